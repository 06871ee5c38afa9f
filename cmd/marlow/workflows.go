package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow/declfile"
)

func newWorkflowsCmd() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "workflows [SPEC]",
		Short: "List the workflows: their stages, role kinds, loop and final answer",
		Long: `workflows lists the built-in workflows, then those a spec's workflow_files
declare (with SPEC) or the declaration files given with --file, each with its
stages in calling order (name, role kind, role, the pretraining teacher the
tiny models learn the role from, agent count, what the stage reads or sees), its loop, the stage whose output is final, its
settings, and whether a stage runs several agents of one role (the structure
claim c's same-role rule is about). It ends with the role kinds. A malformed
declaration is refused with its file:line and what to do
(docs/extending.md says how to write one).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws := make([]study.Workflow, 0, len(study.Workflows))
			for _, name := range study.Workflows {
				ws = append(ws, study.WorkflowOf(name))
			}
			if len(args) == 1 {
				s, err := spec.Load(args[0])
				if err != nil {
					return err
				}
				ws = append(ws, s.Declared()...)
			}
			for _, f := range files {
				w, err := declfile.Load(f)
				if err != nil {
					return err
				}
				ws = append(ws, w)
			}
			return printWorkflows(cmd.OutOrStdout(), ws)
		},
	}
	cmd.Flags().StringArrayVar(&files, "file", nil, "a workflow declaration file to check and list (repeatable)")
	return cmd
}

// printWorkflows writes the listing of ws, then the role kinds.
func printWorkflows(out io.Writer, ws []study.Workflow) error {
	var b strings.Builder
	for _, w := range ws {
		from := "built-in"
		if w.Source != "" {
			from = w.Source
		}
		fmt.Fprintf(&b, "%s (%s)\n", w.Name, from)
		if w.Doc != "" {
			fmt.Fprintf(&b, "  %s\n", w.Doc)
		}
		for i, s := range w.Stages {
			fmt.Fprintf(&b, "  stage %d %s: %s, role %s (tiny models' teacher: %s)%s\n", i+1, s.Name, s.Kind, s.Role, pretrain.TeacherOf(s.Role), stageDetail(w, s))
		}
		if l := w.Loop; l != nil {
			if l.Until != "" {
				fmt.Fprintf(&b, "  loop: stages %s..%s, until %s says Correct, at most %s rounds\n", l.First, l.Last, l.Until, l.Max)
			} else {
				fmt.Fprintf(&b, "  loop: stages %s..%s, %s rounds\n", l.First, l.Last, l.Max)
			}
		}
		same := "no"
		if w.SameRoleAgents() {
			same = "yes"
		}
		settings := strings.Join(w.Settings(), ", ")
		if settings == "" {
			settings = "none"
		}
		fmt.Fprintf(&b, "  final: %s (the %s's answer); roles: %s; settings: %s; several agents of one role: %s\n\n",
			w.Final, w.Answerer(), strings.Join(w.Roles(), ", "), settings, same)
	}
	b.WriteString("role kinds:\n")
	for _, k := range study.Kinds() {
		fmt.Fprintf(&b, "  %-11s %s\n", k.Kind, k.Doc)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// stageDetail says how many agents a stage runs and what it reads or
// sees.
func stageDetail(w study.Workflow, s study.Stage) string {
	var parts []string
	switch {
	case s.Agents.Set():
		parts = append(parts, s.Agents.String()+" agents")
	case s.PerStrategy != "":
		parts = append(parts, "one agent per strategy of "+s.PerStrategy)
	}
	if s.Most.Set() {
		parts = append(parts, "at most "+s.Most.String()+" strategies")
	}
	if s.Reads != "" {
		parts = append(parts, "reads "+s.Reads)
	}
	if s.Revises {
		parts = append(parts, "later rounds see its previous answer and "+w.Loop.Until+"'s feedback")
	}
	if s.Others {
		parts = append(parts, "later rounds see the other agents' previous answers")
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}
