package workflow

import (
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/keyed"
)

func TestParseVerdict(t *testing.T) {
	cases := []struct {
		name     string
		text     string
		correct  bool
		ok       bool
		feedback string
		reason   string // substring
	}{
		{"canonical correct", FormatVerdict(true, "fine"), true, true, "fine", "ok"},
		{"canonical incorrect", FormatVerdict(false, "carry  the\n one"), false, true, "carry the one", "ok"},
		{"markdown and case", "**verdict:** INCORRECT.\nfeedback: redo step 2", false, true, "redo step 2", "ok"},
		{"feedback first", "Feedback: the carry\nis lost\nVerdict: Incorrect", false, true, "the carry\nis lost", "ok"},
		{"prose around", "I checked it.\nVerdict: Correct\nThat is all.", true, true, "", "ok"},
		{"agreeing repeat", "Verdict: Correct\nVerdict: correct", true, true, "", "ok"},
		{"conflicting", "Verdict: Correct\nVerdict: Incorrect", false, false, "", "conflicting"},
		{"unknown value", "Verdict: maybe", false, false, "", "unknown value"},
		{"missing", "The answer looks right.", false, false, "", "no `Verdict:`"},
		{"empty", "", false, false, "", "no `Verdict:`"},
		{"verdict word without colon", "verdict correct", false, false, "", "no `Verdict:`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, ok, reason := ParseVerdict(c.text)
			if v.Correct != c.correct || ok != c.ok || v.Feedback != c.feedback || !strings.Contains(reason, c.reason) {
				t.Errorf("ParseVerdict(%q) = %+v, %v, %q; want correct=%v ok=%v feedback=%q reason~%q",
					c.text, v, ok, reason, c.correct, c.ok, c.feedback, c.reason)
			}
		})
	}
}

func TestParseSelection(t *testing.T) {
	cases := []struct {
		name   string
		text   string
		n      int
		k      int
		ok     bool
		reason string
	}{
		{"canonical", FormatSelection(2), 3, 2, true, "ok"},
		{"candidate word and bold", "**Selected: Candidate 3**", 3, 3, true, "ok"},
		{"last line counts", "Selected: 1\nOn reflection:\nSelected: 2", 3, 2, true, "ok"},
		{"after reasoning", "Candidates 1 and 3 agree.\nselected: 3.", 3, 3, true, "ok"},
		{"out of range falls back to first digit", "Compare 2 and 4.\nSelected: 4", 3, 2, false, "out of range"},
		{"no line, first digit", "I like the 3rd one", 3, 3, false, "first digit"},
		{"first digit out of range gives candidate 1", "there are 7 good ideas, pick 2", 3, 1, false, "candidate 1"},
		{"zero digit gives candidate 1", "0 is wrong", 3, 1, false, "candidate 1"},
		{"nothing", "no idea", 3, 1, false, "candidate 1"},
		{"not a number", "Selected: two", 3, 1, false, "not a number"},
		{"no candidates", "Selected: 1", 0, 0, false, "no candidates"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, ok, reason := ParseSelection(c.text, c.n)
			if k != c.k || ok != c.ok || !strings.Contains(reason, c.reason) {
				t.Errorf("ParseSelection(%q, %d) = %d, %v, %q; want %d, %v, ~%q", c.text, c.n, k, ok, reason, c.k, c.ok, c.reason)
			}
			// The typed fallback agrees with the logged reason.
			want := NoFallback
			switch {
			case strings.HasSuffix(reason, "fell back to first digit"):
				want = FallbackFirstDigit
			case strings.HasSuffix(reason, "fell back to candidate 1"):
				want = FallbackFirstCandidate
			}
			if k2, fb, reason2 := readSelection(c.text, c.n); k2 != k || fb != want || reason2 != reason {
				t.Errorf("readSelection(%q, %d) = %d, %q, %q; want %d, %q, %q", c.text, c.n, k2, fb, reason2, k, want, reason)
			}
		})
	}
}

