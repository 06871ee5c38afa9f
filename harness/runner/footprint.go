package runner

import (
	"fmt"
	"path/filepath"

	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/workflow"
)

// Limits past which `marlow plan` warns about an experiment's footprint.
const (
	WarnRunFiles        = 50_000
	WarnRunBytes        = 1 << 30 // 1 GiB
	WarnExperimentFiles = 1_000_000
	WarnExperimentBytes = 10 << 30 // 10 GiB
	// MinNewTokens is the fewest new tokens a role may be given before plan
	// warns that it cannot write an answer in its format (every reward 0,
	// every group without variance: no learning signal).
	MinNewTokens = 4
)

// Sizes of the footprint estimate, measured on the smoke experiment's logs
// and rounded up: a Parquet segment's fixed part (schema, footer,
// statistics) and the compressed bytes of a row of each table. A prompt
// and a completion took about 3 bytes per allowed new token together when
// every samples row held its prompt (log schema 1); the prompt, a third of
// it, is now stored once per run in prompts/ (a prompt row), and a samples
// row keeps the completion and the prompt's id.
const (
	segmentOverhead      = 4 << 10
	stepsRowBytes        = 200
	evalsRowBytes        = 100
	timingRowBytes       = 40
	samplesRowBytes      = 64
	samplesBytesPerToken = 2
	promptRowBytes       = 32
	promptBytesPerToken  = 1
	loraBytesPerParam    = 4 * 3 // fp32 adapter and two AdamW moments
	emaBytesPerParam     = 4     // fp32 gradient EMA of one role
	ckptFilesPerAdapter  = 4     // adapter_model, adapter_config, optimizer, state
	ckptFixedFiles       = 2     // state.json, adapters.json
)

// Footprint is the estimated disk use of one run when it has finished:
// what its folder holds (manifest, committed segments, the last two
// checkpoints, kept so that resume can roll back past one damaged segment)
// plus its lock file. The log estimate errs on the large side.
type Footprint struct {
	// StepRows and ValSampleRows are the steps/ rows and validation
	// samples/ rows the run logs; LargestSegment the largest segment's
	// estimated bytes (what a report keeps and decodes of it: ReportCost).
	StepRows, ValSampleRows int
	LargestSegment          int64
	Commits                 int   // commits of the run log (checkpoints)
	Segments                int   // committed Parquet segments
	Files                   int   // files in the run folder, plus the lock file
	LogBytes                int64 // Parquet segments
	CheckpointBytes         int64 // the checkpoints kept (-1 when the model's shape is unknown)
}

// Bytes is the whole estimate (checkpoint counted as 0 when unknown).
func (f Footprint) Bytes() int64 { return f.LogBytes + max(f.CheckpointBytes, 0) }

