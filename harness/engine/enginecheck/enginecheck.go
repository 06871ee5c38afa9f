// Package enginecheck cross-checks the torch engine against the native
// engine on one checkpoint: both score a fixed set of sequences with no
// adapter and with a seeded random non-zero adapter, take one identical
// GRPO train step, and load each other's saved checkpoints; then, with the
// coherence regularizer on, one step that fills the gradient EMAs and two
// that are scaled against them (the second after each engine loaded the
// other's checkpoint, EMAs included), and the same three steps with the
// measuring-only EMA every run keeps (lambda 0); and, on a constructed
// gradient history where both forms of the regularizer must act (each
// role's EMA set to its own gradient, history.go), one step in each form.
// The native engine is thereby also
// checked against transformers' own Qwen3. Last, the torch engine samples
// completions and rescores them as training does (the rollout agreement,
// rollout.go), the check that judges bfloat16: in bfloat16 or float16 the
// figures against native (float32) are printed, not judged.
package enginecheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/keyed"
)

// Default tolerances, for fp32 on the CPU.
const (
	DefaultLogProbTol = 1e-4 // largest absolute difference of a per-token log-prob
	DefaultStepTol    = 1e-3 // largest relative difference of loss, KL and per-role gradient norms
)

// Options configure a check.
type Options struct {
	Torch      torch.Options
	LogProbTol float64 // default DefaultLogProbTol
	StepTol    float64 // default DefaultStepTol
	NoiseFloor float64 // default DefaultNoiseFloor
	UpdateTol  float64 // default DefaultUpdateTol
	// RolloutShare and RolloutP99 judge the rollout agreement outside
	// float32 (defaults DefaultRolloutShare, DefaultRolloutP99).
	RolloutShare float64
	RolloutP99   float64
	Threads      int    // native engine threads (default 1)
	Work         string // scratch folder for checkpoints (default: a temporary folder)
	// Skip leaves these stages out (the report names them, prints
	// "skipped" for each and judges nothing of them): for a test that runs
	// the check again on the same engines' code, where a stage would repeat
	// what an earlier run checked, or that needs only the stage it is
	// about. The log-probs and the train step with the cross-loaded
	// checkpoints always run: every other stage starts from their seeded
	// adapter and step. The command always runs every stage.
	Skip []Stage
}

// Stage names a stage of the check that Options.Skip may leave out.
type Stage string

// The stages that may be skipped, in the order they run.
const (
	StageUpdate    Stage = "update"    // the optimizer update, component by component
	StageCoherence Stage = "coherence" // the coherence regularizer and the measuring-only EMA on the check's own steps
	StageHistory   Stage = "history"   // both forms of the coherence regularizer on the constructed gradient history
	StageRouting   Stage = "routing"   // the routing settings (routing.go)
	StageRollout   Stage = "rollout"   // the rollout agreement (rollout.go)
)

// Stages lists the stages Options.Skip may name, in the order they run.
var Stages = []Stage{StageUpdate, StageCoherence, StageHistory, StageRouting, StageRollout}

// Report holds the measured differences. Relative differences are
// |torch - native| / max(|native|, 1e-12).
type Report struct {
	Checkpoint     string
	TorchVersion   string
	DType          string             // the torch engine's dtype (float32 unless asked)
	Tokens         int                // scored tokens per pass
	FreshAdapter   float64            // max |Δ| over the tensors of a new adapter saved by each engine (must be 0)
	FreshTensors   int                // tensors compared
	LogProbBase    float64            // max |Δ log-prob|, no adapter
	LogProbAdapter float64            // max |Δ log-prob|, seeded random adapter
	LossRel        float64            // loss of the train step (total)
	KLRel          float64            // KL of the train step (total)
	GradNormRel    map[string]float64 // per role, and "*" for the total
	GradNormNative map[string]float64
	GradNormTorch  map[string]float64
	AfterStep      float64 // max |Δ log-prob| after each engine's own optimizer step (reported, not judged)
	// The optimizer step, component by component (see DefaultNoiseFloor).
	Components     int     // adapter components
	BelowFloor     int     // components whose gradient is below the noise floor
	GradMax        float64 // largest |gradient| component
	Floor          float64 // the noise floor of |gradient|
	UpdateAbove    float64 // max |Δ update| in units of lr, components above the floor
	UpdateBelow    float64 // max |Δ update| in units of lr, components below the floor
	Flipped        int     // components whose updates differ by more than lr
	FlippedAbove   int     // of those, above the floor
	AfterStepAbove float64 // max |Δ log-prob| after the step, torch's below-floor components replaced by native's
	NativeToTorch  float64 // max |Δ log-prob|: native's saved checkpoint loaded by torch
	TorchToNative  float64 // max |Δ log-prob|: torch's saved checkpoint loaded by native
	// The coherence regularizer (CoherenceOptions) and the measuring-only
	// EMA (MonitorOptions, every scale exactly 1 in both engines), over the
	// steps after the one that fills the EMAs, and the steps from the
	// constructed gradient history in both forms: the largest |Δ| of a
	// role's cosine to its EMA and of its scale, the largest relative Δ of
	// the total gradient norm, and the role-steps compared.
	CoherenceCos     float64
	CoherenceScale   float64
	CoherenceGradRel float64
	CoherenceRoles   int
	// On the constructed gradient history (history.go), where every role's
	// cosine to its EMA is about 1: the smallest role factor native applied
	// in the paper's form and the step factor of the step form (both about
	// 1 - lambda, or the check exercised nothing), and the step form's
	// update against the plain step's (History).
	CoherenceMinScale float64
	History           History
	// AgentCos is the largest |Δ| of a same-role agent's gradient cosine
	// with the others (RoleStats.AgentCos) in the train step, over
	// AgentCosN agents.
	AgentCos     float64
	AgentCosN    int
	Routing      Routing // the routing settings (routing.go)
	Rollout      Rollout // the rollout agreement
	Skipped      []Stage // the stages left out (Options.Skip), in Stages' order
	LogProbTol   float64
	StepTol      float64
	NoiseFloor   float64
	UpdateTol    float64
	RolloutShare float64
	RolloutP99   float64
}

