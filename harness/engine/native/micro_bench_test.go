package native

import (
	"testing"

	"github.com/marlowlab/marlow/harness/internal/procstat"
)

// BenchmarkAttention measures causal attention over one 128-token
// sequence (4 heads, 2 KV heads, head dim 16): the training pass per
// (sequence, head) and the decode path row by row (rows per CPU second).
func BenchmarkAttention(b *testing.B) {
	g := attnGeom{H: 4, KV: 2, HD: 16, scale: 0.25}
	const T = 128
	q := randVec(T*64, 1, 1)
	k := randVec(T*32, 2, 1)
	v := randVec(T*32, 3, 1)
	out := make([]float32, T*64)
	probs := make([]float32, T*T)
	sc := make([]float32, T)
	for _, mode := range []string{"sequence", "rows"} {
		b.Run(mode, func(b *testing.B) {
			c0 := procstat.CPUTime()
			for it := 0; it < b.N; it++ {
				if mode == "rows" {
					for i := 0; i < T; i++ {
						g.attnRow(out[i*64:(i+1)*64], q[i*64:(i+1)*64], k, v, 0, i, sc)
					}
					continue
				}
				for h := 0; h < 4; h++ {
					g.attnSeqHead(h, T, q, k, v, out, probs)
				}
			}
			b.ReportMetric(float64(b.N*T)/(procstat.CPUTime()-c0), "rows/cpu-s")
		})
	}
}

// naiveNT is the hand-written alternative to pool.linear: y = x Wᵀ by
// row-by-row dot products.
func naiveNT(y, x, w []float32, m, k, n int) {
	for i := 0; i < m; i++ {
		xr := x[i*k : (i+1)*k]
		for j := 0; j < n; j++ {
			y[i*n+j] = dot(xr, w[j*k:(j+1)*k])
		}
	}
}

// BenchmarkSmallGemm compares the gonum-backed GEMM with a hand-written loop
// on the small shapes of LoRA and decode (one thread, CPU time).
func BenchmarkSmallGemm(b *testing.B) {
	for _, sh := range []struct {
		name    string
		m, k, n int
	}{{"lora-A-train-4096x64x8", 4096, 64, 8}, {"lora-B-train-4096x8x64", 4096, 8, 64}, {"decode-q-64x64x64", 64, 64, 64}, {"decode-up-64x64x256", 64, 64, 256}} {
		x, w, y := randVec(sh.m*sh.k, 1, 1), randVec(sh.n*sh.k, 2, 1), make([]float32, sh.m*sh.n)
		flops := 2 * float64(sh.m*sh.k*sh.n)
		for _, impl := range []string{"gonum", "hand"} {
			b.Run(sh.name+"/"+impl, func(b *testing.B) {
				c0 := procstat.CPUTime()
				for i := 0; i < b.N; i++ {
					if impl == "gonum" {
						pool{threads: 1}.linear(y, x, w, sh.m, sh.k, sh.n)
					} else {
						naiveNT(y, x, w, sh.m, sh.k, sh.n)
					}
				}
				b.ReportMetric(flops*float64(b.N)/(procstat.CPUTime()-c0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}
