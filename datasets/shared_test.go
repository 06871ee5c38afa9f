package datasets

import (
	"fmt"
	"strings"
	"testing"
)

func problems(n int) []Problem {
	out := make([]Problem, n)
	for i := range out {
		out[i] = Problem{ID: fmt.Sprintf("p%03d", i), Prompt: fmt.Sprintf("prompt %d", i)}
	}
	return out
}

func TestSplitProblems(t *testing.T) {
	probs := problems(400)
	byPrompt := func(p Problem) string { return p.Prompt }
	cases := []struct {
		name    string
		valFrac float64
		valSize int
		wantVal int // -1: about valFrac of the problems
	}{
		{name: "uncapped", valFrac: 0.1, valSize: 0, wantVal: -1},
		{name: "capped", valFrac: 0.1, valSize: 7, wantVal: 7},
		{name: "cap above split", valFrac: 0.1, valSize: 1000, wantVal: -1},
		{name: "no validation", valFrac: 0, valSize: 5, wantVal: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			train, val := SplitProblems(probs, 3, tc.valFrac, tc.valSize, "test/valcap", byPrompt)
			if len(train)+len(val) != len(probs) {
				t.Fatalf("%d train + %d val != %d", len(train), len(val), len(probs))
			}
			switch {
			case tc.wantVal >= 0 && len(val) != tc.wantVal:
				t.Fatalf("%d validation problems, want %d", len(val), tc.wantVal)
			case tc.wantVal < 0 && (len(val) < 20 || len(val) > 60):
				t.Fatalf("%d validation problems, want about %d", len(val), int(tc.valFrac*400))
			}
			seen := map[string]bool{}
			for _, side := range [][]Problem{train, val} {
				for i, p := range side {
					if seen[p.ID] {
						t.Fatalf("%s on both sides", p.ID)
					}
					seen[p.ID] = true
					if i > 0 && side[i-1].ID >= p.ID {
						t.Fatalf("input order lost at %s after %s", p.ID, side[i-1].ID)
					}
				}
			}
			// A problem's side depends only on its own prompt, not on the rest.
			_, val2 := SplitProblems(probs[:200], 3, tc.valFrac, 0, "test/valcap", byPrompt)
			_, full := SplitProblems(probs, 3, tc.valFrac, 0, "test/valcap", byPrompt)
			for _, p := range val2 {
				if !containsID(full, p.ID) {
					t.Fatalf("%s moved side when the file grew", p.ID)
				}
			}
		})
	}
}

func containsID(ps []Problem, id string) bool {
	for _, p := range ps {
		if p.ID == id {
			return true
		}
	}
	return false
}

func TestHeldOutValidation(t *testing.T) {
	// Candidates cycle through a prompt space of the given size.
	run := func(space, size int) ([]Problem, error) {
		draw := func(j uint64) (int, string, bool) {
			k := int(j) % space
			return k, fmt.Sprintf("q%d", k), k%5 != 4 // every fifth is rejected by the generator
		}
		return HeldOutValidation("test", 9, size, draw, func(k int, c int) Problem {
			return Problem{ID: fmt.Sprintf("v%d", k), Prompt: fmt.Sprintf("q%d", c)}
		})
	}
	val, err := run(1000, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(val) != 10 {
		t.Fatalf("%d problems, want 10", len(val))
	}
	seen := map[string]bool{}
	for k, p := range val {
		if p.ID != fmt.Sprintf("v%d", k) || seen[p.Prompt] || !HeldOut(9, p.Prompt) {
			t.Fatalf("problem %d: %+v (repeat %v, held out %v)", k, p, seen[p.Prompt], HeldOut(9, p.Prompt))
		}
		var c int
		fmt.Sscanf(p.Prompt, "q%d", &c)
		if c%5 == 4 {
			t.Fatalf("rejected candidate %s kept", p.Prompt)
		}
		seen[p.Prompt] = true
	}
	again, _ := run(1000, 10)
	if fmt.Sprint(again) != fmt.Sprint(val) {
		t.Fatal("same draws gave a different set")
	}
	if _, err := run(20, 10); err == nil || !strings.Contains(err.Error(), "test: found only") {
		t.Fatalf("tiny prompt space: err %v, want a 'found only' error", err)
	}
}

func TestFilePool(t *testing.T) {
	pool := NewFilePool("src", 4, problems(5), problems(2))
	seen := map[string]int{}
	for i := int64(0); i < 10; i++ {
		p, err := pool.Train(i)
		if err != nil {
			t.Fatal(err)
		}
		seen[p.ID]++
	}
	for _, p := range problems(5) {
		if seen[p.ID] != 2 {
			t.Fatalf("%s visited %d times in two epochs, want 2", p.ID, seen[p.ID])
		}
	}
	val, _ := pool.Validation()
	val[0].ID = "changed"
	if again, _ := pool.Validation(); again[0].ID == "changed" {
		t.Fatal("Validation returned the pool's own slice")
	}
	if pool.TrainSize() != 5 {
		t.Fatalf("TrainSize %d", pool.TrainSize())
	}
	for _, tc := range []struct {
		pool FilePool
		i    int64
		want string
	}{
		{NewFilePool("src", 4, nil, problems(2)), 0, "src: no train problems"},
		{pool, -1, "src: negative train cursor -1"},
	} {
		if _, err := tc.pool.Train(tc.i); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Train(%d): err %v, want %q", tc.i, err, tc.want)
		}
	}
}

func TestValidationOnce(t *testing.T) {
	var v ValidationOnce
	calls := 0
	build := func() ([]Problem, error) { calls++; return problems(3), nil }
	a, _ := v.Get(build)
	a[0].ID = "changed"
	b, err := v.Get(build)
	if err != nil || calls != 1 || b[0].ID != "p000" {
		t.Fatalf("calls %d, err %v, first %q", calls, err, b[0].ID)
	}
	var bad ValidationOnce
	if _, err := bad.Get(func() ([]Problem, error) { return nil, fmt.Errorf("boom") }); err == nil {
		t.Fatal("build error lost")
	}
}

func TestCapProblems(t *testing.T) {
	probs := problems(50)
	key := func(p Problem) string { return p.ID }
	kept, rest := CapProblems(probs, 2, 10, "test/cap", key)
	if len(kept) != 10 || len(rest) != 40 {
		t.Fatalf("%d kept, %d rest", len(kept), len(rest))
	}
	for _, side := range [][]Problem{kept, rest} {
		for i := 1; i < len(side); i++ {
			if side[i-1].ID >= side[i].ID {
				t.Fatalf("input order lost at %s", side[i].ID)
			}
		}
	}
	// The kept set depends on the seed, not on the other problems' order.
	other, _ := CapProblems(probs, 3, 10, "test/cap", key)
	if fmt.Sprint(other) == fmt.Sprint(kept) {
		t.Fatal("seed does not change the cap")
	}
	rev := append([]Problem(nil), probs...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	kr, _ := CapProblems(rev, 2, 10, "test/cap", key)
	ids := map[string]bool{}
	for _, p := range kept {
		ids[p.ID] = true
	}
	for _, p := range kr {
		if !ids[p.ID] {
			t.Fatalf("row order changed the cap: %s", p.ID)
		}
	}
	if all, rest := CapProblems(probs, 2, 0, "test/cap", key); len(all) != 50 || rest != nil {
		t.Fatalf("no cap: %d %d", len(all), len(rest))
	}
}
