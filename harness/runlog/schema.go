package runlog

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// SchemaVersion is the version of the run-table schemas and of the manifest
// layout. It is stored in every Parquet file's key-value metadata (key
// MetaSchemaVersion) and in manifest.json, and readers refuse other versions.
// Bump it whenever a column is added, removed, renamed or changes meaning.
// Version 2 moved the prompt text of samples/ into prompts/ (each distinct
// prompt once per run, by hash); the readers still read version 1 logs.
// Version 3 appended steps' coherence_cos and coherence_scale, evals'
// strict_accuracy and fallback_rate and samples' fallback; in files of
// versions 1 and 2, which lack them, they read as null (NaN, a nil map, an
// empty string).
// Version 4 appended steps' agent_cos (each same-role agent's mean gradient
// cosine with the others); in older files it reads as null (a nil map).
const SchemaVersion = 4

// MinReadVersion is the oldest schema version the readers accept. Runs of
// an older version than SchemaVersion are read, never resumed.
const MinReadVersion = 1

// Key-value metadata keys written into every segment file.
const (
	MetaSchemaVersion = "marlow.schema_version"
	MetaTable         = "marlow.table"
)

// Table names; each is also the folder of the table's segments in a run
// directory.
const (
	TableSteps   = "steps"
	TableEvals   = "evals"
	TableSamples = "samples"
	TablePrompts = "prompts"
	TableTiming  = "timing"
)

// Tables lists the run tables in the order they are written and documented.
// Runs of schema version 1 have no prompts/ folder.
var Tables = []string{TableSteps, TableEvals, TableSamples, TablePrompts, TableTiming}

// kind is the logical type of a column.
type kind int

const (
	kString   kind = iota // UTF-8 string, required
	kInt64                // 64-bit signed integer, required
	kFloat64              // double, nullable: NaN is stored as null
	kBool                 // boolean, required
	kFloatMap             // map<string, double>, nullable; NaN values are null
)

func (k kind) arrowType() arrow.DataType {
	switch k {
	case kString:
		return arrow.BinaryTypes.String
	case kInt64:
		return arrow.PrimitiveTypes.Int64
	case kFloat64:
		return arrow.PrimitiveTypes.Float64
	case kBool:
		return arrow.FixedWidthTypes.Boolean
	case kFloatMap:
		return arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64)
	}
	panic(fmt.Sprintf("runlog: unknown column kind %d", int(k)))
}

func (k kind) nullable() bool { return k == kFloat64 || k == kFloatMap }

// docType is the type as written in SCHEMA.md.
func (k kind) docType() string {
	switch k {
	case kString:
		return "`STRING`"
	case kInt64:
		return "`INT64`"
	case kFloat64:
		return "`DOUBLE`, nullable"
	case kBool:
		return "`BOOLEAN`"
	case kFloatMap:
		return "`MAP<STRING, DOUBLE>`, nullable"
	}
	return "?"
}

// column describes one column of a table with row type R: its name, type,
// documentation and the field of R it holds.
type column[R any] struct {
	name string
	kind kind
	doc  string
	// ref returns a pointer to the field: *string, *int64, *float64, *bool
	// or *map[string]float64 according to kind.
	ref func(*R) any
}

// tableDef is the one place a table's columns, order and keys are defined.
type tableDef[R any] struct {
	name string
	doc  string
	cols []column[R]
	// order compares rows for ReadRun's sort; rows that compare equal keep
	// the order in which they were written.
	order func(a, b *R) int
	// key identifies a row for duplicate detection; nil when rows may
	// legitimately repeat (samples: an agent may take several turns).
	key  func(*R) string
	step func(*R) int64
	run  func(*R) *string
	// versions are the schema versions whose files this definition reads
	// (nil: every version from MinReadVersion to SchemaVersion); its files
	// are written as the newest of them (SchemaVersion when nil).
	versions []int
	// before3 is the number of leading columns a file of schema version 1
	// or 2 holds (0: all of them); the columns after it were appended in
	// version 3.
	before3 int
	// before4 is the number of leading columns a file of schema version 3
	// (or older, up to before3) holds (0: all of them); the columns after it
	// were appended in version 4.
	before4 int
}

