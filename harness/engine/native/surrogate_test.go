package native

import (
	"context"
	"math"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
)

// TestSurrogateDerivative: the derivative the gradient uses is the
// derivative of the loss the step reports, in every region of the clipped
// ratio (inside, clipped below, clipped above; positive and negative
// advantages) with and without the KL penalty.
func TestSurrogateDerivative(t *testing.T) {
	const lo, hi, h = 0.2, 0.28, 1e-6
	cases := []struct {
		name            string
		lp, old, base   float64
		adv, coef       float64
		wantClipped     bool
		wantZeroPolicyD bool // the policy term's gradient vanishes
	}{
		{"inside, A>0", -1.0, -1.05, -1.2, 1.3, 0, false, false},
		{"inside, A<0, KL", -1.0, -0.95, -0.7, -0.8, 0.5, false, false},
		{"above the clip, A>0", -1.0, -1.5, -1.1, 0.9, 0, true, true},
		{"above the clip, A<0", -1.0, -1.5, -1.1, -0.9, 0.3, false, false},
		{"below the clip, A<0", -1.5, -1.0, -1.2, -0.6, 0, true, true},
		{"below the clip, A>0, KL", -1.5, -1.0, -1.2, 0.6, 0.2, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := surrogate(c.lp, c.old, c.base, c.adv, c.coef, lo, hi)
			lossAt := func(lp float64) float64 { return surrogate(lp, c.old, c.base, c.adv, c.coef, lo, hi).loss }
			fd := (lossAt(c.lp+h) - lossAt(c.lp-h)) / (2 * h)
			if math.Abs(fd-tl.dlp) > 1e-6*math.Max(1, math.Abs(fd)) {
				t.Errorf("dℓ/dlp %v, finite difference %v", tl.dlp, fd)
			}
			if tl.clipped != c.wantClipped {
				t.Errorf("clipped %v, want %v (ratio %v)", tl.clipped, c.wantClipped, tl.ratio)
			}
			policyD := tl.dlp
			if c.coef != 0 {
				policyD -= c.coef * (1 - math.Exp(c.base-c.lp))
			}
			if (math.Abs(policyD) < 1e-15) != c.wantZeroPolicyD {
				t.Errorf("policy-term derivative %v", policyD)
			}
		})
	}
}

// TestLoggedLossIsTheAppliedLoss: the loss TrainStep logs is the loss whose
// gradient it applied. A small plain-SGD step along that gradient lowers
// the reported loss by |g|² lr to first order, and the gradient the step
// recomputes afterwards is the one of that lowered loss.
func TestLoggedLossIsTheAppliedLoss(t *testing.T) {
	e, ad, turns := grpoFixture(t, 1)
	opt := defaultTrainOptions()
	opt.KLCoef = map[string]float64{"aggregator": 0.5}
	ctx := context.Background()
	before, gg, err := e.grpoStep(ctx, "p", turns, opt, false)
	if err != nil {
		t.Fatal(err)
	}
	logged, err := e.TrainStep(ctx, "p", turns, opt)
	if err != nil {
		t.Fatal(err)
	}
	if logged.Total.Loss != before.Total.Loss {
		t.Fatalf("TrainStep logged loss %v, the loss of its gradient is %v", logged.Total.Loss, before.Total.Loss)
	}
	// Move along -g by hand and compare the change of the reported loss
	// with the first-order prediction -lr |g|².
	const lr = 1e-3
	copy(ad.Data, randVec(len(ad.Data), 21, 0.3))
	g2 := dot64(gg.total, gg.total)
	for i := range ad.Data {
		ad.Data[i] -= float32(lr) * gg.total[i]
	}
	after, _, err := e.grpoStep(ctx, "p", turns, opt, false)
	if err != nil {
		t.Fatal(err)
	}
	got, want := after.Total.Loss-before.Total.Loss, -lr*g2
	if math.Abs(got-want) > 0.1*math.Abs(want) {
		t.Fatalf("loss changed by %v along -lr g, first order predicts %v", got, want)
	}
}

// TestEveryLossModeTrains: every loss aggregation mode of the study is one
// the engine accepts and weights.
func TestEveryLossModeTrains(t *testing.T) {
	for _, mode := range study.LossAggs {
		opt := defaultTrainOptions()
		opt.LossAgg = mode
		if err := checkTrainOptions(opt); err != nil {
			t.Errorf("%s: %v", mode, err)
		}
		if w := aggWeight(mode, 2, 10, 4); !(w > 0) {
			t.Errorf("%s: weight %v", mode, w)
		}
	}
}
