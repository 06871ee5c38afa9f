package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/internal/procstat"
)

func nativeRegistry(t testing.TB) *engine.Registry {
	reg := &engine.Registry{}
	if err := reg.Register(native.Driver()); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestEngineRuns measures the small size briefly and checks that every
// rate was measured.
func TestEngineRuns(t *testing.T) {
	r, err := Engine(context.Background(), nativeRegistry(t), "d64l2", Options{Threads: 1, MinTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.TrainSteps < 1 || r.GenRuns < 1 || r.TrainTokS <= 0 || r.GenTokS <= 0 || r.GemmGFLOPS <= 0 || r.BlasGFLOPS <= 0 {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(r.String(), "engine native, size d64l2") {
		t.Fatalf("report:\n%s", r)
	}
}

func TestEngineRefusesUnknown(t *testing.T) {
	if _, err := Engine(context.Background(), nativeRegistry(t), "huge", Options{}); err == nil || !strings.Contains(err.Error(), `unknown size "huge"`) {
		t.Fatalf("err %v", err)
	}
	if _, err := Engine(context.Background(), nativeRegistry(t), "d64l2", Options{Engine: "torch"}); err == nil || !strings.Contains(err.Error(), `engine "torch" is not registered`) {
		t.Fatalf("err %v", err)
	}
}

// openReference opens the native engine at the reference size with the
// bench adapter; it is closed when b ends.
func openReference(b *testing.B, threads int) engine.Engine {
	e, _, err := openRandom(context.Background(), nativeRegistry(b), native.Name, Sizes["d64l2"], engine.Options{Threads: threads})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// BenchmarkEngine runs Engine at the reference size and reports rates per
// wall second and the cores the process actually obtained.
func BenchmarkEngine(b *testing.B) {
	reg := nativeRegistry(b)
	for i := 0; i < b.N; i++ {
		r, err := Engine(context.Background(), reg, "d64l2", Options{Threads: 2, MinTime: 3 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.TrainTokS, "train-tok/s")
		b.ReportMetric(r.TrainCores, "train-cores")
		b.ReportMetric(r.GenTokS, "gen-tok/s")
		b.ReportMetric(r.GenCores, "gen-cores")
	}
}

// BenchmarkTrainStep times one LoRA GRPO step at the reference size
// (32 x 128 tokens) and reports sequence tokens per CPU second.
func BenchmarkTrainStep(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			e := openReference(b, threads)
			turns, opt := trainBatchTurns()
			b.ResetTimer()
			c0 := procstat.CPUTime()
			for i := 0; i < b.N; i++ {
				if _, err := e.TrainStep(context.Background(), "bench", turns, opt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*32*128)/(procstat.CPUTime()-c0), "tok/cpu-s")
			b.ReportMetric(float64(b.N*32*128)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkGenerate times sampling at the reference size (64 requests,
// prompt 32, 96 new tokens) and reports generated tokens per CPU second.
func BenchmarkGenerate(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			e := openReference(b, threads)
			reqs := genRequestsOf()
			b.ResetTimer()
			c0 := procstat.CPUTime()
			for i := 0; i < b.N; i++ {
				if _, err := e.Generate(context.Background(), reqs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*64*96)/(procstat.CPUTime()-c0), "tok/cpu-s")
			b.ReportMetric(float64(b.N*64*96)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

func TestCalibrate(t *testing.T) {
	reg := &engine.Registry{}
	if err := reg.Register(native.Driver()); err != nil {
		t.Fatal(err)
	}
	cfg := Sizes["d64l2"]
	cfg.VocabSize, cfg.MaxPositionEmbeddings = 99, 64 // a spec's shape: both are adjusted
	sp, err := Calibrate(context.Background(), reg, native.Name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !(sp.TrainTokS > 0) || !(sp.GenTokS > 0) || sp.Wall <= 0 {
		t.Fatalf("speed %+v: want positive rates", sp)
	}
	if _, err := Calibrate(context.Background(), reg, "nosuch", cfg); err == nil {
		t.Fatal("an unregistered engine was calibrated")
	}
}

// TestCompareAndKernels: a comparison of the native engine with itself
// prints both columns and their ratios, and the kernel table lists every
// kernel with the path the engine runs.
func TestCompareAndKernels(t *testing.T) {
	c, err := Compare(context.Background(), nativeRegistry(t), "d64l2", Options{Threads: 1, MinTime: time.Millisecond}, native.Name)
	if err != nil {
		t.Fatal(err)
	}
	out := c.String()
	if c.Engine.TrainTokS <= 0 || c.Reference.GenTokS <= 0 || !strings.Contains(out, "native/native") || strings.Count(out, "x\n") != 4 {
		t.Fatalf("comparison:\n%s", out)
	}
	k, err := Kernels(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gemm-nt ", "gemm-nt8", "gemm-nn-tn", "attn-scores16", "attn-pv16", "softmax", "swiglu", "rmsnorm"} {
		if !strings.Contains(k, "\n"+name) {
			t.Errorf("kernel table lacks %q:\n%s", name, k)
		}
	}
	if !strings.Contains(k, "engine uses") {
		t.Errorf("kernel table:\n%s", k)
	}
}