// reads reports whether the definition reads files of schema version v.
func (t *tableDef[R]) reads(v int) bool {
	if t.versions == nil {
		return v >= MinReadVersion && v <= SchemaVersion
	}
	return slices.Contains(t.versions, v)
}

// schema returns the table's Arrow schema with the version metadata.
func (t *tableDef[R]) schema() *arrow.Schema {
	fields := make([]arrow.Field, len(t.cols))
	for i, c := range t.cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.kind.arrowType(), Nullable: c.kind.nullable()}
	}
	v := SchemaVersion
	if t.versions != nil {
		v = slices.Max(t.versions)
	}
	md := arrow.NewMetadata(
		[]string{MetaSchemaVersion, MetaTable},
		[]string{strconv.Itoa(v), t.name},
	)
	return arrow.NewSchema(fields, &md)
}

var stepsDef = &tableDef[StepRow]{
	name: TableSteps,
	doc: "One row per (step, policy, role) of training, plus a total row per (step, policy) " +
		"with role `*`. Written at every training step; steps count optimizer steps from 1 " +
		"(validation before training is step 0 of `evals/` and `samples/`), and a base run, " +
		"which does not train, has no rows.",
	cols: []column[StepRow]{
		{"run_id", kString, "run id, as in the manifest", func(r *StepRow) any { return &r.RunID }},
		{"step", kInt64, "training step: the optimizer step the row describes, 1 for the first (there is no step 0)", func(r *StepRow) any { return &r.Step }},
		{"policy", kString, "adapter (policy) name: `policy` (the one adapter of an sa-rl run), `shared` (sp: one adapter for every role), the role's name (ip: one adapter per role type) or the adapter a declared routing sends the role to (a role it routes to the frozen base model has no rows)", func(r *StepRow) any { return &r.Policy }},
		{"role", kString, "role type, or `*` for the policy's total", func(r *StepRow) any { return &r.Role }},
		{"loss", kFloat64, "the role's share of the policy loss", func(r *StepRow) any { return &r.Loss }},
		{"grad_norm", kFloat64, "L2 norm of the gradient of the role's share of the loss, computed separately before the shares are summed", func(r *StepRow) any { return &r.GradNorm }},
		{"grad_share", kFloat64, "share of the policy's summed squared gradient norm", func(r *StepRow) any { return &r.GradShare }},
		{"agent_cos_mean", kFloat64, "mean pairwise cosine between the gradients of same-role agents (generator0 vs generator1 ...); null with one agent", func(r *StepRow) any { return &r.AgentCosMean }},
		{"agent_cos_min", kFloat64, "minimum of those pairwise cosines; null with one agent", func(r *StepRow) any { return &r.AgentCosMin }},
		{"role_cos", kFloatMap, "cosine between this role's gradient and each other role of the same policy, keyed by role", func(r *StepRow) any { return &r.RoleCos }},
		{"tokens", kInt64, "completion tokens trained on (those of the `seqs` turns)", func(r *StepRow) any { return &r.Tokens }},
		{"seqs", kInt64, "completions (agent turns) trained on: the turns with a non-zero advantage. A turn of a GRPO group whose rewards are all equal has advantage 0, adds nothing to the loss and is skipped, so with groups of equal size `seqs` = (1 - `zero_var_frac`) x the role's turns", func(r *StepRow) any { return &r.Seqs }},
		{"mean_len", kFloat64, "mean completion length in tokens", func(r *StepRow) any { return &r.MeanLen }},
		{"entropy", kFloat64, "mean token entropy of the policy on its completions (nats)", func(r *StepRow) any { return &r.Entropy }},
		{"perplexity", kFloat64, "exp of the mean token negative log-likelihood", func(r *StepRow) any { return &r.Perplexity }},
		{"ratio_mean", kFloat64, "mean importance ratio (new / old policy probability)", func(r *StepRow) any { return &r.RatioMean }},
		{"ratio_max", kFloat64, "maximum importance ratio", func(r *StepRow) any { return &r.RatioMax }},
		{"clip_frac", kFloat64, "fraction of tokens whose ratio was clipped", func(r *StepRow) any { return &r.ClipFrac }},
		{"kl", kFloat64, "KL divergence to the base model, mean per token", func(r *StepRow) any { return &r.KL }},
		{"reward_mean", kFloat64, "mean reward of the role's turns", func(r *StepRow) any { return &r.RewardMean }},
		{"reward_std", kFloat64, "standard deviation of those rewards", func(r *StepRow) any { return &r.RewardStd }},
		{"zero_var_frac", kFloat64, "fraction of the role's GRPO groups whose rewards had zero variance", func(r *StepRow) any { return &r.ZeroVarFrac }},
		{"lr", kFloat64, "learning rate used at this step", func(r *StepRow) any { return &r.LR }},
		{"coherence_cos", kFloat64, "cosine between the role's gradient and the EMA of its past gradients, before scaling: the coherence regularizer's (`grpo.coherence`), or without it the measuring-only EMA every run keeps (`ema_decay` 0.9, never applied); null on the `*` row and at the role's first trained step (no EMA yet), and in logs written before the measuring-only EMA when the regularizer is off. Since schema 3", func(r *StepRow) any { return &r.CoherenceCos }},
		{"coherence_scale", kFloat64, "the role's factor `1 - lambda * max(0, coherence_cos)`, which the regularizer's paper form multiplies the role's gradient by before the roles' gradients are summed (1 at the role's first trained step, and always 1 without the regularizer: lambda 0); on the `*` row null, except with `grpo.coherence.form: step`, where it is the factor the optimizer's step was multiplied by (the roles' factors weighted by `grad_share`); null in logs written before the measuring-only EMA when the regularizer is off. Since schema 3", func(r *StepRow) any { return &r.CoherenceScale }},
		{"agent_cos", kFloatMap, "roles with two or more agents in the policy's step (voting's `generator0`..): for each agent, the mean cosine between its gradient and each other same-role agent's, keyed by agent (their mean is `agent_cos_mean`), so an amplification signature can be placed on an agent of the role; null with one agent and on the `*` row. Since schema 4 (null in older files)", func(r *StepRow) any { return &r.AgentCos }},
	},
	order: func(a, b *StepRow) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Role, b.Role))
	},
	key:     func(r *StepRow) string { return keyOf(r.Step, r.Policy, r.Role) },
	step:    func(r *StepRow) int64 { return r.Step },
	run:     func(r *StepRow) *string { return &r.RunID },
	before3: 23,
	before4: 25,
}

