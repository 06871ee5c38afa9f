package spec

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

var (
	experimentRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	taskNameRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	scaleNameRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)
)

// checker reports errors at the line where a value was set, falling back to
// the nearest enclosing key that was set, for values that are defaults.
type checker struct {
	errs   *errList
	org    origins
	prefix string // full path of the section, for values never set
	line   int    // line of the section, for values never set
}

func (c checker) at(rel string) (string, int) {
	if l, ok := c.org[rel]; ok {
		return l.path, l.line
	}
	path := join(c.prefix, rel)
	for r := rel; r != ""; {
		i := strings.LastIndexAny(r, ".[")
		if i < 0 {
			r = ""
		} else {
			r = r[:i]
		}
		if l, ok := c.org[r]; ok && r != "" {
			return path, l.line
		}
	}
	return path, c.line
}

func (c checker) errf(rel, format string, args ...any) {
	p, l := c.at(rel)
	c.errs.add(l, p, format, args...)
}

func (c checker) minInt(rel string, v, lo int) {
	if v < lo {
		c.errf(rel, "must be >= %d, got %d", lo, v)
	}
}

func (c checker) rangeInt(rel string, v, lo, hi int) {
	if v < lo || v > hi {
		c.errf(rel, "must be in [%d, %d], got %d", lo, hi, v)
	}
}

// rangeFloat checks lo <= v <= hi, or lo < v when openLo.
func (c checker) rangeFloat(rel string, v, lo, hi float64, openLo bool) {
	switch {
	case openLo && !(v > lo), !openLo && !(v >= lo), !(v <= hi):
		lb := "["
		if openLo {
			lb = "("
		}
		c.errf(rel, "must be in %s%g, %g], got %g", lb, lo, hi, v)
	}
}

func (c checker) oneOf(rel, v string, allowed []string) bool {
	if slices.Contains(allowed, v) {
		return true
	}
	c.errf(rel, "%q is not allowed; allowed values: %s", v, strings.Join(allowed, ", "))
	return false
}

// section returns a checker for the section at prefix (relative to c).
func (c checker) section(prefix string) checker {
	_, line := c.at(prefix)
	return checker{errs: c.errs, org: sub(c.org, prefix), prefix: join(c.prefix, prefix), line: line}
}

// sub returns the origins under prefix with the prefix removed.
func sub(org origins, prefix string) origins {
	out := origins{}
	for k, v := range org {
		if k == prefix {
			out[""] = v
		} else if strings.HasPrefix(k, prefix+".") {
			out[k[len(prefix)+1:]] = v
		}
	}
	return out
}

func validate(s *Spec, root *yaml.Node, errs *errList) {
	c := checker{errs: errs, org: s.org}
	required := []string{"experiment", "seeds", "matrix"}
	for _, k := range required {
		if _, ok := s.org[k]; !ok {
			errs.add(root.Line, k, "required key is missing")
		}
	}
	if _, ok := s.org["experiment"]; ok && !experimentRe.MatchString(s.Experiment) {
		c.errf("experiment", "%q must match %s (it names the runs/ folder)", s.Experiment, experimentRe)
	}
	if _, ok := s.org["seeds"]; ok {
		if len(s.Seeds) == 0 {
			c.errf("seeds", "must list at least one seed")
		}
		first := map[int]int{}
		for i, sd := range s.Seeds {
			rel := fmt.Sprintf("seeds[%d]", i)
			if sd < 0 {
				c.errf(rel, "must be >= 0, got %d", sd)
			}
			if j, dup := first[sd]; dup {
				c.errf(rel, "duplicate seed %d (also seeds[%d])", sd, j)
			} else {
				first[sd] = i
			}
		}
	}
	validateMatrix(s, c)
	validateModels(s, c)
	validateTasks(s, c)
	validateEval(s.Eval, c.section("eval"))
	c.minInt("checkpoint.every", s.Checkpoint.Every, 1)
	validateAnalysis(s.Analysis, c.section("analysis"))
	validatePretrain(s.Pretrain, c.section("pretrain"))
	validateWorkflowUse(s, c)
	// Every (task, scale) cell, with its overrides applied.
	for _, task := range s.Matrix.Tasks {
		t, okT := s.Tasks[task]
		for _, scale := range s.Matrix.Scales {
			m, okM := s.Models[scale]
			if !okT || !okM {
				continue
			}
			g, w, gc, wc := s.cell(task, scale, t, m, errs)
			validateGRPO(g, gc, s.roleSet())
			validateWorkflow(w, wc)
			if t.ValSize > 0 && s.Eval.ValSize > t.ValSize {
				c.errf("eval.val_size", "%d exceeds the validation split of task %s (tasks.%s.val_size = %d)",
					s.Eval.ValSize, task, task, t.ValSize)
			}
		}
	}
}