// FP32 reports whether the torch engine ran in float32 (an empty dtype is
// float32, the check's default), so that the figures against native are judged.
func (r Report) FP32() bool { return r.DType == "" || r.DType == "float32" }

// Ran reports whether stage s ran (was not skipped).
func (r Report) Ran(s Stage) bool { return !slices.Contains(r.Skipped, s) }

// GradNormMax is the largest relative gradient-norm difference.
func (r Report) GradNormMax() float64 {
	m := 0.0
	for _, v := range r.GradNormRel {
		m = math.Max(m, v)
	}
	return m
}

// GradNormAbsMax is the largest absolute gradient-norm difference.
func (r Report) GradNormAbsMax() float64 {
	m := 0.0
	for k, v := range r.GradNormNative {
		m = math.Max(m, math.Abs(r.GradNormTorch[k]-v))
	}
	return m
}

// Failures lists every figure beyond its tolerance: in float32 all of
// them; otherwise the rollout agreement and the checks that do not depend
// on precision (the new adapters' weights, the coherence regularizer
// exercised). A skipped stage's figures are not judged.
func (r Report) Failures() []string {
	var out []string
	if r.Ran(StageRollout) {
		out = rolloutFailures(r.Rollout, r.FP32(), r.LogProbTol, r.RolloutShare, r.RolloutP99)
	}
	if r.FreshAdapter != 0 || r.FreshTensors == 0 {
		out = append(out, fmt.Sprintf("new adapter: the engines' initial weights differ (max |Δ| %.3g over %d tensors), want identical", r.FreshAdapter, r.FreshTensors))
	}
	coherence := r.Ran(StageCoherence) || r.Ran(StageHistory)
	// The smallest scale comes from the constructed history, where the
	// regularizer must act; the check's own steps need not scale anything.
	if coherence && (r.CoherenceRoles == 0 || r.Ran(StageHistory) && !(r.CoherenceMinScale < 1)) {
		out = append(out, fmt.Sprintf("coherence regularizer: %d role-steps compared, smallest scale %.3g: the check scaled no gradient", r.CoherenceRoles, r.CoherenceMinScale))
	}
	if r.Ran(StageHistory) {
		out = append(out, r.History.failures(r.FP32(), r.StepTol)...)
	}
	if r.Ran(StageRouting) {
		out = append(out, r.Routing.failures(r.FP32(), r.StepTol)...)
	}
	if !r.FP32() {
		return out
	}
	lp := func(name string, v float64) {
		if !(v <= r.LogProbTol) {
			out = append(out, fmt.Sprintf("%s: max |Δ log-prob| %.3g > %.3g", name, v, r.LogProbTol))
		}
	}
	lp("no adapter", r.LogProbBase)
	lp("seeded adapter", r.LogProbAdapter)
	if r.Ran(StageUpdate) {
		lp("after one step, components above the noise floor", r.AfterStepAbove)
		if !(r.UpdateAbove <= r.UpdateTol) || r.Components == 0 {
			out = append(out, fmt.Sprintf("optimizer step: max |Δ update| above the noise floor %.3g lr > %.3g lr (%d of %d components)", r.UpdateAbove, r.UpdateTol, r.Components-r.BelowFloor, r.Components))
		}
	}
	lp("native checkpoint in torch", r.NativeToTorch)
	lp("torch checkpoint in native", r.TorchToNative)
	st := func(name string, v float64) {
		if !(v <= r.StepTol) {
			out = append(out, fmt.Sprintf("%s: relative difference %.3g > %.3g", name, v, r.StepTol))
		}
	}
	if !(r.AgentCos <= r.StepTol) || r.AgentCosN == 0 {
		out = append(out, fmt.Sprintf("train step, same-role agents' cosines: max |Δ| %.3g over %d agents, want within %.3g over some", r.AgentCos, r.AgentCosN, r.StepTol))
	}
	st("train step loss", r.LossRel)
	st("train step KL", r.KLRel)
	roles := make([]string, 0, len(r.GradNormRel))
	for k := range r.GradNormRel {
		roles = append(roles, k)
	}
	slices.Sort(roles)
	for _, k := range roles {
		st("grad norm of role "+k, r.GradNormRel[k])
	}
	if !coherence {
		return out
	}
	if !(r.CoherenceCos <= r.StepTol) || !(r.CoherenceScale <= r.StepTol) {
		out = append(out, fmt.Sprintf("coherence regularizer: max |Δ cosine to the EMA| %.3g, max |Δ scale| %.3g > %.3g", r.CoherenceCos, r.CoherenceScale, r.StepTol))
	}
	st("coherence step grad norm", r.CoherenceGradRel)
	return out
}

