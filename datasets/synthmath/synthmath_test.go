package synthmath

import (
	"context"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/datasetstest"
	"github.com/marlowlab/marlow/keyed"
)

func mustNew(t testing.TB, cfg Config) *Task {
	t.Helper()
	task, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return task
}

// digest hashes the rendered train problems [0, n) and the validation set.
func TestDeterminism(t *testing.T) {
	cfg := DefaultConfig()
	a := datasetstest.Digest(t, mustNew(t, cfg), 500)
	b := datasetstest.Digest(t, mustNew(t, cfg), 500)
	if a != b {
		t.Fatalf("same seed gave different problem sets: %s vs %s", a, b)
	}
	cfg.Seed++
	if c := datasetstest.Digest(t, mustNew(t, cfg), 500); c == a {
		t.Fatalf("different seeds gave the same problem set %s", c)
	}
}

func TestExamples(t *testing.T) {
	tests := []struct {
		prompt string
		want   string
	}{
		{"Compute 7 + 5 * 3 - 2.", "5 * 3 = 15\n7 + 15 = 22\n22 - 2 = 20\nAnswer: 20"},
		{"Compute 3 - 7.", "3 - 7 = -4\nAnswer: -4"},
		{"Compute 2 * 3 * 4 - 1 * 5.", "2 * 3 = 6\n6 * 4 = 24\n1 * 5 = 5\n24 - 5 = 19\nAnswer: 19"},
		{"Compute 9 - 2 - 3 + 1.", "9 - 2 = 7\n7 - 3 = 4\n4 + 1 = 5\nAnswer: 5"},
		{"Compute 1 - 4 * 4.", "4 * 4 = 16\n1 - 16 = -15\nAnswer: -15"},
	}
	for _, tc := range tests {
		e, err := Parse(tc.prompt)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.prompt, err)
		}
		if got := e.Prompt(); got != tc.prompt {
			t.Errorf("Prompt round trip: got %q want %q", got, tc.prompt)
		}
		steps, ans := e.Solve()
		if got := Render(steps, ans); got != tc.want {
			t.Errorf("%s: solution\n%s\nwant\n%s", tc.prompt, got, tc.want)
		}
		if got := Steps(tc.want); len(got) != len(steps) {
			t.Errorf("%s: Steps parsed %d steps, want %d", tc.prompt, len(got), len(steps))
		}
	}
}

