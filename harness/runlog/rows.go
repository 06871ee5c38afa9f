package runlog

import "github.com/marlowlab/marlow/harness/pin"

// The row types of the run tables. Their Arrow schemas, Parquet encoding and
// column documentation live beside them in this package. Floating-point
// values that are undefined (for example a same-role cosine for a role with
// one agent) are NaN in Go and null in Parquet.

// StepRow is one row of steps/: one per (step, policy, role), plus a total
// row per (step, policy) with Role "*".
type StepRow struct {
	RunID        string
	Step         int64
	Policy       string // adapter name
	Role         string // role type, or "*" for the policy's total
	Loss         float64
	GradNorm     float64
	GradShare    float64 // share of the policy's summed squared gradient norm
	AgentCosMean float64 // mean pairwise cosine between same-role agents' gradients
	AgentCosMin  float64
	RoleCos      map[string]float64 // cosine to each other role of the same policy
	Tokens       int64
	Seqs         int64
	MeanLen      float64
	Entropy      float64
	Perplexity   float64
	RatioMean    float64
	RatioMax     float64
	ClipFrac     float64
	KL           float64
	RewardMean   float64
	RewardStd    float64
	ZeroVarFrac  float64 // fraction of this role's groups whose rewards had zero variance
	LR           float64
	// CoherenceCos and CoherenceScale are the cosine to the role's
	// gradient EMA and the factor its gradient was scaled by (the coherence
	// regularizer's, or the measuring-only EMA's with scale 1 when it is
	// off); NaN on the "*" row, the cosine also at the role's first step.
	CoherenceCos   float64
	CoherenceScale float64
	// AgentCos is, for a role with several agents in the policy's step,
	// each agent's mean gradient cosine with the other same-role agents,
	// keyed by agent; nil otherwise and in logs before schema 4.
	AgentCos map[string]float64
}

// TimingRow is one row of timing/: wall-clock seconds of a step. Wall time
// is the one thing a run records that is not a function of commit, spec and
// seed, so it lives in its own table and the determinism guarantee covers
// steps/, evals/ and samples/ byte for byte.
type TimingRow struct {
	RunID      string
	Step       int64
	RolloutSec float64
	TrainSec   float64
	TotalSec   float64
}

// EvalRow is one row of evals/: one per (step, workflow, split, role), plus a
// row with Role "*" for the workflow as a whole.
type EvalRow struct {
	RunID        string
	Step         int64
	Workflow     string // workflow evaluated (an sa-rl run is evaluated in several)
	Split        string // "val"
	Role         string
	Accuracy     float64 // "*": final-answer accuracy; role: mean regraded correctness of its answers
	AnyCorrect   float64 // fraction of episodes where any agent of the role (any agent for "*") was correct
	SelectionAcc float64 // aggregator/synthesizer: picked a correct candidate when one existed; else NaN
	FormatRate   float64 // fraction of the role's turns whose output was compliant
	MeanLen      float64 // mean output length in tokens
	Problems     int64   // validation episodes: problems x eval.samples rollouts
	Turns        int64
	// StrictAccuracy ("*" rows): final-answer accuracy counting an episode
	// wrong when a supervisory turn did not parse; NaN on role rows.
	StrictAccuracy float64
	// FallbackRate (supervisory roles): the fraction of the role's turns
	// each fallback was taken for, keyed by workflow.Fallback word; nil
	// for other roles.
	FallbackRate map[string]float64
}

// SampleRow is one row of samples/: one agent turn.
type SampleRow struct {
	RunID     string
	Step      int64
	Workflow  string
	Split     string // "train" or "val"
	ProblemID string
	Rollout   int64
	Agent     string // e.g. "generator1"
	Role      string
	Policy    string // adapter name, "" for the base policy
	// Prompt is the prompt text: written to prompts/ once per run and
	// filled in by the readers from there (schema version 1 stored it in
	// every row).
	Prompt string
	// promptID is the prompt's prompt_id on its way to and from the
	// column; rows the readers return have it cleared, so that a row reads
	// back equal to the row written.
	promptID   int64
	Completion string
	Parsed     string // parsed answer, verdict, selection or strategy list
	Compliant  bool
	Correct    bool // regraded correctness of the agent's own answer
	Reward     float64
	Advantage  float64
	Tokens     int64
	Finish     string
	Fallback   string // supervisory turns: the workflow's fallback word, "" when parsed
}

// PromptRow is one row of prompts/: a distinct prompt of the run, stored
// once and named by its id from samples/.
type PromptRow struct {
	RunID  string
	Step   int64 // step of the first sample row that uses it
	ID     int64 // 1, 2, ... in the order of first use
	Prompt string
}

// Run states recorded in a manifest.
const (
	StatusRunning     = "running"
	StatusDone        = "done"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
)

// Manifest is a run's manifest.json: identity, provenance and status.
type Manifest struct {
	SchemaVersion int      `json:"schema_version"`
	RunID         string   `json:"run_id"`
	Experiment    string   `json:"experiment"`
	Workflow      string   `json:"workflow"` // workflow trained in ("single" for sa-rl) or evaluated in (base)
	EvalWorkflows []string `json:"eval_workflows"`
	Task          string   `json:"task"`
	Scale         string   `json:"scale"`
	Condition     string   `json:"condition"` // base, sa-rl, sp, ip
	// Arm is the spec arm the run belongs to (a named variant of the
	// recipe: another rate, an intervention, another n_votes); empty for
	// the main matrix, and absent from the JSON then.
	Arm        string `json:"arm,omitempty"`
	Seed       uint64 `json:"seed"` // the run's derived seed
	MasterSeed uint64 `json:"master_seed"`
	SeedIndex  int    `json:"seed_index"` // the experiment seed this run belongs to (1-based as in run ids)
	ConfigHash string `json:"config_hash"`
	Config     any    `json:"config"` // fully resolved run config
	// Analysis holds the analysis parameters of the spec (cliff_abs,
	// cliff_rel, amp_k, amp_cos, ...) so a report can be rebuilt from logs.
	Analysis   map[string]float64 `json:"analysis"`
	Provenance pin.Provenance     `json:"provenance"`
	Engine     string             `json:"engine"`
	// Sandbox is the isolation that generated code ran under (the sandbox
	// probe's level, with " unsafe" appended when --unsafe-code-exec allowed
	// running without network isolation); empty for tasks that execute no
	// generated code.
	Sandbox       string `json:"sandbox,omitempty"`
	EngineVersion string `json:"engine_version"`
	// Devices are the GPUs the run's engine was pinned to, as
	// "CUDA_VISIBLE_DEVICES=3 (NVIDIA H200 x1)", at its last start; empty
	// for a run on the CPU.
	Devices    string `json:"devices,omitempty"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	Created    string `json:"created"` // RFC 3339, UTC
	Updated    string `json:"updated"`
	LastStep   int64  `json:"last_step"`   // last committed step; -1 before the first commit
	TotalSteps int64  `json:"total_steps"` // planned training steps (0 for base)
	// Inventory lists every committed segment and checkpoint file with its
	// size and SHA-256; absent in manifests written before it existed.
	Inventory *Inventory `json:"inventory,omitempty"`
}