var evalsDef = &tableDef[EvalRow]{
	name: TableEvals,
	doc: "One row per (step, workflow, split, role) of validation, plus a row with role `*` " +
		"for the workflow as a whole. Written at step 0 (before training; unless " +
		"`eval.before_training` is false, always for base) and every `eval.every` " +
		"steps (the spec key), and after the last step.",
	cols: []column[EvalRow]{
		{"run_id", kString, "run id, as in the manifest", func(r *EvalRow) any { return &r.RunID }},
		{"step", kInt64, "training step the policy had reached (0: before training)", func(r *EvalRow) any { return &r.Step }},
		{"workflow", kString, "workflow evaluated (an sa-rl run is evaluated in several)", func(r *EvalRow) any { return &r.Workflow }},
		{"split", kString, "data split, `val`", func(r *EvalRow) any { return &r.Split }},
		{"role", kString, "role type, or `*` for the workflow", func(r *EvalRow) any { return &r.Role }},
		{"accuracy", kFloat64, "`*`: accuracy of the workflow's final answer; role: mean regraded correctness of the role's own answers", func(r *EvalRow) any { return &r.Accuracy }},
		{"any_correct", kFloat64, "fraction of episodes where any agent of the role (any agent, for `*`) was correct", func(r *EvalRow) any { return &r.AnyCorrect }},
		{"selection_acc", kFloat64, "aggregator/synthesizer: fraction of episodes with a correct candidate where a correct one was picked; null for other roles", func(r *EvalRow) any { return &r.SelectionAcc }},
		{"format_rate", kFloat64, "fraction of the role's turns whose output was format-compliant", func(r *EvalRow) any { return &r.FormatRate }},
		{"mean_len", kFloat64, "mean output length in tokens", func(r *EvalRow) any { return &r.MeanLen }},
		{"problems", kInt64, "validation episodes the row covers: problems x `eval.samples` rollouts", func(r *EvalRow) any { return &r.Problems }},
		{"turns", kInt64, "agent turns of the role", func(r *EvalRow) any { return &r.Turns }},
		{"strict_accuracy", kFloat64, "`*`: accuracy counting an episode wrong when a supervisory turn's output (aggregator, evaluator, orchestrator, synthesizer) did not parse, whatever the fallback then chose; equals `accuracy` for workflows without supervisory roles; null on role rows. `accuracy` is the lenient figure. Since schema 3", func(r *EvalRow) any { return &r.StrictAccuracy }},
		{"fallback_rate", kFloatMap, "supervisory roles: for each fallback the workflow took in place of the role's parsed output (`incorrect`, `first-digit`, `candidate-1`, `list-items`, `dropped`, `free-worker`), the fraction of the role's turns it was taken for, keyed by that word (fallbacks never taken are absent; an empty map: none taken); null for other roles and `*`. Since schema 3", func(r *EvalRow) any { return &r.FallbackRate }},
	},
	order: func(a, b *EvalRow) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Workflow, b.Workflow),
			cmp.Compare(a.Split, b.Split), cmp.Compare(a.Role, b.Role))
	},
	key:     func(r *EvalRow) string { return keyOf(r.Step, r.Workflow, r.Split, r.Role) },
	step:    func(r *EvalRow) int64 { return r.Step },
	run:     func(r *EvalRow) *string { return &r.RunID },
	before3: 12,
}