// cell merges the grpo and workflow sections with the overrides of a model
// and a task (in that order) and returns them with checkers that point at
// the lines that set each value.
func (s *Spec) cell(task, scale string, t Task, m Model, errs *errList) (GRPO, WorkflowSettings, checker, checker) {
	d := &decoder{errs: errs}
	g := s.GRPO.clone()
	gorg := sub(s.org, "grpo")
	delete(gorg, "")
	if m.GRPO != nil {
		d.decode(m.GRPO, reflect.ValueOf(&g).Elem(), "models."+scale+".grpo", "", gorg)
	}
	if t.GRPO != nil {
		d.decode(t.GRPO, reflect.ValueOf(&g).Elem(), "tasks."+task+".grpo", "", gorg)
	}
	delete(gorg, "")
	w := s.Workflow
	worg := sub(s.org, "workflow")
	delete(worg, "")
	if t.Workflow != nil {
		d.decode(t.Workflow, reflect.ValueOf(&w).Elem(), "tasks."+task+".workflow", "", worg)
	}
	delete(worg, "")
	return g, w, checker{errs: errs, org: gorg, prefix: "grpo", line: s.org["grpo"].line},
		checker{errs: errs, org: worg, prefix: "workflow", line: s.org["workflow"].line}
}

func checkList(c checker, rel string, vals, allowed []string, nameRe *regexp.Regexp) {
	if _, set := c.org[rel]; set && len(vals) == 0 {
		if allowed != nil {
			c.errf(rel, "must not be empty; allowed values: %s", strings.Join(allowed, ", "))
		} else {
			c.errf(rel, "must not be empty")
		}
	}
	seen := map[string]int{}
	for i, v := range vals {
		r := fmt.Sprintf("%s[%d]", rel, i)
		if j, dup := seen[v]; dup {
			c.errf(r, "duplicate %q (also %s[%d])", v, rel, j)
			continue
		}
		seen[v] = i
		if allowed != nil {
			c.oneOf(r, v, allowed)
		} else if !nameRe.MatchString(v) {
			c.errf(r, "name %q must match %s", v, nameRe)
		}
	}
}

func validateMatrix(s *Spec, c checker) {
	if _, ok := s.org["matrix"]; !ok {
		return
	}
	for _, k := range []string{"workflows", "tasks", "scales", "conditions"} {
		if _, ok := s.org["matrix."+k]; !ok {
			c.errf("matrix."+k, "required key is missing")
		}
	}
	checkList(c, "matrix.workflows", s.Matrix.Workflows, Workflows, nil)
	checkList(c, "matrix.tasks", s.Matrix.Tasks, nil, taskNameRe)
	checkList(c, "matrix.scales", s.Matrix.Scales, nil, scaleNameRe)
	checkList(c, "matrix.conditions", s.Matrix.Conditions, Conditions, nil)
	for i, t := range s.Matrix.Tasks {
		if _, ok := s.Tasks[t]; ok {
			continue
		}
		if !slices.Contains(Sources, t) && taskNameRe.MatchString(t) {
			c.errf(fmt.Sprintf("matrix.tasks[%d]", i), "unknown task %q: define it under tasks: or use a built-in source (%s)",
				t, strings.Join(Sources, ", "))
		}
	}
	for i, sc := range s.Matrix.Scales {
		if _, ok := s.Models[sc]; !ok && scaleNameRe.MatchString(sc) {
			c.errf(fmt.Sprintf("matrix.scales[%d]", i), "scale %q has no model: add models.%s with a checkpoint or a tiny shape", sc, sc)
		}
	}
}