// Print writes the report.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "engine-check %s\n  torch engine: %s\n  %d scored tokens per pass\n", r.Checkpoint, r.TorchVersion, r.Tokens)
	if !r.FP32() {
		fmt.Fprintf(w, "  %s: the figures against native (float32) are printed, not judged; the rollout agreement is\n", r.DType)
	}
	fmt.Fprintf(w, "  new adapter, max |Δ weight| (%d tensors):  %.3g (must be 0: same seeded stream)\n", r.FreshTensors, r.FreshAdapter)
	fmt.Fprintf(w, "  max |Δ log-prob|, no adapter:               %.3g (tolerance %.3g)\n", r.LogProbBase, r.LogProbTol)
	fmt.Fprintf(w, "  max |Δ log-prob|, seeded random adapter:    %.3g\n", r.LogProbAdapter)
	fmt.Fprintf(w, "  train step, relative Δ loss:                %.3g (tolerance %.3g)\n", r.LossRel, r.StepTol)
	fmt.Fprintf(w, "  train step, relative Δ KL:                  %.3g\n", r.KLRel)
	roles := make([]string, 0, len(r.GradNormRel))
	for k := range r.GradNormRel {
		roles = append(roles, k)
	}
	slices.Sort(roles)
	for _, k := range roles {
		fmt.Fprintf(w, "  train step, grad norm of role %-10s native %.6g torch %.6g relative Δ %.3g\n", k, r.GradNormNative[k], r.GradNormTorch[k], r.GradNormRel[k])
	}
	fmt.Fprintf(w, "  train step, max |Δ grad norm| over roles:   %.3g (max relative %.3g)\n", r.GradNormAbsMax(), r.GradNormMax())
	fmt.Fprintf(w, "  train step, max |Δ agent cosine|:           %.3g over %d same-role agents\n", r.AgentCos, r.AgentCosN)
	if r.Ran(StageUpdate) {
		fmt.Fprintf(w, "  optimizer step: %d components, %d below the noise floor (|g| < max(%.3g x max |g|, %d eps) = %.3g)\n", r.Components, r.BelowFloor, r.NoiseFloor, FloorEps, r.Floor)
		fmt.Fprintf(w, "  optimizer step, max |Δ update| above floor: %.3g lr (tolerance %.3g lr)\n", r.UpdateAbove, r.UpdateTol)
		fmt.Fprintf(w, "  optimizer step, max |Δ update| below floor: %.3g lr (%d components differ by more than lr, %d above the floor)\n", r.UpdateBelow, r.Flipped, r.FlippedAbove)
	}
	fmt.Fprintf(w, "  max |Δ log-prob| after the optimizer step:  %.3g (each engine's own step; not judged)\n", r.AfterStep)
	if r.Ran(StageUpdate) {
		fmt.Fprintf(w, "  the same, below-floor components native's: %.3g\n", r.AfterStepAbove)
	}
	fmt.Fprintf(w, "  native checkpoint loaded by torch:          %.3g\n", r.NativeToTorch)
	fmt.Fprintf(w, "  torch checkpoint loaded by native:          %.3g\n", r.TorchToNative)
	if r.Ran(StageCoherence) || r.Ran(StageHistory) {
		over := "regularizer and measuring-only"
		if !r.Ran(StageCoherence) {
			over = "the constructed history only"
		}
		if r.Ran(StageHistory) {
			over += fmt.Sprintf(" (smallest scale %.4g)", r.CoherenceMinScale)
		}
		fmt.Fprintf(w, "  coherence, max |Δ cosine to the EMA|:       %.3g over %d role-steps, %s\n", r.CoherenceCos, r.CoherenceRoles, over)
		fmt.Fprintf(w, "  coherence, max |Δ scale|:                   %.3g\n", r.CoherenceScale)
		fmt.Fprintf(w, "  coherence, relative Δ total grad norm:      %.3g\n", r.CoherenceGradRel)
	}
	if r.Ran(StageHistory) {
		r.History.print(w, r.StepTol)
	}
	if r.Ran(StageRouting) {
		r.Routing.print(w)
	}
	if r.Ran(StageRollout) {
		r.Rollout.print(w, r.FP32(), r.LogProbTol, r.RolloutShare, r.RolloutP99)
	}
	if len(r.Skipped) > 0 {
		names := make([]string, len(r.Skipped))
		for i, s := range r.Skipped {
			names[i] = string(s)
		}
		fmt.Fprintf(w, "  skipped (not judged): %s\n", strings.Join(names, ", "))
	}
}

