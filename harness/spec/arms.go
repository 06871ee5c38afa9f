package spec

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Arm is a named variant of the recipe within one experiment file: the
// same cells at another learning rate, with an intervention (a per-role
// KL coefficient, the coherence regularizer) or another n_votes. Its runs
// are planned next to the main matrix's, with the arm's name in their IDs
// and configs, so that one study holds the variants side by side and its
// report compares them cell by cell.
//
// An arm's matrix lists replace the main matrix's lists it names and
// inherit the others; its seeds likewise. Its grpo and workflow sections
// override the resolved sections of each cell (after the model's and the
// task's overrides), key by key. An arm without them is a sub-grid of the
// main recipe, for cells outside the matrix's cross product (one scale
// for one workflow only, say).
type Arm struct {
	Matrix   ArmMatrix  `yaml:"matrix" json:"matrix"`
	Seeds    []int      `yaml:"seeds,omitempty" json:"seeds,omitempty"`
	GRPO     *yaml.Node `yaml:"grpo,omitempty" json:"-"`
	Workflow *yaml.Node `yaml:"workflow,omitempty" json:"-"`
}

// ArmMatrix is the grid of an arm; an empty list inherits the main
// matrix's.
type ArmMatrix struct {
	Workflows  []string `yaml:"workflows,omitempty" json:"workflows,omitempty"`
	Tasks      []string `yaml:"tasks,omitempty" json:"tasks,omitempty"`
	Scales     []string `yaml:"scales,omitempty" json:"scales,omitempty"`
	Conditions []string `yaml:"conditions,omitempty" json:"conditions,omitempty"`
}

// armNameRe is the form of an arm's name; it becomes part of run IDs and
// folder names, so it has no dashes (the IDs' separator).
var armNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)

// ArmNames returns "" (the main matrix) followed by the spec's arms in
// name order.
func (s *Spec) ArmNames() []string {
	return append([]string{""}, slices.Sorted(maps.Keys(s.Arms))...)
}

// ArmMatrix returns the resolved grid of an arm ("" is the main matrix).
func (s *Spec) ArmMatrix(arm string) Matrix {
	if arm == "" {
		return s.Matrix
	}
	a := s.Arms[arm]
	pick := func(own, main []string) []string {
		if len(own) > 0 {
			return own
		}
		return main
	}
	return Matrix{
		Workflows:  pick(a.Matrix.Workflows, s.Matrix.Workflows),
		Tasks:      pick(a.Matrix.Tasks, s.Matrix.Tasks),
		Scales:     pick(a.Matrix.Scales, s.Matrix.Scales),
		Conditions: pick(a.Matrix.Conditions, s.Matrix.Conditions),
	}
}

// ArmSeeds returns the seeds of an arm ("" is the main matrix).
func (s *Spec) ArmSeeds(arm string) []int {
	if a, ok := s.Arms[arm]; ok && len(a.Seeds) > 0 {
		return a.Seeds
	}
	return s.Seeds
}

// Scales returns every scale the spec plans runs of: the main matrix's,
// then each arm's that the main matrix lacks, in order.
func (s *Spec) Scales() []string {
	var out []string
	for _, arm := range s.ArmNames() {
		for _, sc := range s.ArmMatrix(arm).Scales {
			if !slices.Contains(out, sc) {
				out = append(out, sc)
			}
		}
	}
	return out
}

// allWorkflows returns every workflow of the main matrix and the arms.
func (s *Spec) allWorkflows() []string {
	var out []string
	for _, arm := range s.ArmNames() {
		for _, wf := range s.ArmMatrix(arm).Workflows {
			if !slices.Contains(out, wf) {
				out = append(out, wf)
			}
		}
	}
	return out
}

// armOverride applies an arm's grpo and workflow sections on top of a
// cell's resolved sections, recording where each key was set.
func (s *Spec) armOverride(arm string, g *GRPO, w *WorkflowSettings, gorg, worg origins, d *decoder) {
	a, ok := s.Arms[arm]
	if !ok {
		return
	}
	if a.GRPO != nil {
		d.decode(a.GRPO, reflect.ValueOf(g).Elem(), "arms."+arm+".grpo", "", gorg)
		delete(gorg, "")
	}
	if a.Workflow != nil {
		d.decode(a.Workflow, reflect.ValueOf(w).Elem(), "arms."+arm+".workflow", "", worg)
		delete(worg, "")
	}
}