func validateModels(s *Spec, c checker) {
	for _, name := range sortedKeys(s.Models) {
		m := s.Models[name]
		p := "models." + name
		if !slices.Contains(s.Matrix.Scales, name) {
			c.errf(p, "scale %q is not in matrix.scales (%s); remove it or add it to the matrix", name, strings.Join(s.Matrix.Scales, ", "))
		}
		c.oneOf(p+".engine", m.Engine, Engines)
		_, hasCk := c.org[p+".checkpoint"]
		switch {
		case hasCk && m.Tiny != nil:
			c.errf(p, "set either checkpoint or tiny, not both")
		case !hasCk && m.Tiny == nil:
			c.errf(p+".checkpoint", "missing: a model needs a checkpoint path (a Hugging Face folder) or a tiny shape")
		case hasCk:
			if m.Checkpoint == "" {
				c.errf(p+".checkpoint", "must not be empty")
			} else if abs, err := resolvePath(s.File, m.Checkpoint); err != nil {
				c.errf(p+".checkpoint", "%v", err)
			} else {
				m.Checkpoint = abs
			}
		default:
			validateTiny(*m.Tiny, c.section(p+".tiny"))
		}
		s.Models[name] = m
	}
}

func validateTiny(t Tiny, c checker) {
	c.rangeInt("hidden", t.Hidden, 1, 1<<16)
	c.rangeInt("layers", t.Layers, 1, 1024)
	c.rangeInt("heads", t.Heads, 1, 1024)
	c.rangeInt("kv_heads", t.KVHeads, 1, 1024)
	c.rangeInt("head_dim", t.HeadDim, 2, 1024)
	if t.HeadDim%2 != 0 {
		c.errf("head_dim", "must be even (RoPE rotates pairs), got %d", t.HeadDim)
	}
	if t.KVHeads >= 1 && t.Heads%t.KVHeads != 0 {
		c.errf("kv_heads", "heads (%d) must be a multiple of kv_heads (%d)", t.Heads, t.KVHeads)
	}
	c.rangeInt("intermediate", t.Intermediate, 1, 1<<20)
	c.rangeFloat("rope_theta", t.RopeTheta, 0, 1e12, true)
	c.rangeInt("max_positions", t.MaxPositions, 16, 1<<20)
}

func validateTasks(s *Spec, c checker) {
	for _, name := range s.Matrix.Tasks {
		if _, ok := s.Tasks[name]; !ok && slices.Contains(Sources, name) {
			var t Task
			t.setDefaults()
			s.Tasks[name] = t
		}
	}
	for _, name := range sortedKeys(s.Tasks) {
		t := s.Tasks[name]
		p := "tasks." + name
		if !slices.Contains(s.Matrix.Tasks, name) {
			c.errf(p, "task %q is not in matrix.tasks (%s); remove it or add it to the matrix", name, strings.Join(s.Matrix.Tasks, ", "))
		}
		if !taskNameRe.MatchString(name) {
			c.errf(p, "task name %q must match %s", name, taskNameRe)
		}
		if t.Source == "" {
			if !slices.Contains(Sources, name) {
				c.errf(p+".source", "missing: task %q is not a built-in source name, so it needs source: one of %s", name, strings.Join(Sources, ", "))
				continue
			}
			t.Source = name
		}
		if !c.oneOf(p+".source", t.Source, Sources) {
			continue
		}
		synth := strings.HasPrefix(t.Source, "synth-")
		if synth {
			if t.Path != "" {
				c.errf(p+".path", "not used by source %s (synthetic tasks are generated); remove it", t.Source)
			}
		} else if _, set := c.org[p+".path"]; !set {
			c.errf(p+".path", "missing: source %s reads a file; set path (may use ${ENV})", t.Source)
		} else if t.Path == "" {
			c.errf(p+".path", "must not be empty")
		} else if abs, err := resolvePath(s.File, t.Path); err != nil {
			c.errf(p+".path", "%v", err)
		} else {
			t.Path = abs
		}
		c.minInt(p+".train_size", t.TrainSize, 0)
		if synth {
			c.rangeInt(p+".val_size", t.ValSize, 1, 100_000)
			if _, set := c.org[p+".val_frac"]; set {
				c.errf(p+".val_frac", "only used by file sources (dapo-math, deepcoder), not %s; remove it", t.Source)
			}
		} else {
			c.rangeInt(p+".val_size", t.ValSize, 0, 1_000_000)
			if t.ValFrac == 0 {
				t.ValFrac = 0.1
			}
			c.rangeFloat(p+".val_frac", t.ValFrac, 0, 1, true)
			if t.ValFrac >= 1 {
				c.errf(p+".val_frac", "must be < 1, got %g", t.ValFrac)
			}
		}
		if t.Source == "dapo-math" {
			if t.AnswerMode == "" {
				t.AnswerMode = "answer"
			}
			c.oneOf(p+".answer_mode", t.AnswerMode, AnswerMode)
		} else if t.AnswerMode != "" {
			c.errf(p+".answer_mode", "only used by source dapo-math, not %s; remove it", t.Source)
		}
		if t.Source == "synth-math" {
			if t.SynthMath == nil {
				t.SynthMath = &SynthMath{}
				t.SynthMath.setDefaults()
			}
			validateSynthMath(*t.SynthMath, c.section(p+".synth_math"))
		} else if t.SynthMath != nil {
			c.errf(p+".synth_math", "only used by source synth-math, not %s; remove it", t.Source)
		}
		if t.Source == "synth-code" {
			if t.SynthCode == nil {
				t.SynthCode = &SynthCode{}
				t.SynthCode.setDefaults()
			}
			validateSynthCode(*t.SynthCode, c.section(p+".synth_code"))
		} else if t.SynthCode != nil {
			c.errf(p+".synth_code", "only used by source synth-code, not %s; remove it", t.Source)
		}
		s.Tasks[name] = t
	}
}