var samplesDef = &tableDef[SampleRow]{
	name: TableSamples,
	doc: "One row per agent turn kept: a subset of the training rollouts every step and all " +
		"validation rollouts at eval steps. Rows of one rollout keep their turn order. Every " +
		"validation episode ends with a row of the pseudo-role `final` (agent `final`), which " +
		"holds the workflow's final answer: `completion` is its text, `parsed` the extracted " +
		"answer, `correct` its grade and `compliant` whether an answer was found; its `prompt_id` is 0, its " +
		"`policy` and `finish` are empty and `tokens` is 0. Accuracy per problem is read from " +
		"these rows. The prompt text is in `prompts/`, once per run (schema version 2; version 1 " +
		"logs have a `prompt` column here instead of `prompt_id`, and the readers read both).",
	cols: []column[SampleRow]{
		{"run_id", kString, "run id, as in the manifest", func(r *SampleRow) any { return &r.RunID }},
		{"step", kInt64, "training step: for `train` rows the step they were rolled out for (from 1), for `val` rows the step the policy had reached (0: before training)", func(r *SampleRow) any { return &r.Step }},
		{"workflow", kString, "workflow the rollout ran in", func(r *SampleRow) any { return &r.Workflow }},
		{"split", kString, "`train` or `val`", func(r *SampleRow) any { return &r.Split }},
		{"problem_id", kString, "problem id from the task source", func(r *SampleRow) any { return &r.ProblemID }},
		{"rollout", kInt64, "rollout index within the problem's group (0..G-1)", func(r *SampleRow) any { return &r.Rollout }},
		{"agent", kString, "agent name, e.g. `generator1`", func(r *SampleRow) any { return &r.Agent }},
		{"role", kString, "role type of the agent, or `final` (see above)", func(r *SampleRow) any { return &r.Role }},
		{"policy", kString, "adapter that produced the turn, named as in `steps/`; empty for the base model and for `final` rows", func(r *SampleRow) any { return &r.Policy }},
		{"prompt_id", kInt64, "the turn's prompt: the `prompt_id` of its row in `prompts/` (0 for `final` rows, whose prompt is empty)", func(r *SampleRow) any { return &r.promptID }},
		{"completion", kString, "completion text", func(r *SampleRow) any { return &r.Completion }},
		{"parsed", kString, "parsed answer, verdict, selection or strategy list", func(r *SampleRow) any { return &r.Parsed }},
		{"compliant", kBool, "the output followed the role's format", func(r *SampleRow) any { return &r.Compliant }},
		{"correct", kBool, "regraded correctness of the agent's own answer", func(r *SampleRow) any { return &r.Correct }},
		{"reward", kFloat64, "outcome reward given to the turn", func(r *SampleRow) any { return &r.Reward }},
		{"advantage", kFloat64, "`train` rows: GRPO advantage of the turn (0 in a group whose rewards are all equal: not trained on); `val` rows: 0, since validation turns are not trained on", func(r *SampleRow) any { return &r.Advantage }},
		{"tokens", kInt64, "completion tokens", func(r *SampleRow) any { return &r.Tokens }},
		{"finish", kString, "finish reason reported by the engine (e.g. `stop`, `length`)", func(r *SampleRow) any { return &r.Finish }},
		{"fallback", kString, "supervisory turns: the fallback the workflow took in place of the parsed output (the words of `evals/` `fallback_rate`), empty when the output was used as parsed and for other roles. Since schema 3 (empty in older files)", func(r *SampleRow) any { return &r.Fallback }},
	},
	order: func(a, b *SampleRow) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Split, b.Split), cmp.Compare(a.Workflow, b.Workflow),
			cmp.Compare(a.ProblemID, b.ProblemID), cmp.Compare(a.Rollout, b.Rollout))
	},
	step:     func(r *SampleRow) int64 { return r.Step },
	run:      func(r *SampleRow) *string { return &r.RunID },
	versions: []int{2, 3, 4},
	before3:  18,
}

