package analysis

import (
	"fmt"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow/declfile"
)

// registerDeclared registers the workflows the runs' configs declare
// (a spec's workflow files, recorded with their text in each run config's
// workflow_declarations), so that a study of runs read back without their
// spec (an archive) knows those workflows' roles and structure. A
// declaration that does not parse, or one that differs from a workflow
// registered under its name, is an error naming the run.
func registerDeclared(runs []*runlog.Run) error {
	for _, r := range runs {
		var c struct {
			Declarations []struct {
				Workflow, File, Text string
			} `json:"workflow_declarations"`
		}
		if err := r.Manifest.DecodeConfig(&c); err != nil {
			return fmt.Errorf("analysis: %s: workflow_declarations: %w", r.Dir, err)
		}
		for _, d := range c.Declarations {
			w, err := declfile.Parse(d.File, []byte(d.Text))
			if err == nil {
				err = study.Register(w)
			}
			if err != nil {
				return fmt.Errorf("analysis: run %q (%s): the declaration of workflow %s: %w", r.Manifest.RunID, r.Dir, d.Workflow, err)
			}
		}
	}
	return nil
}
