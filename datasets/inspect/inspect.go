// Package inspect describes a downloaded task file the way a run reads it:
// which published variant it is, how many rows and distinct problems it
// holds, what was dropped as a repeat or skipped and why, the train and
// validation sizes a spec's settings give, and sample problems. It backs
// `marlow data`.
package inspect

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/dapo"
	"github.com/marlowlab/marlow/datasets/deepcoder"
	"github.com/marlowlab/marlow/datasets/internal/pqread"
)

// Sources inspect reads.
const (
	SourceDAPO      = datasets.SourceDAPOMath
	SourceDeepCoder = datasets.SourceDeepCoder
)

// Options are a task's data settings, with the spec's names and defaults
// (seeds/README.md): DefaultOptions gives them.
type Options struct {
	Source    string   // SourceDAPO, SourceDeepCoder, or "" to detect from the file
	SplitSeed uint64   // split_seed
	ValFrac   float64  // val_frac
	ValSize   int      // val_size (a cap; 0 = none)
	Language  string   // language (dapo-math)
	Subsets   []string // subsets (deepcoder)
	TestPath  string   // test_path (deepcoder)
	Samples   int      // sample problems to show
}

// DefaultOptions are the spec's defaults for a file task.
func DefaultOptions() Options {
	return Options{SplitSeed: 1, ValFrac: 0.1, ValSize: 200, Samples: 2}
}

// Report is what Inspect found.
type Report struct {
	Path      string
	Source    string
	Variant   string   // the published variant (dapo-math) or "shards" (deepcoder)
	Files     []string // files read
	TestFiles []string // deepcoder test shards read
	Rows      int
	TestRows  int
	// Distinct counts distinct problem statements read (test shards apart).
	Distinct, TestDistinct int
	Duplicates, Conflicts  int
	// Wrapper counts DAPO's instruction wrapper outcomes (dapo-math only).
	Wrapper *Wrapper
	Skipped map[string]int
	// Train and Val are the sizes a run with these options gets.
	Train, Val   int
	Options      Options
	Instructions string
	// Samples are problems as the workflows get them: the first of the
	// train stream (cursor 0) and the first validation problems.
	Samples []Sample
}

// Wrapper counts the outcomes of dapo.StripWrapper.
type Wrapper struct{ Stripped, Bare, NearMiss int }

// Sample is one sample problem and where it comes from.
type Sample struct {
	Where   string // "train cursor 0", "validation 0", ...
	Problem datasets.Problem
}

// Inspect reads the task file or folder at path with opt.
func Inspect(path string, opt Options) (*Report, error) {
	if opt.Samples < 0 {
		return nil, fmt.Errorf("inspect: negative sample count %d", opt.Samples)
	}
	if opt.Source == "" {
		src, err := Detect(path)
		if err != nil {
			return nil, err
		}
		opt.Source = src
	}
	switch opt.Source {
	case SourceDAPO:
		if len(opt.Subsets) > 0 || opt.TestPath != "" {
			return nil, fmt.Errorf("inspect: subsets and test files are deepcoder options, not %s", SourceDAPO)
		}
		return inspectDAPO(path, opt)
	case SourceDeepCoder:
		if opt.Language != "" {
			return nil, fmt.Errorf("inspect: language is a %s option, not %s", SourceDAPO, SourceDeepCoder)
		}
		return inspectDeepCoder(path, opt)
	}
	return nil, fmt.Errorf("inspect: unknown source %q (want %s or %s)", opt.Source, SourceDAPO, SourceDeepCoder)
}

// Detect names the source of a file or folder: a folder is DeepCoder
// shards (a folder of DAPO files is an error naming one to give instead); a
// Parquet file with a "tests" column is a DeepCoder shard, one with
// "reward_model" a DAPO file.
func Detect(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("inspect: %w", err)
	}
	if st.IsDir() {
		// A folder is DeepCoder shards, unless its shards are DAPO files.
		shards, err := deepcoder.Shards(path, nil, deepcoder.SplitTrain)
		if err != nil {
			return SourceDeepCoder, nil
		}
		if sc, err := pqread.Schema(shards[0]); err == nil && len(sc.FieldIndices("reward_model")) > 0 {
			return "", fmt.Errorf("inspect: %s is a folder of DAPO files; dapo-math reads one file, e.g. %s", path, shards[0])
		}
		return SourceDeepCoder, nil
	}
	sc, err := pqread.Schema(path)
	if err != nil {
		return "", fmt.Errorf("inspect: %w", err)
	}
	switch {
	case len(sc.FieldIndices("tests")) > 0:
		return SourceDeepCoder, nil
	case len(sc.FieldIndices("reward_model")) > 0:
		return SourceDAPO, nil
	}
	var names []string
	for _, f := range sc.Fields() {
		names = append(names, f.Name)
	}
	return "", fmt.Errorf("inspect: %s is neither a DAPO file (column %q, struct<ground_truth: string, style: string>) nor a DeepCoder shard (column %q, string); its columns: %s; name the source with --source to see what a reader expects",
		path, "reward_model", "tests", strings.Join(names, ", "))
}

