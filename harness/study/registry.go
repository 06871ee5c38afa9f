package study

import "slices"

// The registry of workflow facts: one entry per workflow (its stages, so
// its roles in calling order and how many agents of each, the role whose
// answer it returns, the settings it reads), one per role (whether it
// answers the problem, whose answers it chooses among, the fallbacks of a
// supervisory role) and one per condition. Every package that needs such a
// fact reads it here; the behaviour of each workflow (its prompts, parsers
// and state machine) lives in package workflow.

// Workflow settings: the keys of a spec's workflow section.
const (
	SettingNVotes        = "n_votes"
	SettingMaxIterations = "max_iterations"
	SettingMaxSubtasks   = "max_subtasks"
)

// Settings are the knobs of the multi-agent workflows (a spec's workflow
// section, a run's config and an episode's workflow.Config carry this one
// type). Each is read by the workflows whose Settings name its key.
type Settings struct {
	NVotes int `yaml:"n_votes" json:"n_votes"` // voting: generators per episode
	// MaxIterations is the eval-opt generator-turn budget; in a spec, 0
	// means by task kind (3 math, 2 code), resolved in each run's config.
	MaxIterations int `yaml:"max_iterations" json:"max_iterations"`
	MaxSubtasks   int `yaml:"max_subtasks" json:"max_subtasks"` // orch-workers: strategies (and workers) at most
}

// Value returns the setting named by key (a Setting* constant), ok false
// for a key that names none.
func (s Settings) Value(key string) (int, bool) {
	switch key {
	case SettingNVotes:
		return s.NVotes, true
	case SettingMaxIterations:
		return s.MaxIterations, true
	case SettingMaxSubtasks:
		return s.MaxSubtasks, true
	}
	return 0, false
}

// registry holds the workflows in the design's order: the four built-in
// declarations (the study's own workflows), then those a spec's workflow
// files declared (Register).
var registry = []Workflow{
	{Name: Single, Doc: "one generator answers", Stages: []Stage{{Name: "generator", Kind: Answerer, Role: Generator}}, Final: "generator"},
	{Name: EvalOpt, Doc: "a generator answers and an evaluator judges, until Correct or max_iterations answers", Stages: []Stage{
		{Name: "generator", Kind: Answerer, Role: Generator, Revises: true},
		{Name: "evaluator", Kind: Judge, Role: Evaluator, Reads: "generator"},
	}, Loop: &Loop{First: "generator", Last: "evaluator", Until: "evaluator", Max: Count{Setting: SettingMaxIterations}}, Final: "generator"},
	{Name: Voting, Doc: "n_votes generators answer; the aggregator picks one", Stages: []Stage{
		{Name: "generators", Kind: Answerer, Role: Generator, Agents: Count{Setting: SettingNVotes}},
		{Name: "aggregator", Kind: Selector, Role: Aggregator, Reads: "generators"},
	}, Final: "aggregator"},
	{Name: OrchWorkers, Doc: "the orchestrator lists strategies, a worker solves with each, the synthesizer answers", Stages: []Stage{
		{Name: "orchestrator", Kind: Planner, Role: Orchestrator, Most: Count{Setting: SettingMaxSubtasks}},
		{Name: "workers", Kind: Answerer, Role: Worker, PerStrategy: "orchestrator"},
		{Name: "synthesizer", Kind: SynthesizerKind, Role: Synthesizer, Reads: "workers"},
	}, Final: "synthesizer"},
}

// builtins is how many of registry's entries are the study's own.
var builtins = len(registry)

// Lookup returns the registry's entry of a workflow, ok false for a name
// that names none.
func Lookup(name string) (Workflow, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	i := slices.IndexFunc(registry, func(w Workflow) bool { return w.Name == name })
	if i < 0 {
		return Workflow{}, false
	}
	return registry[i], true
}

// WorkflowOf returns the registry's entry of a workflow, the zero
// Workflow (no roles) for a name that names none.
func WorkflowOf(name string) Workflow {
	w, _ := Lookup(name)
	return w
}

// SameRoleWorkflows lists the workflows whose stages run several agents
// of the same role (Workflow.SameRoleAgents), in the design's order.
func SameRoleWorkflows() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	var out []string
	for _, w := range registry {
		if w.SameRoleAgents() {
			out = append(out, w.Name)
		}
	}
	return out
}

// OneAgentPerRoleWorkflows lists the multi-agent workflows (two roles or
// more) none of whose stages runs several agents of one role: claim c's
// comparison group (eval-opt among the built-ins), in the design's order.
func OneAgentPerRoleWorkflows() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	var out []string
	for _, w := range registry {
		if len(w.Roles()) > 1 && !w.SameRoleAgents() {
			out = append(out, w.Name)
		}
	}
	return out
}

// Fallback names what a workflow did with a supervisory turn's output in
// place of a parsed one. Its values are short stable words, fit for a log
// column (the samples' `fallback` since schema 3).
type Fallback string