// validateArms checks each arm's name and grid; its cells are checked with
// the main matrix's in validate.
func validateArms(s *Spec, c checker) {
	for _, name := range sortedKeys(s.Arms) {
		p := "arms." + name
		if !armNameRe.MatchString(name) {
			c.errf(p, "arm name %q must match %s (it becomes part of run IDs)", name, armNameRe)
		}
		a := s.Arms[name]
		checkList(c, p+".matrix.workflows", a.Matrix.Workflows, Workflows, nil)
		checkList(c, p+".matrix.tasks", a.Matrix.Tasks, nil, taskNameRe)
		checkList(c, p+".matrix.scales", a.Matrix.Scales, nil, scaleNameRe)
		checkList(c, p+".matrix.conditions", a.Matrix.Conditions, s.conditionNames(), nil)
		for i, t := range a.Matrix.Tasks {
			if _, ok := s.Tasks[t]; !ok {
				c.errf(fmt.Sprintf("%s.matrix.tasks[%d]", p, i), "unknown task %q:%s define it under tasks:", t, didYouMean(t, sortedKeys(s.Tasks)))
			}
		}
		for i, sc := range a.Matrix.Scales {
			if _, ok := s.Models[sc]; !ok {
				c.errf(fmt.Sprintf("%s.matrix.scales[%d]", p, i), "scale %q has no model:%s add models.%s", sc, didYouMean(sc, sortedKeys(s.Models)), sc)
			}
		}
		first := map[int]int{}
		for i, sd := range a.Seeds {
			rel := fmt.Sprintf("%s.seeds[%d]", p, i)
			if sd < 0 {
				c.errf(rel, "must be >= 0, got %d", sd)
			}
			if j, dup := first[sd]; dup {
				c.errf(rel, "duplicate seed %d (also %s.seeds[%d])", sd, p, j)
			} else {
				first[sd] = i
			}
		}
		wfs := s.ArmMatrix(name).Workflows
		uses := map[string]string{"n_votes": "voting", "max_iterations": "eval-opt", "max_subtasks": "orch-workers"}
		if n := a.Workflow; n != nil && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if wf, ok := uses[k]; ok && !slices.Contains(wfs, wf) {
					c.errs.add(n.Content[i].Line, p+".workflow."+k,
						"only used by workflow %s, which is not in this arm's workflows (%s); remove it", wf, strings.Join(wfs, ", "))
				}
			}
		}
	}
}

// checkArmBase refuses an arm cell whose workflow settings would need
// another base model than the scale's: a tiny scale is pretrained with the
// main workflow section's n_votes (unless its pretrain section sets
// n_votes_mix) and max_subtasks.
func (s *Spec) checkArmBase(arm, scale string, m Model, w WorkflowSettings, wc checker) {
	if arm == "" || m.Tiny == nil {
		return
	}
	p := s.PretrainFor(scale)
	if len(p.NVotesMix) == 0 && w.NVotes != s.Workflow.NVotes {
		wc.errf("n_votes", "%d differs from workflow.n_votes (%d), which the base model of scale %s is pretrained with; "+
			"give the scale a mixed base model (models.%s.pretrain.n_votes_mix: [%d, %d])",
			w.NVotes, s.Workflow.NVotes, scale, scale, min(w.NVotes, s.Workflow.NVotes), max(w.NVotes, s.Workflow.NVotes))
	}
	if w.MaxSubtasks != s.Workflow.MaxSubtasks {
		wc.errf("max_subtasks", "%d differs from workflow.max_subtasks (%d), which the base model of scale %s is pretrained with; "+
			"set it in the workflow section, or define another scale for this arm", w.MaxSubtasks, s.Workflow.MaxSubtasks, scale)
	}
}
