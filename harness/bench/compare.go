package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/internal/procstat"
	"github.com/marlowlab/marlow/harness/model"
)

// Comparison is Engine's measurement of two engines in one process at the
// same size, batch and threads: the engine under test and a reference (the
// torch engine on the CPU is one every user has).
type Comparison struct {
	CPU       string // the CPU both ran on
	Rounds    int    // measurements per engine and phase, alternating
	Engine    Result
	Reference Result
}

// compareRounds is how many times Compare measures each engine in each
// phase, alternating, so that a machine whose speed drifts (other jobs)
// slows both alike; it reports the medians.
const compareRounds = 3

// Compare opens opt.Engine and reference over the same random-weight
// checkpoint and measures training and then generation on both, in
// compareRounds rounds of opt.MinTime/compareRounds each, alternating
// engine and reference, and reports the median of each rate; the GEMM is
// measured on the engine under test (and on the reference where it
// exposes one).
func Compare(ctx context.Context, reg *engine.Registry, size string, opt Options, reference string) (Comparison, error) {
	c := Comparison{CPU: CPUModel(), Rounds: compareRounds}
	cfg, ok := Sizes[size]
	if !ok {
		return c, fmt.Errorf("bench: unknown size %q (want d64l2 or d128l4)", size)
	}
	if opt.Engine == "" {
		opt.Engine = native.Name
	}
	opt.Threads = max(opt.Threads, 1)
	if opt.MinTime <= 0 {
		opt.MinTime = 2 * time.Second
	}
	per := max(opt.MinTime/compareRounds, time.Millisecond)
	names := [2]string{opt.Engine, reference}
	var es [2]engine.Engine
	var toks [2]*model.Tokenizer
	for i, name := range names {
		if err := reg.Check(ctx, engine.Options{Threads: opt.Threads}, name); err != nil {
			return c, fmt.Errorf("bench: %w", err)
		}
		e, tok, err := openRandom(ctx, reg, name, cfg, engine.Options{Threads: opt.Threads, GenBackend: opt.GenBackend})
		if err != nil {
			return c, err
		}
		defer e.Close()
		es[i], toks[i] = e, tok
	}
	var rounds [2][compareRounds]Result
	for r := 0; r < compareRounds; r++ {
		for i := range es {
			if err := measureTrain(ctx, es[i], per, &rounds[i][r]); err != nil {
				return c, fmt.Errorf("%s: %w", names[i], err)
			}
		}
	}
	for r := 0; r < compareRounds; r++ {
		for i := range es {
			if err := measureGenerate(ctx, es[i], toks[i], per, &rounds[i][r]); err != nil {
				return c, fmt.Errorf("%s: %w", names[i], err)
			}
		}
	}
	res := [2]*Result{&c.Engine, &c.Reference}
	for i, name := range names {
		rs := rounds[i][:]
		*res[i] = Result{
			Engine: name, Size: size, Threads: opt.Threads, CPU: c.CPU,
			TrainTokS: median(rs, func(r Result) float64 { return r.TrainTokS }), TrainCores: median(rs, func(r Result) float64 { return r.TrainCores }),
			GenTokS: median(rs, func(r Result) float64 { return r.GenTokS }), GenCores: median(rs, func(r Result) float64 { return r.GenCores }),
		}
		for _, r := range rs {
			res[i].TrainSteps += r.TrainSteps
			res[i].GenRuns += r.GenRuns
		}
		measureGemm(es[i], cfg, opt.MinTime/4, res[i])
		if su, ok := es[i].(serverUsage); ok {
			if _, rss, err := su.ProcessUsage(ctx); err == nil {
				res[i].ServerPeakRSSBytes = rss
			}
		}
	}
	c.Engine.PeakRSSBytes = procstat.PeakRSS()
	c.Reference.PeakRSSBytes = c.Engine.PeakRSSBytes
	return c, nil
}

// median is the median of f over rs (the mean of the middle two for an
// even count).
func median(rs []Result, f func(Result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// String renders the comparison as a table with the ratio engine /
// reference of every rate (above 1: the engine under test is faster).
func (c Comparison) String() string {
	var b strings.Builder
	a, r := c.Engine, c.Reference
	fmt.Fprintf(&b, "size %s, threads %d, CPU %s; medians of %d rounds per engine, alternating\n", a.Size, a.Threads, c.CPU, c.Rounds)
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
		if x.ServerPeakRSSBytes == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", float64(x.ServerPeakRSSBytes)/(1<<20))
	}
	line("peak RSS MB of a server process", mb(a), mb(r), "")
	fmt.Fprintf(&b, "peak RSS of this process, both engines open: %.1f MB; busy cores count a server process too\n", float64(a.PeakRSSBytes)/(1<<20))
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

// Kernels reports the native engine's kernels: each one's fastest call on
// its SIMD and its portable path, timed now in turn for about perPath each,
// and the path the engine runs (chosen at start-up, see native.KernelsEnv).
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
	fmt.Fprintf(&b, "native kernels on %s (%s=%s); the fastest of many calls on each path, in turn\n", CPUModel(), native.KernelsEnv, mode)
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
