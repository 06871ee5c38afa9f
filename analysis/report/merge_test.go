package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReportMergesSources splits the fixture's runs into two archives and
// checks that the report of both together is byte-identical to the report
// of one archive holding them all; a run given twice with the same bytes is
// read once, and with different bytes is an error naming it.
func TestReportMergesSources(t *testing.T) {
	tmp := t.TempDir()
	all := filepath.Join(tmp, "all")
	if err := analysistest.WriteRuns(all, analysistest.Fixture()); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(all)
	if err != nil {
		t.Fatal(err)
	}
	parts := [2]string{filepath.Join(tmp, "a"), filepath.Join(tmp, "b")}
	for i, e := range ents {
		copyTree(t, filepath.Join(all, e.Name()), filepath.Join(parts[i%2], e.Name()))
	}
	archive := func(dir string) string {
		out := dir + ".tar.zst"
		if err := runlog.Archive(dir, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	one := archive(all)
	a, b := archive(parts[0]), archive(parts[1])

	render := func(srcs ...string) []File {
		t.Helper()
		st, err := analysis.LoadAll(srcs...)
		if err != nil {
			t.Fatalf("LoadAll(%v): %v", srcs, err)
		}
		files, err := Render(st, fixtureOpts)
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	want := render(one)
	for _, srcs := range [][]string{{a, b}, {b, a}, {one, all}, {parts[0], b, one}} {
		got := render(srcs...)
		if len(got) != len(want) {
			t.Fatalf("%v: %d files, want %d", srcs, len(got), len(want))
		}
		for i := range got {
			if got[i].Path != want[i].Path || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Errorf("%v: %s differs from the report of one archive\n%s", srcs, got[i].Path, firstDiff(string(want[i].Data), string(got[i].Data)))
			}
		}
	}

	// The same run with other bytes (here its manifest) is refused.
	changed := filepath.Join(tmp, "changed")
	id := ents[0].Name()
	copyTree(t, filepath.Join(all, id), filepath.Join(changed, id))
	mp := filepath.Join(changed, id, runlog.ManifestFile)
	data, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = analysis.LoadAll(one, changed)
	if err == nil || !strings.Contains(err.Error(), "run "+id+" ") || !strings.Contains(err.Error(), "different bytes") {
		t.Errorf("a run present twice with different bytes: %v; want an error naming %s", err, id)
	}
}