// samplesV1Def is samples/ as schema version 1 wrote it: samplesDef with
// the prompt text in every row where version 2 has prompt_id. The readers
// read it; nothing writes it.
var samplesV1Def = func() *tableDef[SampleRow] {
	d := *samplesDef
	d.cols = slices.Clone(samplesDef.cols[:samplesDef.before3]) // without fallback (version 3)
	d.before3 = 0
	for i, c := range d.cols {
		if c.name == "prompt_id" {
			d.cols[i] = column[SampleRow]{"prompt", kString, "prompt text as given to the engine", func(r *SampleRow) any { return &r.Prompt }}
		}
	}
	d.versions = []int{1}
	return &d
}()

var promptsDef = &tableDef[PromptRow]{
	name: TablePrompts,
	doc: "One row per distinct prompt of a run (distinct by the SHA-256 of its text), written with the " +
		"commit of the first `samples/` row that uses it; `samples/` names it by `prompt_id`, so a prompt " +
		"the run gives again (the same validation problem at every evaluation, the rollouts of one group, " +
		"voting's generators) is stored once. Join on (`run_id`, `prompt_id`); the `samples` view below " +
		"does. Runs of schema version 1 have no `prompts/` folder: their `samples/` hold the `prompt` text " +
		"in every row.",
	cols: []column[PromptRow]{
		{"run_id", kString, "run id, as in the manifest", func(r *PromptRow) any { return &r.RunID }},
		{"step", kInt64, "step of the first `samples/` row with this prompt", func(r *PromptRow) any { return &r.Step }},
		{"prompt_id", kInt64, "the prompt's number in the run, 1 for the first distinct prompt, in the order of first use (distinct by SHA-256 of the text)", func(r *PromptRow) any { return &r.ID }},
		{"prompt", kString, "prompt text as given to the engine", func(r *PromptRow) any { return &r.Prompt }},
	},
	order:    func(a, b *PromptRow) int { return cmp.Compare(a.Step, b.Step) },
	key:      func(r *PromptRow) string { return strconv.FormatInt(r.ID, 10) },
	step:     func(r *PromptRow) int64 { return r.Step },
	run:      func(r *PromptRow) *string { return &r.RunID },
	versions: []int{2, 3, 4},
}

// promptKey is what the Writer tells prompts apart by: the SHA-256 of
// the text.
func promptKey(prompt string) [sha256.Size]byte { return sha256.Sum256([]byte(prompt)) }

// samplesFor is the samples definition of a run of schema version v.
func samplesFor(v int) *tableDef[SampleRow] {
	if v < 2 {
		return samplesV1Def
	}
	return samplesDef
}