// The fallbacks of the workflows, the same as the paper's code.
const (
	// NoFallback: the output was used as parsed.
	NoFallback Fallback = ""
	// FallbackIncorrect: an evaluator verdict that did not parse counts as
	// Incorrect (with no feedback), so eval-opt revises.
	FallbackIncorrect Fallback = "incorrect"
	// FallbackFirstDigit: an aggregator output without a valid `Selected:`
	// line selects the candidate named by its first digit.
	FallbackFirstDigit Fallback = "first-digit"
	// FallbackFirstCandidate: an aggregator output without a valid
	// `Selected:` line whose first digit names no candidate selects
	// candidate 1.
	FallbackFirstCandidate Fallback = "candidate-1"
	// FallbackListItems: an orchestrator output without `Strategy K:` lines
	// has its numbered or bulleted lines taken as the strategies.
	FallbackListItems Fallback = "list-items"
	// FallbackDropped: an orchestrator output had empty or duplicate
	// strategies, which were dropped; the rest were used. Analysis counts
	// it with FallbackListItems (Class): both leave a strategy list.
	FallbackDropped Fallback = "dropped"
	// FallbackFreeWorker: an orchestrator output with no usable strategy
	// gets one worker with a free choice of method.
	FallbackFreeWorker Fallback = "free-worker"
	// FallbackNoAnswer: a synthesizer output without an answer leaves the
	// episode none. The workflow logs no word for it (the turn is not
	// compliant); analysis names it so.
	FallbackNoAnswer Fallback = "no-answer"
	// FallbackEnded: an orchestrator output proposing more strategies than
	// max_subtasks ends the episode without an answer. The workflow logs
	// no word for it; analysis names it so.
	FallbackEnded Fallback = "ended"
)

// Class is the fallback as analysis counts it: FallbackDropped counts as
// FallbackListItems, every other fallback as itself.
func (f Fallback) Class() Fallback {
	if f == FallbackDropped {
		return FallbackListItems
	}
	return f
}

// RoleInfo is the registry's entry of one role type. Its kind owns every
// fact but Chooses (KindOf): RoleOf fills them in.
type RoleInfo struct {
	Name string
	Kind Kind
	// Answers: the role's turns hold an answer to the problem, graded by
	// the task's verifier (rather than a verdict, a selection or a plan).
	Answers bool
	// Chooses is the role whose answers this role reads as numbered
	// candidates ("" for none).
	Chooses string
	// Supervisory: the workflows parse the role's output for their own
	// control flow (its compliance decides the strict grade).
	Supervisory bool
	// Fallbacks are the fallback classes the role can take, in print order.
	Fallbacks []Fallback
	// Unlogged is the class of an unparsed turn the workflow logs no
	// fallback word for ("" when it logs one for every unparsed turn).
	Unlogged Fallback
}

// roleInfos holds the role types in the design's order (Roles), then
// those a workflow file declared (Register): each role's kind, and the
// role it chooses among.
var roleInfos = []RoleInfo{
	{Name: Generator, Kind: Answerer},
	{Name: Evaluator, Kind: Judge},
	{Name: Aggregator, Kind: Selector, Chooses: Generator},
	{Name: Orchestrator, Kind: Planner},
	{Name: Worker, Kind: Answerer},
	{Name: Synthesizer, Kind: SynthesizerKind, Chooses: Worker},
}

// builtinRoles is how many of roleInfos' entries are the study's own.
var builtinRoles = len(roleInfos)

// RoleOf returns the registry's entry of a role type, with the facts its
// kind owns; a RoleInfo with only its name for one the registry does not
// hold.
func RoleOf(name string) RoleInfo {
	regMu.RLock()
	defer regMu.RUnlock()
	i := slices.IndexFunc(roleInfos, func(r RoleInfo) bool { return r.Name == name })
	if i < 0 {
		return RoleInfo{Name: name}
	}
	r := roleInfos[i]
	k := KindOf(r.Kind)
	r.Answers, r.Supervisory = k.Answers, k.Supervisory
	r.Fallbacks, r.Unlogged = slices.Clone(k.Fallbacks), k.Unlogged
	return r
}

// SupervisoryRoles lists the supervisory role types, sorted.
func SupervisoryRoles() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	var out []string
	for _, r := range roleInfos {
		if KindOf(r.Kind).Supervisory {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Condition is the registry's entry of one condition.
type Condition struct {
	Name string
	// Trains: the condition runs GRPO (base evaluates the untrained model).
	Trains bool
	// TrainsIn is the workflow it trains in whatever the cell's ("" for
	// the cell's own): sa-rl trains in the single workflow.
	TrainsIn string
}

var conditionInfos = []Condition{
	{Name: Base},
	{Name: SARL, Trains: true, TrainsIn: Single},
	{Name: SP, Trains: true},
	{Name: IP, Trains: true},
}

// ConditionOf returns the registry's entry of a condition, ok false for a
// name that names none.
func ConditionOf(name string) (Condition, bool) {
	i := slices.IndexFunc(conditionInfos, func(c Condition) bool { return c.Name == name })
	if i < 0 {
		return Condition{}, false
	}
	return conditionInfos[i], true
}

// Reviser is the pretraining teacher's name for eval-opt's revision turn
// of the generator (a Stage that Revises), which the tiny models learn as
// a role of its own.
const Reviser = "reviser"

// TeacherRoles lists the roles the tiny models' pretraining teacher
// renders, in its fixed sampling order (the spec's pretrain.roles keys):
// every role type, with the reviser after the generator.
var TeacherRoles = func() []string {
	out := []string{}
	for _, r := range roleInfos {
		out = append(out, r.Name)
		if r.Name == Generator {
			out = append(out, Reviser)
		}
	}
	return out
}()
