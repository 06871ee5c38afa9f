package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
)

// Comparison is Engine run on two engines in one process, one after the
// other, at the same size, batch and threads: the engine under test and a
// reference (the torch engine on the CPU is one every user has).
type Comparison struct {
	CPU       string // the CPU both ran on
	Engine    Result
	Reference Result
}

// Compare measures opt.Engine and then reference with Engine at size, with
// the same options.
func Compare(ctx context.Context, reg *engine.Registry, size string, opt Options, reference string) (Comparison, error) {
	c := Comparison{CPU: CPUModel()}
	var err error
	if c.Engine, err = Engine(ctx, reg, size, opt); err != nil {
		return c, err
	}
	ropt := opt
	ropt.Engine = reference
	if c.Reference, err = Engine(ctx, reg, size, ropt); err != nil {
		return c, fmt.Errorf("bench: reference engine %s: %w", reference, err)
	}
	return c, nil
}

// String renders the comparison as a table with the ratio engine /
// reference of every rate (above 1: the engine under test is faster).
func (c Comparison) String() string {
	var b strings.Builder
	a, r := c.Engine, c.Reference
	fmt.Fprintf(&b, "size %s, threads %d, CPU %s\n", a.Size, a.Threads, c.CPU)
	line := func(name, x, y, ratio string) { fmt.Fprintf(&b, "%-34s %13s %13s %13s\n", name, x, y, ratio) }
	line("", a.Engine, r.Engine, a.Engine+"/"+r.Engine)
	row := func(name string, x, y float64) {
		ratio := "-"
		if y > 0 {
			ratio = fmt.Sprintf("%.2fx", x/y)
		}
		line(name, fmt.Sprintf("%.0f", x), fmt.Sprintf("%.0f", y), ratio)
	}
	row("train tok/s (LoRA GRPO, 32 x 128)", a.TrainTokS, r.TrainTokS)
	row("generate tok/s (64 x 96 new)", a.GenTokS, r.GenTokS)
	row("train tok/s per busy core", perCore(a.TrainTokS, a.TrainCores), perCore(r.TrainTokS, r.TrainCores))
	row("generate tok/s per busy core", perCore(a.GenTokS, a.GenCores), perCore(r.GenTokS, r.GenCores))
	line("cores busy, train / generate", fmt.Sprintf("%.2f / %.2f", a.TrainCores, a.GenCores), fmt.Sprintf("%.2f / %.2f", r.TrainCores, r.GenCores), "")
	mb := func(x Result) string {
		return fmt.Sprintf("%.0f", float64(x.PeakRSSBytes+x.ServerPeakRSSBytes)/(1<<20))
	}
	line("peak RSS MB (process + server)", mb(a), mb(r), "")
	fmt.Fprintf(&b, "(this process's peak RSS covers both runs; busy cores count the engine's server process too)\n")
	return b.String()
}

// CPUModel is the CPU's model name as the operating system reports it
// (/proc/cpuinfo on Linux), or the architecture where it reports none.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				return fmt.Sprintf("%s (%d logical CPUs)", strings.TrimSpace(v), runtime.NumCPU())
			}
		}
	}
	return fmt.Sprintf("%s/%s (%d logical CPUs)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}

// Kernels reports the native engine's kernels: each one's time per call on
// its SIMD and its portable path, measured now for about perPath each, and
// the path the engine runs (chosen at start-up, see native.KernelsEnv).
func Kernels(perPath time.Duration) (string, error) {
	mode, _, err := native.Kernels()
	if err != nil {
		return "", err
	}
	ts, err := native.MeasureKernels(perPath)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "native kernels on %s (%s=%s)\n", CPUModel(), native.KernelsEnv, mode)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "kernel\tshape of one call\tSIMD µs\tportable µs\tportable/SIMD\tengine uses\n")
	for _, t := range ts {
		simd, ratio := "none in this build or CPU", "-"
		if t.SIMD > 0 {
			simd = fmt.Sprintf("%.2f", us(t.SIMD))
			ratio = fmt.Sprintf("%.2fx", float64(t.Portable)/float64(t.SIMD))
		}
		uses := "portable"
		if t.UsesSIMD {
			uses = "SIMD"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\n", t.Name, t.Shape, simd, us(t.Portable), ratio, uses)
	}
	tw.Flush()
	return b.String(), nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