// Turns returns the fixed sequences: six turns of two roles and four agents
// (two same-role agents share a role) with positive and negative
// advantages, token ids below min(vocab, 2000) excluding the last three
// ids.
func Turns(vocab int) []engine.Turn {
	s := keyed.Stream(20260101)
	hi := min(vocab-3, 2000)
	ids := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(s.Uint64() % uint64(hi))
		}
		return out
	}
	spec := []struct {
		role, agent string
		p, c        int
		adv         float64
	}{
		{"generator", "generator0", 11, 7, 1.0}, {"generator", "generator1", 6, 9, -0.5},
		{"generator", "generator0", 15, 5, -1.2}, {"evaluator", "evaluator", 9, 6, 0.8},
		{"evaluator", "evaluator", 13, 4, -0.7}, {"generator", "generator1", 8, 3, 0},
	}
	turns := make([]engine.Turn, len(spec))
	for i, x := range spec {
		turns[i] = engine.Turn{Adapter: AdapterName, Role: x.role, Agent: x.agent, PromptIDs: ids(x.p), CompletionIDs: ids(x.c), Advantage: x.adv}
	}
	return turns
}

// AdapterName names the adapter of the check.
const AdapterName = "policy"

// Adapter settings of the check: all seven targets.
const (
	adapterRank  = 4
	adapterAlpha = 8
	adapterSeed  = 7
)

// TrainOptions are the settings of the checked step: a KL penalty on one
// role and a gradient clip, so both paths are exercised.
func TrainOptions() engine.TrainOptions {
	return engine.TrainOptions{ClipLow: 0.2, ClipHigh: 0.28, LossAgg: engine.SeqMeanTokenMean, Temperature: 0.7,
		LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, GradClip: 1.0,
		KLCoef: map[string]float64{"evaluator": 0.05}}
}

// CoherenceOptions are TrainOptions with the coherence regularizer on, in
// the paper's form.
func CoherenceOptions() engine.TrainOptions {
	o := TrainOptions()
	o.Coherence = &engine.Coherence{Lambda: 0.5, EMADecay: 0.5}
	return o
}

// StepCoherenceOptions are CoherenceOptions in the form that acts on the
// optimizer's step (engine.CoherenceStep).
func StepCoherenceOptions() engine.TrainOptions {
	o := CoherenceOptions()
	o.Coherence.Form = engine.CoherenceStep
	return o
}

// MonitorOptions are TrainOptions with the measuring-only gradient EMA every
// run keeps without the regularizer (engine.CoherenceMonitor).
func MonitorOptions() engine.TrainOptions {
	o := TrainOptions()
	o.Coherence = engine.CoherenceMonitor()
	return o
}

// WriteRandomAdapter writes, in the engines' checkpoint layout, one adapter
// named AdapterName whose A and B are drawn from a seeded stream (B is not
// zero, so the adapter changes the model), with a zero optimizer state.
func WriteRandomAdapter(dir string, cfg model.Config) error {
	targets := model.LoRATargets()
	specs, err := model.ExpectedAdapterTensors(cfg, adapterRank, targets)
	if err != nil {
		return err
	}
	s := keyed.Stream(adapterSeed)
	var ts, opt []model.Tensor
	for _, sp := range specs {
		n := sp.Shape[0] * sp.Shape[1]
		// A: PEFT's bound 1/sqrt(in); B: bound 0.5/sqrt(r).
		bound := 1 / math.Sqrt(float64(sp.Shape[1]))
		if sp.Shape[1] == adapterRank {
			bound = 0.5 / math.Sqrt(adapterRank)
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(bound * (2*s.Float64() - 1))
		}
		ts = append(ts, model.Tensor{Name: sp.Name, Shape: sp.Shape, Data: v})
		opt = append(opt, model.Tensor{Name: sp.Name + ".exp_avg", Shape: sp.Shape, Data: make([]float32, n)},
			model.Tensor{Name: sp.Name + ".exp_avg_sq", Shape: sp.Shape, Data: make([]float32, n)})
	}
	ad := filepath.Join(dir, AdapterName)
	if err := model.WriteAdapter(ad, model.AdapterFile{Rank: adapterRank, Alpha: adapterAlpha, Targets: targets, BaseModel: "marlow-native"}, ts); err != nil {
		return err
	}
	if err := model.WriteSafetensors(filepath.Join(ad, "optimizer.safetensors"), opt, map[string]string{"format": "marlow-adamw"}); err != nil {
		return err
	}
	state, _ := json.MarshalIndent(map[string]any{"name": AdapterName, "seed": adapterSeed, "step": 0}, "", "  ")
	if err := os.WriteFile(filepath.Join(ad, "state.json"), append(state, '\n'), 0o644); err != nil {
		return err
	}
	idx, _ := json.MarshalIndent(map[string]any{"adapters": []string{AdapterName}}, "", "  ")
	return os.WriteFile(filepath.Join(dir, "adapters.json"), append(idx, '\n'), 0o644)
}

