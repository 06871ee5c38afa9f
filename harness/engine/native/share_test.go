package native

import (
	"context"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
)

// shareRequests are requests with identical prompts, prompts sharing a long
// prefix, a prompt shared across adapters, and finished-at-once requests.
func shareRequests() []engine.Request {
	long := "the same long instruction text, then a problem: "
	var reqs []engine.Request
	for i, c := range []struct {
		ad, msg string
		n       int
	}{
		{"a", long + "1+2", 10}, {"a", long + "1+2", 7}, {"", long + "1+2", 9}, {"a", long + "3+4+5", 12},
		{"", long + "1+2", 0}, {"a", long + "1+2", 11}, {"b", long + "3+4+5", 8}, {"a", "short", 6},
		{"a", long + "3+4+5", 12}, {"b", long + "3+4", 5}, {"a", long, 4},
	} {
		reqs = append(reqs, engine.Request{Adapter: c.ad, Messages: chat(c.msg), MaxNewTokens: c.n, Temperature: 0.9, Seed: uint64(i + 1)})
	}
	return reqs
}

// TestSharedPrefill: prefilling shared prompt prefixes once gives the
// same tokens and log-probs, bit for bit, as prefilling every prompt, for
// any thread count.
func TestSharedPrefill(t *testing.T) {
	reqs := shareRequests()
	var want []engine.Completion
	for _, threads := range []int{1, 3} {
		for _, noShare := range []bool{true, false} {
			e := testEngine(t, false, threads)
			for i, name := range []string{"a", "b"} {
				if err := e.NewAdapter(name, adapterCfg(4)); err != nil {
					t.Fatal(err)
				}
				copy(e.adapters[name].Data, randVec(len(e.adapters[name].Data), uint64(40+i), 0.3))
			}
			e.noShare = noShare
			if !noShare {
				// The plan must share: identical prompts and the common instruction.
				var seqs []genSeq
				order := make([]int, len(reqs))
				for i, r := range reqs {
					p, err := e.tok.EncodeChat(r.Messages, true)
					if err != nil {
						t.Fatal(err)
					}
					ad, _ := e.adapter(r.Adapter)
					seqs = append(seqs, genSeq{prompt: p, ad: ad})
					order[i] = i
				}
				plan := e.planPrefill(seqs, order)
				if plan[1].donor != 0 || plan[1].shared != len(seqs[1].prompt)-1 || plan[3].donor != 0 || plan[2].donor != -1 || plan[6].donor != -1 || plan[9].donor != 6 {
					t.Fatalf("unexpected plan %+v", plan)
				}
			}
			got, err := e.Generate(context.Background(), reqs)
			if err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = got
				continue
			}
			for i := range want {
				if !slices.Equal(got[i].IDs, want[i].IDs) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) || got[i].Finish != want[i].Finish {
					t.Errorf("threads %d share %v request %d: got %v %v, want %v %v", threads, !noShare, i, got[i].IDs, got[i].LogProbs, want[i].IDs, want[i].LogProbs)
				}
			}
		}
	}
}
