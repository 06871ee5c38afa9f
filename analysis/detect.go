package analysis

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
)

// Amplification is the gradient-amplification evidence of one role of one
// policy: the steps after the LoRA warm-up where the role's gradient norm
// exceeded amp_k times its baseline (the median over the early steps after
// the warm-up) while, for a role with two or more agents, the mean cosine
// between its same-role agents' gradients exceeded amp_cos. A role is
// amplified when such steps are sustained: AmpSustainK of AmpSustainN
// consecutive steps. A role with one agent has no same-role cosine (Cosine
// false) and is tested on its norm alone.
//
// The cosine between the role's gradient and the EMA of its past gradients
// (steps.coherence_cos: logged by every run since the measuring-only
// gradient EMA, by runs with the coherence regularizer before it, since
// schema 3; EMA false where the logs have none) is the temporal coherence
// the regularizer (I6) acts on. It is evidence beside the test, not a
// condition of it: EMAAligned counts the steps over the norm threshold whose
// EMA cosine exceeded amp_cos. Measured on the detector's positive control
// (controls_slow_test.go: the demo's cell at a learning rate far too high),
// the late IP aggregator's norm rose 17-fold before its cliff while its EMA
// cosine stayed in [-0.27, 0.21], as it did in the stable runs: with the
// EMA cosine as a condition the detector could fire on no real run of this
// regime, so it would have no positive control.
type Amplification struct {
	Policy      string
	Role        string
	EarlyUntil  int64   // last step counted as early training
	EarlyMedian float64 // median gradient norm over the early steps
	Steps       []int64 // steps meeting both conditions
	Norms       []float64
	Cos         []float64 // same-role cosine at Steps (NaN for a role with one agent)
	EMACos      []float64 // cosine to the role's gradient EMA at Steps (NaN without it)
	EMAAligned  int       // Steps whose EMA cosine exceeded amp_cos (evidence, not a condition)
	PeakStep    int64     // step of the largest gradient norm (any step)
	PeakNorm    float64
	// AgentCos are the role's same-role agents' cosines (each agent's mean
	// with the others, steps' agent_cos) at the first of Steps, keyed by
	// agent: where the signature sits among the role's agents. Nil for a
	// role with one agent and in logs before schema 4.
	AgentCos    map[string]float64
	Cosine      bool  // the role has a same-role cosine (two or more agents)
	EMA         bool  // the logs have the role's cosine to its gradient EMA (coherence_cos)
	Sustained   int64 // the step closing the first sustained window, -1 when none
	Amplified   bool  // some AmpSustainK of AmpSustainN consecutive steps met the conditions
	CliffStep   int64 // fall step of the run's terminal cliff, -1 when none
	BeforeCliff bool  // amplified and the first sustained window closes at or before the cliff's fall
}

// AmpWarmupSteps is the LoRA warm-up window: the first steps of a role,
// where the adapter's B matrix is still near zero and its gradient norm
// small, are left out of the baseline and of the test.
const AmpWarmupSteps = 5

// AmpSustainK of AmpSustainN consecutive steps must meet the conditions for
// a role to count as amplified.
const (
	AmpSustainK = 3
	AmpSustainN = 5
)

