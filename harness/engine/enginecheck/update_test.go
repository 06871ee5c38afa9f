package enginecheck

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/marlowlab/marlow/harness/model"
)

// writeStepped writes adapter AdapterName under dir with weights ts and
// first moments (1-β1)·g.
func writeStepped(t *testing.T, dir string, ts []model.Tensor, g map[string][]float32) {
	t.Helper()
	ad := filepath.Join(dir, AdapterName)
	if err := model.WriteAdapter(ad, model.AdapterFile{Rank: adapterRank, Alpha: adapterAlpha, Targets: model.LoRATargets(), BaseModel: "marlow-native"}, ts); err != nil {
		t.Fatal(err)
	}
	var opt []model.Tensor
	for _, x := range ts {
		m := make([]float32, len(x.Data))
		for i, v := range g[x.Name] {
			m[i] = float32(0.1 * float64(v))
		}
		opt = append(opt, model.Tensor{Name: x.Name + ".exp_avg", Shape: x.Shape, Data: m},
			model.Tensor{Name: x.Name + ".exp_avg_sq", Shape: x.Shape, Data: make([]float32, len(x.Data))})
	}
	if err := model.WriteSafetensors(filepath.Join(ad, "optimizer.safetensors"), opt, map[string]string{"format": "marlow-adamw"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ad, "state.json"), []byte(`{"name": "policy", "seed": 7, "step": 1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompareUpdate steps a seeded adapter by ±lr per component in both
// "engines", then makes torch differ by 0.5 lr on one component above the
// noise floor and by 2 lr (the opposite sign) on one below it: the first
// is judged, the second only counted and replaced by native's value.
func TestCompareUpdate(t *testing.T) {
	cfg, err := model.LoadConfig(filepath.Join("..", "..", "..", "seeds", "models", "s-862b5de974d5", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	before := filepath.Join(work, "seeded")
	if err := WriteRandomAdapter(before, cfg); err != nil {
		t.Fatal(err)
	}
	_, x0, err := model.ReadAdapter(filepath.Join(before, AdapterName), cfg)
	if err != nil {
		t.Fatal(err)
	}
	const lr = 1e-3
	g := map[string][]float32{}
	step := func(x []model.Tensor) []model.Tensor {
		var out []model.Tensor
		for _, tt := range x {
			v := make([]float32, len(tt.Data))
			for i, w := range tt.Data {
				v[i] = w - float32(lr*math.Copysign(1, float64(g[tt.Name][i])))
			}
			out = append(out, model.Tensor{Name: tt.Name, Shape: tt.Shape, Data: v})
		}
		return out
	}
	for k, tt := range x0 {
		gv := make([]float32, len(tt.Data))
		for i := range gv {
			gv[i] = float32(0.01 * math.Sin(float64(7*k+i+1))) // |g| ≤ 0.01
		}
		g[tt.Name] = gv
	}
	// Component 0 of tensor 0: gradient below the floor (1e-4 x max).
	g[x0[0].Name][0] = 1e-9
	xn, xt := step(x0), step(x0)
	xt[0].Data[0] += 2 * lr            // opposite sign, below the floor
	xt[1].Data[3] += float32(0.5 * lr) // above the floor
	nd, td := filepath.Join(work, "native"), filepath.Join(work, "torch")
	writeStepped(t, nd, xn, g)
	writeStepped(t, td, xt, g)
	u, err := compareUpdate(cfg, before, nd, td, lr, 0.9, 1e-8, DefaultNoiseFloor)
	if err != nil {
		t.Fatal(err)
	}
	if u.below < 1 || u.flipped != 1 || u.flippedAbove != 0 {
		t.Errorf("below %d, flipped %d (above the floor %d); want ≥ 1, 1, 0", u.below, u.flipped, u.flippedAbove)
	}
	if math.Abs(u.maxAbove-0.5) > 1e-3 || math.Abs(u.maxBelow-2) > 1e-3 {
		t.Errorf("max |Δ update| above %.4g lr, below %.4g lr; want 0.5 and 2", u.maxAbove, u.maxBelow)
	}
	if u.masked[0].Data[0] != xn[0].Data[0] || u.masked[1].Data[3] != xt[1].Data[3] {
		t.Error("masked: the below-floor component must be native's, the others torch's")
	}
	r := Report{LogProbTol: DefaultLogProbTol, StepTol: DefaultStepTol, UpdateTol: DefaultUpdateTol, FreshTensors: 1,
		Components: u.components, BelowFloor: u.below, UpdateAbove: u.maxAbove,
		CoherenceRoles: 2, CoherenceMinScale: 0.6, History: History{Roles: 2, StepFactor: 0.6}, // a coherence check that passed
		Rollout: Rollout{Seqs: 1, Tokens: 3, Max: 2e-5}, // and a rollout agreement
		Routing: passedRouting(), AgentCosN: 2}          // and routing checks that passed
	if f := r.Failures(); len(f) != 1 {
		t.Errorf("failures %q, want the update above the floor only", f)
	}
	if err := writeMasked(filepath.Join(work, "masked"), td, cfg, u.masked); err != nil {
		t.Fatal(err)
	}
	if _, got, err := model.ReadAdapter(filepath.Join(work, "masked", AdapterName), cfg); err != nil || got[0].Data[0] != xn[0].Data[0] {
		t.Fatalf("masked adapter: %v", err)
	}
}