var timingDef = &tableDef[TimingRow]{
	name: TableTiming,
	doc: "One row per training step with wall-clock seconds. Wall time is the one thing a run " +
		"records that is not a function of commit, spec and seed, so it lives here alone: " +
		"`steps/`, `evals/` and `samples/` are byte-identical for the same commit, spec and " +
		"seed (also after a crash and resume), `timing/` is not.",
	cols: []column[TimingRow]{
		{"run_id", kString, "run id, as in the manifest", func(r *TimingRow) any { return &r.RunID }},
		{"step", kInt64, "training step", func(r *TimingRow) any { return &r.Step }},
		{"rollout_sec", kFloat64, "seconds spent generating rollouts", func(r *TimingRow) any { return &r.RolloutSec }},
		{"train_sec", kFloat64, "seconds spent on the loss, gradients and optimizer step", func(r *TimingRow) any { return &r.TrainSec }},
		{"total_sec", kFloat64, "seconds for the whole step, validation included", func(r *TimingRow) any { return &r.TotalSec }},
	},
	order: func(a, b *TimingRow) int { return cmp.Compare(a.Step, b.Step) },
	key:   func(r *TimingRow) string { return keyOf(r.Step) },
	step:  func(r *TimingRow) int64 { return r.Step },
	run:   func(r *TimingRow) *string { return &r.RunID },
}

func keyOf(step int64, parts ...string) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(step, 10))
	for _, p := range parts {
		b.WriteString("\x00")
		b.WriteString(p)
	}
	return b.String()
}

// tableInfo is the row-type-independent view of a table definition.
type tableInfo struct {
	name, doc string
	schema    *arrow.Schema
	cols      []colInfo
	reads     func(version int) bool
	before3   int // columns of a file of version 1 or 2 (all when 0)
	before4   int // columns of a file of version 3 or older (all when 0)
}

// colsAt is the number of leading columns a file of schema version v holds.
func (t tableInfo) colsAt(v int) int {
	if v < 3 && t.before3 > 0 {
		return t.before3
	}
	if v < 4 && t.before4 > 0 {
		return t.before4
	}
	return len(t.cols)
}

type colInfo struct {
	name string
	kind kind
	doc  string
	// dict turns dictionary encoding on for an INT64 column whose values
	// repeat; distinct turns it off for a STRING column whose values never
	// repeat (on for every other STRING column).
	dict, distinct bool
}

func (t *tableDef[R]) info() tableInfo {
	ti := tableInfo{name: t.name, doc: t.doc, schema: t.schema(), reads: t.reads, before3: t.before3, before4: t.before4}
	for _, c := range t.cols {
		ti.cols = append(ti.cols, colInfo{name: c.name, kind: c.kind, doc: c.doc,
			dict: c.name == "prompt_id" && t.name == TableSamples, distinct: c.name == "prompt" && t.name == TablePrompts})
	}
	return ti
}

// tableInfos returns the definitions of all tables in Tables order.
func tableInfos() []tableInfo {
	return []tableInfo{stepsDef.info(), evalsDef.info(), samplesDef.info(), promptsDef.info(), timingDef.info()}
}

// tableInfoByName returns a table's definition for runs of schema version
// v (samples/ changed between versions 1 and 2).
func tableInfoByName(name string, v int) (tableInfo, bool) {
	if name == TableSamples {
		return samplesFor(v).info(), true
	}
	for _, t := range tableInfos() {
		if t.name == name {
			return t, true
		}
	}
	return tableInfo{}, false
}