// DetectAmplification checks every (policy, role) of a run's step rows.
// cliff is the terminal-cliff evidence of the run's curve.
func DetectAmplification(steps []runlog.StepRow, cliff Cliff, p Params) []Amplification {
	type key struct{ pol, role string }
	groups := map[key][]runlog.StepRow{}
	for _, s := range steps {
		if s.Role == "*" {
			continue
		}
		k := key{s.Policy, s.Role}
		groups[k] = append(groups[k], s)
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].pol != keys[j].pol {
			return keys[i].pol < keys[j].pol
		}
		return keys[i].role < keys[j].role
	})
	var out []Amplification
	for _, k := range keys {
		rows := groups[k]
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].Step < rows[j].Step })
		first, last := rows[0].Step, rows[len(rows)-1].Step
		a := Amplification{Policy: k.pol, Role: k.role, CliffStep: -1, PeakStep: -1, PeakNorm: math.NaN(), Sustained: -1}
		warm := first + AmpWarmupSteps
		a.EarlyUntil = warm + int64(math.Floor(p.EarlyFrac*float64(last-warm)))
		var early []float64
		for _, r := range rows {
			if !math.IsNaN(r.AgentCosMean) {
				a.Cosine = true
			}
			if !math.IsNaN(r.CoherenceCos) {
				a.EMA = true
			}
			if r.Step >= warm && r.Step <= a.EarlyUntil && !math.IsNaN(r.GradNorm) {
				early = append(early, r.GradNorm)
			}
			if !math.IsNaN(r.GradNorm) && (math.IsNaN(a.PeakNorm) || r.GradNorm > a.PeakNorm) {
				a.PeakNorm, a.PeakStep = r.GradNorm, r.Step
			}
		}
		a.EarlyMedian = median(early)
		var window []bool
		if !math.IsNaN(a.EarlyMedian) {
			for _, r := range rows {
				if r.Step <= a.EarlyUntil {
					continue
				}
				cosOK := !a.Cosine || (!math.IsNaN(r.AgentCosMean) && r.AgentCosMean > p.AmpCos)
				hit := !math.IsNaN(r.GradNorm) && r.GradNorm > p.AmpK*a.EarlyMedian && cosOK
				if hit {
					if len(a.Steps) == 0 {
						a.AgentCos = r.AgentCos
					}
					a.Steps = append(a.Steps, r.Step)
					a.Norms = append(a.Norms, r.GradNorm)
					a.Cos = append(a.Cos, r.AgentCosMean)
					a.EMACos = append(a.EMACos, r.CoherenceCos)
					if !math.IsNaN(r.CoherenceCos) && r.CoherenceCos > p.AmpCos {
						a.EMAAligned++
					}
				}
				window = append(window, hit)
				if len(window) > AmpSustainN {
					window = window[1:]
				}
				if a.Sustained < 0 && hit && countTrue(window) >= AmpSustainK {
					a.Sustained = r.Step
				}
			}
		}
		a.Amplified = a.Sustained >= 0
		if cliff.Cliff {
			a.CliffStep = cliff.FallStep
			a.BeforeCliff = a.Amplified && a.Sustained <= cliff.FallStep
		}
		out = append(out, a)
	}
	return out
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Dominance is the gradient-mass evidence of one policy trained on several
// roles: each role's share of the summed gradient per step.
type Dominance struct {
	Policy       string
	Roles        []string    // sorted
	Steps        []int64     // sorted
	Shares       [][]float64 // Shares[i][j]: role Roles[j] at step Steps[i] (NaN when absent)
	Dominant     []string    // role with the largest share at each step
	MeanShare    []float64   // per role, over steps where it is present
	DominantRole string      // role with the largest mean share
	DominantFrac float64     // fraction of steps at which DominantRole had the largest share
}

// DetectDominance returns the evidence for every policy of the step rows
// that trains two or more roles (the shared policy); single-role policies
// are skipped.
func DetectDominance(steps []runlog.StepRow) []Dominance {
	type cell struct {
		step int64
		role string
	}
	pols := map[string]map[cell]float64{}
	for _, s := range steps {
		if s.Role == "*" {
			continue
		}
		m := pols[s.Policy]
		if m == nil {
			m = map[cell]float64{}
			pols[s.Policy] = m
		}
		m[cell{s.Step, s.Role}] = s.GradShare
	}
	names := slices.Sorted(maps.Keys(pols))
	var out []Dominance
	for _, pol := range names {
		m := pols[pol]
		roleSet, stepSet := map[string]bool{}, map[int64]bool{}
		for c := range m {
			roleSet[c.role] = true
			stepSet[c.step] = true
		}
		if len(roleSet) < 2 {
			continue
		}
		d := Dominance{Policy: pol}
		for r := range roleSet {
			d.Roles = append(d.Roles, r)
		}
		sort.Strings(d.Roles)
		for s := range stepSet {
			d.Steps = append(d.Steps, s)
		}
		sort.Slice(d.Steps, func(i, j int) bool { return d.Steps[i] < d.Steps[j] })
		sum := make([]float64, len(d.Roles))
		cnt := make([]float64, len(d.Roles))
		wins := map[string]int{}
		for _, st := range d.Steps {
			row := make([]float64, len(d.Roles))
			best, bestV := "", math.Inf(-1)
			for j, r := range d.Roles {
				v, ok := m[cell{st, r}]
				if !ok || math.IsNaN(v) {
					row[j] = math.NaN()
					continue
				}
				row[j] = v
				sum[j] += v
				cnt[j]++
				if v > bestV {
					best, bestV = r, v
				}
			}
			d.Shares = append(d.Shares, row)
			d.Dominant = append(d.Dominant, best)
			if best != "" {
				wins[best]++
			}
		}
		bestMean := math.Inf(-1)
		for j, r := range d.Roles {
			d.MeanShare = append(d.MeanShare, math.NaN())
			if cnt[j] > 0 {
				d.MeanShare[j] = sum[j] / cnt[j]
				if d.MeanShare[j] > bestMean {
					bestMean, d.DominantRole = d.MeanShare[j], r
				}
			}
		}
		if len(d.Steps) > 0 {
			d.DominantFrac = float64(wins[d.DominantRole]) / float64(len(d.Steps))
		}
		out = append(out, d)
	}
	return out
}

