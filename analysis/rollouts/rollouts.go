// Package rollouts selects and prints the rollouts a run logged in its
// samples/ table (marlow samples): every turn of a rollout with its
// completion, parse outcome, fallback, grade and reward, so a researcher can
// read what a role wrote at a step without SQL. It reads samples only
// through runlog's reader API.
package rollouts

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
)

// FinalRole is the pseudo-role of the sample row holding an episode's final
// answer (grpo.FinalAgent).
const FinalRole = "final"

// LastStep asks Select for the last step that has matching rows, per run.
const LastStep = -1

// AnyRollout asks Select for every rollout index.
const AnyRollout = -1

// Filter selects rollouts; a zero string field matches anything.
type Filter struct {
	Run      string // glob on the run id (path.Match syntax)
	Step     int64  // a step, or LastStep
	Split    string // "val" or "train"
	Workflow string
	Role     string // keep only this role's turns (the final row is kept too)
	Problem  string // problem id
	Rollout  int64  // rollout index, or AnyRollout
}

// Rollout is one logged rollout: its identity, reward and turns in order.
// WriteJSON gives its JSON form.
type Rollout struct {
	RunID     string
	Step      int64
	Split     string
	Workflow  string
	ProblemID string
	Rollout   int64
	Reward    float64
	Turns     []runlog.SampleRow // agent turns (those of Filter.Role only, when set)
	Final     *runlog.SampleRow  // the final-answer row (validation rollouts)
}

func (f Filter) matches(r *runlog.SampleRow) bool {
	return (f.Split == "" || r.Split == f.Split) && (f.Workflow == "" || r.Workflow == f.Workflow) &&
		(f.Problem == "" || r.ProblemID == f.Problem) && (f.Rollout == AnyRollout || r.Rollout == f.Rollout)
}

func (f Filter) roleMatches(r *runlog.SampleRow) bool {
	return f.Role == "" || r.Role == f.Role
}

// Select returns the rollouts of runs that match f, in run, step, split,
// workflow, problem and rollout order. Nothing matching is an error that
// says what the runs hold, so a misspelt role or step is easy to fix.
func Select(runs []*runlog.Run, f Filter) ([]Rollout, error) {
	if f.Run != "" {
		if _, err := path.Match(f.Run, ""); err != nil {
			return nil, fmt.Errorf("samples: run pattern %q: %w", f.Run, err)
		}
	}
	var out []Rollout
	matchedRuns := 0
	for _, run := range runs {
		id := run.Manifest.RunID
		if ok, _ := path.Match(f.Run, id); f.Run != "" && !ok {
			continue
		}
		matchedRuns++
		step := f.Step
		if step == LastStep {
			step = math.MinInt64
			for i := range run.Samples {
				if s := &run.Samples[i]; f.matches(s) && f.roleMatches(s) {
					step = max(step, s.Step)
				}
			}
		}
		out = append(out, group(id, run.Samples, step, f)...)
	}
	if matchedRuns == 0 {
		return nil, fmt.Errorf("samples: no run matches %q (%d runs in the source)", f.Run, len(runs))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("samples: no rollout matches %s; %s", f.describe(), holdings(runs, f))
	}
	slices.SortStableFunc(out, func(a, b Rollout) int {
		return cmp.Or(cmp.Compare(a.RunID, b.RunID), cmp.Compare(a.Step, b.Step), cmp.Compare(a.Split, b.Split),
			cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.ProblemID, b.ProblemID), cmp.Compare(a.Rollout, b.Rollout))
	})
	return out, nil
}

