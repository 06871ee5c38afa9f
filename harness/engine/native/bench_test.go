package native

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
)

// BenchmarkEngine runs Bench at the reference size and reports rates per
// wall second and the cores the process actually obtained.
func BenchmarkEngine(b *testing.B) {
	for i := 0; i < b.N; i++ {
		r, err := Bench(context.Background(), "d64l2", BenchOptions{Threads: 2, MinTime: 3 * time.Second})
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
			e, turns, opt, err := newBenchTrain(BenchSizes["d64l2"], threads)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := e.TrainStep(context.Background(), "bench", turns, opt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*32*128)/(cpuTime()-c0), "tok/cpu-s")
			b.ReportMetric(float64(b.N*32*128)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkGenerate times sampling at the reference size (64 requests,
// prompt 32, 96 new tokens) and reports generated tokens per CPU second.
func BenchmarkGenerate(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			e, _, _, err := newBenchTrain(BenchSizes["d64l2"], threads)
			if err != nil {
				b.Fatal(err)
			}
			e.noStop = true
			var reqs []engine.Request
			for i := 0; i < 64; i++ {
				reqs = append(reqs, engine.Request{Adapter: []string{"", "bench"}[i%2], Messages: []engine.Message{{Role: "user", Content: "abcdefghijklm"}},
					MaxNewTokens: 96, Temperature: 0.7, Seed: uint64(i)})
			}
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := e.Generate(context.Background(), reqs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*64*96)/(cpuTime()-c0), "tok/cpu-s")
			b.ReportMetric(float64(b.N*64*96)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
