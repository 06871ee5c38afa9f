package runner

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/marlowlab/marlow/harness/pin"
	"github.com/marlowlab/marlow/harness/spec"
)

// PlanInfo is what a plan reports beyond its runs: where each scale's base
// model comes from and, when measured, a rough time estimate.
type PlanInfo struct {
	Bases    []BaseModel
	Estimate *Estimate // nil: not estimated
	GPU      *GPUCost  // nil: no checkpoint runs, or not estimated
}

// WritePlan writes the runs of a plan with the spec's provenance: a table
// (one line per run, then the counts per condition, the base models and
// the time estimate), or JSON when asJSON.
func WritePlan(w io.Writer, s *spec.Spec, runs []spec.Run, prov pin.Provenance, info PlanInfo, asJSON bool) error {
	if asJSON {
		return writePlanJSON(w, s, runs, prov, PlanWarnings(runs), info)
	}
	if err := writePlanTable(w, s, runs, prov); err != nil {
		return err
	}
	if err := writePlanInfo(w, info); err != nil {
		return err
	}
	writeGPUCost(w, info.GPU)
	return nil
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

// ReportPlanJobs is the --jobs the plan estimates the report at: a
// 16-core node's.
const ReportPlanJobs = 16

func writePlanTable(w io.Writer, s *spec.Spec, runs []spec.Run, prov pin.Provenance) error {
	fmt.Fprintf(w, "experiment: %s  spec: %s\n%s\n\n", s.Experiment, s.File, commitLine(prov))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONDITION\tWORKFLOW\tEVAL\tTASK\tSCALE\tSEED\tDERIVED SEED\tCONFIG HASH\tFILES\tBYTES")
	var files int
	var bytes int64
	for _, r := range runs {
		f := EstimateFootprint(r)
		files += f.Files
		bytes += f.Bytes()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\n", r.ID, r.Condition, r.Workflow,
			strings.Join(r.EvalWorkflows, ","), r.Task, r.Scale, r.SeedIndex, r.Seed, r.ConfigHash[:12], f.Files, f.SizeText())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("plan: write table: %w", err)
	}
	var parts []string
	for _, c := range spec.Counts(runs) {
		parts = append(parts, fmt.Sprintf("%s %d", c.Condition, c.Runs))
	}
	_, err := fmt.Fprintf(w, "\n%d runs: %s\nestimated footprint: %d files, %s\n%s\n", len(runs), strings.Join(parts, ", "), files, HumanBytes(bytes),
		EstimateReportCost(runs, ReportPlanJobs))
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
	EstFiles   int                   `json:"est_files"`
	EstBytes   int64                 `json:"est_bytes"`
	Warnings   []string              `json:"warnings"`
	BaseModels []baseModelJSON       `json:"base_models"`
	Estimate   *estimateJSON         `json:"estimate"` // null when not estimated
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
	EstFiles      int      `json:"est_files"`
	EstBytes      int64    `json:"est_bytes"`            // segments and (when known) the checkpoint
	EstCkptBytes  int64    `json:"est_checkpoint_bytes"` // -1 when the model's shape is unknown
}

func writePlanJSON(w io.Writer, s *spec.Spec, runs []spec.Run, prov pin.Provenance, warnings []string, info PlanInfo) error {
	out := planJSON{Experiment: s.Experiment, Spec: s.File, Repo: prov.Repo, Commit: prov.Commit,
		Dirty: prov.Dirty, DiffHash: prov.DiffHash, Runs: []planRunJSON{}, Counts: spec.Counts(runs),
		Warnings: append([]string{}, warnings...), BaseModels: basesJSON(info.Bases), Estimate: estimateOf(info.Estimate)}
	for _, r := range runs {
		f := EstimateFootprint(r)
		out.EstFiles += f.Files
		out.EstBytes += f.Bytes()
		out.Runs = append(out.Runs, planRunJSON{ID: r.ID, Condition: r.Condition, Workflow: r.Workflow,
			EvalWorkflows: r.EvalWorkflows, Task: r.Task, Scale: r.Scale, SeedIndex: r.SeedIndex,
			Seed: r.Seed, ConfigHash: r.ConfigHash, EstFiles: f.Files, EstBytes: f.Bytes(), EstCkptBytes: f.CheckpointBytes})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("plan: write json: %w", err)
	}
	return nil
}
