package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/runner"
)

func TestRunExit(t *testing.T) {
	out := func(states ...string) *runner.Summary {
		s := &runner.Summary{}
		for i, st := range states {
			o := runner.Outcome{ID: "r" + string(rune('a'+i)), State: st}
			if st == runner.StateFailed || st == runner.StateDamaged || st == runner.StateHeld {
				o.Err = errors.New("boom")
			}
			s.Outcomes = append(s.Outcomes, o)
		}
		return s
	}
	many := make([]string, 120)
	for i := range many {
		many[i] = runner.StateFailed
	}
	cases := []struct {
		name    string
		sum     *runner.Summary
		code    int
		printed string
	}{
		{"all done", out(runner.StateDone, runner.StateSkipped), 0, "2 runs: done 1, skipped 1"},
		{"two failed", out(runner.StateDone, runner.StateFailed, runner.StateFailed), 2, "failed: rc: boom"},
		{"failures capped", out(many...), maxFailExit, "120 runs: failed 120"},
		{"damaged counts", out(runner.StateSkipped, runner.StateDamaged, runner.StateFailed), 2, "damaged: rb: boom"},
		{"held is no failure", out(runner.StateDone, runner.StateHeld), 0, "held: rb: boom"},
		{"interrupted wins", out(runner.StateFailed, runner.StateInterrupted, runner.StateNotStarted), exitInterrupted, "interrupted 1, not-started 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := runExit(&buf, c.sum)
			if got := codeOf(err); got != c.code {
				t.Errorf("exit %d, want %d (err %v)", got, c.code, err)
			}
			if !strings.Contains(buf.String(), c.printed) {
				t.Errorf("output lacks %q:\n%s", c.printed, buf.String())
			}
		})
	}
}

func codeOf(err error) int {
	if err == nil {
		return 0
	}
	return exitCode(err)
}

func TestNewReporterModes(t *testing.T) {
	var buf bytes.Buffer
	for _, m := range []string{"auto", "bars", "lines", "none"} {
		r, err := newReporter(m, &buf, 0)
		if err != nil || r == nil {
			t.Errorf("%s: %v", m, err)
			continue
		}
		r.Close()
	}
	if _, err := newReporter("fancy", &buf, 0); err == nil || !strings.Contains(err.Error(), `--progress "fancy"`) {
		t.Errorf("unknown mode: %v", err)
	}
}
