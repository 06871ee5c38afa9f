// Validation of each section of a spec: the matrix, models, tasks, grpo,
// workflow, eval and analysis sections (pretrain is in pretrain.go).

package spec

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/dapo"
	"github.com/marlowlab/marlow/datasets/deepcoder"
	"github.com/marlowlab/marlow/harness/study"
)

func validateMatrix(s *Spec, c checker) {
	if _, ok := s.org["matrix"]; !ok {
		return
	}
	for _, k := range []string{"workflows", "tasks", "scales", "conditions"} {
		if _, ok := s.org["matrix."+k]; !ok {
			c.errf("matrix."+k, "required key is missing")
		}
	}
	if allowed := s.allowedWorkflows(); allowed != nil {
		checkList(c, "matrix.workflows", s.Matrix.Workflows, allowed, nil)
	} else {
		checkList(c, "matrix.workflows", s.Matrix.Workflows, nil, taskNameRe)
	}
	checkList(c, "matrix.tasks", s.Matrix.Tasks, nil, taskNameRe)
	checkList(c, "matrix.scales", s.Matrix.Scales, nil, scaleNameRe)
	checkList(c, "matrix.conditions", s.Matrix.Conditions, s.conditionNames(), nil)
	for i, t := range s.Matrix.Tasks {
		if _, ok := s.Tasks[t]; ok {
			continue
		}
		if !slices.Contains(Sources, t) && taskNameRe.MatchString(t) {
			c.errf(fmt.Sprintf("matrix.tasks[%d]", i), "unknown task %q:%s define it under tasks: or use a built-in source (%s)",
				t, didYouMean(t, Sources), strings.Join(Sources, ", "))
		}
	}
	for i, sc := range s.Matrix.Scales {
		if _, ok := s.Models[sc]; !ok && scaleNameRe.MatchString(sc) {
			c.errf(fmt.Sprintf("matrix.scales[%d]", i), "scale %q has no model:%s add models.%s with a checkpoint or a tiny shape", sc, didYouMean(sc, sortedKeys(s.Models)), sc)
		}
	}
}

