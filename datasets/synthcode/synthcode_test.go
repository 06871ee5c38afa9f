package synthcode

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
	// Train(i) does not depend on which positions were asked before.
	task := mustNew(t, DefaultConfig())
	late, _ := task.Train(777)
	fresh, _ := mustNew(t, DefaultConfig()).Train(777)
	if late.Prompt != fresh.Prompt || late.Solution != fresh.Solution {
		t.Fatal("Train(777) depends on call history")
	}
}

func TestConfigValidate(t *testing.T) {
	mod := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"default", DefaultConfig(), ""},
		{"one stage", mod(func(c *Config) { c.StagesMin, c.StagesMax = 1, 1 }), ""},
		{"no stages", mod(func(c *Config) { c.StagesMin = 0 }), "stages"},
		{"too many stages", mod(func(c *Config) { c.StagesMax = 7 }), "stages"},
		{"bad prob", mod(func(c *Config) { c.ReduceProb = 1.5 }), "ReduceProb"},
		{"tiny values", mod(func(c *Config) { c.ValueMax = 1 }), "ValueMax"},
		{"lists", mod(func(c *Config) { c.ListMin = 0 }), "list lengths"},
		{"examples", mod(func(c *Config) { c.Examples = 0 }), "Examples"},
		{"hidden", mod(func(c *Config) { c.Hidden = 0 }), "Hidden"},
		{"val", mod(func(c *Config) { c.ValSize = -3 }), "ValSize"},
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

// TestTeacherSolutions checks thousands of teacher solutions: they verify,
// pass the shown examples, are printable and short, and their trace ends
// with the first example's output.
func TestTeacherSolutions(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{
		DefaultConfig(),
		{Seed: 5, ValSize: 50, StagesMin: 1, StagesMax: 5, ReduceProb: 0.5, ValueMax: 20, ListMin: 1, ListMax: 8, Examples: 3, Hidden: 8},
	} {
		task := mustNew(t, cfg)
		check := func(p datasets.Problem) {
			if v := task.Verify(ctx, p, p.Solution); !v.Correct {
				t.Fatalf("%s: teacher solution rejected (%s):\n%s\n%s", p.ID, v.Reason, p.Prompt, p.Solution)
			}
			if len(p.Tests) != cfg.Hidden {
				t.Fatalf("%s: %d hidden tests, want %d", p.ID, len(p.Tests), cfg.Hidden)
			}
			ex := Examples(p.Prompt)
			if len(ex) != cfg.Examples {
				t.Fatalf("%s: %d examples in prompt, want %d:\n%s", p.ID, len(ex), cfg.Examples, p.Prompt)
			}
			prog, err := Parse(p.Truth, DefaultLimits())
			if err != nil {
				t.Fatalf("%s: truth %q: %v", p.ID, p.Truth, err)
			}
			if failsSome(prog, ex) {
				t.Fatalf("%s: reference program fails a shown example", p.ID)
			}
			firstLine, _, _ := strings.Cut(p.Solution, "\n")
			if !strings.HasSuffix(firstLine, " "+ex[0].Output) {
				t.Fatalf("%s: trace %q does not end with %s", p.ID, firstLine, ex[0].Output)
			}
			if !datasets.IsPrintable(p.Prompt) || !datasets.IsPrintable(p.Solution) {
				t.Fatalf("%s: non-printable text", p.ID)
			}
			if len(p.Prompt) > MaxPrompt {
				t.Fatalf("%s: prompt of %d chars", p.ID, len(p.Prompt))
			}
		}
		datasetstest.EachProblem(t, task, 3000, "sc-train-%06d", cfg.ValSize, check)
	}
}

func TestValidationDisjoint(t *testing.T) {
	datasetstest.ValidationDisjoint(t, mustNew(t, DefaultConfig()), "sc-val-%04d", 100_000)
}

// TestPerturbRejected is the property test: every perturbed solution is a
// one-edit near miss of the reference and fails verification.
func TestPerturbRejected(t *testing.T) {
	task := mustNew(t, DefaultConfig())
	ctx := context.Background()
	for i := 0; i < 3000; i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		out, err := Perturb(p, keyed.NewRNG(4, "perturb", uint64(i)))
		if err != nil {
			t.Fatalf("%s: %v", p.ID, err)
		}
		v := task.Verify(ctx, p, out)
		if v.Correct {
			t.Fatalf("%s: near miss accepted:\n%s", p.ID, out)
		}
		if !strings.HasPrefix(v.Reason, "test ") {
			t.Fatalf("%s: near miss rejected for %q, want a failed test", p.ID, v.Reason)
		}
		alt, err := Parse(v.Answer, DefaultLimits())
		ref, _ := Parse(p.Truth, DefaultLimits())
		if err != nil || len(alt) != len(ref) {
			t.Fatalf("%s: near miss %q is not a one-stage edit of %q", p.ID, v.Answer, p.Truth)
		}
		diff := 0
		for s := range alt {
			if alt[s] != ref[s] {
				diff++
			}
		}
		if diff != 1 {
			t.Fatalf("%s: near miss %q differs from %q in %d stages", p.ID, v.Answer, p.Truth, diff)
		}
	}
	bad := datasets.Problem{ID: "bad", Solution: "```\nfold\n```"}
	if _, err := Perturb(bad, keyed.NewRNG(1, "p")); err == nil {
		t.Fatal("Perturb of an unparsable reference succeeded")
	}
}

