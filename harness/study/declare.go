package study

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A workflow is a declaration: stages of role kinds, each saying how many
// agents it runs (a fixed count, a setting, or one per strategy of a
// planner stage), what they see (the problem, an earlier stage's outputs,
// the other agents' previous answers), an optional loop over a run of
// stages (repeated until a judge says Correct, or a fixed or configured
// number of rounds), and which stage's output is final. The four
// built-in workflows are declared as Go values in registry.go; a spec may
// name a workflow file (package workflow/declfile reads one), whose
// declaration Register adds. Package workflow runs every declaration
// through one interpreter.

// Kind is a role kind: what a role's turns do, and so its prompt layout,
// parser, fallbacks, format metric and pretraining teacher. The set is
// closed: a workflow declares roles of these kinds only.
type Kind string

// The role kinds.
const (
	// Answerer solves the problem; its answer is graded by the task.
	Answerer Kind = "answerer"
	// Selector picks one of an earlier stage's answers by its number.
	Selector Kind = "selector"
	// Judge says Correct or Incorrect of an earlier stage's answer, with
	// feedback.
	Judge Kind = "judge"
	// Planner lists strategies, one agent of a later stage per strategy.
	Planner Kind = "planner"
	// SynthesizerKind answers after reading an earlier stage's answers.
	SynthesizerKind Kind = "synthesizer"
)

// KindInfo is what a role kind owns besides its behaviour (package
// workflow's interpreter): whether its turns answer, whether the workflow
// parses them for its control flow, and its fallbacks.
type KindInfo struct {
	Kind Kind
	// Answers: its turns hold an answer graded by the task's verifier.
	Answers bool
	// Supervisory: the workflow parses its output for its own control
	// flow (its compliance decides the strict grade).
	Supervisory bool
	// Reads: a stage of the kind reads an earlier stage's outputs (its
	// Reads names the stage).
	Reads bool
	// Fallbacks are the fallback classes its turns can take, in print
	// order (the paper's).
	Fallbacks []Fallback
	// Unlogged is the class of an unparsed turn the workflow logs no
	// fallback word for ("" when it logs one for every unparsed turn).
	Unlogged Fallback
	// Doc says what a stage of the kind does, for listings.
	Doc string
}

// kinds lists the role kinds in print order.
var kinds = []KindInfo{
	{Kind: Answerer, Answers: true, Doc: "solves the problem; graded by the task"},
	{Kind: Selector, Supervisory: true, Reads: true, Fallbacks: []Fallback{FallbackFirstDigit, FallbackFirstCandidate},
		Doc: "picks one of a stage's answers by number (`Selected: K`)"},
	{Kind: Judge, Supervisory: true, Reads: true, Fallbacks: []Fallback{FallbackIncorrect},
		Doc: "judges a stage's answer (`Verdict: Correct|Incorrect`, `Feedback:`)"},
	{Kind: Planner, Supervisory: true, Fallbacks: []Fallback{FallbackListItems, FallbackFreeWorker, FallbackEnded}, Unlogged: FallbackEnded,
		Doc: "lists strategies (`Strategy K: ...`), one agent of a later stage each"},
	{Kind: SynthesizerKind, Answers: true, Supervisory: true, Reads: true, Fallbacks: []Fallback{FallbackNoAnswer}, Unlogged: FallbackNoAnswer,
		Doc: "answers after reading a stage's answers"},
}

// Kinds lists the role kinds in print order.
func Kinds() []KindInfo { return slices.Clone(kinds) }

// KindOf returns what a role kind owns, the zero KindInfo (with the kind)
// for one that names none.
func KindOf(k Kind) KindInfo {
	i := slices.IndexFunc(kinds, func(x KindInfo) bool { return x.Kind == k })
	if i < 0 {
		return KindInfo{Kind: k}
	}
	return kinds[i]
}

// Count is how many of something a declaration asks for: the value of a
// workflow setting, or a fixed number; the zero Count is one.
type Count struct {
	Setting string // a Setting* key; "" for Fixed
	Fixed   int    // used when Setting is ""; 0 means 1
}

// Of returns the count under the settings s (at least 1).
func (c Count) Of(s Settings) int {
	if c.Setting == "" {
		return max(1, c.Fixed)
	}
	v, _ := s.Value(c.Setting)
	return max(1, v)
}

// Set reports whether the count asks for more than the default one.
func (c Count) Set() bool { return c.Setting != "" || c.Fixed > 1 }

// String renders the count as a declaration writes it.
func (c Count) String() string {
	if c.Setting != "" {
		return c.Setting
	}
	return fmt.Sprint(max(1, c.Fixed))
}

