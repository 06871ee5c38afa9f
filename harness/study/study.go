// Package study owns the words of the study that several packages share:
// workflows and the roles they call, conditions, loss aggregation modes,
// LoRA targets and engine names, and the registry of workflow facts
// (registry.go). It imports only the standard library, so every package
// (the spec, the workflows, GRPO routing, the engines, analysis and
// reports) takes these words from here instead of spelling them again.
// Task sources and task kinds belong to package datasets.
package study

// Workflows.
const (
	Single      = "single"
	EvalOpt     = "eval-opt"
	Voting      = "voting"
	OrchWorkers = "orch-workers"
)

// Workflows lists the workflows in the design's order (the registry's).
var Workflows = func() []string {
	out := make([]string, len(registry))
	for i, w := range registry {
		out[i] = w.Name
	}
	return out
}()

// Role types. An agent is one call of a role; agent names add an index
// (generator0, worker2) where a workflow has several agents of a role.
const (
	Generator    = "generator"
	Evaluator    = "evaluator"
	Aggregator   = "aggregator"
	Orchestrator = "orchestrator"
	Worker       = "worker"
	Synthesizer  = "synthesizer"
)

// Roles lists every role type in the design's order (the order of the
// workflows that introduce them; the registry's).
var Roles = func() []string {
	out := make([]string, len(roleInfos))
	for i, r := range roleInfos {
		out[i] = r.Name
	}
	return out
}()

// Conditions of a cell.
const (
	Base = "base"  // the untrained model run through the workflow
	SARL = "sa-rl" // GRPO on the single workflow, evaluated in the cell's
	SP   = "sp"    // shared policy: every role updates one adapter
	IP   = "ip"    // isolated policy: one adapter per role type
)

// Conditions lists the conditions in the design's order (the registry's).
var Conditions = func() []string {
	out := make([]string, len(conditionInfos))
	for i, c := range conditionInfos {
		out[i] = c.Name
	}
	return out
}()

// Loss aggregation modes of a GRPO step.
const (
	TokenMean        = "token-mean"
	SeqMeanTokenMean = "seq-mean-token-mean"
	SeqMeanTokenSum  = "seq-mean-token-sum"
)

// CoherenceStep is the coherence regularizer's form that multiplies the
// optimizer's step by the roles' factors, the spec's grpo.coherence.form
// (engine.CoherenceStep says what it does); the paper's form, on each
// role's gradient, is the absent form.
const CoherenceStep = "step"

// LossAggs lists the loss aggregation modes.
var LossAggs = []string{TokenMean, SeqMeanTokenMean, SeqMeanTokenSum}

// LoRATargets are the short (PEFT) names of the linear modules of a layer
// a LoRA adapter may target, in the layer's order.
var LoRATargets = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// Engine names a spec's model.engine may select.
const (
	Native = "native" // the pure-Go CPU engine (package native)
	Torch  = "torch"  // the GPU engine, registered only in a program built with it
)

// Engines lists the engine names.
var Engines = []string{Native, Torch}
