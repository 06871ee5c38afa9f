package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis/report"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
)

func newDiffCmd() *cobra.Command {
	var (
		experiment, repo, runsDir, only string
		jobs                            int
		asJSON                          bool
	)
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two experiment summaries: git revisions, report or run folders, archives, specs",
		Long: "diff starts with its conclusion: the values that changed significantly, the cell conditions\n" +
			"whose runs are byte-identical on both sides (same run IDs and segment hashes, e.g. base runs\n" +
			"when only the training recipe changed: one study, so their deltas are exactly 0 rather than\n" +
			"compared as independent), and the config\n" +
			"keys that differ between A's and B's runs of the same run ID (e.g. grpo.lr: 0.002 -> 0.003),\n" +
			"read from the runs' manifests (a report folder's log archives, at a revision too).\n" +
			"Then it compares, per cell and condition, every summary metric of A and B: the values, the\n" +
			"delta with its 95% interval (from both sides' standard errors), whether that interval excludes\n" +
			"zero (never from a zero-width interval), and how many seeds and problems each side rests on,\n" +
			"with a warning below 3 seeds. Each side is a path or a git revision. A path is a report\n" +
			"folder (its summary.parquet), a summary.parquet file, or runs that are analysed: a runs\n" +
			"folder, a .tar.zst archive, or a spec (its runs under <runs>/<experiment>; --only keeps the\n" +
			"runs whose id matches a glob). Anything else is a git revision of --repo, and\n" +
			"reports/<experiment>/summary.parquet is read there with go-git, without a checkout (bare\n" +
			"repositories work); --experiment may be omitted when the other side names the experiment or\n" +
			"revision A holds one report. diff warns when A and B are different experiments.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sides := [2]diffSide{{arg: args[0]}, {arg: args[1]}}
			if err := loadDiffSides(&sides, repo, experiment, runsDir, only, jobs); err != nil {
				return err
			}
			if ea, eb := sides[0].experiments(), sides[1].experiments(); ea != eb {
				fmt.Fprintf(cmd.ErrOrStderr(), "marlow: warning: A is experiment %s and B is experiment %s; their cells are compared where they share a task, workflow, scale and condition\n", ea, eb)
			}
			why := ""
			for i, s := range sides {
				if s.manifests == nil {
					why = fmt.Sprintf("%s (%s) %s", "AB"[i:i+1], s.arg, s.noRuns)
					break
				}
			}
			d := report.DiffRuns(sides[0].rows, sides[1].rows, sides[0].manifests, sides[1].manifests, why)
			if asJSON {
				data, err := d.JSON(args[0], args[1])
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), d.Markdown(args[0], args[1]))
			return err
		},
	}
	cmd.Flags().StringVar(&experiment, "experiment", "", "experiment whose reports/<experiment>/summary.parquet to read at a revision")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of markdown")
	cmd.Flags().StringVar(&repo, "repo", ".", "git repository (work tree or bare) holding the revisions")
	addRunsFlags(cmd, &runsDir, &only)
	addJobsFlag(cmd, &jobs)
	return cmd
}

// diffSide is one side of a diff: its argument, summary rows and the
// manifests of its runs (nil when they could not be read, and noRuns says
// why).
type diffSide struct {
	arg       string
	rows      []report.SummaryRow
	rev       bool // read at a git revision
	manifests []runlog.Manifest
	noRuns    string
}

