package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// reportPoint is one measured `marlow report` over logs grown by Scale.
type reportPoint struct {
	Scale        int
	Runs         int
	ArchiveBytes int64
	Wall         time.Duration
	PeakRSS      int64  // bytes, the child's maximum resident set
	Summary      []byte // the report's summary.parquet
}

// MBps is the archive megabytes read per second.
func (p reportPoint) MBps() float64 { return float64(p.ArchiveBytes) / 1e6 / p.Wall.Seconds() }

// childCommand makes the command that runs marlow with args in a child
// process (the binary itself; the tests pass their own).
type childCommand func(args ...string) (*exec.Cmd, error)

func selfCommand(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the marlow binary: %w", err)
	}
	return exec.Command(exe, args...), nil
}

// benchReport grows the runs of srcs by each scale into work/x<scale>
// (analysistest.GrowRuns, then archived), and runs `marlow report` over
// the archives in a child process repeat times, keeping the least wall
// time and peak RSS (a busy machine only ever adds to them).
func benchReport(ctx context.Context, child childCommand, srcs []string, scales []int, jobs, repeat int, work string, log io.Writer) ([]reportPoint, error) {
	var out []reportPoint
	for _, f := range scales {
		dir := filepath.Join(work, fmt.Sprintf("x%d", f))
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		p := reportPoint{Scale: f}
		var archives []string
		for i, src := range srcs {
			// grown in a child process too: a child's peak RSS counts the
			// parent's at its start (Linux keeps the high-water mark of the
			// memory it forked from across exec), so the parent stays small
			a := filepath.Join(dir, fmt.Sprintf("logs-%d.tar.zst", i))
			if _, _, err := measureChild(child, []string{"bench", "grow", src, a, "--scale", strconv.Itoa(f)}); err != nil {
				return nil, fmt.Errorf("growing %s by %d: %w", src, f, err)
			}
			found, err := runlog.Manifests(a)
			if err != nil {
				return nil, err
			}
			st, err := os.Stat(a)
			if err != nil {
				return nil, err
			}
			p.Runs += len(found)
			p.ArchiveBytes += st.Size()
			archives = append(archives, a)
		}
		fmt.Fprintf(log, "scale %d: %d runs, %.1f MB of archives; marlow report ...\n", f, p.Runs, float64(p.ArchiveBytes)/1e6)
		rep := filepath.Join(dir, "report")
		args := append(append([]string{"report"}, archives...), "--out", rep, "--jobs", strconv.Itoa(jobs))
		for k := range max(repeat, 1) {
			wall, peak, err := measureChild(child, args)
			if err != nil {
				return nil, fmt.Errorf("marlow report at scale %d: %w", f, err)
			}
			if k == 0 || wall < p.Wall {
				p.Wall = wall
			}
			if k == 0 || peak < p.PeakRSS {
				p.PeakRSS = peak
			}
		}
		var err error
		if p.Summary, err = os.ReadFile(filepath.Join(rep, "summary.parquet")); err != nil {
			return nil, err
		}
		out = append(out, p)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// measureChild runs marlow with args in a child process and returns its
// wall time and peak resident set in bytes.
func measureChild(child childCommand, args []string) (time.Duration, int64, error) {
	cmd, err := child(args...)
	if err != nil {
		return 0, 0, err
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	wall := time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, fmt.Errorf("no resource usage on this system")
	}
	return wall, ru.Maxrss * 1024, nil // kilobytes on Linux
}

// reportTable prints the measured points and whether their reports'
// summaries are byte-identical.
func reportTable(points []reportPoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scale | runs | archives (MB) | wall (s) | MB/s | peak RSS (MB) |\n|---|---|---|---|---|---|\n")
	same := true
	for _, p := range points {
		fmt.Fprintf(&b, "| %dx | %d | %.1f | %.1f | %.2f | %.0f |\n", p.Scale, p.Runs, float64(p.ArchiveBytes)/1e6, p.Wall.Seconds(), p.MBps(), float64(p.PeakRSS)/1e6)
		same = same && bytes.Equal(p.Summary, points[0].Summary)
	}
	if len(points) > 1 {
		fmt.Fprintf(&b, "summary.parquet identical at every scale: %v\n", same)
	}
	return b.String()
}

// growArchive writes the runs of src grown by factor
// (analysistest.GrowRuns) as the archive out, through a folder beside it.
func growArchive(src, out string, factor int) (int, error) {
	runs := out + ".runs"
	if err := os.RemoveAll(runs); err != nil {
		return 0, err
	}
	n, err := analysistest.GrowRuns(src, runs, factor)
	if err != nil {
		return 0, err
	}
	if err := runlog.Archive(runs, out); err != nil {
		return 0, err
	}
	return n, os.RemoveAll(runs)
}

func newBenchGrowCmd() *cobra.Command {
	var scale int
	cmd := &cobra.Command{
		Use:   "grow " + sourceArg + " ARCHIVE",
		Short: "Write a study's runs again as an archive with their training text grown to --scale times the logs' size",
		Long: "bench grow writes the runs of the source again, as a .tar.zst archive, with their training samples'\n" +
			"completions lengthened by filler words to make the logs about --scale times their stored size;\n" +
			"steps, evals and validation samples are kept, so the grown logs' report is the original's\n" +
			"(marlow bench report measures the report on them).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if scale < 1 {
				return fmt.Errorf("bench grow: --scale %d: give a factor of 1 or more", scale)
			}
			n, err := growArchive(args[0], args[1], scale)
			if err != nil {
				return fmt.Errorf("bench grow: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bench grow: %d runs of %s grown %d times into %s\n", n, args[0], scale, args[1])
			return nil
		},
	}
	cmd.Flags().IntVar(&scale, "scale", 10, "factor to grow the logs by")
	return cmd
}

func newBenchReportCmd() *cobra.Command {
	var scales []int
	var jobs, repeat int
	var work string
	cmd := &cobra.Command{
		Use:   "report " + sourceArg + "...",
		Short: "Measure marlow report's MB/s and peak RSS on logs grown to several times their size",
		Long: "bench report writes the runs of the sources again at each --scale, as bench grow does (their\n" +
			"training text grown to about that many times the logs' size; validation rows, steps and evals as\n" +
			"they were, so the analysis is the same at every scale), runs marlow report over the archives in a\n" +
			"child process and prints, per scale, the archives' size, the wall time, MB/s and the child's\n" +
			"peak resident set size (the least over --repeat runs), and whether the reports' summaries are\n" +
			"byte-identical. The grown logs\n" +
			"are kept under --work (default a temporary folder, removed).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := work
			if dir == "" {
				tmp, err := os.MkdirTemp("", "marlow-bench-report-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			}
			for _, s := range scales {
				if s < 1 {
					return fmt.Errorf("bench report: --scale %d: give factors of 1 or more", s)
				}
			}
			points, err := benchReport(cmd.Context(), selfCommand, args, scales, jobs, repeat, dir, cmd.ErrOrStderr())
			if err != nil {
				return fmt.Errorf("bench report: %w", err)
			}
			fmt.Fprint(cmd.OutOrStdout(), reportTable(points))
			return nil
		},
	}
	cmd.Flags().IntSliceVar(&scales, "scale", []int{1, 10}, "factors to grow the training samples' text by")
	cmd.Flags().IntVar(&jobs, "jobs", 0, "marlow report --jobs (0: one per CPU)")
	cmd.Flags().IntVar(&repeat, "repeat", 1, "runs of marlow report per scale; the least wall time and peak RSS are kept")
	cmd.Flags().StringVar(&work, "work", "", "folder for the grown logs and reports (kept)")
	return cmd
}