// CaptureDefinition is the one statement of what role capture is; the
// report's *Definitions* read it from here, and DetectCapture applies it
// (Capture.Captured).
func CaptureDefinition(p Params) string {
	return fmt.Sprintf("in a policy shared by several roles, a role is captured by the role with the largest mean gradient share (the dominant role) when, "+
		"from the first validation to the last, (1) its format compliance falls by at least capture_format_drop (%g), "+
		"(2) the character %d-gram cosine similarity of its outputs to the dominant role's rises by at least %g, "+
		"(3) the ratio of its mean output length (characters) to the dominant role's moves toward 1 and does not end past 1 by more than a factor of %g "+
		"(a shorter role may grow to at most %g times the dominant's length, a longer one shrink to at least 1/%g of it), "+
		"and (4) its outputs at the last validation are not degenerate (%s)",
		p.CaptureFormatDrop, p.NGram, CaptureSimRise, CaptureOvershoot, CaptureOvershoot, CaptureOvershoot, DegenerationRule())
}

// CaptureSimRise is the least rise of the n-gram similarity to the
// dominant role's outputs, from the first validation to the last, for a
// role's outputs to count as moving toward the dominant's.
const CaptureSimRise = 0.1

// CaptureOvershoot is how far past 1 the length ratio may end: a role that
// copies the dominant role's text and keeps a line of its own ends a little
// past it (the dynamics study's SP voting aggregators that write the
// generators' arithmetic end at 1.4-1.7 times the generators' length), a
// role that blows out to its token cap far past it (the IP aggregators
// there end at 4 times or more, with similarity to the generators near 0).
const CaptureOvershoot = 2.0

// Capture is the role-capture evidence of one role against the dominant
// role of its policy, comparing the first validation (base) with the last
// (CaptureDefinition).
type Capture struct {
	Role, Dominant     string
	BaseStep, EndStep  int64
	FormatBase         float64 // format compliance at BaseStep (evals rows)
	FormatEnd          float64
	FormatCollapse     bool    // FormatBase - FormatEnd >= capture_format_drop
	LenRatioBase       float64 // mean output length (characters) of Role / of Dominant, at base
	LenRatioEnd        float64
	SimBase            float64 // character n-gram cosine similarity of Role's outputs to Dominant's, at base
	SimEnd             float64
	Signature          Signature // the dominant role's format signature at the last validation (evidence only)
	SigBase, SigEnd    float64   // fraction of Role's outputs carrying Signature
	SimRise            bool      // SimEnd - SimBase >= CaptureSimRise
	LengthToward       bool      // the length ratio moved toward 1 without ending past it by more than CaptureOvershoot
	Converging         bool      // SimRise and LengthToward
	Degenerate         bool      // Role's outputs at EndStep are degenerate (Degeneration)
	Captured           bool      // FormatCollapse, Converging and not Degenerate
	ExampleBase        string
	ExampleEnd         string
	DominantExampleEnd string
}

// Signature is a role's output format, as a captured role would copy it.
type Signature int

// Format signatures, in order of precedence.
const (
	SigNone        Signature = iota
	SigAnswerLine            // a line starting "Answer:"
	SigCodeFence             // a ``` code fence
	SigWorkedSteps           // two or more lines of worked steps (numbered, "Step", or holding "=")
)

// SignatureOf classifies one output.
func SignatureOf(text string) Signature {
	if strings.Contains(text, "```") {
		return SigCodeFence
	}
	steps := 0
	for _, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		low := strings.ToLower(l)
		if strings.HasPrefix(low, "answer:") || strings.HasPrefix(low, "**answer") {
			return SigAnswerLine
		}
		if strings.HasPrefix(low, "step") || strings.Contains(l, "=") || (len(l) > 1 && l[0] >= '0' && l[0] <= '9' && (l[1] == '.' || l[1] == ')')) {
			steps++
		}
	}
	if steps >= 2 {
		return SigWorkedSteps
	}
	return SigNone
}

// dominantSignature is the most common signature other than SigNone among
// texts (the first in precedence on a tie), SigNone when none has one.
func dominantSignature(texts []string) Signature {
	var n [4]int
	for _, t := range texts {
		n[SignatureOf(t)]++
	}
	best := SigNone
	for s := SigAnswerLine; s <= SigWorkedSteps; s++ {
		if n[s] > n[best] || (best == SigNone && n[s] > 0) {
			best = s
		}
	}
	return best
}

