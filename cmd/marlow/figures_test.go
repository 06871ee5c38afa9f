package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedReportsRebuild: every committed report folder with log
// archives (reports/<experiment>/*.tar.zst, one per seed when a study was
// archived seed by seed) is what `make figures` rebuilds from them, file for
// file and byte for byte, and holds no file the rebuild does not write.
func TestCommittedReportsRebuild(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "..", "reports", "*"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, dir := range dirs {
		archives, _ := filepath.Glob(filepath.Join(dir, "*.tar.zst"))
		if len(archives) == 0 {
			continue
		}
		checked++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			// make figures runs from the repository root with relative
			// paths, which the report quotes in its rebuild command: the
			// same layout in a temporary root.
			root := t.TempDir()
			rel := filepath.Join("reports", filepath.Base(dir))
			out := filepath.Join(root, rel)
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			args := []string{"report"}
			for _, a := range archives {
				data, err := os.ReadFile(a)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(out, filepath.Base(a)), data, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, filepath.ToSlash(filepath.Join(rel, filepath.Base(a))))
			}
			args = append(args, "--out", filepath.ToSlash(rel))
			if _, stderr, code := runCLIIn(t, root, nil, args...); code != 0 {
				t.Fatalf("marlow %v: exit %d\n%s", args, code, stderr)
			}
			rebuilt := readTree(t, out)
			committed := readTree(t, dir)
			for _, a := range archives {
				delete(committed, filepath.Base(a))
				delete(rebuilt, filepath.Base(a))
			}
			for name, data := range rebuilt {
				c, ok := committed[name]
				switch {
				case !ok:
					t.Errorf("%s: the rebuild writes %s, which is not committed (run make figures)", dir, name)
				case !bytes.Equal(c, data):
					t.Errorf("%s: committed %s differs from its rebuild (run make figures)", dir, name)
				}
			}
			for name := range committed {
				if _, ok := rebuilt[name]; !ok {
					t.Errorf("%s: committed %s is not written by the rebuild (a stale file?)", dir, name)
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no committed report with log archives under reports/")
	}
}
