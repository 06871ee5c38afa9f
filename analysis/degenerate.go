package analysis

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/runlog"
)

// Degeneration: a role's outputs break down into truncation or repetition.
// It is a failure of its own, told apart from role capture: a role that
// blows out to the token cap, or loops on a phrase, moves its length ratio
// and its n-gram profile without copying anyone, so capture requires its
// outputs not to be degenerate (CaptureDefinition).

// DegenerateCapShare is the share of a role's outputs at one validation
// stopping at the token cap (the engine's finish reason "length") at or
// above which its outputs are degenerate.
const DegenerateCapShare = 0.5

// DegenerateDistinct is the mean distinct word n-gram ratio (distinct
// DegenerateNGram-grams of an output over all of them) at or below which a
// role's outputs are degenerate: an output that repeats itself.
const DegenerateDistinct = 0.5

// DegenerateNGram is the word n-gram length of the repetition test.
const DegenerateNGram = 3

// DegenerationRule states when a role's outputs at one validation are
// degenerate; CaptureDefinition and the report's *Definitions* read it.
func DegenerationRule() string {
	return fmt.Sprintf("%g or more of them stop at the token cap, or their mean distinct word %d-gram ratio is %g or less",
		DegenerateCapShare, DegenerateNGram, DegenerateDistinct)
}

// DegenerationDefinition is the one statement of the degeneration
// detector, read by the report.
func DegenerationDefinition() string {
	return "a role degenerates when its outputs at the last validation are degenerate and those at the first were not; outputs are degenerate when " +
		DegenerationRule() + " (an output of fewer words than that counts as all distinct)"
}

// Degeneration is the degeneration evidence of one role of a run view,
// comparing its outputs at the first validation (base) and the last.
type Degeneration struct {
	Role                      string
	BaseStep, EndStep         int64
	Outputs                   int     // the role's outputs at EndStep
	CapBase, CapEnd           float64 // share of outputs at the token cap
	DistinctBase, DistinctEnd float64 // mean distinct word n-gram ratio
	DegenerateBase            bool    // the outputs at BaseStep are degenerate
	DegenerateEnd             bool
	Degenerated               bool // DegenerateEnd and not DegenerateBase
	ExampleEnd                string
}

// capShare is the share of rows whose output stopped at the token cap.
func capShare(rows []runlog.SampleRow) float64 {
	if len(rows) == 0 {
		return math.NaN()
	}
	k := 0
	for _, s := range rows {
		if s.Finish == engine.FinishLength {
			k++
		}
	}
	return float64(k) / float64(len(rows))
}

// distinctRatio is the mean over rows of the share of distinct word
// DegenerateNGram-grams among an output's word n-grams (1 for an output
// with fewer words than that).
func distinctRatio(rows []runlog.SampleRow) float64 {
	if len(rows) == 0 {
		return math.NaN()
	}
	var s float64
	for _, r := range rows {
		words := strings.Fields(r.Completion)
		n := len(words) - DegenerateNGram + 1
		if n <= 0 {
			s++
			continue
		}
		seen := make(map[string]bool, n)
		for i := 0; i < n; i++ {
			seen[strings.Join(words[i:i+DegenerateNGram], " ")] = true
		}
		s += float64(len(seen)) / float64(n)
	}
	return s / float64(len(rows))
}

// DegenerateOutputs reports whether a role's outputs at one validation are
// degenerate (DegenerationRule); false without outputs.
func DegenerateOutputs(rows []runlog.SampleRow) bool {
	if len(rows) == 0 {
		return false
	}
	return capShare(rows) >= DegenerateCapShare-1e-12 || distinctRatio(rows) <= DegenerateDistinct+1e-12
}

// valSamples groups a run's validation sample rows of workflow by step and
// role (the pseudo-role "final" left out), each group in problem, rollout
// and agent order, with the steps sorted.
func valSamples(r *runlog.Run, workflow string, keep func(runlog.SampleRow) bool) (map[int64]map[string][]runlog.SampleRow, []int64) {
	samples := map[int64]map[string][]runlog.SampleRow{}
	var steps []int64
	for _, s := range r.Samples {
		if s.Split != "val" || s.Workflow != workflow || s.Role == "final" || (keep != nil && !keep(s)) {
			continue
		}
		m := samples[s.Step]
		if m == nil {
			m = map[string][]runlog.SampleRow{}
			samples[s.Step] = m
			steps = append(steps, s.Step)
		}
		m[s.Role] = append(m[s.Role], s)
	}
	slices.Sort(steps)
	for _, m := range samples {
		for _, rows := range m {
			sort.SliceStable(rows, func(i, j int) bool {
				if rows[i].ProblemID != rows[j].ProblemID {
					return rows[i].ProblemID < rows[j].ProblemID
				}
				if rows[i].Rollout != rows[j].Rollout {
					return rows[i].Rollout < rows[j].Rollout
				}
				return rows[i].Agent < rows[j].Agent
			})
		}
	}
	return samples, steps
}

// DetectDegeneration compares each role's validation outputs in workflow
// at the first and the last validation; nil with fewer than two
// validations.
func DetectDegeneration(r *runlog.Run, workflow string) []Degeneration {
	samples, steps := valSamples(r, workflow, nil)
	if len(steps) < 2 {
		return nil
	}
	b, e := steps[0], steps[len(steps)-1]
	var out []Degeneration
	for _, role := range slices.Sorted(maps.Keys(samples[e])) {
		rb, re := samples[b][role], samples[e][role]
		if len(rb) == 0 || len(re) == 0 {
			continue
		}
		d := Degeneration{Role: role, BaseStep: b, EndStep: e, Outputs: len(re),
			CapBase: capShare(rb), CapEnd: capShare(re), DistinctBase: distinctRatio(rb), DistinctEnd: distinctRatio(re),
			DegenerateBase: DegenerateOutputs(rb), DegenerateEnd: DegenerateOutputs(re), ExampleEnd: re[0].Completion}
		d.Degenerated = d.DegenerateEnd && !d.DegenerateBase
		out = append(out, d)
	}
	return out
}

// Degenerated reports whether some role of the run view degenerated.
func (r *RunResult) Degenerated() bool {
	for _, d := range r.Degeneration {
		if d.Degenerated {
			return true
		}
	}
	return false
}