// Stage is one step of a workflow's episode: agents of one role, of one
// kind, called together.
type Stage struct {
	Name string // unique in the workflow; the other stages name it
	Kind Kind
	Role string // the role type (adapter and token budget); one stage per role
	// Agents is how many agents of the role the stage runs (agents named
	// role0, role1, ...); the zero Count is one agent, named by its role.
	Agents Count
	// PerStrategy names an earlier planner stage: the stage runs one agent
	// per strategy it listed (one with a free choice when none parsed).
	PerStrategy string
	// Most is a planner's most strategies (more end the episode).
	Most Count
	// Reads names the earlier stage whose latest outputs the stage reads:
	// the answer a judge judges, the candidates of a selector, the
	// solutions of a synthesizer.
	Reads string
	// Revises: in the loop's later rounds the stage's agent revises its
	// previous answer after the loop's judge's feedback (longer prompts).
	Revises bool
	// Others: in the loop's later rounds each agent sees the other agents'
	// previous answers (longer prompts).
	Others bool
}

// Loop repeats the stages First..Last (in declaration order) until the
// judge stage Until says Correct (parsed), at most Max rounds; without
// Until every round runs.
type Loop struct {
	First, Last string
	Until       string
	Max         Count
}

// Workflow is the registry's entry of one workflow: its declaration.
type Workflow struct {
	Name   string
	Doc    string  // one line for listings ("" for none)
	Stages []Stage // in calling order
	Loop   *Loop   // nil for none
	// Final names the stage whose output is the episode's final answer:
	// an answerer's or synthesizer's (one agent) answer, or the answer a
	// selector picked.
	Final string
	// Source is the declaration's file ("" for a built-in) and Text its
	// bytes, part of a run's config.
	Source, Text string
}

// Stage returns the stage named name, ok false for none.
func (w Workflow) Stage(name string) (Stage, int, bool) {
	i := slices.IndexFunc(w.Stages, func(s Stage) bool { return s.Name == name })
	if i < 0 {
		return Stage{}, -1, false
	}
	return w.Stages[i], i, true
}

// InLoop reports whether stage i is in the loop.
func (w Workflow) InLoop(i int) bool {
	if w.Loop == nil {
		return false
	}
	_, a, _ := w.Stage(w.Loop.First)
	_, b, _ := w.Stage(w.Loop.Last)
	return a <= i && i <= b
}

// Answerer returns the role whose answer becomes the episode's final
// answer (a selector's is the answer of the stage it reads).
func (w Workflow) Answerer() string {
	s, _, ok := w.Stage(w.Final)
	if !ok {
		return ""
	}
	if s.Kind == Selector {
		r, _, _ := w.Stage(s.Reads)
		return r.Role
	}
	return s.Role
}

// Settings returns the workflow settings its counts read, in first-use
// order.
func (w Workflow) Settings() []string {
	var out []string
	add := func(c Count) {
		if c.Setting != "" && !slices.Contains(out, c.Setting) {
			out = append(out, c.Setting)
		}
	}
	for _, s := range w.Stages {
		add(s.Agents)
		add(s.Most)
	}
	if w.Loop != nil {
		add(w.Loop.Max)
	}
	return out
}

// Roles returns the role types the workflow calls, in calling order.
func (w Workflow) Roles() []string {
	var out []string
	for _, s := range w.Stages {
		if !slices.Contains(out, s.Role) {
			out = append(out, s.Role)
		}
	}
	return out
}

// SameRoleAgents reports whether a stage of the workflow runs several
// agents of the same role (voting's generators, orch-workers' workers):
// the structure the paper's claim c is about.
func (w Workflow) SameRoleAgents() bool {
	return slices.ContainsFunc(w.Stages, func(s Stage) bool { return s.Agents.Set() || s.PerStrategy != "" })
}

// Supervisory returns the workflow's supervisory roles (RoleInfo's
// Supervisory), sorted.
func (w Workflow) Supervisory() []string {
	var out []string
	for _, s := range w.Stages {
		if KindOf(s.Kind).Supervisory && !slices.Contains(out, s.Role) {
			out = append(out, s.Role)
		}
	}
	slices.Sort(out)
	return out
}

// DeclError is one fault of a declaration: the stage (or other part) it
// is in, what is wrong and what to do. A workflow file's reader adds the
// line.
type DeclError struct {
	Stage int    // index of the stage at fault; -1 for the workflow's own fields
	Field string // the field at fault: "kind", "reads", "loop.until", ...
	Msg   string // what is wrong, and what to do
}

func (e DeclError) Error() string {
	if e.Stage < 0 {
		return e.Field + ": " + e.Msg
	}
	return fmt.Sprintf("stage %d: %s: %s", e.Stage+1, e.Field, e.Msg)
}