// group collects the rows of one run at step into rollouts. Rows of a
// rollout are consecutive in the order ReadRuns gives and keep their turn
// order.
func group(id string, rows []runlog.SampleRow, step int64, f Filter) []Rollout {
	var out []Rollout
	var cur *Rollout
	for i := range rows {
		s := rows[i]
		if s.Step != step || !f.matches(&s) {
			continue
		}
		if cur == nil || cur.Step != s.Step || cur.Split != s.Split || cur.Workflow != s.Workflow || cur.ProblemID != s.ProblemID || cur.Rollout != s.Rollout {
			out = append(out, Rollout{RunID: id, Step: s.Step, Split: s.Split, Workflow: s.Workflow, ProblemID: s.ProblemID, Rollout: s.Rollout, Reward: s.Reward})
			cur = &out[len(out)-1]
		}
		switch {
		case s.Role == FinalRole && f.Role != FinalRole:
			cur.Final = &s
		case f.roleMatches(&s):
			cur.Turns = append(cur.Turns, s)
		}
	}
	kept := out[:0]
	for _, r := range out {
		if len(r.Turns) > 0 || f.Role == "" && r.Final != nil {
			kept = append(kept, r)
		}
	}
	return kept
}

func (f Filter) describe() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("run", f.Run)
	if f.Step == LastStep {
		parts = append(parts, "the last step")
	} else {
		parts = append(parts, fmt.Sprintf("step %d", f.Step))
	}
	add("split", f.Split)
	add("workflow", f.Workflow)
	add("role", f.Role)
	add("problem", f.Problem)
	if f.Rollout != AnyRollout {
		parts = append(parts, fmt.Sprintf("rollout %d", f.Rollout))
	}
	return strings.Join(parts, ", ")
}

// holdings summarises what the samples of the runs matching f.Run hold;
// the problem IDs listed are those of f.Split (every split's when unset).
func holdings(runs []*runlog.Run, f Filter) string {
	pattern := f.Run
	steps := map[string][]int64{}
	roles, workflows, problems := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, run := range runs {
		if ok, _ := path.Match(pattern, run.Manifest.RunID); pattern != "" && !ok {
			continue
		}
		for _, s := range run.Samples {
			steps[s.Split] = append(steps[s.Split], s.Step)
			roles[s.Role] = true
			workflows[s.Workflow] = true
			if f.Split == "" || s.Split == f.Split {
				problems[s.ProblemID] = true
			}
		}
	}
	if len(steps) == 0 {
		return "the runs hold no samples"
	}
	var b strings.Builder
	b.WriteString("the runs hold")
	for _, split := range slices.Sorted(maps.Keys(steps)) {
		st := slices.Compact(slices.Sorted(slices.Values(steps[split])))
		fmt.Fprintf(&b, " %s steps %s;", split, joinInts(st))
	}
	fmt.Fprintf(&b, " workflows %s; roles %s", strings.Join(slices.Sorted(maps.Keys(workflows)), ", "), strings.Join(slices.Sorted(maps.Keys(roles)), ", "))
	if len(problems) > 0 {
		where := ""
		if f.Split != "" {
			where = " (" + f.Split + ")"
		}
		fmt.Fprintf(&b, "; problems%s %s", where, someIDs(slices.Sorted(maps.Keys(problems))))
	}
	return b.String()
}

