package spec

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow/declfile"
)

// loadWorkflowFiles reads the spec's workflow files (relative to its
// folder) and registers their declarations (study.Register), so that the
// matrix and arms may name them; a malformed file is refused with its own
// file:line.
func loadWorkflowFiles(s *Spec, c checker) {
	for i, f := range s.WorkflowFiles {
		rel := fmt.Sprintf("workflow_files[%d]", i)
		path := f
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(s.File), path)
		}
		w, err := declfile.Load(path)
		var faults declfile.Errors
		switch {
		case errors.As(err, &faults):
			for _, f := range faults {
				c.errf(rel, "%v", f)
			}
			s.declFailed = true
			continue
		case err != nil:
			c.errf(rel, "%v", err)
			s.declFailed = true
			continue
		}
		if slices.ContainsFunc(s.declared, func(d study.Workflow) bool { return d.Name == w.Name }) {
			c.errf(rel, "workflow %s is declared by an earlier file too: give each workflow its own name", w.Name)
			continue
		}
		if err := study.Register(w); err != nil {
			c.errf(rel, "%s: %v", path, err)
			s.declFailed = true
			continue
		}
		s.declared = append(s.declared, w)
	}
}

// workflowNames lists the workflows the spec may name: the built-in ones,
// then its workflow files'.
func (s *Spec) workflowNames() []string {
	out := slices.Clone(Workflows)
	for _, w := range s.declared {
		out = append(out, w.Name)
	}
	return out
}

// allowedWorkflows is what matrix.workflows is checked against: the
// workflow names, or nothing when a workflow file failed to load (its
// errors say why, and the name it would have declared is unknown).
func (s *Spec) allowedWorkflows() []string {
	if s.declFailed {
		return nil
	}
	return s.workflowNames()
}

// roleNames lists the role types the spec's workflows may call: the
// built-in ones, then those its workflow files add.
func (s *Spec) roleNames() []string {
	out := slices.Clone(Roles)
	for _, w := range s.declared {
		for _, r := range w.Roles() {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// settingUsers names the built-in workflows that read a workflow setting.
func settingUsers(key string) string {
	var out []string
	for _, w := range Workflows {
		if slices.Contains(study.WorkflowOf(w).Settings(), key) {
			out = append(out, w)
		}
	}
	return strings.Join(out, ", ")
}

// declarationsOf returns the declarations of the named workflows that a
// workflow file declared, in name order.
func (s *Spec) declarationsOf(workflows []string) []Declaration {
	var out []Declaration
	for _, w := range s.declared {
		if slices.Contains(workflows, w.Name) {
			out = append(out, Declaration{Workflow: w.Name, File: filepath.Base(w.Source), Text: w.Text})
		}
	}
	slices.SortFunc(out, func(a, b Declaration) int { return strings.Compare(a.Workflow, b.Workflow) })
	return out
}

// Declared returns the spec's workflow files' declarations, in file order.
func (s *Spec) Declared() []study.Workflow { return slices.Clone(s.declared) }