func TestExtractProgram(t *testing.T) {
	tests := []struct {
		text string
		want string
		ok   bool
	}{
		{"```\nsum\n```", "sum", true},
		{"```text\nfilter >3 | sum\n```", "filter >3 | sum", true},
		{"```sum```", "sum", true},
		{"```filter >3 | sum\n```", "filter >3 | sum", true},
		{"first\n```\nsort\n```\nbetter:\n```\nrev\n```", "rev", true},
		{"```\nsort\n```\nand an unclosed ```\nrev", "sort", true},
		{"no code here", "", false},
		{"```\nsum", "", false},
		{"```\n```", "", true},
		{"```\n  sort\n| sum  \n```\n", "sort\n| sum", true},
	}
	for _, tc := range tests {
		got, ok := ExtractProgram(tc.text)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ExtractProgram(%q) = %q, %v; want %q, %v", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}

func TestVerifyReasons(t *testing.T) {
	p := datasets.Problem{ID: "p", Tests: []datasets.Test{
		{Input: "[3 1 5 7]", Output: "24"},
		{Input: "[4 0 2]", Output: "8"},
	}}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		ctx     context.Context
		p       datasets.Problem
		output  string
		correct bool
		reason  string
	}{
		{context.Background(), p, "```\nfilter >3 | map *2 | sum\n```", true, "ok"},
		{context.Background(), p, "```\nfilter >2 | map *2 | sum\n```", false, "test 1: got 30 want 24"},
		{context.Background(), p, "```\nfilter >3 | map *2 | max\n```", false, "test 1: got 14 want 24"},
		{context.Background(), p, "```\nmap *2 | sum\n```", false, "test 1: got 32 want 24"},
		{context.Background(), p, "filter >3 | map *2 | sum", false, "no code block"},
		{context.Background(), p, "```\nfilter >3 | mup *2 | sum\n```", false, "syntax error in stage 2: unknown operation \"mup\""},
		{context.Background(), p, "```\nmap *999999999 | map *999999999 | sum\n```", false, "test 1: runtime error: stage 2 (map *999999999): 2999999997 * 999999999: value out of range (|v| <= 1000000000000)"},
		{context.Background(), datasets.Problem{ID: "e"}, "```\nsum\n```", false, "no hidden tests for e"},
		{context.Background(), datasets.Problem{ID: "b", Tests: []datasets.Test{{Input: "3 4", Output: "7"}}}, "```\nsum\n```", false, "test 1: bad input: list \"3 4\" is not of the form [a b c]"},
		{canceled, p, "```\nsum\n```", false, "canceled before test 1: context canceled"},
	}
	for _, tc := range tests {
		v := Verify(tc.ctx, tc.p, tc.output)
		if v.Correct != tc.correct || v.Reason != tc.reason {
			t.Errorf("Verify(%q) = %+v, want correct=%v reason %q", tc.output, v, tc.correct, tc.reason)
		}
	}
}

// TestVerifyRandomOutputs grades random text; it must never panic and
// never accept.
func TestVerifyRandomOutputs(t *testing.T) {
	task := mustNew(t, DefaultConfig())
	p, err := task.Train(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := keyed.NewRNG(2, "noise")
	alphabet := "```map filter|sum+-*<>0123456789 \n"
	for i := 0; i < 5000; i++ {
		b := make([]byte, rng.Range(0, 80))
		for j := range b {
			if rng.Bernoulli(0.1) {
				b[j] = byte(rng.Range(0, 255))
			} else {
				b[j] = alphabet[rng.Intn(len(alphabet))]
			}
		}
		if v := task.Verify(context.Background(), p, string(b)); v.Correct && !strings.Contains(string(b), "```") {
			t.Fatalf("accepted %q without a code block", b)
		}
	}
}

func FuzzVerify(f *testing.F) {
	task := mustNew(f, DefaultConfig())
	p, err := task.Train(0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p.Solution)
	f.Add("```\n" + p.Truth + "\n```")
	f.Add("```\nfilter >3 | ```")
	f.Fuzz(func(t *testing.T, out string) {
		v := task.Verify(context.Background(), p, out)
		if v.Correct && v.Reason != "ok" {
			t.Fatalf("correct verdict with reason %q", v.Reason)
		}
	})
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
