package rollouts

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// voting is one logged voting rollout: two generators, an aggregator whose
// output parsed or fell back, and the final row.
func voting(id string, step int64, problem string, rollout int64, aggText, fallback string, correct bool) []runlog.SampleRow {
	reward := 0.0
	if correct {
		reward = 1
	}
	row := func(agent, role, text, parsed string, compliant, ok bool) runlog.SampleRow {
		return runlog.SampleRow{RunID: id, Step: step, Workflow: "voting", Split: "val", ProblemID: problem, Rollout: rollout,
			Agent: agent, Role: role, Policy: role, Prompt: "prompt of " + agent, Completion: text, Parsed: parsed,
			Compliant: compliant, Correct: ok, Reward: reward, Tokens: int64(len(text)), Finish: "stop"}
	}
	agg := row("aggregator", "aggregator", aggText, "1", fallback == "", correct)
	agg.Fallback = fallback
	final := row("final", "final", "Answer: 7", "7", true, correct)
	final.Policy, final.Prompt, final.Finish, final.Tokens = "", "", "", 0
	return []runlog.SampleRow{
		row("generator0", "generator", "Answer: 7", "7", true, true),
		row("generator1", "generator", "Answer: 8", "8", true, false),
		agg, final,
	}
}

// testRuns writes two runs with the run log writer and reads them back.
func testRuns(t *testing.T) []*runlog.Run {
	t.Helper()
	ip := analysistest.Manifest("voting-ip-s-math-seed1", "voting", "ip", "math", "s", 1)
	sp := analysistest.Manifest("voting-sp-s-math-seed1", "voting", "sp", "math", "s", 1)
	var ipRows, spRows []runlog.SampleRow
	for _, p := range []string{"p0", "p1"} {
		for k := int64(0); k < 2; k++ {
			ipRows = append(ipRows, voting(ip.RunID, 0, p, k, "Selected: 1", "", true)...)
			ipRows = append(ipRows, voting(ip.RunID, 10, p, k, "ant ant ant ant", "candidate-1", k == 0)...)
			spRows = append(spRows, voting(sp.RunID, 10, p, k, "Selected: 1", "", false)...)
		}
	}
	train := runlog.SampleRow{RunID: ip.RunID, Step: 4, Workflow: "voting", Split: "train", ProblemID: "p9", Rollout: 3,
		Agent: "aggregator", Role: "aggregator", Policy: "aggregator", Completion: "Selected: 9", Parsed: "1",
		Fallback: "first-digit", Reward: 1, Advantage: 0.5, Tokens: 4, Finish: "length"}
	ipRows = append(ipRows, train)
	dir := filepath.Join(t.TempDir(), "exp")
	if err := analysistest.WriteRuns(dir, []*runlog.Run{{Manifest: ip, Samples: ipRows}, {Manifest: sp, Samples: spRows}}); err != nil {
		t.Fatal(err)
	}
	runs, err := runlog.ReadRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func TestSelect(t *testing.T) {
	runs := testRuns(t)
	all := Filter{Step: LastStep, Split: "val", Rollout: AnyRollout}
	with := func(mod func(*Filter)) Filter {
		f := all
		mod(&f)
		return f
	}
	cases := []struct {
		name     string
		f        Filter
		rollouts int
		turns    int    // turns over all rollouts
		first    string // "run step problem rollout" of the first rollout
		err      string
	}{
		{"every run at its last step", all, 8, 24, "voting-ip-s-math-seed1 10 p0 0", ""},
		{"one run", with(func(f *Filter) { f.Run = "voting-sp-*" }), 4, 12, "voting-sp-s-math-seed1 10 p0 0", ""},
		{"step 0", with(func(f *Filter) { f.Step = 0 }), 4, 12, "voting-ip-s-math-seed1 0 p0 0", ""},
		{"aggregator only", with(func(f *Filter) { f.Run, f.Role = "voting-ip-*", "aggregator" }), 4, 4, "voting-ip-s-math-seed1 10 p0 0", ""},
		{"problem and rollout", with(func(f *Filter) { f.Problem, f.Rollout = "p1", 1 }), 2, 6, "voting-ip-s-math-seed1 10 p1 1", ""},
		{"train split", with(func(f *Filter) { f.Split = "train" }), 1, 1, "voting-ip-s-math-seed1 4 p9 3", ""},
		{"the final row as a role", with(func(f *Filter) { f.Run, f.Role = "voting-ip-*", "final" }), 4, 4, "voting-ip-s-math-seed1 10 p0 0", ""},
		{"misspelt role", with(func(f *Filter) { f.Role = "aggregatr" }), 0, 0, "", "roles aggregator, final, generator"},
		{"missing step", with(func(f *Filter) { f.Step = 7 }), 0, 0, "", "val steps 0, 10"},
		{"no such run", with(func(f *Filter) { f.Run = "eval-opt-*" }), 0, 0, "", `no run matches "eval-opt-*" (2 runs in the source)`},
		{"bad pattern", with(func(f *Filter) { f.Run = "[" }), 0, 0, "", "run pattern"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := Select(runs, c.f)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			turns := 0
			for _, r := range rs {
				turns += len(r.Turns)
				for _, tr := range r.Turns {
					if c.f.Role != "" && tr.Role != c.f.Role {
						t.Errorf("role filter %q kept a %s turn", c.f.Role, tr.Role)
					}
				}
			}
			if len(rs) != c.rollouts || turns != c.turns {
				t.Fatalf("%d rollouts with %d turns, want %d with %d", len(rs), turns, c.rollouts, c.turns)
			}
			r := rs[0]
			if got := strings.Join([]string{r.RunID, itoa(r.Step), r.ProblemID, itoa(r.Rollout)}, " "); got != c.first {
				t.Errorf("first rollout %q, want %q", got, c.first)
			}
		})
	}
}