// SchemaMarkdown renders the column reference of all run tables and the
// manifest; SCHEMA.md is this text.
func SchemaMarkdown() string {
	var b strings.Builder
	b.WriteString("<!-- Generated from harness/runlog/schema.go by `go generate ./harness/runlog`; do not edit. -->\n\n")
	b.WriteString("# Run log schema\n\n")
	fmt.Fprintf(&b, "Schema version: **%d**. Every Parquet file stores it in its key-value metadata as `%s`, "+
		"with the table name as `%s`; readers refuse files of another table and of versions they do not know. "+
		"The readers read every version from %d on: version 2 moved the prompt text of `samples/` into `prompts/`, "+
		"version 3 appended the columns marked \"Since schema 3\" below, which read as null in older files "+
		"(an empty string for `fallback`), and version 4 the one marked \"Since schema 4\". A run of an older version is read but not resumed.\n\n",
		SchemaVersion, MetaSchemaVersion, MetaTable, MinReadVersion)
	b.WriteString("A run directory `runs/<experiment>/<run-id>/` holds `manifest.json` and one folder per table. " +
		"Each folder holds Parquet segments (zstd) named after the step they were committed at, " +
		"`000012.parquet` for the commit at step 12; a segment holds the rows added since the previous " +
		"commit. Files ending in `.tmp` and segments named after a step beyond the manifest's " +
		"`last_step` are uncommitted: the marlow readers skip them and reopening the run for resume " +
		"deletes them. A plain glob such as `steps/*.parquet` skips the `.tmp` files but would also read " +
		"the uncommitted segments of a run that crashed and was not resumed; `marlow check` does not " +
		"count these as problems. The manifest's `inventory` lists every committed segment and the files " +
		"of the checkpoint of the last committed step, with their sizes and SHA-256; the readers, " +
		"`marlow check`, resume and skip refuse a listed file that is missing, resized or altered, and " +
		"a committed segment that is not listed. A run submitted with `marlow slurm` also holds `job.log`, " +
		"the task output Slurm appends to; the readers and archives leave it out.\n\n")
	b.WriteString("Types are standard Parquet logical types (no extension types), readable as they are by " +
		"DuckDB (`read_parquet('runs/*/*/steps/*.parquet')`), pandas/pyarrow and polars. Floating-point " +
		"values that are undefined are NaN in Go and null in Parquet; only DOUBLE and MAP columns are " +
		"nullable. `STRING` is BYTE_ARRAY with the STRING logical type (DuckDB `VARCHAR`), `INT64` is DuckDB " +
		"`BIGINT`, and `MAP<STRING, DOUBLE>` is the standard Parquet MAP (DuckDB `MAP(VARCHAR, DOUBLE)`, " +
		"pyarrow `map<string, double>`, which pandas shows as a list of (key, value) tuples).\n\n")
	b.WriteString("Determinism: for the same commit, spec and seed, `steps/`, `evals/`, `samples/` and `prompts/` are " +
		"byte-identical, also after a crash and resume. Wall-clock seconds live in `timing/` alone " +
		"because they are not.\n")
	for _, t := range tableInfos() {
		fmt.Fprintf(&b, "\n## `%s/`\n\n%s\n\n", t.name, t.doc)
		b.WriteString("| column | type | meaning |\n|---|---|---|\n")
		for _, c := range t.cols {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c.name, c.kind.docType(), strings.ReplaceAll(c.doc, "|", "\\|"))
		}
	}
	b.WriteString("\n## Workflow, condition, task and scale: joining the manifests\n\n")
	b.WriteString("The tables hold `run_id` but not the run's cell and condition, which live in `manifest.json`. " +
		"These DuckDB views join them for the runs of one experiment folder (replace `runs/demo` with yours; " +
		"the same SQL is run by the duckdb-tagged test of this package). The manifest's `workflow` is the one the " +
		"run trained in (`single` for sa-rl) and is called `run_workflow`; `evals/` and `samples/` keep their own " +
		"`workflow`, the one evaluated. The `samples` view joins each row's prompt text back from `prompts/`, so " +
		"queries written for schema version 1 (`WHERE prompt = ...`) keep working; for a folder of version 1 logs " +
		"(no `prompts/`), read `samples/*.parquet` directly, since they hold `prompt` themselves.\n\n```sql\n")
	b.WriteString(DuckDBViews)
	b.WriteString("```\n")
	b.WriteString("\n## `manifest.json`\n\n")
	b.WriteString("A JSON object, rewritten atomically (temporary file, fsync, rename) at every commit and status change.\n\n")
	b.WriteString("| key | meaning |\n|---|---|\n")
	for _, f := range manifestDocs {
		fmt.Fprintf(&b, "| `%s` | %s |\n", f[0], f[1])
	}
	return b.String()
}