func TestParseErrors(t *testing.T) {
	bad := []string{"", "7 + 5.", "Compute 7 + 5", "Compute 7 +.", "Compute 7 / 5.", "Compute x + 5.",
		"Compute 7.", "Compute 7 + 5 5.", "Compute 99999999 + 1."}
	for _, s := range bad {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) succeeded, want error", s)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	mod := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" for valid
	}{
		{"default", DefaultConfig(), ""},
		{"plus only", mod(func(c *Config) { c.Ops = "+" }), ""},
		{"one operand", mod(func(c *Config) { c.OperandsMin = 1 }), "OperandsMin"},
		{"max below min", mod(func(c *Config) { c.OperandsMax = 1 }), "OperandsMax"},
		{"bad op", mod(func(c *Config) { c.Ops = "+/" }), "\"/\""},
		{"repeated op", mod(func(c *Config) { c.Ops = "++" }), "repeats"},
		{"no ops", mod(func(c *Config) { c.Ops = "" }), "Ops is empty"},
		{"zero value", mod(func(c *Config) { c.ValueMax = 0 }), "ValueMax"},
		{"negative val", mod(func(c *Config) { c.ValSize = -1 }), "ValSize"},
		{"overflow", mod(func(c *Config) { c.ValueMax = 100000; c.OperandsMax = 12 }), "overflow"},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestTeacherSolutions checks that every teacher solution verifies, is
// printable, short, and consistent step by step.
func TestTeacherSolutions(t *testing.T) {
	for _, cfg := range []Config{
		DefaultConfig(),
		{Seed: 7, ValSize: 50, OperandsMin: 3, OperandsMax: 6, ValueMax: 99, Ops: "+-*"},
		{Seed: 8, ValSize: 5, OperandsMin: 2, OperandsMax: 2, ValueMax: 9, Ops: "-"},
	} {
		task := mustNew(t, cfg)
		ctx := context.Background()
		check := func(p datasets.Problem) {
			if v := task.Verify(ctx, p, p.Solution); !v.Correct {
				t.Fatalf("%s: teacher solution rejected (%s):\n%s", p.ID, v.Reason, p.Solution)
			}
			if !datasets.IsPrintable(p.Prompt) || !datasets.IsPrintable(p.Solution) {
				t.Fatalf("%s: non-printable text", p.ID)
			}
			if len(p.Prompt) > 150 || len(p.Solution) > 200 {
				t.Fatalf("%s: prompt %d / solution %d chars too long", p.ID, len(p.Prompt), len(p.Solution))
			}
			steps := Steps(p.Solution)
			if len(steps) == 0 {
				t.Fatalf("%s: no steps in %q", p.ID, p.Solution)
			}
			for _, s := range steps {
				if !s.Correct() {
					t.Fatalf("%s: wrong teacher step %s", p.ID, s)
				}
			}
		}
		datasetstest.EachProblem(t, task, 3000, "sm-train-%06d", cfg.ValSize, check)
	}
}

func TestValidationDisjoint(t *testing.T) {
	datasetstest.ValidationDisjoint(t, mustNew(t, DefaultConfig()), "sm-val-%04d", 100_000)
}

func TestValidationTooSmallSpace(t *testing.T) {
	cfg := Config{Seed: 1, ValSize: 50, OperandsMin: 2, OperandsMax: 2, ValueMax: 3, Ops: "+"}
	task := mustNew(t, cfg)
	if _, err := task.Validation(); err == nil || !strings.Contains(err.Error(), "distinct") {
		t.Fatalf("got %v, want an error about too few distinct prompts", err)
	}
	if _, err := task.Train(-1); err == nil {
		t.Fatal("Train(-1) succeeded")
	}
}

func TestVerifyAndExtract(t *testing.T) {
	p := datasets.Problem{ID: "x", Prompt: "Compute 7 + 5 * 3 - 2.", Truth: "20"}
	tests := []struct {
		output  string
		correct bool
		answer  string
		reason  string
	}{
		{"5 * 3 = 15\n7 + 15 = 22\n22 - 2 = 20\nAnswer: 20", true, "20", "ok"},
		{"answer:20", true, "20", "ok"},
		{"ANSWER :  20  \n", true, "20", "ok"},
		{"Answer: +20.", true, "+20.", "ok"},
		{"Answer: 21\nwait\nAnswer: 20", true, "20", "ok"},
		{"Answer: 20\nno, Answer: 21", false, "21", "wrong: got 21 want 20"},
		{"The result is 20", false, "", "no answer line"},
		{"", false, "", "no answer line"},
		{"Answer: twenty", false, "twenty", "not an integer: \"twenty\""},
		{"Answer:", false, "", "not an integer: \"\""},
		{"Answer: 20 apples", false, "20 apples", "not an integer: \"20 apples\""},
		{"Answer: 99999999999999999999", false, "99999999999999999999", "not an integer: \"99999999999999999999\""},
	}
	for _, tc := range tests {
		v := Verify(p, tc.output)
		if v.Correct != tc.correct || v.Answer != tc.answer || v.Reason != tc.reason {
			t.Errorf("Verify(%q) = %+v, want correct=%v answer=%q reason=%q", tc.output, v, tc.correct, tc.answer, tc.reason)
		}
	}
	neg := datasets.Problem{ID: "n", Truth: "-4"}
	for out, want := range map[string]bool{"Answer: -4": true, "Answer: - 4": true, "Answer: 4": false} {
		if got := Verify(neg, out).Correct; got != want {
			t.Errorf("Verify(truth -4, %q) correct=%v want %v", out, got, want)
		}
	}
	if v := Verify(datasets.Problem{ID: "b", Truth: "x"}, "Answer: 1"); v.Correct || !strings.Contains(v.Reason, "bad ground truth") {
		t.Errorf("bad truth: %+v", v)
	}
}

// TestPerturbRejected is the property test: a perturbed worked solution has
// exactly one wrong step, every later step is arithmetically right given
// its inputs, and Verify rejects it.
func TestPerturbRejected(t *testing.T) {
	task := mustNew(t, Config{Seed: 3, ValSize: 10, OperandsMin: 2, OperandsMax: 6, ValueMax: 12, Ops: "+-*"})
	ctx := context.Background()
	for i := 0; i < 3000; i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		out, err := Perturb(p, keyed.NewRNG(9, "perturb", uint64(i)))
		if err != nil {
			t.Fatalf("%s: %v", p.ID, err)
		}
		if v := task.Verify(ctx, p, out); v.Correct {
			t.Fatalf("%s: perturbed solution accepted:\n%s", p.ID, out)
		}
		wrong := 0
		for _, s := range Steps(out) {
			if !s.Correct() {
				wrong++
			}
		}
		if wrong != 1 {
			t.Fatalf("%s: %d wrong steps, want 1:\n%s", p.ID, wrong, out)
		}
		if n, m := len(Steps(out)), len(Steps(p.Solution)); n != m {
			t.Fatalf("%s: perturbed solution has %d steps, want %d", p.ID, n, m)
		}
	}
	if _, err := Perturb(datasets.Problem{ID: "bad", Prompt: "hello"}, keyed.NewRNG(1, "p")); err == nil {
		t.Fatal("Perturb of an unparsable prompt succeeded")
	}
}

func BenchmarkTrain(b *testing.B) {
	task := mustNew(b, DefaultConfig())
	for i := 0; b.Loop(); i++ {
		if _, err := task.Train(int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	task := mustNew(b, DefaultConfig())
	p, err := task.Train(0)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if !task.Verify(ctx, p, p.Solution).Correct {
			b.Fatal("teacher solution rejected")
		}
	}
}