func TestParseStrategies(t *testing.T) {
	cases := []struct {
		name     string
		text     string
		max      int
		list     []string
		proposed int
		over     bool
		ok       bool
		reason   string
	}{
		{"canonical", FormatStrategies([]string{"add tens first", "count up"}), 3, []string{"add tens first", "count up"}, 2, false, true, "ok"},
		{"exactly max", FormatStrategies([]string{"a", "b", "c"}), 3, []string{"a", "b", "c"}, 3, false, true, "ok"},
		{"over max", FormatStrategies([]string{"a", "b", "c", "d"}), 3, []string{"a", "b", "c", "d"}, 4, true, false, "more than 3"},
		{"duplicates count toward max", "Strategy 1: a\nStrategy 2: A\nStrategy 3: b\nStrategy 4: c", 3, []string{"a", "b", "c"}, 4, true, false, "more than 3"},
		{"duplicate under max", "Strategy 1: a\nStrategy 2: a", 3, []string{"a"}, 2, false, false, "duplicate"},
		{"markdown", "Plan:\n- **Strategy 1:** guess and check\n- Strategy 2: algebra", 3, []string{"guess and check", "algebra"}, 2, false, true, "ok"},
		{"numbered fallback", "1. guess\n2) algebra", 3, []string{"guess", "algebra"}, 2, false, false, "no `Strategy K:`"},
		{"numbered fallback over max", "1. a\n2. b\n3. c\n4. d", 3, []string{"a", "b", "c", "d"}, 4, true, false, "more than 3"},
		{"empty strategy", "Strategy 1:\nStrategy 2: b", 3, []string{"b"}, 2, false, false, "empty"},
		{"nothing", "just add them", 3, nil, 0, false, false, "no `Strategy K:`"},
		{"strategy without number is prose", "Strategy: add", 3, nil, 0, false, false, "no `Strategy K:`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ok, reason := ParseStrategies(c.text, c.max)
			// Only the numbered fallback cases read list items.
			loose := strings.HasPrefix(c.name, "numbered fallback")
			if !reflect.DeepEqual(s.List, c.list) || s.Proposed != c.proposed || s.Over != c.over || s.Loose != loose || ok != c.ok || !strings.Contains(reason, c.reason) {
				t.Errorf("ParseStrategies(%q, %d) = %+v, %v, %q; want list=%q proposed=%d over=%v loose=%v ok=%v reason~%q",
					c.text, c.max, s, ok, reason, c.list, c.proposed, c.over, loose, c.ok, c.reason)
			}
		})
	}
}

func TestSeedKey(t *testing.T) {
	base := SeedKey{RunSeed: 7, Purpose: "train", Step: 3, Problem: 11, Rollout: 2, Agent: "generator1", Iteration: 0}
	if base.Seed() != base.Seed() {
		t.Fatal("seed is not a function of its key")
	}
	variants := []SeedKey{base, base, base, base, base, base, base}
	variants[0].RunSeed = 8
	variants[1].Purpose = "val"
	variants[2].Step = 4
	variants[3].Problem = 12
	variants[4].Rollout = 3
	variants[5].Agent = "generator2"
	variants[6].Iteration = 1
	seen := map[uint64]int{base.Seed(): -1}
	for i, v := range variants {
		s := v.Seed()
		if j, dup := seen[s]; dup {
			t.Errorf("variant %d has the same seed as %d", i, j)
		}
		seen[s] = i
	}
	// Pin the documented hash so that a change of the derivation is noticed.
	h := uint64(0x6d61726c6f77)
	for _, w := range []uint64{7, keyed.FNV1a64("train"), 3, 11, 2, keyed.FNV1a64("generator1"), 0} {
		h = keyed.SplitMix64(h ^ w)
	}
	if base.Seed() != h {
		t.Errorf("Seed() = %#x, documented derivation gives %#x", base.Seed(), h)
	}
}

func TestPromptsCarryInstructionsAndInputs(t *testing.T) {
	instr := "End with a line `Answer: N`."
	for _, role := range AllRoles {
		s := SystemPrompt(role, instr, 3)
		if s == "" {
			t.Errorf("role %s has no system prompt", role)
		}
		answers := role == study.Generator || role == study.Worker || role == study.Synthesizer
		if strings.Contains(s, instr) != answers {
			t.Errorf("role %s: instructions included = %v, want %v", role, !answers, answers)
		}
	}
	if SystemPrompt("judge", instr, 3) != "" {
		t.Error("unknown role should have no system prompt")
	}
	// The tiny models' alphabet is newline plus printable ASCII: the fixed
	// text of every builder must stay inside it.
	p := datasets.Problem{Prompt: "Compute 2 + 3."}
	all := [][]engine.Message{
		GeneratorPrompt(instr, p), RevisionPrompt(instr, p, "Answer: 6", ""), EvaluatorPrompt(p, "Answer: 5"),
		AggregatorPrompt(p, []string{"a", "b"}), OrchestratorPrompt(p, 3), WorkerPrompt(instr, p, ""),
		SynthesizerPrompt(instr, p, []string{"a"}),
		{{Role: "assistant", Content: FormatVerdict(true, "ok") + FormatSelection(2) + FormatStrategies([]string{"x"})}},
	}
	for i, msgs := range all {
		for _, m := range msgs {
			for _, r := range m.Content {
				if r != '\n' && (r < 0x20 || r > 0x7e) {
					t.Errorf("builder %d writes %q, outside the tiny models' alphabet", i, r)
				}
			}
			if len(m.Content) > 400 {
				t.Errorf("builder %d message of %d characters: too long for a ~1k context", i, len(m.Content))
			}
		}
	}
	if !strings.Contains(SystemPrompt(study.Orchestrator, "", 5), "at most 5") {
		t.Error("orchestrator prompt does not state max_subtasks")
	}
}