func validateSynthMath(m SynthMath, c checker) {
	c.rangeInt("operands_min", m.OperandsMin, 2, 12)
	c.rangeInt("operands_max", m.OperandsMax, 2, 12)
	if m.OperandsMax < m.OperandsMin {
		c.errf("operands_max", "must be >= operands_min (%d), got %d", m.OperandsMin, m.OperandsMax)
	}
	c.rangeInt("value_max", m.ValueMax, 1, 1_000_000)
	if m.ValueMax >= 1 && m.OperandsMax >= 2 && math.Pow(float64(m.ValueMax), float64(m.OperandsMax)) > 1e15 {
		c.errf("value_max", "value_max^operands_max = %d^%d exceeds 1e15; results could overflow", m.ValueMax, m.OperandsMax)
	}
	checkList(c, "operators", m.Operators, Operators, nil)
}

func validateSynthCode(m SynthCode, c checker) {
	c.rangeInt("stages_min", m.StagesMin, 1, 6)
	c.rangeInt("stages_max", m.StagesMax, 1, 6)
	if m.StagesMax < m.StagesMin {
		c.errf("stages_max", "must be >= stages_min (%d), got %d", m.StagesMin, m.StagesMax)
	}
	c.rangeFloat("reduce_prob", m.ReduceProb, 0, 1, false)
	c.rangeInt("value_max", m.ValueMax, 2, 99)
	c.rangeInt("list_min", m.ListMin, 1, 10)
	c.rangeInt("list_max", m.ListMax, 1, 10)
	if m.ListMax < m.ListMin {
		c.errf("list_max", "must be >= list_min (%d), got %d", m.ListMin, m.ListMax)
	}
	c.rangeInt("shown_examples", m.ShownExamples, 1, 4)
	c.rangeInt("hidden_tests", m.HiddenTests, 1, 20)
}

// roleSet is every role type called by the matrix workflows (sa-rl runs
// are evaluated in all of them; single's generator is always present).
func (s *Spec) roleSet() []string {
	set := map[string]bool{"generator": true}
	for _, w := range s.Matrix.Workflows {
		for _, r := range WorkflowRoles[w] {
			set[r] = true
		}
	}
	var out []string
	for _, r := range Roles {
		if set[r] {
			out = append(out, r)
		}
	}
	return out
}

