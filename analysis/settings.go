package analysis

import (
	"fmt"
	"maps"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
)

// seedSettings are the top-level keys of a stored run config that differ
// between the seeds of one condition by construction: the run's identity
// and its seeds.
var seedSettings = map[string]bool{"id": true, "seed_index": true, "seed": true, "val_seed": true}

// placeSettings are paths: where a machine keeps a checkpoint or a data
// file, which may differ between the machines that ran a condition's seeds.
// The files' contents are compared through the provenance file hashes.
var placeSettings = map[string]bool{"model.checkpoint": true, "data.path": true, "data.test_path": true}

// maxSettingDiffs caps the differing settings an error lists.
const maxSettingDiffs = 4

// checkSettings checks that the seeds of each condition (workflow trained
// or evaluated in, task, scale, arm, condition) were run with the same settings
// apart from their identity and seeds. Otherwise a cell's mean and interval
// would mix recipes, for example after a spec changed between seeds and the
// runs of the old recipe were not redone. Runs whose manifest stores no
// config are not compared. runs are sorted by id.
func checkSettings(runs []*runlog.Run) error {
	type condKey struct{ workflow, task, scale, arm, cond string }
	type settings struct {
		run    *runlog.Run
		leaves map[string]string
	}
	first := map[condKey]settings{}
	for _, r := range runs {
		m := &r.Manifest
		if m.Config == nil {
			continue
		}
		leaves, err := runlog.ConfigLeaves(m.Config)
		if err != nil {
			return fmt.Errorf("analysis: reading the settings of run %q (%s): %w", m.RunID, r.Dir, err)
		}
		maps.DeleteFunc(leaves, func(path, _ string) bool { return seedOrPlace(path) })
		k := condKey{m.Workflow, m.Task, m.Scale, m.Arm, m.Condition}
		ref, ok := first[k]
		if !ok {
			first[k] = settings{r, leaves}
			continue
		}
		diffs := runlog.LeavesDiff(ref.leaves, leaves)
		if len(diffs) == 0 {
			continue
		}
		more := ""
		if len(diffs) > maxSettingDiffs {
			more = fmt.Sprintf(" and %d more", len(diffs)-maxSettingDiffs)
			diffs = diffs[:maxSettingDiffs]
		}
		return fmt.Errorf("analysis: runs %q (%s) and %q (%s) are seeds of one condition but were run with different settings (%s%s); "+
			"a condition's mean over seeds would mix them: redo the runs of the old settings (marlow run --redo) or leave them out",
			ref.run.Manifest.RunID, ref.run.Dir, m.RunID, r.Dir, strings.Join(diffs, "; "), more)
	}
	return nil
}

// seedOrPlace reports whether a leaf path of runlog.ConfigLeaves is a seed
// setting (or lies under one) or a place setting.
func seedOrPlace(path string) bool {
	top, _, _ := strings.Cut(path, ".")
	return seedSettings[top] || placeSettings[path]
}