// experiments names the experiments of a side's rows, comma-separated.
func (s diffSide) experiments() string {
	var names []string
	for _, r := range s.rows {
		if !slices.Contains(names, r.Experiment) {
			names = append(names, r.Experiment)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ",")
}

// loadDiffSides reads both sides: paths first, then revisions, so that a
// revision's experiment can come from the other side.
func loadDiffSides(sides *[2]diffSide, repo, experiment, runsDir, only string, jobs int) error {
	for i := range sides {
		s := &sides[i]
		if _, err := os.Stat(s.arg); err != nil {
			if looksLikePath(s.arg) {
				return fmt.Errorf("diff: no such file or folder: %s (%w)", s.arg, err)
			}
			s.rev = true
			continue
		}
		rows, err := loadSummaryPath(s.arg, runsDir, only, jobs)
		if err != nil {
			return fmt.Errorf("diff: %w", err)
		}
		s.rows = rows
		s.manifests, s.noRuns = pathManifests(s.arg, runsDir, only)
	}
	for i := range sides {
		s := &sides[i]
		if !s.rev {
			continue
		}
		exp := experiment
		if other := sides[1-i]; exp == "" && !other.rev && len(other.rows) > 0 {
			exp = other.rows[0].Experiment
		}
		rows, used, err := report.LoadSummaryAt(repo, s.arg, exp)
		if err != nil {
			return fmt.Errorf("diff: %w", err)
		}
		s.rows = rows
		ms, ok, err := report.ManifestsAt(repo, s.arg, used)
		switch {
		case err != nil:
			s.noRuns = "has log archives whose manifests could not be read: " + err.Error()
		case !ok:
			s.noRuns = fmt.Sprintf("holds no log archive in reports/%s/", used)
		default:
			s.manifests = ms
		}
		if experiment == "" {
			experiment = used
		}
	}
	return nil
}

// looksLikePath reports whether a missing argument was meant as a file (a
// summary, archive or spec) rather than a revision.
func looksLikePath(arg string) bool {
	for _, suf := range []string{".parquet", ".tar.zst", ".yaml", ".yml"} {
		if strings.HasSuffix(arg, suf) {
			return true
		}
	}
	return strings.HasPrefix(arg, "./") || strings.HasPrefix(arg, "../") || filepath.IsAbs(arg)
}

// loadSummaryPath reads the summary of an existing path: a report folder
// or a summary.parquet file as stored, runs (a folder, an archive, a
// spec's runs) analysed.
func loadSummaryPath(arg, runsDir, only string, jobs int) ([]report.SummaryRow, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() && strings.HasSuffix(arg, ".parquet") {
		data, err := os.ReadFile(arg)
		if err != nil {
			return nil, err
		}
		return report.DecodeSummary(arg, data)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(arg, "summary.parquet")); err == nil {
			return report.LoadSummaryDir(arg)
		}
	}
	study, err := loadStudy([]string{arg}, runsDir, only, jobs)
	if err != nil {
		return nil, fmt.Errorf("%s is neither a report folder (no summary.parquet) nor readable runs: %w", arg, err)
	}
	return report.SummaryRows(study), nil
}

// pathManifests reads the manifests of a path side's runs: the log
// archives beside a summary (a report folder), or the runs analysed (with
// --only applied). Without them it returns why, for diff's conclusion.
func pathManifests(arg, runsDir, only string) ([]runlog.Manifest, string) {
	st, err := os.Stat(arg)
	if err != nil {
		return nil, err.Error()
	}
	dir := ""
	switch {
	case !st.IsDir() && strings.HasSuffix(arg, ".parquet"):
		dir = filepath.Dir(arg)
	case st.IsDir():
		if _, err := os.Stat(filepath.Join(arg, "summary.parquet")); err == nil {
			dir = arg
		}
	}
	if dir != "" {
		ms, ok, err := report.ArchiveManifests(dir)
		switch {
		case err != nil:
			return nil, "has log archives whose manifests could not be read: " + err.Error()
		case !ok:
			return nil, "is a summary without log archives beside it (a report folder keeps them as *.tar.zst)"
		}
		return ms, ""
	}
	src, _, err := runner.Source(arg, runsDir)
	if err != nil {
		return nil, err.Error()
	}
	keep, err := runner.RunFilter(only)
	if err != nil {
		return nil, err.Error()
	}
	found, err := runlog.Manifests(src)
	if err != nil {
		return nil, err.Error()
	}
	ms := []runlog.Manifest{}
	for _, f := range found {
		if f.Err != nil {
			return nil, "has a run whose manifest could not be read: " + f.Err.Error()
		}
		if keep == nil || keep(f.Manifest.RunID) {
			ms = append(ms, f.Manifest)
		}
	}
	return ms, ""
}