// EstimateFootprint estimates the files and bytes a run writes, from its
// schedule (commits, validations, samples per step) and its shapes.
func EstimateFootprint(r spec.Run) Footprint {
	rc := r.Config
	steps := 0
	if rc.Train {
		steps = rc.GRPO.Steps
	}
	roles, _ := workflow.Roles(r.Workflow)
	adapters, _ := grpo.Adapters(r.Condition, rc.Routing, append([]string{r.Workflow}, r.EvalWorkflows...)...)
	maxTok := 0
	for _, v := range rc.GRPO.MaxNewTokens {
		maxTok = max(maxTok, v)
	}
	// A validation's episodes: eval.val_size problems (0: the whole split),
	// the first one's eval.first_val_size when set.
	valProblems := rc.Eval.ValSize
	if valProblems == 0 {
		valProblems = rc.Data.ValSize
	}
	valEpisodes := valProblems * max(rc.Eval.Samples, 1)
	firstEpisodes := max(valProblems, rc.Eval.FirstValSize) * max(rc.Eval.Samples, 1)
	// valPrompts are the new prompts of a validation after the first: its
	// first-turn prompts (one per problem, shared by voting's generators)
	// were stored by the first one.
	var evalRows, valSamples, firstSamples, valPrompts, firstPrompts int
	for _, wf := range r.EvalWorkflows {
		rs, _ := workflow.Roles(wf)
		evalRows += len(rs) + 1
		valSamples += valEpisodes * maxTurns(wf, rc.WorkflowSet)
		firstSamples += firstEpisodes * maxTurns(wf, rc.WorkflowSet)
		valPrompts += valEpisodes * laterPrompts(wf, rc.WorkflowSet)
		firstPrompts += firstEpisodes
	}
	isEval := func(k int) bool {
		if k == 0 {
			return rc.Eval.BeforeTraining || steps == 0
		}
		return k == steps || (rc.Eval.Every > 0 && k%rc.Eval.Every == 0)
	}
	isCommit := func(k int) bool {
		return k == 0 || k == steps || (rc.Checkpoint.Every > 0 && k%rc.Checkpoint.Every == 0)
	}
	var f Footprint
	var stepsRows, evalsRows, samplesRows, promptRows, timingRows int // since the last commit
	seg := func(rows, rowBytes int) {
		if rows > 0 {
			f.Segments++
			b := int64(segmentOverhead + rows*rowBytes)
			f.LogBytes += b
			f.LargestSegment = max(f.LargestSegment, b)
		}
	}
	sampleBytes := samplesRowBytes + samplesBytesPerToken*maxTok
	promptBytes := promptRowBytes + promptBytesPerToken*maxTok
	evaluated := false
	for k := 0; k <= steps; k++ {
		if k > 0 {
			stepsRows += len(roles) + len(adapters)
			f.StepRows += len(roles) + len(adapters)
			samplesRows += rc.GRPO.SamplesPerStep
			promptRows += rc.GRPO.SamplesPerStep // counted as all new, erring large
			timingRows++
		}
		if isEval(k) {
			evalsRows += evalRows
			n := valSamples
			if k == 0 {
				n = firstSamples
			}
			samplesRows += n
			f.ValSampleRows += n
			promptRows += valPrompts
			if !evaluated {
				promptRows += firstPrompts
				evaluated = true
			}
		}
		if isCommit(k) {
			f.Commits++
			seg(stepsRows, stepsRowBytes)
			seg(evalsRows, evalsRowBytes)
			seg(samplesRows, sampleBytes)
			seg(promptRows, promptBytes)
			seg(timingRows, timingRowBytes)
			stepsRows, evalsRows, samplesRows, promptRows, timingRows = 0, 0, 0, 0, 0
		}
	}
	// A trained adapter also keeps the gradient EMA of each role it trains
	// (coherence.safetensors; every run keeps it, regularizer or not).
	var emaFiles, emas int
	if steps > 0 {
		trained, _ := grpo.Adapters(r.Condition, rc.Routing, r.Workflow)
		emaFiles, emas = len(trained), len(roles)
	}
	// a run keeps its last two checkpoints (one when it committed once)
	kept := min(2, max(f.Commits, 1))
	f.Files = 2 + f.Segments + kept*(ckptFixedFiles+ckptFilesPerAdapter*len(adapters)+emaFiles)
	f.CheckpointBytes = -1
	if params, ok := loraParams(rc.Model, rc.GRPO.Lora.Rank); ok {
		f.CheckpointBytes = int64(kept) * (int64(len(adapters))*params*loraBytesPerParam + int64(emas)*params*emaBytesPerParam)
	}
	return f
}

// maxTurns is the most agent turns one episode of a workflow has.
func maxTurns(wf string, ws spec.WorkflowSettings) int {
	n := 0
	for _, t := range workflowTurns(wf, ws) {
		n += t.N
	}
	return n
}

// laterPrompts is how many distinct prompts one episode of a workflow
// has besides its first-turn prompt (which repeats with the problem, and
// is shared by the agents of a first stage of several, like voting's
// generators): every turn after its first stage's (eval-opt's evaluator
// and revision turns, voting's aggregator, orch-workers' workers, one
// strategy each, and synthesizer).
func laterPrompts(wf string, ws spec.WorkflowSettings) int {
	n := 0
	for i, t := range workflowTurns(wf, ws) {
		if i > 0 {
			n += t.N
		}
	}
	return n
}