func validateGRPO(g GRPO, c checker, roles []string) {
	c.rangeInt("rollouts", g.Rollouts, 2, 1024)
	c.rangeInt("problems_per_step", g.ProblemsPerStep, 1, 1<<20)
	c.rangeInt("steps", g.Steps, 1, 1<<24)
	c.rangeFloat("lr", g.LR, 0, 1, true)
	c.minInt("warmup_steps", g.WarmupSteps, 0)
	if g.WarmupSteps > g.Steps && g.Steps >= 1 {
		c.errf("warmup_steps", "%d exceeds steps (%d)", g.WarmupSteps, g.Steps)
	}
	c.oneOf("schedule", g.Schedule, Schedules)
	c.rangeFloat("min_lr_ratio", g.MinLRRatio, 0, 1, false)
	c.rangeFloat("clip_low", g.ClipLow, 0, 1, true)
	c.rangeFloat("clip_high", g.ClipHigh, 0, 10, true)
	if g.ClipHigh < g.ClipLow {
		c.errf("clip_high", "must be >= clip_low (%g), got %g", g.ClipLow, g.ClipHigh)
	}
	c.oneOf("loss_agg", g.LossAgg, LossAggs)
	c.rangeFloat("temperature", g.Temperature, 0, 10, true)
	if _, ok := g.MaxNewTokens["default"]; !ok {
		c.errf("max_new_tokens.default", "missing: max_new_tokens needs a default")
	}
	allowedTok := append([]string{"default"}, roles...)
	for _, k := range sortedKeys(g.MaxNewTokens) {
		if c.oneOf("max_new_tokens."+k, k, allowedTok) {
			c.rangeInt("max_new_tokens."+k, g.MaxNewTokens[k], 1, 1<<20)
		}
	}
	for _, k := range sortedKeys(g.KLCoef) {
		if c.oneOf("kl_coef."+k, k, roles) {
			c.rangeFloat("kl_coef."+k, g.KLCoef[k], 0, 100, false)
		}
	}
	c.rangeInt("lora.rank", g.Lora.Rank, 1, 4096)
	c.rangeFloat("lora.alpha", g.Lora.Alpha, 0, 1e6, true)
	checkList(c, "lora.targets", g.Lora.Targets, LoraTarget, nil)
	c.rangeFloat("grad_clip", g.GradClip, 0, 1e6, false)
	c.rangeFloat("adam.beta1", g.Adam.Beta1, 0, 1, false)
	c.rangeFloat("adam.beta2", g.Adam.Beta2, 0, 1, false)
	if g.Adam.Beta1 >= 1 {
		c.errf("adam.beta1", "must be < 1, got %g", g.Adam.Beta1)
	}
	if g.Adam.Beta2 >= 1 {
		c.errf("adam.beta2", "must be < 1, got %g", g.Adam.Beta2)
	}
	c.rangeFloat("adam.eps", g.Adam.Eps, 0, 1, true)
	c.rangeFloat("adam.weight_decay", g.Adam.WeightDecay, 0, 1, false)
	c.minInt("samples_per_step", g.SamplesPerStep, 0)
}

func validateWorkflow(w WorkflowSettings, c checker) {
	c.rangeInt("n_votes", w.NVotes, 2, 64)
	c.rangeInt("max_iterations", w.MaxIterations, 0, 64)
	c.rangeInt("max_subtasks", w.MaxSubtasks, 1, 64)
}

// validateWorkflowUse refuses workflow knobs set for workflows that are not
// in the matrix: a knob is never accepted and then ignored.
func validateWorkflowUse(s *Spec, c checker) {
	uses := map[string]string{"n_votes": "voting", "max_iterations": "eval-opt", "max_subtasks": "orch-workers"}
	for _, k := range []string{"max_iterations", "max_subtasks", "n_votes"} {
		if slices.Contains(s.Matrix.Workflows, uses[k]) {
			continue
		}
		if _, set := c.org["workflow."+k]; set {
			c.errf("workflow."+k, "only used by workflow %s, which is not in matrix.workflows; remove it", uses[k])
		}
		for _, t := range sortedKeys(s.Tasks) {
			n := s.Tasks[t].Workflow
			if n == nil || n.Kind != yaml.MappingNode {
				continue
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					c.errs.add(n.Content[i].Line, "tasks."+t+".workflow."+k,
						"only used by workflow %s, which is not in matrix.workflows; remove it", uses[k])
				}
			}
		}
	}
}

