//go:build slow

package pretrain

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/spec"
)

// TestEqualityProbe asks whether the s shape can learn a majority
// aggregator's answers line on its own, away from the rest of the corpus
// (minutes, so it only builds with -tags slow; not part of make
// check-slow). For each line format it pretrains s from the same initial
// weights on transcripts whose prompt lists three candidates' answers and
// whose completion is the answers line (1,500 steps of 16, pretrain's
// default rate and schedule), then writes the line greedily for 200 new
// answer triples. Answers are two-digit numbers, equal to a common one
// about half the time and one or two off it (the near misses the base
// generators make) or random otherwise. Outvoted triples (candidates 2 and
// 3 agree, candidate 1 differs) are where a majority aggregator can beat
// candidate 1. Pilots 17 and 18 (seeds/README.md) found the
// majority-adjacent marks unlearnt inside the full corpus; this probe
// shows that the format, not the mix, is the obstacle: the adjacent
// marks stay unlearnt here too, while majority-match's lookup line is
// learnt.
func TestEqualityProbe(t *testing.T) {
	const steps, batch, evalN = 1500, 16, 200
	rates := map[string]float64{}
	for _, sel := range []string{spec.SelectionMajorityAdjacent, spec.SelectionMajorityMatch} {
		lines, outvoted, outvotedRight := equalityProbe(t, sel, steps, batch, evalN)
		t.Logf("%s: %d/%d lines right; outvoted triples: %d/%d lines right", sel, lines, evalN, outvotedRight, outvoted)
		if outvoted < 10 {
			t.Fatalf("%s: only %d outvoted triples among %d", sel, outvoted, evalN)
		}
		rates[sel] = float64(outvotedRight) / float64(outvoted)
	}
	if m, a := rates[spec.SelectionMajorityMatch], rates[spec.SelectionMajorityAdjacent]; m < 0.8 || m-a < 0.5 {
		t.Errorf("outvoted lines right: majority-match %.2f, majority-adjacent %.2f; want match at least 0.80 and 0.50 above adjacent", m, a)
	}
}

// equalityProbe pretrains s on the answers lines of selection sel and
// returns how many of evalN greedy lines are right, how many triples are
// outvoted, and how many of those lines are right.
func equalityProbe(t *testing.T, sel string, steps, batch, evalN int) (right, outvoted, outvotedRight int) {
	t.Helper()
	tok, err := model.NewCharTokenizer(model.DefaultAlphabet())
	if err != nil {
		t.Fatal(err)
	}
	shape := spec.Tiny{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 192, RopeTheta: 10000, MaxPositions: 256} // s, shorter context
	cfg := TinyModel(shape, tok.VocabSize(), int(tok.ID(model.ImEnd)))
	eng, err := native.New(cfg, tok, native.InitWeights(cfg, 1), native.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	line := func(answers []string) string { return answersLineOf(sel, datasets.KindMath, answers) }
	ctx := context.Background()
	def := DefaultConfig()
	sched := engine.Schedule{Kind: "cosine", Warmup: def.WarmupSteps, Total: steps, MinRatio: def.MinLRRatio}
	r := rand.New(rand.NewPCG(1, 2))
	for step := range steps {
		exs := make([]native.Example, batch)
		for i := range exs {
			answers := probeAnswers(r)
			ex, err := Encode(tok, Transcript{Prompt: probePrompt(answers), Completion: line(answers)})
			if err != nil {
				t.Fatal(err)
			}
			exs[i] = ex
		}
		if _, err := eng.Supervised(ctx, exs, supervisedOptions(def, sched.LR(def.LR, step))); err != nil {
			t.Fatal(err)
		}
	}
	er := rand.New(rand.NewPCG(9, 9))
	triples := make([][]string, evalN)
	reqs := make([]engine.Request, evalN)
	for i := range reqs {
		triples[i] = probeAnswers(er)
		reqs[i] = engine.Request{Messages: probePrompt(triples[i]), MaxNewTokens: 64, Temperature: 1e-6, Seed: uint64(i)}
	}
	comps, err := eng.Generate(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range comps {
		ok := strings.TrimSpace(c.Text) == line(triples[i])
		if ok {
			right++
		}
		if a, p := triples[i], SharedPick(triples[i]); p > 0 && a[0] != a[p-1] { // outvoted, as MajorityOf counts it
			outvoted++
			if ok {
				outvotedRight++
			}
		}
	}
	return right, outvoted, outvotedRight
}

// probeAnswers draws three two-digit answers: each equal to a common one
// with probability 0.55, one or two off it with 0.30, else random.
func probeAnswers(r *rand.Rand) []string {
	common := 10 + r.IntN(80)
	out := make([]string, 3)
	for i := range out {
		switch x := r.Float64(); {
		case x < 0.55:
			out[i] = strconv.Itoa(common)
		case x < 0.85:
			d := 1 + r.IntN(2)
			if r.IntN(2) == 0 {
				d = -d
			}
			out[i] = strconv.Itoa(common + d)
		default:
			out[i] = strconv.Itoa(10 + r.IntN(80))
		}
	}
	return out
}

// probePrompt lists the candidates' answers as the aggregator's prompt
// shows them, without their solutions.
func probePrompt(answers []string) []engine.Message {
	var b strings.Builder
	for i, a := range answers {
		fmt.Fprintf(&b, "Candidate %d:\nAnswer: %s\n", i+1, a)
	}
	return []engine.Message{{Role: "user", Content: b.String()}}
}