func validateModels(s *Spec, c checker) {
	for _, name := range sortedKeys(s.Models) {
		m := s.Models[name]
		p := "models." + name
		if !slices.Contains(s.Scales(), name) {
			c.errf(p, "scale %q is not in matrix.scales (%s) nor in an arm's; remove it or add it to the matrix", name, strings.Join(s.Matrix.Scales, ", "))
		}
		c.oneOf(p+".engine", m.Engine, Engines)
		if m.Engine == "torch" {
			if m.Python != "" {
				if py, err := resolveCommand(s.File, m.Python); err != nil {
					c.errf(p+".python", "%v", err)
				} else {
					m.Python = py
				}
			}
			if m.Device != "" {
				c.oneOf(p+".device", m.Device, Devices)
			}
			if m.DType != "" {
				c.oneOf(p+".dtype", m.DType, DTypes)
			}
			c.rangeInt(p+".gen_tokens", m.GenTokens, 0, 1<<30)
			c.rangeInt(p+".train_tokens", m.TrainTokens, 0, 1<<30)
			if m.GenBackend != "" {
				c.oneOf(p+".gen_backend", m.GenBackend, GenBackends)
			}
			if m.KVCacheFraction != 0 && !(m.KVCacheFraction > 0 && m.KVCacheFraction < 1) {
				c.errf(p+".kv_cache_fraction", "%v is not in (0, 1); it is the share of free GPU memory the KV pool takes (default 0.85)", m.KVCacheFraction)
			}
		} else {
			for key, set := range map[string]bool{"python": m.Python != "", "device": m.Device != "", "dtype": m.DType != "",
				"gen_tokens": m.GenTokens != 0, "train_tokens": m.TrainTokens != 0, "gen_backend": m.GenBackend != "",
				"kv_cache_fraction": m.KVCacheFraction != 0} {
				if set {
					c.errf(p+"."+key, "is a setting of the torch engine; this model's engine is %q", m.Engine)
				}
			}
		}
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
				c.errf(p+".val_frac", "only used by file sources (dapo-math, deepcoder, file), not %s; remove it", t.Source)
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
		validateFileOptions(s, &t, p, c)
		validateFileTask(t, p, c)
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

// validateFileTask checks the file section of a task: required by source
// file (with its mapping's rules, from package filetask), refused by the
// others.
func validateFileTask(t Task, p string, c checker) {
	if t.Source != datasets.SourceFile {
		if t.File != nil {
			c.errf(p+".file", "only used by source file, not %s; remove it", t.Source)
		}
		return
	}
	if t.File == nil {
		c.errf(p+".file", "missing: source file needs a field mapping, e.g. file: {verifier: answer, problem: question, answer: answer}; see docs/extending.md")
		return
	}
	for _, e := range t.File.Check() {
		c.errf(p+".file."+e.Key, "%s", e.Msg)
	}
	if t.Path != "" {
		if _, err := t.File.FormatOf(t.Path); err != nil {
			c.errf(p+".file.format", "%v", err)
		}
	}
}

// validateFileOptions checks the keys of one file source: language
// (dapo-math), subsets and test_path (deepcoder).
func validateFileOptions(s *Spec, t *Task, p string, c checker) {
	if t.Source == datasets.SourceDAPOMath {
		if t.Language == "" {
			t.Language = dapo.LangAll
		}
		c.oneOf(p+".language", t.Language, []string{dapo.LangAll, dapo.LangEN, dapo.LangCN})
	} else if t.Language != "" {
		c.errf(p+".language", "only used by source dapo-math, not %s; remove it", t.Source)
	}
	if t.Source != datasets.SourceDeepCoder {
		if len(t.Subsets) > 0 {
			c.errf(p+".subsets", "only used by source deepcoder, not %s; remove it", t.Source)
		}
		if _, set := c.org[p+".test_path"]; set {
			c.errf(p+".test_path", "only used by source deepcoder, not %s; remove it", t.Source)
		}
		return
	}
	checkList(c, p+".subsets", t.Subsets, deepcoder.Subsets, nil)
	if _, set := c.org[p+".test_path"]; !set {
		return
	}
	if t.TestPath == "" {
		c.errf(p+".test_path", "must not be empty")
	} else if abs, err := resolvePath(s.File, t.TestPath); err != nil {
		c.errf(p+".test_path", "%v", err)
	} else {
		t.TestPath = abs
	}
	if _, set := c.org[p+".val_frac"]; set {
		c.errf(p+".val_frac", "not used with test_path (the test shards are the validation set); remove it")
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

// roleSet is every role type called by the workflows of an arm ("" is the
// main matrix; sa-rl runs are evaluated in all of them; single's generator
// is always present).
// It is nil when the arm's matrix names a workflow that does not exist:
// that name is already an error (matrix.workflows), and the role-keyed
// settings are then not judged against a role set that lacks its roles,
// which would add an error for every role the intended workflow calls.
func (s *Spec) roleSet(arm string) []string {
	set := map[string]bool{"generator": true}
	for _, w := range s.ArmMatrix(arm).Workflows {
		if !slices.Contains(s.workflowNames(), w) {
			return nil
		}
		for _, r := range study.WorkflowOf(w).Roles() {
			set[r] = true
		}
	}
	var out []string
	for _, r := range s.roleNames() {
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
		if c.isSet("warmup_steps") || !c.isSet("steps") {
			c.errf("warmup_steps", "%d%s exceeds steps (%d)", g.WarmupSteps, c.defaultNote("warmup_steps"), g.Steps)
		} else {
			// The warmup is the default and the steps are the user's: point
			// at the line the user wrote.
			c.errf("steps", "%d is below warmup_steps (%d, the default): set %s to at most %d", g.Steps, g.WarmupSteps, join(c.prefix, "warmup_steps"), g.Steps)
		}
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
	// roles is nil when a workflow name is wrong (roleSet): the values are
	// checked, their role names are not.
	allowedTok := append([]string{"default"}, roles...)
	for _, k := range sortedKeys(g.MaxNewTokens) {
		if roles == nil || c.oneOf("max_new_tokens."+k, k, allowedTok) {
			c.rangeInt("max_new_tokens."+k, g.MaxNewTokens[k], 1, 1<<20)
		}
	}
	for _, k := range sortedKeys(g.KLCoef) {
		if roles == nil || c.oneOf("kl_coef."+k, k, roles) {
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
	if g.Coherence != nil {
		if !(g.Coherence.Lambda > 0 && g.Coherence.Lambda <= 1) {
			c.errf("coherence.lambda", "must be in (0, 1] (an aligned gradient is scaled by 1 - lambda; set it, there is no default), got %g", g.Coherence.Lambda)
		}
		if !(g.Coherence.EMADecay >= 0 && g.Coherence.EMADecay < 1) {
			c.errf("coherence.ema_decay", "must be in [0, 1) (the EMA keeps ema_decay of its past each step), got %g", g.Coherence.EMADecay)
		}
		if f := g.Coherence.Form; f != "" && f != study.CoherenceStep {
			c.errf("coherence.form", "must be %s (the factors multiply the optimizer's step) or absent (the paper's form: they multiply each role's gradient), got %q", study.CoherenceStep, f)
		}
	}
}

func validateWorkflow(w WorkflowSettings, c checker) {
	c.rangeInt("n_votes", w.NVotes, 2, 64)
	c.rangeInt("max_iterations", w.MaxIterations, 0, 64)
	c.rangeInt("max_subtasks", w.MaxSubtasks, 1, 64)
}

// validateWorkflowUse refuses workflow knobs set for workflows that are not
// in the matrix: a knob is never accepted and then ignored.
func validateWorkflowUse(s *Spec, c checker) {
	for _, wf := range s.allWorkflows() {
		if !slices.Contains(s.workflowNames(), wf) {
			return // a misspelt workflow is its own error; which knobs it uses is unknown
		}
	}
	for _, k := range []string{study.SettingMaxIterations, study.SettingMaxSubtasks, study.SettingNVotes} {
		if slices.ContainsFunc(s.allWorkflows(), func(w string) bool { return slices.Contains(study.WorkflowOf(w).Settings(), k) }) {
			continue
		}
		users := settingUsers(k)
		if _, set := c.org["workflow."+k]; set {
			c.errf("workflow."+k, "only used by workflow %s, which is not in matrix.workflows; remove it", users)
		}
		for _, t := range sortedKeys(s.Tasks) {
			n := s.Tasks[t].Workflow
			if n == nil || n.Kind != yaml.MappingNode {
				continue
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					c.errs.add(n.Content[i].Line, "tasks."+t+".workflow."+k,
						"only used by workflow %s, which is not in matrix.workflows; remove it", users)
				}
			}
		}
	}
}

func validateEval(e Eval, c checker) {
	c.minInt("every", e.Every, 1)
	c.minInt("val_size", e.ValSize, 0)
	c.rangeInt("samples", e.Samples, 1, 64)
	if e.FirstValSize < 0 || (e.FirstValSize > 0 && e.ValSize > 0 && e.FirstValSize <= e.ValSize) {
		c.errf("first_val_size", "%d: want 0 (the first validation uses val_size's problems) or more than val_size (%d)", e.FirstValSize, e.ValSize)
	} else if e.FirstValSize > 0 && e.ValSize == 0 {
		c.errf("first_val_size", "%d with val_size 0: every validation already uses the whole validation split; set val_size below it", e.FirstValSize)
	}
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
