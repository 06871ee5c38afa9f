package native

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
	"github.com/marlowlab/marlow/keyed"
)

// TestSamplingMatchesTorchServer feeds the same logits to this engine's
// sampling rule and to the torch server's: the same uniform per (seed,
// position) and the same float64 inverse CDF must pick the same token with
// the same log-prob bits. Only numpy is needed on the Python side.
func TestSamplingMatchesTorchServer(t *testing.T) {
	py := torchtest.Python(t, "numpy")
	e, err := torch.Start(context.Background(), torch.Options{Python: py})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	const rows = 400
	var logits [][]float32
	var temps []float64
	var seeds []uint64
	var pos []int
	for i := 0; i < rows; i++ {
		v := []int{5, 99, 1000, 151936}[i%4]
		if i%4 == 3 && i > 12 {
			v = 4096 // a few full-size rows are enough
		}
		r := make([]float32, v)
		scale := []float64{0.1, 1, 5, 30}[(i/4)%4]
		for j := range r {
			r[j] = float32(scale * rng.NormFloat64())
		}
		if i%7 == 0 { // ties and a dominant token
			for j := 0; j < len(r); j += 3 {
				r[j] = r[0]
			}
			r[len(r)/2] += 20
		}
		logits = append(logits, r)
		temps = append(temps, []float64{0.7, 1, 0.3, 1.5}[i%4])
		seeds = append(seeds, rng.Uint64())
		pos = append(pos, rng.IntN(5000))
	}
	toks, lps, err := e.SampleRows(context.Background(), logits, temps, seeds, pos)
	if err != nil {
		t.Fatal(err)
	}
	for i := range logits {
		tok, lp := sampleRow(logits[i], temps[i], keyed.SampleUniform(seeds[i], pos[i]))
		if tok != toks[i] || math.Float32bits(lp) != math.Float32bits(lps[i]) {
			t.Errorf("row %d (vocab %d, T %v): native picks %d (log-prob %v), torch server %d (%v)", i, len(logits[i]), temps[i], tok, lp, toks[i], lps[i])
		}
	}
}