// OpenNative opens the checkpoint in the native engine. Checkpoints whose
// tokenizer the native engine cannot read (the real Qwen3 BPE tokenizers)
// get a character tokenizer instead: the check exchanges token ids only.
func OpenNative(dir string, threads int) (*native.Engine, error) {
	if e, err := native.Open(dir, native.Options{Threads: threads}); err == nil {
		return e, nil
	}
	cfg, ts, err := model.ReadCheckpoint(dir)
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	w, err := native.WeightsFromTensors(cfg, ts)
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	tok, err := model.NewCharTokenizer(model.DefaultAlphabet())
	if err != nil {
		return nil, err
	}
	return native.New(cfg, tok, w, native.Options{Threads: threads})
}

func maxAbs(a, b [][]float32) float64 {
	m := 0.0
	for i := range a {
		for j := range a[i] {
			d := math.Abs(float64(a[i][j]) - float64(b[i][j]))
			if math.IsNaN(d) {
				return math.Inf(1)
			}
			m = math.Max(m, d)
		}
	}
	return m
}

func rel(t, n float64) float64 {
	if math.IsNaN(t) && math.IsNaN(n) {
		return 0
	}
	return math.Abs(t-n) / math.Max(math.Abs(n), 1e-12)
}

// Run checks the torch engine against the native engine on checkpoint dir:
// log-probs without and with an adapter, a fresh adapter's tensors, one train
// step and the optimizer's update, cross-loaded checkpoints, the coherence
// regularizer, and the rollout agreement of torch's sampler.
func Run(ctx context.Context, dir string, opt Options) (Report, error) {
	r := newReport(dir, opt)
	var err error
	if r.Skipped, err = skipped(opt.Skip); err != nil {
		return r, err
	}
	work := opt.Work
	if work == "" {
		tmp, err := os.MkdirTemp("", "marlow-engine-check-")
		if err != nil {
			return r, err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	ne, err := OpenNative(dir, max(opt.Threads, 1))
	if err != nil {
		return r, err
	}
	defer ne.Close()
	to := opt.Torch
	if to.DType == "" {
		to.DType = "float32" // the check compares semantics, at full precision
	}
	te, err := torch.Open(ctx, dir, to)
	if err != nil {
		return r, err
	}
	defer te.Close()
	r.TorchVersion = te.Version()
	r.DType = te.Info().DType
	c := &check{ne: ne, te: te, cfg: ne.Config(), work: work, temp: TrainOptions().Temperature}
	c.turns = Turns(c.cfg.VocabSize)
	for _, t := range c.turns {
		r.Tokens += len(t.CompletionIDs)
	}
	for _, stage := range []struct {
		name Stage // empty: always run
		run  func(context.Context, *Report) error
	}{
		{"", c.logProbsAndFresh},
		{"", c.stepAndCrossLoad},
		{StageUpdate, c.update},
		{StageCoherence, c.coherence},
		{StageHistory, c.history},
		{StageRouting, c.routing},
		{StageRollout, c.rollout},
	} {
		if stage.name != "" && !r.Ran(stage.name) {
			continue
		}
		if err := stage.run(ctx, &r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// skipped is opt.Skip in Stages' order, or an error naming a stage that
// cannot be skipped.
func skipped(skip []Stage) ([]Stage, error) {
	for _, s := range skip {
		if !slices.Contains(Stages, s) {
			return nil, fmt.Errorf("engine-check: stage %q cannot be skipped (the stages that can: %v)", s, Stages)
		}
	}
	var out []Stage
	for _, s := range Stages {
		if slices.Contains(skip, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// newReport is a report with opt's tolerances, each zero one at its default.
func newReport(dir string, opt Options) Report {
	r := Report{Checkpoint: dir, LogProbTol: opt.LogProbTol, StepTol: opt.StepTol,
		GradNormRel: map[string]float64{}, GradNormNative: map[string]float64{}, GradNormTorch: map[string]float64{}}
	if r.LogProbTol == 0 {
		r.LogProbTol = DefaultLogProbTol
	}
	if r.StepTol == 0 {
		r.StepTol = DefaultStepTol
	}
	if r.NoiseFloor = opt.NoiseFloor; r.NoiseFloor == 0 {
		r.NoiseFloor = DefaultNoiseFloor
	}
	if r.UpdateTol = opt.UpdateTol; r.UpdateTol == 0 {
		r.UpdateTol = DefaultUpdateTol
	}
	if r.RolloutShare = opt.RolloutShare; r.RolloutShare == 0 {
		r.RolloutShare = DefaultRolloutShare
	}
	if r.RolloutP99 = opt.RolloutP99; r.RolloutP99 == 0 {
		r.RolloutP99 = DefaultRolloutP99
	}
	return r
}

// check holds the two engines of one Run and what its stages pass on: the
// seeded adapter's folder and the log-probs after the train step (native's
// in after, torch's in afterTorch).
type check struct {
	ne    *native.Engine
	te    *torch.Engine
	cfg   model.Config
	turns []engine.Turn
	work  string
	temp  float64

	seeded            string
	after, afterTorch [][]float32
}

// score is both engines' log-probs of the check's turns under adapter.
func (c *check) score(ctx context.Context, adapter string) ([][]float32, [][]float32, error) {
	a, err := c.ne.LogProbs(ctx, adapter, c.turns, c.temp)
	if err != nil {
		return nil, nil, err
	}
	b, err := c.te.LogProbs(ctx, adapter, c.turns, c.temp)
	return a, b, err
}

// logProbsAndFresh compares the base policy's log-probs and a fresh
// adapter's tensors, then loads the seeded adapter into both engines and
// compares its log-probs.
func (c *check) logProbsAndFresh(ctx context.Context, r *Report) error {
	a, b, err := c.score(ctx, "")
	if err != nil {
		return err
	}
	r.LogProbBase = maxAbs(a, b)
	if r.FreshAdapter, r.FreshTensors, err = compareFresh(ctx, c.ne, c.te, c.cfg, c.work); err != nil {
		return err
	}
	c.seeded = filepath.Join(c.work, "seeded")
	if err := WriteRandomAdapter(c.seeded, c.cfg); err != nil {
		return fmt.Errorf("write seeded adapter: %w", err)
	}
	if err := c.ne.Load(ctx, c.seeded); err != nil {
		return err
	}
	if err := c.te.Load(ctx, c.seeded); err != nil {
		return err
	}
	a, b, err = c.score(ctx, AdapterName)
	if err != nil {
		return err
	}
	r.LogProbAdapter = maxAbs(a, b)
	c.after = a // the seeded adapter's native log-probs, which compareStep reads
	return nil
}

// stepAndCrossLoad takes one train step in each engine, compares the
// log-probs after it, and loads each engine's checkpoint into the other.
func (c *check) stepAndCrossLoad(ctx context.Context, r *Report) error {
	if err := compareStep(ctx, c.ne, c.te, c.turns, c.after, r); err != nil {
		return err
	}
	a, b, err := c.score(ctx, AdapterName)
	if err != nil {
		return err
	}
	r.AfterStep = maxAbs(a, b)
	score := func(adapter string) ([][]float32, [][]float32, error) { return c.score(ctx, adapter) }
	if r.NativeToTorch, r.TorchToNative, err = compareCrossLoad(ctx, c.ne, c.te, c.work, a, b, score); err != nil {
		return err
	}
	c.after, c.afterTorch = a, b
	return nil
}

// update compares the two engines' optimizer updates component by component
// and scores torch's update with the components below the noise floor
// masked to native's.
func (c *check) update(ctx context.Context, r *Report) error {
	topt := TrainOptions()
	u, err := compareUpdate(c.cfg, c.seeded, filepath.Join(c.work, "native"), filepath.Join(c.work, "torch"), topt.LR, topt.Beta1, topt.Eps, r.NoiseFloor)
	if err != nil {
		return fmt.Errorf("optimizer step: %w", err)
	}
	r.Components, r.BelowFloor, r.GradMax, r.Floor = u.components, u.below, u.gradMax, u.cut
	r.UpdateAbove, r.UpdateBelow, r.Flipped, r.FlippedAbove = u.maxAbove, u.maxBelow, u.flipped, u.flippedAbove
	masked := filepath.Join(c.work, "masked")
	if err := writeMasked(masked, filepath.Join(c.work, "torch"), c.cfg, u.masked); err != nil {
		return fmt.Errorf("optimizer step: %w", err)
	}
	if err := c.te.Load(ctx, masked); err != nil {
		return err
	}
	m, err := c.te.LogProbs(ctx, AdapterName, c.turns, c.temp)
	if err != nil {
		return err
	}
	r.AfterStepAbove = maxAbs(c.after, m)
	return nil
}

// coherence checks the coherence regularizer (I6) on the check's own steps.
func (c *check) coherence(ctx context.Context, r *Report) error {
	if err := compareCoherence(ctx, c.ne, c.te, c.turns, c.seeded, c.work, r); err != nil {
		return fmt.Errorf("coherence regularizer: %w", err)
	}
	return nil
}

// history checks both forms of the coherence regularizer on a constructed
// gradient history where they must act.
func (c *check) history(ctx context.Context, r *Report) error {
	if err := compareHistory(ctx, c.ne, c.te, c.cfg, c.turns, c.seeded, c.work, r); err != nil {
		return fmt.Errorf("coherence regularizer on a constructed gradient history: %w", err)
	}
	return nil
}

// rollout measures torch's rollout log-probs against its training
// log-probs at step 0 of the seeded adapter.
func (c *check) rollout(ctx context.Context, r *Report) error {
	if err := c.te.Load(ctx, c.seeded); err != nil {
		return err
	}
	var err error
	r.Rollout, err = measureRollout(ctx, c.te, AdapterName, TrainOptions())
	return err
}

// compareCoherence runs coherencePass with CoherenceOptions and then with
// MonitorOptions.
func compareCoherence(ctx context.Context, ne *native.Engine, te *torch.Engine, turns []engine.Turn, seeded, work string, r *Report) error {
	if err := coherencePass(ctx, ne, te, turns, seeded, work, CoherenceOptions(), r); err != nil {
		return err
	}
	if err := coherencePass(ctx, ne, te, turns, seeded, work, MonitorOptions(), r); err != nil {
		return fmt.Errorf("measuring-only EMA (lambda 0): %w", err)
	}
	return nil
}

// coherencePass reloads the seeded adapter in both engines and takes three
// train steps with opt: the first fills each role's gradient EMA (cosine
// undefined, scale 1 in both), the second is scaled against it (or, with
// lambda 0, only measured: every scale exactly 1 in both), and the third is
// taken after each engine loaded the other's checkpoint (EMAs included). It
// records the differences of the last two in r. Whether a factor below 1
// was applied depends on the checkpoint's gradients (at random weights the
// second step's gradient may point away from the first's); the
// constructed history (compareHistory) is where the regularizer must act.
func coherencePass(ctx context.Context, ne *native.Engine, te *torch.Engine, turns []engine.Turn, seeded, work string, opt engine.TrainOptions, r *Report) error {
	if err := ne.Load(ctx, seeded); err != nil {
		return err
	}
	if err := te.Load(ctx, seeded); err != nil {
		return err
	}
	monitor := opt.Coherence.Lambda == 0
	for step := 1; step <= 3; step++ {
		if step == 3 {
			pass := "coherence"
			if monitor {
				pass = "monitor"
			}
			nd, td := filepath.Join(work, pass+"-native"), filepath.Join(work, pass+"-torch")
			if err := ne.Save(ctx, nd); err != nil {
				return err
			}
			if err := te.Save(ctx, td); err != nil {
				return err
			}
			if err := te.Load(ctx, nd); err != nil {
				return fmt.Errorf("torch loading native's checkpoint: %w", err)
			}
			if err := ne.Load(ctx, td); err != nil {
				return fmt.Errorf("native loading torch's checkpoint: %w", err)
			}
		}
		ns, err := ne.TrainStep(ctx, AdapterName, turns, opt)
		if err != nil {
			return err
		}
		ts, err := te.TrainStep(ctx, AdapterName, turns, opt)
		if err != nil {
			return err
		}
		if len(ns.Roles) != len(ts.Roles) {
			return fmt.Errorf("step %d: native has %d roles, torch %d", step, len(ns.Roles), len(ts.Roles))
		}
		for i, nr := range ns.Roles {
			tr := ts.Roles[i]
			if step == 1 {
				if !math.IsNaN(nr.CoherenceCos) || !math.IsNaN(tr.CoherenceCos) || nr.CoherenceScale != 1 || tr.CoherenceScale != 1 {
					return fmt.Errorf("step 1, role %s: cosine native %v torch %v, scale native %v torch %v; want undefined and 1 before the EMA exists",
						nr.Role, nr.CoherenceCos, tr.CoherenceCos, nr.CoherenceScale, tr.CoherenceScale)
				}
				continue
			}
			if monitor && (nr.CoherenceScale != 1 || tr.CoherenceScale != 1) {
				return fmt.Errorf("step %d, role %s: scale native %v torch %v; want exactly 1 with lambda 0", step, nr.Role, nr.CoherenceScale, tr.CoherenceScale)
			}
			r.CoherenceRoles++
			r.CoherenceCos = math.Max(r.CoherenceCos, absDiff(tr.CoherenceCos, nr.CoherenceCos))
			r.CoherenceScale = math.Max(r.CoherenceScale, absDiff(tr.CoherenceScale, nr.CoherenceScale))
		}
		if step > 1 {
			r.CoherenceGradRel = math.Max(r.CoherenceGradRel, rel(ts.Total.GradNorm, ns.Total.GradNorm))
		}
	}
	return nil
}

// absDiff is |a - b|, +Inf when only one is NaN and 0 when both are.
func absDiff(a, b float64) float64 {
	switch {
	case math.IsNaN(a) && math.IsNaN(b):
		return 0
	case math.IsNaN(a) || math.IsNaN(b):
		return math.Inf(1)
	}
	return math.Abs(a - b)
}

// compareStep takes one identical train step of AdapterName in both engines
// and records the relative differences of loss, KL and every role's
// gradient norm in r. The turns' old log-probs are native's current ones
// (current) shifted per token, so the ratios spread over both sides of the
// clip range.
func compareStep(ctx context.Context, ne *native.Engine, te *torch.Engine, turns []engine.Turn, current [][]float32, r *Report) error {
	s := keyed.Stream(99)
	for i := range turns {
		turns[i].OldLogProbs = make([]float32, len(current[i]))
		for j, lp := range current[i] {
			turns[i].OldLogProbs[j] = lp + float32(0.6*(s.Float64()-0.5))
		}
	}
	topt := TrainOptions()
	ns, err := ne.TrainStep(ctx, AdapterName, turns, topt)
	if err != nil {
		return err
	}
	ts, err := te.TrainStep(ctx, AdapterName, turns, topt)
	if err != nil {
		return err
	}
	if len(ns.Roles) != len(ts.Roles) || ns.SkippedTurns != ts.SkippedTurns {
		return fmt.Errorf("train step: native has %d roles (%d skipped turns), torch %d (%d)", len(ns.Roles), ns.SkippedTurns, len(ts.Roles), ts.SkippedTurns)
	}
	r.LossRel = rel(ts.Total.Loss, ns.Total.Loss)
	r.KLRel = rel(ts.Total.KL, ns.Total.KL)
	r.GradNormNative["*"], r.GradNormTorch["*"] = ns.Total.GradNorm, ts.Total.GradNorm
	r.GradNormRel["*"] = rel(ts.Total.GradNorm, ns.Total.GradNorm)
	for i, nr := range ns.Roles {
		tr := ts.Roles[i]
		if tr.Role != nr.Role {
			return fmt.Errorf("train step: role %d is %q in native, %q in torch", i, nr.Role, tr.Role)
		}
		r.GradNormNative[nr.Role], r.GradNormTorch[nr.Role] = nr.GradNorm, tr.GradNorm
		r.GradNormRel[nr.Role] = rel(tr.GradNorm, nr.GradNorm)
		r.LossRel = math.Max(r.LossRel, rel(tr.Loss, nr.Loss))
		r.KLRel = math.Max(r.KLRel, rel(tr.KL, nr.KL))
		if len(tr.AgentCos) != len(nr.AgentCos) {
			return fmt.Errorf("train step: role %s has %d agent cosines in native, %d in torch", nr.Role, len(nr.AgentCos), len(tr.AgentCos))
		}
		for a, v := range nr.AgentCos {
			tv, ok := tr.AgentCos[a]
			if !ok {
				return fmt.Errorf("train step: torch has no cosine of agent %s", a)
			}
			r.AgentCos = math.Max(r.AgentCos, absDiff(tv, v))
			r.AgentCosN++
		}
	}
	return nil
}

// compareCrossLoad saves both engines' adapters under work, loads each
// engine's checkpoint into the other and scores again; it returns the
// largest log-prob differences of torch with native's checkpoint against
// native before (nativeAfter), and of native with torch's against torch
// before (torchAfter).
func compareCrossLoad(ctx context.Context, ne *native.Engine, te *torch.Engine, work string, nativeAfter, torchAfter [][]float32,
	score func(adapter string) ([][]float32, [][]float32, error)) (nativeToTorch, torchToNative float64, err error) {
	nd, td := filepath.Join(work, "native"), filepath.Join(work, "torch")
	if err := ne.Save(ctx, nd); err != nil {
		return 0, 0, err
	}
	if err := te.Save(ctx, td); err != nil {
		return 0, 0, err
	}
	if err := te.Load(ctx, nd); err != nil {
		return 0, 0, fmt.Errorf("torch loading native's checkpoint: %w", err)
	}
	if err := ne.Load(ctx, td); err != nil {
		return 0, 0, fmt.Errorf("native loading torch's checkpoint: %w", err)
	}
	a, b, err := score(AdapterName)
	if err != nil {
		return 0, 0, err
	}
	return maxAbs(nativeAfter, b), maxAbs(torchAfter, a), nil
}

// compareFresh creates the same new adapter in both engines (all seven
// targets, A from the seeded stream, B = 0), saves both and compares the
// saved tensors.
func compareFresh(ctx context.Context, ne *native.Engine, te *torch.Engine, cfg model.Config, work string) (float64, int, error) {
	const name = "fresh"
	ac := engine.AdapterConfig{Rank: adapterRank, Alpha: adapterAlpha, Seed: 12345}
	if err := ne.NewAdapter(ctx, name, ac); err != nil {
		return 0, 0, err
	}
	if err := te.NewAdapter(ctx, name, ac); err != nil {
		return 0, 0, err
	}
	nd, td := filepath.Join(work, "fresh-native"), filepath.Join(work, "fresh-torch")
	if err := ne.Save(ctx, nd); err != nil {
		return 0, 0, err
	}
	if err := te.Save(ctx, td); err != nil {
		return 0, 0, err
	}
	_, nts, err := model.ReadAdapter(filepath.Join(nd, name), cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("native's new adapter: %w", err)
	}
	_, tts, err := model.ReadAdapter(filepath.Join(td, name), cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("torch's new adapter: %w", err)
	}
	byName := map[string]model.Tensor{}
	for _, t := range tts {
		byName[t.Name] = t
	}
	m := 0.0
	for _, t := range nts {
		u, ok := byName[t.Name]
		if !ok || len(u.Data) != len(t.Data) {
			return 0, 0, fmt.Errorf("new adapter: torch's checkpoint lacks %s or has another shape", t.Name)
		}
		for i, x := range t.Data {
			m = math.Max(m, math.Abs(float64(x)-float64(u.Data[i])))
		}
	}
	return m, len(nts), nil
}