// someIDs lists ids, or the first few of many with their count, so that a
// misspelt --problem shows what the IDs look like.
func someIDs(ids []string) string {
	const show = 6
	if len(ids) <= show {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s, ... (%d in all)", strings.Join(ids[:show], ", "), len(ids))
}

func joinInts(xs []int64) string {
	if len(xs) > 12 {
		return fmt.Sprintf("%s ... %s (%d steps)", joinInts(xs[:6]), joinInts(xs[len(xs)-3:]), len(xs))
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// PrintOptions shape the text output.
type PrintOptions struct {
	Prompts  bool // print each turn's prompt before its completion
	MaxChars int  // cut texts longer than this many characters (0: never)
}

// Print writes the rollouts as text: a header per rollout (run, step,
// split, workflow, problem, rollout, reward), then each turn with its role,
// agent, policy, parse outcome, fallback, grade, tokens and finish reason,
// its parsed output and its completion, and last the final answer.
func Print(w io.Writer, rs []Rollout, opt PrintOptions) error {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "== %s  step %d  %s  %s  problem %s  rollout %d  reward %s\n", r.RunID, r.Step, r.Split, r.Workflow, r.ProblemID, r.Rollout, num(r.Reward))
		for _, t := range r.Turns {
			policy := t.Policy
			if policy == "" {
				policy = "base"
			}
			fmt.Fprintf(&b, "-- %s (agent %s, policy %s): %s", t.Role, t.Agent, policy, parseOutcome(t))
			if t.Split == "train" {
				fmt.Fprintf(&b, ", advantage %s", num(t.Advantage))
			}
			fmt.Fprintf(&b, ", correct %s, %d tokens, finish %s\n", yesNo(t.Correct), t.Tokens, t.Finish)
			if opt.Prompts {
				b.WriteString("   prompt:\n")
				indent(&b, clip(t.Prompt, opt.MaxChars))
			}
			fmt.Fprintf(&b, "   parsed: %q\n", clip(t.Parsed, opt.MaxChars))
			b.WriteString("   completion:\n")
			indent(&b, clip(t.Completion, opt.MaxChars))
		}
		if f := r.Final; f != nil {
			fmt.Fprintf(&b, "-- final answer %q: correct %s\n", clip(f.Parsed, opt.MaxChars), yesNo(f.Correct))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the rollouts as one indented JSON array; undefined
// numbers (NaN) are null.
func WriteJSON(w io.Writer, rs []Rollout) error {
	type turn struct {
		Agent      string   `json:"agent"`
		Role       string   `json:"role"`
		Policy     string   `json:"policy"`
		Prompt     string   `json:"prompt"`
		Completion string   `json:"completion"`
		Parsed     string   `json:"parsed"`
		Compliant  bool     `json:"compliant"`
		Fallback   string   `json:"fallback"`
		Correct    bool     `json:"correct"`
		Advantage  *float64 `json:"advantage"`
		Tokens     int64    `json:"tokens"`
		Finish     string   `json:"finish"`
	}
	type final struct {
		Answer  string `json:"answer"`
		Correct bool   `json:"correct"`
	}
	type rollout struct {
		RunID     string   `json:"run_id"`
		Step      int64    `json:"step"`
		Split     string   `json:"split"`
		Workflow  string   `json:"workflow"`
		ProblemID string   `json:"problem_id"`
		Rollout   int64    `json:"rollout"`
		Reward    *float64 `json:"reward"`
		Turns     []turn   `json:"turns"`
		Final     *final   `json:"final,omitempty"`
	}
	opt := func(x float64) *float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return &x
	}
	out := make([]rollout, len(rs))
	for i, r := range rs {
		o := rollout{RunID: r.RunID, Step: r.Step, Split: r.Split, Workflow: r.Workflow, ProblemID: r.ProblemID, Rollout: r.Rollout, Reward: opt(r.Reward), Turns: []turn{}}
		for _, t := range r.Turns {
			o.Turns = append(o.Turns, turn{Agent: t.Agent, Role: t.Role, Policy: t.Policy, Prompt: t.Prompt, Completion: t.Completion, Parsed: t.Parsed,
				Compliant: t.Compliant, Fallback: t.Fallback, Correct: t.Correct, Advantage: opt(t.Advantage), Tokens: t.Tokens, Finish: t.Finish})
		}
		if r.Final != nil {
			o.Final = &final{Answer: r.Final.Parsed, Correct: r.Final.Correct}
		}
		out[i] = o
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// parseOutcome says whether the turn's output parsed and which fallback
// the workflow took ("parsed", "unparsed, fallback candidate-1").
func parseOutcome(t runlog.SampleRow) string {
	s := "parsed"
	if !t.Compliant {
		s = "unparsed"
	}
	if t.Fallback != "" {
		s += ", fallback " + t.Fallback
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%g", x)
}

// clip cuts s after n characters (runes), saying how much was cut.
func clip(s string, n int) string {
	if n <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + fmt.Sprintf(" [... %d more characters]", len(r)-n)
}

func indent(b *strings.Builder, s string) {
	for _, line := range strings.Split(s, "\n") {
		b.WriteString("   | ")
		b.WriteString(line)
		b.WriteString("\n")
	}
}