// signatureShare is the fraction of texts carrying sig.
func signatureShare(texts []string, sig Signature) float64 {
	if len(texts) == 0 {
		return math.NaN()
	}
	k := 0
	for _, t := range texts {
		if SignatureOf(t) == sig {
			k++
		}
	}
	return float64(k) / float64(len(texts))
}

// lengthToward reports whether the length ratio moved from base to end
// toward 1 (the dominant's length) without ending past it by more than
// CaptureOvershoot.
func lengthToward(base, end float64) bool {
	if !(base > 0) || !(end > 0) {
		return false
	}
	closer := math.Abs(math.Log(end)) < math.Abs(math.Log(base))-1e-12
	switch {
	case base < 1:
		return closer && end <= CaptureOvershoot+1e-12
	case base > 1:
		return closer && end >= 1/CaptureOvershoot-1e-12
	}
	return false
}

// DetectCapture compares each non-dominant role of a dominance result with
// the dominant role in the run's validation samples and evals of workflow.
func DetectCapture(r *runlog.Run, workflow string, d Dominance, p Params) []Capture {
	if d.DominantRole == "" {
		return nil
	}
	// validation samples per (step, role), in a fixed order; d.Policy "":
	// every policy's, as for IP's roles against a dominant role named
	// elsewhere
	samples, stepList := valSamples(r, workflow, func(s runlog.SampleRow) bool {
		return d.Policy == "" || s.Policy == "" || s.Policy == d.Policy
	})
	if len(stepList) < 2 {
		return nil
	}
	format := map[int64]map[string]float64{}
	for _, e := range r.Evals {
		if e.Split != "val" || e.Workflow != workflow || e.Role == "*" {
			continue
		}
		if format[e.Step] == nil {
			format[e.Step] = map[string]float64{}
		}
		format[e.Step][e.Role] = e.FormatRate
	}
	texts := func(rows []runlog.SampleRow) []string {
		out := make([]string, len(rows))
		for i, s := range rows {
			out[i] = s.Completion
		}
		return out
	}
	fmtAt := func(step int64, role string) float64 {
		if v, ok := format[step][role]; ok {
			return v
		}
		return math.NaN()
	}
	b, e := stepList[0], stepList[len(stepList)-1]
	var out []Capture
	for _, role := range d.Roles {
		if role == d.DominantRole {
			continue
		}
		rb, re := samples[b][role], samples[e][role]
		db, de := samples[b][d.DominantRole], samples[e][d.DominantRole]
		if len(rb) == 0 || len(re) == 0 || len(db) == 0 || len(de) == 0 {
			continue
		}
		c := Capture{Role: role, Dominant: d.DominantRole, BaseStep: b, EndStep: e}
		c.FormatBase, c.FormatEnd = fmtAt(b, role), fmtAt(e, role)
		c.FormatCollapse = c.FormatBase-c.FormatEnd >= p.CaptureFormatDrop-1e-12
		c.LenRatioBase = meanRunes(texts(rb)) / meanRunes(texts(db))
		c.LenRatioEnd = meanRunes(texts(re)) / meanRunes(texts(de))
		c.SimBase = NGramSimilarity(texts(rb), texts(db), p.NGram)
		c.SimEnd = NGramSimilarity(texts(re), texts(de), p.NGram)
		c.Signature = dominantSignature(texts(de))
		if c.Signature != SigNone {
			c.SigBase, c.SigEnd = signatureShare(texts(rb), c.Signature), signatureShare(texts(re), c.Signature)
		}
		c.SimRise = c.SimEnd-c.SimBase >= CaptureSimRise-1e-12
		c.LengthToward = lengthToward(c.LenRatioBase, c.LenRatioEnd)
		c.Converging = c.SimRise && c.LengthToward
		c.Degenerate = DegenerateOutputs(re)
		c.Captured = c.FormatCollapse && c.Converging && !c.Degenerate
		c.ExampleBase, c.ExampleEnd, c.DominantExampleEnd = rb[0].Completion, re[0].Completion, de[0].Completion
		out = append(out, c)
	}
	return out
}

// CaptureAgainst compares every other role of the run view's workflow with
// the role dominant, over the validation samples of every policy: the
// capture test of a run whose roles train their own adapters (IP), against
// a dominant role named elsewhere (the cell's SP runs). The samples are
// not kept once a run is read, so the test is run then, against each role
// of the workflow in turn, with the study's parameters: nil for a role the
// workflow does not have.
func (r *RunResult) CaptureAgainst(dominant string) []Capture {
	return r.captureAgainst[dominant]
}