// DuckDBViews is the SQL of SCHEMA.md that joins each run table with the
// manifests of the runs of one experiment folder, runs/demo.
const DuckDBViews = `CREATE VIEW runs AS
  SELECT run_id, experiment, workflow AS run_workflow, task, scale, condition, seed_index, seed, status
  FROM read_json('runs/demo/*/manifest.json', format = 'auto', columns = {
    run_id: 'VARCHAR', experiment: 'VARCHAR', workflow: 'VARCHAR', task: 'VARCHAR', scale: 'VARCHAR',
    condition: 'VARCHAR', seed_index: 'BIGINT', seed: 'UBIGINT', status: 'VARCHAR'});
CREATE VIEW steps AS
  SELECT r.experiment, r.run_workflow, r.task, r.scale, r.condition, r.seed_index, t.*
  FROM read_parquet('runs/demo/*/steps/*.parquet') t JOIN runs r USING (run_id);
CREATE VIEW evals AS
  SELECT r.experiment, r.run_workflow, r.task, r.scale, r.condition, r.seed_index, t.*
  FROM read_parquet('runs/demo/*/evals/*.parquet') t JOIN runs r USING (run_id);
CREATE VIEW prompts AS
  SELECT * FROM read_parquet('runs/demo/*/prompts/*.parquet');
CREATE VIEW samples AS
  SELECT r.experiment, r.run_workflow, r.task, r.scale, r.condition, r.seed_index, t.*, coalesce(p.prompt, '') AS prompt
  FROM read_parquet('runs/demo/*/samples/*.parquet') t JOIN runs r USING (run_id)
  LEFT JOIN prompts p ON p.run_id = t.run_id AND p.prompt_id = t.prompt_id;
-- e.g. final validation accuracy per condition:
-- SELECT condition, workflow, step, avg(accuracy) FROM evals WHERE role = '*' GROUP BY ALL ORDER BY ALL;
`

var manifestDocs = [][2]string{
	{"schema_version", "schema version of the run's tables and manifest"},
	{"run_id", "run id: `<workflow>-<condition>-<scale>-<task>-seed<k>`, e.g. `voting-ip-s-synth-math-seed1`; an sa-rl run, trained in `single` and validated in several workflows, omits the workflow: `sa-rl-s-synth-math-seed1`"},
	{"experiment", "experiment name"},
	{"workflow", "workflow trained in (`single` for sa-rl) or evaluated in (base)"},
	{"eval_workflows", "workflows the run is validated in"},
	{"task", "task name"},
	{"scale", "model scale"},
	{"condition", "`base`, `sa-rl`, `sp` or `ip`"},
	{"seed", "the run's derived seed"},
	{"master_seed", "the experiment's master seed"},
	{"seed_index", "the experiment seed this run belongs to (1-based, as in run ids)"},
	{"config_hash", "hash of the resolved run config; resuming with another hash is refused, and a stored `config` that does not hash to it is a damaged manifest"},
	{"config", "the fully resolved run config"},
	{"analysis", "analysis parameters of the spec (cliff_abs, cliff_rel, amp_k, ...)"},
	{"provenance", "git commit, branch, dirty flag and diff hash, allow-dirty, Go version, module versions, hashes of data and checkpoint files, and under `slurm` the Slurm job id, array job id and index, node, cluster, partition and restart count of the job that last ran it (absent outside Slurm)"},
	{"engine", "engine name"},
	{"engine_version", "engine version"},
	{"devices", "the GPUs the run's engine was pinned to at its last start, as `CUDA_VISIBLE_DEVICES=3 (NVIDIA H200 x1)` (one run per GPU by default); absent for a run on the CPU"},
	{"status", "`running`, `done`, `failed` or `interrupted`"},
	{"error", "error text of a failed run"},
	{"created", "creation time, RFC 3339 UTC"},
	{"updated", "time of the last manifest write, RFC 3339 UTC"},
	{"last_step", "last committed step; -1 before the first commit"},
	{"total_steps", "planned training steps (0 for base)"},
	{"inventory", "every committed file, rewritten with the manifest at each commit (absent in manifests written before it existed): `segments`, each committed Parquet segment as `{path, bytes, rows, sha256}`, and `checkpoint`, each file of the checkpoint of the last committed step as `{path, bytes, sha256}`; both sorted, paths relative to the run folder with `/`"},
}
