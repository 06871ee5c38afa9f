package analysis

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// sameValue compares two values field by field, NaN equal to NaN, leaving
// out the field named skip (at any depth); it returns where they differ.
func sameValue(a, b reflect.Value, where, skip string) string {
	if a.Kind() != b.Kind() {
		return where + ": kinds differ"
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			return fmt.Sprintf("%s: %v and %v", where, x, y)
		}
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return where + ": one is nil"
			}
			return ""
		}
		return sameValue(a.Elem(), b.Elem(), where, skip)
	case reflect.Struct:
		for i := range a.NumField() {
			name := a.Type().Field(i).Name
			if name == skip {
				continue
			}
			if d := sameValue(a.Field(i), b.Field(i), where+"."+name, skip); d != "" {
				return d
			}
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: lengths %d and %d", where, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := sameValue(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", where, i), skip); d != "" {
				return d
			}
		}
	case reflect.Map:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d and %d keys", where, a.Len(), b.Len())
		}
		for _, k := range a.MapKeys() {
			if d := sameValue(a.MapIndex(k), b.MapIndex(k), fmt.Sprintf("%s[%v]", where, k), skip); d != "" {
				return d
			}
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			return fmt.Sprintf("%s: %v and %v", where, a.Bool(), b.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			return fmt.Sprintf("%s: %v and %v", where, a.Int(), b.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if a.Uint() != b.Uint() {
			return fmt.Sprintf("%s: %v and %v", where, a.Uint(), b.Uint())
		}
	case reflect.String:
		if a.String() != b.String() {
			return fmt.Sprintf("%s: %q and %q", where, a.String(), b.String())
		}
	}
	return ""
}

// fixtureRuns writes the analysistest fixture's runs to a folder and
// archives that folder, returning both paths.
func fixtureRuns(t *testing.T) (dir, arch string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "runs")
	if err := analysistest.WriteRuns(dir, analysistest.Fixture()); err != nil {
		t.Fatal(err)
	}
	arch = filepath.Join(t.TempDir(), "runs.tar.zst")
	if err := runlog.Archive(dir, arch); err != nil {
		t.Fatal(err)
	}
	return dir, arch
}

// TestLoadMatchesAnalyze: the study read streaming (samples reduced run by
// run, any number of jobs, from a folder or an archive) is the study of
// the same runs held whole in memory.
func TestLoadMatchesAnalyze(t *testing.T) {
	dir, arch := fixtureRuns(t)
	whole, err := runlog.ReadRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Analyze(whole)
	if err != nil {
		t.Fatal(err)
	}
	captures := 0
	for _, src := range []string{dir, arch} {
		for _, jobs := range []int{1, 2, 5} {
			got, err := LoadWith(context.Background(), LoadOptions{Jobs: jobs}, src)
			if err != nil {
				t.Fatalf("%s jobs %d: %v", src, jobs, err)
			}
			if d := sameValue(reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem(), "study", "run"); d != "" {
				t.Errorf("%s jobs %d: the streamed study differs from the whole one at %s", filepath.Base(src), jobs, d)
			}
			for i, r := range got.Runs {
				for _, role := range study.WorkflowOf(r.Cell.Workflow).Roles() {
					g, w := r.CaptureAgainst(role), want.Runs[i].CaptureAgainst(role)
					captures += len(g)
					if d := sameValue(reflect.ValueOf(g), reflect.ValueOf(w), "captures", ""); d != "" {
						t.Errorf("%s jobs %d run %s against %s: %s", filepath.Base(src), jobs, r.RunID, role, d)
					}
				}
			}
		}
	}
	if captures == 0 {
		t.Fatal("no capture comparison made: the test compares nothing of the samples' text")
	}
}

// TestValSampleKeeper: the keeper drops training rows and keeps the text
// of the first and last validation step of each workflow and policy, in
// whatever order the steps come, and of an aggregator of an old log the
// text up to its first digit.
func TestValSampleKeeper(t *testing.T) {
	row := func(step int64, split, role, policy, text string) runlog.SampleRow {
		return runlog.SampleRow{Step: step, Split: split, Workflow: "voting", Role: role, Policy: policy, Completion: text}
	}
	in := [][]runlog.SampleRow{
		{row(5, "val", "generator", "p", "g5"), row(5, "train", "generator", "p", "t5"), row(5, "val", "final", "", "f5")},
		{row(3, "val", "generator", "p", "g3"), row(3, "val", "aggregator", "q", "pick 2 of 3")},
		{row(7, "val", "generator", "p", "g7"), row(4, "val", "aggregator", "q", "a4 says 1")},
		{row(7, "val", "generator", "p", "g7b"), row(6, "val", "aggregator", "q", "no digit"), row(5, "val", "aggregator", "q", "x9")},
	}
	for _, version := range []int{2, 3} {
		k := newValSampleKeeper(runlog.Manifest{SchemaVersion: version})
		for _, rows := range in {
			k.Add(rows)
		}
		var got []string
		for _, r := range k.Rows() {
			got = append(got, fmt.Sprintf("%d %s %q", r.Step, r.Role, r.Completion))
		}
		old := version < loggedFallbacks
		pick := func(s string) string {
			if old {
				return s
			}
			return ""
		}
		want := []string{
			`5 generator ""`, `5 final ""`,
			`3 generator "g3"`, `3 aggregator "pick 2 of 3"`,
			`7 generator "g7"`, fmt.Sprintf(`4 aggregator %q`, pick("a4")),
			`7 generator "g7b"`, `6 aggregator "no digit"`, fmt.Sprintf(`5 aggregator %q`, pick("x9")),
		}
		// the aggregator's steps run 3, 4, 6, 5: 6 is its last so far when
		// 5 comes, and stays its last
		if !reflect.DeepEqual(got, want) {
			t.Errorf("schema version %d:\n got %q\nwant %q", version, got, want)
		}
	}
}

// TestLoadMergesCopies: a run read from two sources is kept once when its
// copies hold the same bytes, and is an error naming both places when
// they differ; --only's selection that keeps no run is named.
func TestLoadMergesCopies(t *testing.T) {
	dir, arch := fixtureRuns(t)
	one, err := LoadWith(context.Background(), LoadOptions{Jobs: 2}, dir)
	if err != nil {
		t.Fatal(err)
	}
	both, err := LoadWith(context.Background(), LoadOptions{Jobs: 2}, dir, arch)
	if err != nil {
		t.Fatal(err)
	}
	if d := sameValue(reflect.ValueOf(both).Elem(), reflect.ValueOf(one).Elem(), "study", "run"); d != "" {
		t.Errorf("the study of two identical copies differs from one's at %s", d)
	}
	// Written again with one logged value changed, so the copies' bytes
	// differ whatever the manifests' times (the writer sets those, to the
	// second, and may give both copies the same).
	changed := analysistest.Fixture()
	changed[0].Evals[0].MeanLen++
	other := filepath.Join(t.TempDir(), "other")
	if err := analysistest.WriteRuns(other, changed); err != nil {
		t.Fatal(err)
	}
	_, err = LoadWith(context.Background(), LoadOptions{Jobs: 2}, dir, other)
	if err == nil || !strings.Contains(err.Error(), "different bytes") || !strings.Contains(err.Error(), other) {
		t.Errorf("copies with different bytes: %v", err)
	}
	_, err = LoadWith(context.Background(), LoadOptions{Keep: func(string) bool { return false }, Only: "none*"}, dir)
	if err == nil || !strings.Contains(err.Error(), `--only "none*"`) {
		t.Errorf("a selection of no run: %v", err)
	}
}