func itoa(x int64) string { return strconv.FormatInt(x, 10) }

func TestPrint(t *testing.T) {
	runs := testRuns(t)
	rs, err := Select(runs, Filter{Run: "voting-ip-*", Step: 10, Split: "val", Problem: "p0", Rollout: 1, Role: "aggregator"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		opt      PrintOptions
		want     []string
		wantNone []string
	}{
		{"whole", PrintOptions{}, []string{
			"== voting-ip-s-math-seed1  step 10  val  voting  problem p0  rollout 1  reward 0\n",
			"-- aggregator (agent aggregator, policy aggregator): unparsed, fallback candidate-1, correct no, 15 tokens, finish stop\n",
			"   parsed: \"1\"\n", "   | ant ant ant ant\n", "-- final answer \"7\": correct no\n"}, []string{"prompt", "generator"}},
		{"prompts, clipped", PrintOptions{Prompts: true, MaxChars: 4}, []string{"   prompt:\n   | prom [... 16 more characters]\n", "   | ant  [... 11 more characters]\n"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Print(&b, rs, c.opt); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range c.wantNone {
				if strings.Contains(b.String(), w) {
					t.Errorf("output holds %q:\n%s", w, b.String())
				}
			}
		})
	}
	// A training turn shows its advantage; JSON carries the fallback.
	rs, err = Select(runs, Filter{Step: LastStep, Split: "train", Rollout: AnyRollout})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Print(&b, rs, PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "parsed, fallback first-digit, advantage 0.5, correct no, 4 tokens, finish length") {
		t.Errorf("train turn printed as:\n%s", b.String())
	}
	b.Reset()
	if err := WriteJSON(&b, rs); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Turns []struct {
			Fallback  string
			Advantage *float64
		}
		Final *struct{}
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(got) != 1 || len(got[0].Turns) != 1 || got[0].Turns[0].Fallback != "first-digit" || *got[0].Turns[0].Advantage != 0.5 || got[0].Final != nil {
		t.Errorf("JSON %s", b.String())
	}
}
