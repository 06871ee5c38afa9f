package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"text/tabwriter"

	"github.com/marlowlab/marlow/harness/pin"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
)

func init() {
	var (
		asJSON, resolved, allowDirty bool
		only                         string
	)
	cmd := &cobra.Command{
		Use:   "plan SPEC",
		Short: "Validate an experiment file and list the runs it expands to",
		Long: `plan validates SPEC strictly and prints one line per run (id, condition,
workflow trained, workflows evaluated, task, scale, seed index, derived seed,
config hash), the counts per condition, and the pinned git commit.
With --resolved it prints the spec with every default filled in instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := spec.Load(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if resolved {
				b, err := s.ResolvedYAML()
				if err != nil {
					return err
				}
				_, err = out.Write(b)
				return err
			}
			runs, err := spec.Plan(s)
			if err != nil {
				return err
			}
			if only != "" {
				if _, err := path.Match(only, ""); err != nil {
					return fmt.Errorf("plan: --only %q: %w", only, err)
				}
				kept := runs[:0:0]
				for _, r := range runs {
					if ok, _ := path.Match(only, r.ID); ok {
						kept = append(kept, r)
					}
				}
				runs = kept
			}
			prov, perr := pin.Resolve(args[0], allowDirty, nil)
			if perr != nil {
				// plan writes nothing, so it only warns; `marlow run` refuses.
				fmt.Fprintf(cmd.ErrOrStderr(), "marlow: warning: %v\n", perr)
				if prov, err = pin.Inspect(args[0]); err != nil {
					return err
				}
			}
			if asJSON {
				return writePlanJSON(out, s, runs, prov)
			}
			return writePlanTable(out, s, runs, prov)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&resolved, "resolved", false, "print the fully resolved spec (with defaults) as YAML")
	cmd.Flags().StringVar(&only, "only", "", "keep only runs whose id matches this glob (e.g. 'voting-*-seed1')")
	cmd.Flags().BoolVar(&allowDirty, "allow-dirty", false, "accept a dirty tree or a spec outside git without a warning")
	rootCmd.AddCommand(cmd)
}

func commitLine(p pin.Provenance) string {
	switch {
	case p.Repo == "":
		return "commit: none (spec is not inside a git repository)"
	case p.Dirty:
		return fmt.Sprintf("commit: %s (dirty, diff sha256 %s)", p.Commit, p.DiffHash)
	}
	return fmt.Sprintf("commit: %s (clean)", p.Commit)
}

func writePlanTable(w io.Writer, s *spec.Spec, runs []spec.Run, prov pin.Provenance) error {
	fmt.Fprintf(w, "experiment: %s  spec: %s\n%s\n\n", s.Experiment, s.File, commitLine(prov))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONDITION\tWORKFLOW\tEVAL\tTASK\tSCALE\tSEED\tDERIVED SEED\tCONFIG HASH")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, r.Condition, r.Workflow,
			strings.Join(r.EvalWorkflows, ","), r.Task, r.Scale, r.SeedIndex, r.Seed, r.ConfigHash[:12])
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("plan: write table: %w", err)
	}
	var parts []string
	for _, c := range spec.Counts(runs) {
		parts = append(parts, fmt.Sprintf("%s %d", c.Condition, c.Runs))
	}
	_, err := fmt.Fprintf(w, "\n%d runs: %s\n", len(runs), strings.Join(parts, ", "))
	return err
}

// planJSON is the --json output; runs omit their full config (see
// `plan --resolved` for the settings).
type planJSON struct {
	Experiment string                `json:"experiment"`
	Spec       string                `json:"spec"`
	Repo       string                `json:"repo"`
	Commit     string                `json:"commit"`
	Dirty      bool                  `json:"dirty"`
	DiffHash   string                `json:"diff_hash"`
	Runs       []planRunJSON         `json:"runs"`
	Counts     []spec.ConditionCount `json:"counts"`
}

type planRunJSON struct {
	ID            string   `json:"id"`
	Condition     string   `json:"condition"`
	Workflow      string   `json:"workflow"`
	EvalWorkflows []string `json:"eval_workflows"`
	Task          string   `json:"task"`
	Scale         string   `json:"scale"`
	SeedIndex     int      `json:"seed_index"`
	Seed          uint64   `json:"seed"`
	ConfigHash    string   `json:"config_hash"`
}

func writePlanJSON(w io.Writer, s *spec.Spec, runs []spec.Run, prov pin.Provenance) error {
	out := planJSON{Experiment: s.Experiment, Spec: s.File, Repo: prov.Repo, Commit: prov.Commit,
		Dirty: prov.Dirty, DiffHash: prov.DiffHash, Runs: []planRunJSON{}, Counts: spec.Counts(runs)}
	for _, r := range runs {
		out.Runs = append(out.Runs, planRunJSON{ID: r.ID, Condition: r.Condition, Workflow: r.Workflow,
			EvalWorkflows: r.EvalWorkflows, Task: r.Task, Scale: r.Scale, SeedIndex: r.SeedIndex,
			Seed: r.Seed, ConfigHash: r.ConfigHash})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("plan: write json: %w", err)
	}
	return nil
}