func inspectDAPO(path string, opt Options) (*Report, error) {
	task, err := dapo.Open(path, dapo.Config{Seed: opt.SplitSeed, ValSize: opt.ValSize, ValFrac: opt.ValFrac, Language: opt.Language})
	if err != nil {
		return nil, err
	}
	st := task.Stats()
	val, err := task.Validation()
	if err != nil {
		return nil, err
	}
	r := &Report{
		Path: path, Source: SourceDAPO, Variant: st.Variant, Files: []string{path},
		Rows: st.Rows, Distinct: st.Distinct, Duplicates: st.Duplicates, Conflicts: st.Conflicts,
		Wrapper: &Wrapper{Stripped: st.Stripped, Bare: st.Bare, NearMiss: st.NearMiss},
		Skipped: st.Skipped(), Train: task.TrainSize(), Val: len(val), Options: opt,
		Instructions: task.Instructions(),
	}
	return r, r.sample(task.TrainSize(), task.Train, val)
}

func inspectDeepCoder(path string, opt Options) (*Report, error) {
	train, err := deepcoder.Shards(path, opt.Subsets, deepcoder.SplitTrain)
	if err != nil {
		return nil, err
	}
	cfg := deepcoder.Config{Seed: opt.SplitSeed, ValSize: opt.ValSize, ValFrac: opt.ValFrac}
	if opt.TestPath != "" {
		if cfg.TestPaths, err = deepcoder.Shards(opt.TestPath, opt.Subsets, deepcoder.SplitTest); err != nil {
			return nil, err
		}
	}
	set, err := deepcoder.Load(train, cfg)
	if err != nil {
		return nil, err
	}
	st := set.Stats
	r := &Report{
		Path: path, Source: SourceDeepCoder, Variant: "shards", Files: train, TestFiles: cfg.TestPaths,
		Rows: st.Rows, TestRows: st.TestRows, Distinct: st.Problems, TestDistinct: st.TestProblems,
		Duplicates: st.Duplicates, Conflicts: st.Conflicts, Skipped: st.Skipped,
		Train: len(set.Train), Val: len(set.Val), Options: opt, Instructions: deepcoder.Instructions,
	}
	pool := datasets.NewFilePool(datasets.SourceDeepCoder, opt.SplitSeed, set.Train, set.Val)
	return r, r.sample(pool.TrainSize(), pool.Train, set.Val)
}

// sample fills r.Samples: the first problem of the train stream, then
// validation problems, up to r.Options.Samples.
func (r *Report) sample(trainSize int, train func(int64) (datasets.Problem, error), val []datasets.Problem) error {
	n := r.Options.Samples
	if n > 0 && trainSize > 0 {
		p, err := train(0)
		if err != nil {
			return err
		}
		r.Samples = append(r.Samples, Sample{Where: "train cursor 0", Problem: p})
	}
	for i := 0; len(r.Samples) < n && i < len(val); i++ {
		r.Samples = append(r.Samples, Sample{Where: fmt.Sprintf("validation %d", i), Problem: val[i]})
	}
	return nil
}

// Write prints the report; render turns a sample problem into the text an
// agent is shown (nil: the problem statement).
func (r *Report) Write(w io.Writer, render func(datasets.Problem) string) error {
	if render == nil {
		render = func(p datasets.Problem) string { return p.Prompt }
	}
	var b strings.Builder
	f := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f("path:        %s\n", r.Path)
	f("source:      %s (variant %s)\n", r.Source, r.Variant)
	f("files:       %d", len(r.Files))
	if len(r.TestFiles) > 0 {
		f(" train, %d test", len(r.TestFiles))
	}
	f("\n")
	for _, p := range r.Files {
		f("  train  %s\n", p)
	}
	for _, p := range r.TestFiles {
		f("  test   %s\n", p)
	}
	f("rows:        %d", r.Rows)
	if len(r.TestFiles) > 0 {
		f(" train, %d test", r.TestRows)
	}
	f("\n")
	f("distinct:    %d problem statements", r.Distinct)
	if len(r.TestFiles) > 0 {
		f(" in the train files, %d in the test files", r.TestDistinct)
	}
	f("\n")
	f("duplicates:  %d rows repeat an earlier statement (dropped; the first is kept)\n", r.Duplicates)
	what := "tests, function name or starter code"
	if r.Source == SourceDAPO {
		what = "ground truth"
	}
	f("conflicts:   %d of them differ from the first in their %s\n", r.Conflicts, what)
	if r.Wrapper != nil {
		f("wrapper:     %d stripped, %d without it, %d near misses (passed through unchanged)\n", r.Wrapper.Stripped, r.Wrapper.Bare, r.Wrapper.NearMiss)
	}
	if len(r.Skipped) == 0 {
		f("skipped:     none\n")
	} else {
		total := 0
		reasons := make([]string, 0, len(r.Skipped))
		for k, v := range r.Skipped {
			reasons = append(reasons, k)
			total += v
		}
		sort.Strings(reasons)
		f("skipped:     %d\n", total)
		for _, k := range reasons {
			f("  %6d  %s\n", r.Skipped[k], k)
		}
	}
	o := r.Options
	f("split:       train %d, validation %d (split_seed %d, val_size %d", r.Train, r.Val, o.SplitSeed, o.ValSize)
	if len(r.TestFiles) > 0 {
		f(", validation = the test files")
	} else {
		f(", val_frac %g", o.ValFrac)
	}
	if o.Language != "" {
		f(", language %s", o.Language)
	}
	if len(o.Subsets) > 0 {
		f(", subsets %s", strings.Join(o.Subsets, ","))
	}
	f(")\n")
	for _, s := range r.Samples {
		p := s.Problem
		f("\nsample (%s): %s", s.Where, p.ID)
		if r.Source == SourceDAPO {
			f(", truth %q", p.Truth)
		} else {
			f(", %s", p.Truth)
		}
		f("\n")
		for _, line := range strings.Split(render(p), "\n") {
			f("  | %s\n", line)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
