package pretrain

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
)

// nVotesSpec is a one-cell voting spec with the given workflow.n_votes and
// pretrain.n_votes_mix ("" for none).
func nVotesSpec(t *testing.T, nVotes, mix string) *spec.Spec {
	t.Helper()
	src := "experiment: nv\nseeds: [1]\nmatrix:\n  workflows: [voting]\n  tasks: [synth-math]\n  scales: [s]\n  conditions: [base]\n" +
		"models:\n  s:\n    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n" +
		"workflow:\n  n_votes: " + nVotes + "\n"
	if mix != "" {
		src += "pretrain:\n  n_votes_mix: " + mix + "\n"
	}
	p := filepath.Join(t.TempDir(), "nv.yaml")
	s, err := spec.Parse(p, p, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func keyOf(t *testing.T, s *spec.Spec) string {
	t.Helper()
	j, err := FromSpec(s, "s", ConfigOf(s, "s"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := j.Key()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Without a mix n_votes is part of the key; with one, specs that differ
// only in n_votes share the key, the key differs from the no-mix key of the
// committed models (whose KeyJSON has no n_votes_mix), and the aggregator
// transcripts show every count of the mix.
func TestNVotesMix(t *testing.T) {
	k3, k5 := keyOf(t, nVotesSpec(t, "3", "")), keyOf(t, nVotesSpec(t, "5", ""))
	if k3 == k5 {
		t.Fatal("n_votes 3 and 5 share a pretraining key without a mix")
	}
	m3, m5 := keyOf(t, nVotesSpec(t, "3", "[3, 5]")), keyOf(t, nVotesSpec(t, "5", "[3, 5]"))
	if m3 != m5 {
		t.Errorf("with n_votes_mix [3, 5], n_votes 3 and 5 have keys %s and %s, want one", m3[:12], m5[:12])
	}
	if m3 == k3 {
		t.Error("the mix does not change the key")
	}
	j, err := FromSpec(nVotesSpec(t, "3", ""), "s", ConfigOf(nVotesSpec(t, "3", ""), "s"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := j.KeyJSON()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "n_votes_mix") {
		t.Errorf("KeyJSON without a mix names n_votes_mix (the committed keys would change):\n%s", doc)
	}
	s := nVotesSpec(t, "5", "[3, 5]")
	j, err = FromSpec(s, "s", ConfigOf(s, "s"))
	if err != nil {
		t.Fatal(err)
	}
	teacher, err := j.NewTeacher()
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := j.OpenTasks()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]int{}
	for i := range 200 {
		p, err := tasks[0].Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := teacher.RenderRole(tasks[0].Name(), study.Aggregator, p, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		counts[len(tr.Shown)]++
	}
	if got := slices.Sorted(maps.Keys(counts)); !slices.Equal(got, []int{3, 5}) {
		t.Errorf("aggregator transcripts show %v candidates (counts %v), want 3 and 5", got, counts)
	}
}

// A count outside the teacher's range, a duplicate, and a spec whose
// n_votes is not in the mix are refused, each naming its key.
func TestNVotesMixValidation(t *testing.T) {
	for _, tc := range []struct{ nVotes, mix, want string }{
		{"3", "[3, 12]", "pretrain.n_votes_mix[1]"},
		{"3", "[3, 3]", "duplicate"},
		{"4", "[3, 5]", "workflow.n_votes: 4 is not in pretrain.n_votes_mix"},
	} {
		src := "experiment: nv\nseeds: [1]\nmatrix:\n  workflows: [voting]\n  tasks: [synth-math]\n  scales: [s]\n  conditions: [base]\n" +
			"models:\n  s:\n    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\n" +
			"workflow:\n  n_votes: " + tc.nVotes + "\npretrain:\n  n_votes_mix: " + tc.mix + "\n"
		_, err := spec.Parse("nv.yaml", filepath.Join(t.TempDir(), "nv.yaml"), []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("n_votes %s, mix %s: err %v, want %q", tc.nVotes, tc.mix, err, tc.want)
		}
	}
}
