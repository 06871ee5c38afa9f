package spec

import (
	"fmt"
	"maps"
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

// isSet reports whether the spec sets rel (in the section or in an
// override of it), as opposed to leaving it at its default.
func (c checker) isSet(rel string) bool {
	_, ok := c.org[rel]
	return ok
}

// defaultNote is " (the default)" for a value the spec leaves at its
// default, so that an error about it says the user never wrote it.
func (c checker) defaultNote(rel string) string {
	if c.isSet(rel) {
		return ""
	}
	return " (the default)"
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
	if hint := didYouMean(v, allowed); hint != "" {
		c.errf(rel, "%q is not allowed;%s (allowed values: %s)", v, hint, strings.Join(allowed, ", "))
		return false
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
	resolvePretrains(s, errs)
	validateArms(s, c)
	validateRoutings(s, c)
	validateWorkflowUse(s, c)
	// Every (task, scale) cell of the main matrix and of each arm, with its
	// overrides applied.
	for _, arm := range s.ArmNames() {
		mx := s.ArmMatrix(arm)
		for _, task := range mx.Tasks {
			t, okT := s.Tasks[task]
			for _, scale := range mx.Scales {
				m, okM := s.Models[scale]
				if !okT || !okM {
					continue
				}
				g, w, gc, wc := s.cell(arm, task, scale, t, m, errs)
				// An arm inherits the main grpo section, whose per-role keys
				// may name roles of the main matrix's workflows that the
				// arm's do not call (a KL anchor on eval-opt's evaluator in
				// a voting-only arm): they are allowed there and have no
				// effect on its runs.
				roles := s.roleSet(arm)
				if arm != "" {
					if main := s.roleSet(""); roles != nil && main != nil {
						for _, r := range main {
							if !slices.Contains(roles, r) {
								roles = append(roles, r)
							}
						}
					}
				}
				validateGRPO(g, gc, roles)
				validateWorkflow(w, wc)
				if mix := s.PretrainFor(scale).NVotesMix; len(mix) > 0 && m.Tiny != nil && !slices.Contains(mix, w.NVotes) {
					key := "pretrain.n_votes_mix"
					if m.Pretrain != nil {
						key = "models." + scale + ".pretrain.n_votes_mix"
					}
					wc.errf("n_votes", "%d is not in %s %v: the base model of scale %s would never see that many candidates (add it to the mix)", w.NVotes, key, mix, scale)
				}
				s.checkArmBase(arm, scale, m, w, wc)
				if arm == "" && t.ValSize > 0 && s.Eval.ValSize > t.ValSize {
					c.errf("eval.val_size", "%d exceeds the validation split of task %s (tasks.%s.val_size = %d)",
						s.Eval.ValSize, task, task, t.ValSize)
				}
				if arm == "" && t.ValSize > 0 && s.Eval.FirstValSize > t.ValSize {
					c.errf("eval.first_val_size", "%d exceeds the validation split of task %s (tasks.%s.val_size = %d)",
						s.Eval.FirstValSize, task, task, t.ValSize)
				}
			}
		}
	}
}

// resolvePretrains applies each tiny model's pretrain overrides to the
// pretrain section and validates the result (Spec.PretrainFor).
func resolvePretrains(s *Spec, errs *errList) {
	d := &decoder{errs: errs}
	for _, scale := range sortedKeys(s.Models) {
		m := s.Models[scale]
		if m.Pretrain == nil {
			continue
		}
		if m.Tiny == nil {
			errs.add(m.Pretrain.Line, "models."+scale+".pretrain", "only a tiny shape is pretrained; model %s is a checkpoint", scale)
			continue
		}
		p := s.Pretrain.Clone()
		porg := sub(s.org, "pretrain")
		delete(porg, "")
		d.decode(m.Pretrain, reflect.ValueOf(&p).Elem(), "models."+scale+".pretrain", "", porg)
		delete(porg, "")
		validatePretrain(p, checker{errs: errs, org: porg, prefix: "models." + scale + ".pretrain", line: m.Pretrain.Line})
		if s.pretrains == nil {
			s.pretrains = map[string]Pretrain{}
		}
		s.pretrains[scale] = p
	}
}

// cell merges the grpo and workflow sections with the overrides of a model,
// a task and an arm (in that order; arm "" is the main matrix) and returns them with checkers that point at
// the lines that set each value.
func (s *Spec) cell(arm, task, scale string, t Task, m Model, errs *errList) (GRPO, WorkflowSettings, checker, checker) {
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
	s.armOverride(arm, &g, &w, gorg, worg, d)
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

// resolvePath expands ${VAR} and ${VAR:-default} and makes the result
// absolute. The one rule for relative results: a path that starts with a
// variable that is set takes the variable's value as the shell would, so a
// relative value (MARLOW_DATA=data) is relative to the current folder,
// exactly as in a shell command such as `make reproduce`'s engine-check
// ("$MARLOW_MODELS/Qwen3-0.6B"); anything written in the spec itself, a
// ${VAR:-default} default included, is relative to the spec's folder.
func resolvePath(specFile, p string) (string, error) {
	fromEnv := false
	var b strings.Builder
	for i := 0; i < len(p); {
		j := strings.Index(p[i:], "${")
		if j < 0 {
			b.WriteString(p[i:])
			break
		}
		start := i + j // where this ${ begins
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
		} else if start == 0 {
			fromEnv = true // the path starts with the variable's value
		}
		b.WriteString(val)
	}
	out := b.String()
	if !filepath.IsAbs(out) {
		if fromEnv {
			abs, err := filepath.Abs(out)
			if err != nil {
				return "", fmt.Errorf("resolve %q against the current folder: %w", p, err)
			}
			return abs, nil
		}
		out = filepath.Join(filepath.Dir(specFile), out)
	}
	return filepath.Clean(out), nil
}

// resolveCommand expands ${ENV} in an interpreter setting; a result with a
// path separator is a file path (relative to the spec), otherwise a command
// looked up on PATH when it runs.
func resolveCommand(specFile, p string) (string, error) {
	if !strings.Contains(p, "${") && !strings.ContainsRune(p, '/') {
		return p, nil
	}
	abs, err := resolvePath(specFile, p)
	if err != nil {
		return "", err
	}
	if rel := filepath.Base(abs); !strings.ContainsRune(expandOnly(p), '/') {
		return rel, nil
	}
	return abs, nil
}

// expandOnly expands ${ENV} references without resolving the result as a path.
func expandOnly(p string) string {
	return os.Expand(p, func(expr string) string {
		name, def, _ := strings.Cut(expr, ":-")
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	})
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
