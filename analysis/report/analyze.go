package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/marlowlab/marlow/analysis"
)

// WriteAnalysisJSON writes the rows of summary.parquet as a JSON array,
// undefined values as null.
func WriteAnalysisJSON(w io.Writer, st *analysis.Study) error {
	var rows []map[string]any
	for _, r := range SummaryRows(st) {
		m := map[string]any{"kind": r.Kind, "experiment": r.Experiment, "workflow": r.Workflow, "task": r.Task,
			"scale": r.Scale, "condition": r.Condition, "run_id": r.RunID, "status": r.Status, "ci_method": r.CIMethod,
			"dominant_role": r.DominantRole, "seed_index": r.SeedIndex, "seeds": r.Seeds, "problems": r.Problems}
		for i, name := range SummaryMetrics {
			if v := r.Values[i]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				m[name] = v
			} else {
				m[name] = nil
			}
		}
		rows = append(rows, m)
	}
	data, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// WriteAnalysisTable writes one line per run view: base, ceiling and its
// step, final, floor, drop, AUC, the terminal-cliff verdict and the
// failure-mode detectors that fired, then the skipped runs.
func WriteAnalysisTable(w io.Writer, st *analysis.Study) error {
	fmt.Fprintf(w, "experiment %s: %d run views, %d cells\n", st.Experiment, len(st.Runs), len(st.Cells))
	fmt.Fprintf(w, "%-36s %-14s %-6s %5s %7s %13s %7s %7s %7s %7s %-5s %s\n", "run", "workflow", "cond", "seed", "base", "ceiling@step", "final", "floor", "drop", "auc", "cliff", "detectors")
	for _, r := range st.Runs {
		m := r.Metrics
		cliff := "no"
		if m.Cliff.Cliff {
			cliff = fmt.Sprintf("@%d", m.Cliff.FallStep)
		}
		fmt.Fprintf(w, "%-36s %-14s %-6s %5d %7.3f %7.3f@%-5d %7.3f %7.3f %7.3f %7.3f %-5s %s\n", r.RunID, r.Cell.Workflow, r.Condition,
			r.SeedIndex, m.Base, m.Ceiling, m.CeilingStep, m.Final, m.Floor, m.Drop, m.AUC, cliff, strings.Join(detectors(r), "; "))
	}
	for _, s := range st.Skipped {
		if _, err := fmt.Fprintf(w, "skipped %s\n", s); err != nil {
			return err
		}
	}
	return nil
}

// detectors names the failure-mode detectors that fired on a run view.
func detectors(r *analysis.RunResult) []string {
	var det []string
	for _, a := range r.Amplification {
		if a.BeforeCliff {
			det = append(det, fmt.Sprintf("amplification %s/%s@%d", a.Policy, a.Role, a.Sustained))
		}
	}
	for _, d := range r.Dominance {
		det = append(det, fmt.Sprintf("dominant %s (%.0f%% of steps)", d.DominantRole, 100*d.DominantFrac))
	}
	for _, c := range r.Capture {
		if c.Captured {
			det = append(det, "captured "+c.Role)
		}
	}
	return det
}
