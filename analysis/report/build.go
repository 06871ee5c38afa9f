// Package report renders an analysed study as a report folder: README.md
// (its answer first: a summary with the verdicts on the paper's four
// claims and the computed findings, and a figure index; then the matrix
// table, each claim's evidence, figures, failure-mode evidence,
// definitions, parameters, provenance and the rebuild command), figures/
// (PNG and SVG through gonum/plot) and summary.parquet (one row per run and
// per cell condition). Output depends only on the logs: the same logs give
// byte-identical files. It also compares two summaries (Diff), read from
// folders or from git revisions without a checkout.
package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/analysis"
)

// Options are the parts of a report that are not computed from the logs.
type Options struct {
	Source string // the logs argument, as shown in the rebuild command
	Out    string // the output folder, as shown in the rebuild command
	// Incomplete lists the runs of a partial experiment ("run-id: state
	// (detail)"): planned but missing, running, failed, interrupted. A
	// report with any is marked partial and lists them at the top.
	Incomplete []string
}

// File is one output file, its path relative to the report folder.
type File struct {
	Path string
	Data []byte
}

// Render produces every file of the report in memory, sorted by path.
func Render(st *analysis.Study, opts Options) ([]File, error) {
	figs, err := Figures(st)
	if err != nil {
		return nil, fmt.Errorf("rendering figures: %w", err)
	}
	cl := analysis.CompareClaims(st)
	if hf, ok, err := headlineFigure(studyHeadline(st, cl), st.Params.CI); err != nil {
		return nil, fmt.Errorf("rendering figures: %w", err)
	} else if ok {
		figs = append([]Figure{hf}, figs...)
	}
	sum, err := EncodeSummary(SummaryRows(st))
	if err != nil {
		return nil, err
	}
	files := []File{{Path: "README.md", Data: []byte(readmeClaims(st, cl, figs, opts))}, {Path: "summary.parquet", Data: sum}}
	for _, f := range figs {
		files = append(files, File{Path: "figures/" + f.Name + ".png", Data: f.PNG}, File{Path: "figures/" + f.Name + ".svg", Data: f.SVG})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// Write renders the report and writes it under out, replacing PNG and SVG
// files in out/figures that this report no longer produces. It refuses a
// folder that could be taken for code (checkOut).
func Write(st *analysis.Study, out string, opts Options) ([]File, error) {
	if err := checkOut(out); err != nil {
		return nil, err
	}
	files, err := Render(st, opts)
	if err != nil {
		return nil, err
	}
	figDir := filepath.Join(out, "figures")
	if err := os.MkdirAll(figDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating report folder: %w", err)
	}
	keep := map[string]bool{}
	for _, f := range files {
		keep[filepath.FromSlash(f.Path)] = true
	}
	old, err := os.ReadDir(figDir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", figDir, err)
	}
	for _, e := range old {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, ".png") || strings.HasSuffix(n, ".svg")) && !keep[filepath.Join("figures", n)] {
			if err := os.Remove(filepath.Join(figDir, n)); err != nil {
				return nil, fmt.Errorf("removing stale figure: %w", err)
			}
		}
	}
	for _, f := range files {
		p := filepath.Join(out, filepath.FromSlash(f.Path))
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return nil, fmt.Errorf("writing report file: %w", err)
		}
	}
	return files, nil
}

// checkOut refuses a report folder that could be taken for code: one named
// like a Go file or like a folder the Go tool treats specially (testdata,
// vendor), as the default folder reports/<experiment> of an experiment so
// named would be, or one that holds Go source.
func checkOut(out string) error {
	switch base := filepath.Base(filepath.Clean(out)); {
	case strings.HasSuffix(base, ".go") || base == "testdata" || base == "vendor":
		return fmt.Errorf("report folder %s is named like Go code (a .go file, testdata or vendor), and a report folder holds only a report: "+
			"pass --out with another folder (an experiment named %q gets this folder by default)", out, base)
	}
	entries, err := os.ReadDir(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading report folder: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") || n == "go.mod" {
			return fmt.Errorf("report folder %s holds Go source (%s), and a report folder holds only a report: pass --out with another folder", out, n)
		}
	}
	return nil
}