func validateEval(e Eval, c checker) {
	c.minInt("every", e.Every, 1)
	c.minInt("val_size", e.ValSize, 0)
	c.rangeInt("samples", e.Samples, 1, 64)
}

func validateAnalysis(a Analysis, c checker) {
	c.rangeFloat("cliff_abs", a.CliffAbs, 0, 1, false)
	c.rangeFloat("cliff_rel", a.CliffRel, 0, 1, false)
	c.rangeFloat("amp_k", a.AmpK, 1, 1e6, false)
	c.rangeFloat("amp_cos", a.AmpCos, -1, 1, false)
	c.rangeFloat("early_frac", a.EarlyFrac, 0, 1, true)
	c.rangeFloat("capture_format_drop", a.CaptureFormatDrop, 0, 1, false)
	c.rangeInt("ngram", a.NGram, 1, 16)
	c.rangeInt("bootstrap", a.Bootstrap, 1, 1_000_000)
	c.rangeFloat("ci", a.CI, 0, 1, true)
	if a.CI >= 1 {
		c.errf("ci", "must be < 1, got %g", a.CI)
	}
}

// pretrainRoleKeys name the shares of PretrainRoles.Weights.
var pretrainRoleKeys = []string{"generator", "reviser", "evaluator", "aggregator", "orchestrator", "worker", "synthesizer"}

func validatePretrain(p Pretrain, c checker) {
	if _, ok := p.Steps["default"]; !ok {
		c.errf("steps", "needs a `default` entry")
	}
	for _, k := range sortedKeys(p.Steps) {
		c.rangeInt("steps."+k, p.Steps[k], 1, 1_000_000)
	}
	c.rangeInt("batch_size", p.BatchSize, 1, 4096)
	c.rangeFloat("lr", p.LR, 0, 1, true)
	c.minInt("warmup_steps", p.WarmupSteps, 0)
	c.rangeFloat("min_lr_ratio", p.MinLRRatio, 0, 1, false)
	c.rangeFloat("weight_decay", p.WeightDecay, 0, 0.999, false)
	c.rangeFloat("grad_clip", p.GradClip, 0, 1e9, false)
	c.rangeFloat("beta1", p.Beta1, 0, 0.999999, false)
	c.rangeFloat("beta2", p.Beta2, 0, 0.999999, false)
	sum := 0.0
	for i, v := range p.Roles.Weights() {
		c.rangeFloat("roles."+pretrainRoleKeys[i], v, 0, 1e6, false)
		if v > 0 {
			sum += v
		}
	}
	if !(sum > 0) {
		c.errf("roles", "at least one role needs a positive share")
	}
	n := p.Noise
	c.rangeFloat("noise.slip", n.Slip, 0, 1, false)
	c.rangeFloat("noise.wrong_verdict", n.WrongVerdict, 0, 1, false)
	c.rangeFloat("noise.random_selection", n.RandomSelection, 0, 1, false)
	c.rangeFloat("noise.too_many_strategies", n.TooManyStrategies, 0, 1, false)
	c.rangeFloat("noise.malformed", n.Malformed, 0, 1, false)
	c.rangeFloat("candidate_correct", p.CandidateCorrect, 0, 1, false)
}

// resolvePath expands ${VAR} and ${VAR:-default} and makes the result
// absolute against the folder of the spec file.
func resolvePath(specFile, p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); {
		j := strings.Index(p[i:], "${")
		if j < 0 {
			b.WriteString(p[i:])
			break
		}
		b.WriteString(p[i : i+j])
		i += j + 2
		k := strings.IndexByte(p[i:], '}')
		if k < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", p)
		}
		expr := p[i : i+k]
		i += k + 1
		name, def, hasDef := strings.Cut(expr, ":-")
		if !envNameRe.MatchString(name) {
			return "", fmt.Errorf("bad variable name %q in %q", name, p)
		}
		val, ok := os.LookupEnv(name)
		if !ok || val == "" {
			if !hasDef {
				return "", fmt.Errorf("environment variable %s is not set (used in %q)", name, p)
			}
			val = def
		}
		b.WriteString(val)
	}
	out := b.String()
	if !filepath.IsAbs(out) {
		out = filepath.Join(filepath.Dir(specFile), out)
	}
	return filepath.Clean(out), nil
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
