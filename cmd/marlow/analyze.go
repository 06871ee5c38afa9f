package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/reports"
)

var analyzeJSON bool

var analyzeCmd = &cobra.Command{
	Use:   "analyze SPEC|RUNS_DIR|ARCHIVE",
	Short: "Print per-run ceiling/floor metrics and failure-mode verdicts without writing a report",
	Long: "analyze reads the runs like marlow report and prints one line per run view (an SA-RL run\n" +
		"once per workflow it was evaluated in): base, ceiling and its step, final, floor, drop, AUC,\n" +
		"the terminal-cliff verdict, roles with gradient amplification before the cliff, the role\n" +
		"dominating the shared policy's gradient, and captured roles. --json prints the rows of\n" +
		"summary.parquet instead (undefined values as null).",
	Args: cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		st, err := loadStudy(args[0])
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if analyzeJSON {
			var rows []map[string]any
			for _, r := range reports.SummaryRows(st) {
				m := map[string]any{"kind": r.Kind, "experiment": r.Experiment, "workflow": r.Workflow, "task": r.Task,
					"scale": r.Scale, "condition": r.Condition, "run_id": r.RunID, "status": r.Status, "ci_method": r.CIMethod,
					"dominant_role": r.DominantRole, "seed_index": r.SeedIndex, "seeds": r.Seeds}
				for i, name := range reports.SummaryMetrics {
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
		fmt.Fprintf(w, "experiment %s: %d run views, %d cells\n", st.Experiment, len(st.Runs), len(st.Cells))
		fmt.Fprintf(w, "%-36s %-14s %-6s %5s %7s %13s %7s %7s %7s %7s %-5s %s\n", "run", "workflow", "cond", "seed", "base", "ceiling@step", "final", "floor", "drop", "auc", "cliff", "detectors")
		for _, r := range st.Runs {
			m := r.Metrics
			var det []string
			for _, a := range r.Amplification {
				if a.BeforeCliff {
					det = append(det, fmt.Sprintf("amplification %s/%s@%d", a.Policy, a.Role, a.Steps[0]))
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
			cliff := "no"
			if m.Cliff.Cliff {
				cliff = fmt.Sprintf("@%d", m.Cliff.FallStep)
			}
			fmt.Fprintf(w, "%-36s %-14s %-6s %5d %7.3f %7.3f@%-5d %7.3f %7.3f %7.3f %7.3f %-5s %s\n", r.RunID, r.Cell.Workflow, r.Condition,
				r.SeedIndex, m.Base, m.Ceiling, m.CeilingStep, m.Final, m.Floor, m.Drop, m.AUC, cliff, strings.Join(det, "; "))
		}
		for _, s := range st.Skipped {
			fmt.Fprintf(w, "skipped %s\n", s)
		}
		return nil
	},
}

func init() {
	analyzeCmd.Flags().BoolVar(&analyzeJSON, "json", false, "print the summary rows as JSON")
	rootCmd.AddCommand(analyzeCmd)
}
