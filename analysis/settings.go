package analysis

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
)

// seedSettings are the keys of a stored run config that differ between the
// seeds of one condition by construction: the run's identity and its seeds.
var seedSettings = map[string]bool{"id": true, "seed_index": true, "seed": true, "val_seed": true}

// placeSettings are paths: where a machine keeps a checkpoint or a data
// file, which may differ between the machines that ran a condition's seeds.
// The files' contents are compared through the provenance file hashes.
var placeSettings = map[string]bool{"model.checkpoint": true, "data.path": true, "data.test_path": true}

// maxSettingDiffs caps the differing settings an error lists.
const maxSettingDiffs = 4

// checkSettings checks that the seeds of each condition (workflow trained
// or evaluated in, task, scale, condition) were run with the same settings
// apart from their identity and seeds. Otherwise a cell's mean and interval
// would mix recipes, for example after a spec changed between seeds and the
// runs of the old recipe were not redone. Runs whose manifest stores no
// config are not compared. runs are sorted by id.
func checkSettings(runs []*runlog.Run) error {
	type condKey struct{ workflow, task, scale, cond string }
	first := map[condKey]*runlog.Run{}
	for _, r := range runs {
		m := r.Manifest
		if m.Config == nil {
			continue
		}
		k := condKey{m.Workflow, m.Task, m.Scale, m.Condition}
		ref, ok := first[k]
		if !ok {
			first[k] = r
			continue
		}
		var diffs []string
		settingsDiff("", ref.Manifest.Config, m.Config, &diffs)
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
			ref.Manifest.RunID, ref.Dir, m.RunID, r.Dir, strings.Join(diffs, "; "), more)
	}
	return nil
}

// settingsDiff appends "path: a vs b" for every setting where the decoded
// configs a and b differ, in key order, skipping seedSettings at the top
// and placeSettings.
func settingsDiff(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if (path == "" && seedSettings[k]) || placeSettings[p] {
				continue
			}
			settingsDiff(p, am[k], bm[k], out)
		}
		return
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil || string(ja) != string(jb) {
		*out = append(*out, fmt.Sprintf("%s: %s vs %s", path, jsonOrAbsent(a, ja), jsonOrAbsent(b, jb)))
	}
}

// jsonOrAbsent shows a setting's value, or "absent" when one config lacks it.
func jsonOrAbsent(v any, j []byte) string {
	if v == nil {
		return "absent"
	}
	return string(j)
}