// loraParams counts one adapter's parameters: rank x (in + out) for every
// linear layer of every block (q, k, v, o, gate, up, down).
func loraParams(m spec.ModelConfig, rank int) (int64, bool) {
	var h, inter, layers, heads, kv, hd int
	switch {
	case m.Tiny != nil:
		t := m.Tiny
		h, inter, layers, heads, kv, hd = t.Hidden, t.Intermediate, t.Layers, t.Heads, t.KVHeads, t.HeadDim
	case m.Checkpoint != "":
		c, err := model.LoadConfig(filepath.Join(m.Checkpoint, model.ConfigFile))
		if err != nil {
			return 0, false
		}
		h, inter, layers, heads, kv, hd = c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	default:
		return 0, false
	}
	perLayer := (h + heads*hd) + 2*(h+kv*hd) + (heads*hd + h) + 2*(h+inter) + (inter + h)
	return int64(rank) * int64(perLayer) * int64(layers), true
}

// NoSignal lists the reasons a trained run cannot learn anything (empty
// when none): when the role that writes the final answer of the trained
// workflow (the generator; the synthesizer of orch-workers) may write fewer
// than MinNewTokens tokens, no answer fits, every reward is 0 and no group
// has variance. (Groups of one rollout and a zero learning rate, the other
// ways to have no signal, are refused by the spec itself.)
func NoSignal(r spec.Run) []string {
	rc := r.Config
	if !rc.Train {
		return nil
	}
	d, err := workflow.Lookup(r.Workflow)
	if err != nil {
		return []string{err.Error()}
	}
	role := d.Answerer
	key := role
	n, ok := rc.GRPO.MaxNewTokens[role]
	if !ok {
		key, n = "default", rc.GRPO.MaxNewTokens["default"]
	}
	if n >= MinNewTokens {
		return nil
	}
	return []string{fmt.Sprintf("grpo.max_new_tokens.%s %d: the %s of %s cannot write an answer in %d tokens, so every reward is 0 and no group has variance (no learning signal)",
		key, n, role, r.Workflow, n)}
}

// PlanWarnings checks the runs' estimated footprint against the stated
// limits and each trained run for a learning signal; a reason shared by
// several runs is one line naming how many and the first.
func PlanWarnings(runs []spec.Run) []string {
	var out []string
	var files int
	var bytes int64
	type group struct {
		n     int
		first string
	}
	groups := map[string]*group{}
	var order []string
	add := func(msg, id string) {
		g := groups[msg]
		if g == nil {
			g = &group{first: id}
			groups[msg] = g
			order = append(order, msg)
		}
		g.n++
	}
	for _, r := range runs {
		f := EstimateFootprint(r)
		files += f.Files
		bytes += f.Bytes()
		if f.Files > WarnRunFiles {
			add(fmt.Sprintf("would write more than %d files", WarnRunFiles), r.ID)
		}
		if f.Bytes() > WarnRunBytes {
			add(fmt.Sprintf("would write more than %s", HumanBytes(WarnRunBytes)), r.ID)
		}
		for _, why := range NoSignal(r) {
			add("has no learning signal: "+why, r.ID)
		}
	}
	for _, msg := range order {
		g := groups[msg]
		if g.n == 1 {
			out = append(out, fmt.Sprintf("run %s %s", g.first, msg))
			continue
		}
		out = append(out, fmt.Sprintf("%d runs (the first %s) each %s", g.n, g.first, msg))
	}
	if files > WarnExperimentFiles {
		out = append(out, fmt.Sprintf("the experiment would write about %d files, more than %d", files, WarnExperimentFiles))
	}
	if bytes > WarnExperimentBytes {
		out = append(out, fmt.Sprintf("the experiment would write about %s, more than %s", HumanBytes(bytes), HumanBytes(WarnExperimentBytes)))
	}
	return out
}

// SizeText is the estimated bytes, marked "+ckpt" when the checkpoint's
// share is unknown.
func (f Footprint) SizeText() string {
	if f.CheckpointBytes < 0 {
		return HumanBytes(f.Bytes()) + "+ckpt"
	}
	return HumanBytes(f.Bytes())
}

// HumanBytes renders a byte count with a binary unit.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