// Check returns every fault of the declaration, in order: unknown kinds
// and settings, duplicate stage names or roles, a role declared with a
// kind other than its registered one, a stage that reads a later stage
// or itself (a cycle), fan-out from a stage that is not a planner, a loop
// whose stages are not in order or whose judge is outside it, and a final
// stage that gives no answer.
func (w Workflow) Check() []DeclError {
	var errs []DeclError
	bad := func(i int, field, format string, args ...any) {
		errs = append(errs, DeclError{Stage: i, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if w.Name == "" || strings.ContainsAny(w.Name, " \t/") {
		bad(-1, "name", "%q is not a workflow name: give one word (letters, digits, -)", w.Name)
	}
	if len(w.Stages) == 0 {
		bad(-1, "stages", "none declared: give at least one stage")
	}
	kindNames := func() string {
		var ks []string
		for _, k := range kinds {
			ks = append(ks, string(k.Kind))
		}
		return strings.Join(ks, ", ")
	}
	count := func(i int, field string, c Count) {
		if c.Setting == "" {
			if c.Fixed < 0 {
				bad(i, field, "%d is below 1: give a positive number or a setting", c.Fixed)
			}
			return
		}
		if _, ok := (Settings{}).Value(c.Setting); !ok {
			bad(i, field, "%q is not a workflow setting: give a number or one of %s, %s, %s", c.Setting, SettingNVotes, SettingMaxIterations, SettingMaxSubtasks)
		}
	}
	// earlier reports whether stage j is declared before stage i; it
	// reports a reference to an unknown, a later stage or the stage itself.
	earlier := func(i int, field, name string) (Stage, bool) {
		s, j, ok := w.Stage(name)
		switch {
		case !ok:
			bad(i, field, "no stage is named %q: name an earlier stage", name)
		case j == i:
			bad(i, field, "the stage reads itself (a cycle): name an earlier stage (a loop repeats stages)")
		case j > i:
			bad(i, field, "stage %q comes later (stage %d): a stage reads only earlier stages; move it before, or use a loop", name, j+1)
		default:
			return s, true
		}
		return Stage{}, false
	}
	seenRole := map[string]int{}
	for i, s := range w.Stages {
		if s.Name == "" {
			bad(i, "name", "missing: give the stage a name the others can refer to")
		} else if _, j, _ := w.Stage(s.Name); j != i {
			bad(i, "name", "%q is also stage %d's name: give each stage its own", s.Name, j+1)
		}
		k := KindOf(s.Kind)
		if k.Doc == "" {
			bad(i, "kind", "unknown kind %q: use one of %s", s.Kind, kindNames())
		}
		switch {
		case s.Role == "":
			bad(i, "role", "missing: name the role type whose adapter the stage's agents use")
		case seenRole[s.Role] > 0:
			bad(i, "role", "%q is also stage %d's role: a role's agents belong to one stage (use a loop to run a stage again, or another role)", s.Role, seenRole[s.Role])
		default:
			seenRole[s.Role] = i + 1
			if r := RoleOf(s.Role); r.Kind != "" && k.Doc != "" && r.Kind != s.Kind {
				bad(i, "kind", "role %q is of kind %s, not %s: declare it with kind %s, or name another role", s.Role, r.Kind, s.Kind, r.Kind)
			}
		}
		count(i, "agents", s.Agents)
		count(i, "most", s.Most)
		if s.Most.Set() && s.Kind != Planner {
			bad(i, "most", "only a planner lists strategies: drop it, or make the stage a planner")
		}
		if s.Kind == Planner && !s.Most.Set() {
			bad(i, "most", "a planner needs the most strategies it may list: give a number or a setting")
		}
		if s.Agents.Set() && s.Kind != Answerer {
			bad(i, "agents", "only an answerer stage runs several agents: drop it, or make the stage an answerer")
		}
		if s.PerStrategy != "" {
			if s.Agents.Set() {
				bad(i, "per_strategy", "a stage runs either a count of agents or one per strategy: drop one")
			}
			if s.Kind != Answerer {
				bad(i, "per_strategy", "only an answerer stage fans out: make the stage an answerer")
			}
			if p, ok := earlier(i, "per_strategy", s.PerStrategy); ok && p.Kind != Planner {
				bad(i, "per_strategy", "stage %q is of kind %s, not a planner: only a planner's strategies fan out; name a planner stage", p.Name, p.Kind)
			}
		}
		switch {
		case k.Reads && s.Reads == "":
			bad(i, "reads", "a %s reads an earlier stage's answers: name that stage", s.Kind)
		case k.Doc != "" && !k.Reads && s.Reads != "":
			bad(i, "reads", "a %s reads no stage's answers: drop it", s.Kind)
		case s.Reads != "":
			r, ok := earlier(i, "reads", s.Reads)
			switch {
			case !ok:
			case !KindOf(r.Kind).Answers:
				bad(i, "reads", "stage %q is of kind %s, which gives no answer: name a stage of answerers or a synthesizer", r.Name, r.Kind)
			case s.Kind == Judge && (r.Agents.Set() || r.PerStrategy != ""):
				bad(i, "reads", "a judge judges one answer, and stage %q runs several agents: name a one-agent stage, or use a selector", r.Name)
			}
		}
		if (s.Revises || s.Others) && !w.InLoop(i) {
			bad(i, "sees", "a stage sees earlier rounds only in a loop: put it in the loop, or drop it")
		}
		if s.Revises && (w.Loop == nil || w.Loop.Until == "") {
			bad(i, "sees", "revising needs the loop's judge's feedback: give the loop an until judge")
		}
		if s.Others && !s.Agents.Set() {
			bad(i, "sees", "seeing the other agents' answers needs several agents: give the stage agents")
		}
	}
	if l := w.Loop; l != nil {
		_, a, okA := w.Stage(l.First)
		_, b, okB := w.Stage(l.Last)
		switch {
		case !okA:
			bad(-1, "loop.from", "no stage is named %q: name the loop's first stage", l.First)
		case !okB:
			bad(-1, "loop.to", "no stage is named %q: name the loop's last stage", l.Last)
		case b < a:
			bad(-1, "loop.to", "stage %q comes before the loop's first stage %q: name stages in order", l.Last, l.First)
		}
		count(-1, "loop.max", l.Max)
		if l.Until != "" {
			u, j, ok := w.Stage(l.Until)
			switch {
			case !ok:
				bad(-1, "loop.until", "no stage is named %q: name the judge stage that ends the loop", l.Until)
			case u.Kind != Judge:
				bad(-1, "loop.until", "stage %q is of kind %s: only a judge's Correct ends a loop; name a judge stage", u.Name, u.Kind)
			case okA && okB && (j < a || j > b):
				bad(-1, "loop.until", "stage %q is outside the loop: name a judge stage in it", u.Name)
			}
		} else if !l.Max.Set() {
			bad(-1, "loop.max", "a loop without a judge needs rounds: give loop.max a number above 1 or a setting")
		}
		for i, s := range w.Stages {
			if r, j, ok := w.Stage(s.Reads); ok && w.InLoop(j) && !w.InLoop(i) && j != b && s.Kind == Judge {
				bad(i, "reads", "a judge after the loop reads stage %q inside it: put the judge in the loop", r.Name)
			}
			if s.PerStrategy != "" && w.InLoop(i) {
				bad(i, "per_strategy", "a fan-out stage cannot be in a loop: move the loop")
			}
		}
	}
	if f, _, ok := w.Stage(w.Final); !ok {
		bad(-1, "final", "no stage is named %q: name the stage whose output is the final answer", w.Final)
	} else {
		switch {
		case f.Kind == Selector:
		case KindOf(f.Kind).Answers && !f.Agents.Set() && f.PerStrategy == "":
		default:
			bad(-1, "final", "stage %q gives no single answer: name a selector, a synthesizer or a one-agent answerer", f.Name)
		}
	}
	return errs
}

// regMu guards registry and roleInfos against Register.
var regMu sync.RWMutex

// Register adds a declared workflow (and its new roles) to the registry.
// It refuses a faulty declaration (Check), a built-in's name, and a name
// registered before with another text; registering the same text again is
// a no-op.
func Register(w Workflow) error {
	if errs := w.Check(); len(errs) > 0 {
		return fmt.Errorf("workflow %s: %w", w.Name, errs[0])
	}
	regMu.Lock()
	defer regMu.Unlock()
	if i := slices.IndexFunc(registry, func(x Workflow) bool { return x.Name == w.Name }); i >= 0 {
		if i < builtins {
			return fmt.Errorf("workflow %s: a built-in workflow has that name: give the declaration another", w.Name)
		}
		if registry[i].Text != w.Text {
			return fmt.Errorf("workflow %s: declared twice with different texts (%s and %s): give each its own name", w.Name, registry[i].Source, w.Source)
		}
		return nil
	}
	var add []RoleInfo
	for _, s := range w.Stages {
		if slices.ContainsFunc(roleInfos, func(r RoleInfo) bool { return r.Name == s.Role }) {
			continue
		}
		r := RoleInfo{Name: s.Role, Kind: s.Kind}
		if s.Reads != "" && s.Kind != Judge {
			c, _, _ := w.Stage(s.Reads)
			r.Chooses = c.Role
		}
		add = append(add, r)
	}
	registry = append(registry, w)
	roleInfos = append(roleInfos, add...)
	return nil
}
