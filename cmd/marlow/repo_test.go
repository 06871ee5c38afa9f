package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// maxTrackedBytes is the largest file the repository may track outside a
// committed report's log archives (reports/<experiment>/*.tar.zst): build
// outputs, checkpoints and data sets belong in ignored folders.
const maxTrackedBytes = 20 << 20

// reportArchive matches the paths allowed above maxTrackedBytes.
var reportArchive = regexp.MustCompile(`^reports/[^/]+/[^/]+\.tar\.zst$`)

// oversized returns the paths whose size is above maxTrackedBytes and that
// are not report archives, each with its size in MiB.
func oversized(paths []string, size map[string]int64) []string {
	var out []string
	for _, p := range paths {
		if size[p] > maxTrackedBytes && !reportArchive.MatchString(p) {
			out = append(out, p+" ("+strconv.FormatInt(size[p]>>20, 10)+" MiB)")
		}
	}
	return out
}

func TestOversizedRule(t *testing.T) {
	size := map[string]int64{
		"cmd/marlow/marlow":           76 << 20,
		"reports/mini/logs.tar.zst":   30 << 20,
		"reports/mini/figures/a.png":  21 << 20,
		"seeds/models/s/weights.bin":  maxTrackedBytes,
		"reports/x/y/logs.tar.zst":    25 << 20,
		"README.md":                   10 << 10,
		"reports/demo/logs-a.tar.zst": 12 << 20,
	}
	var paths []string
	for p := range size {
		paths = append(paths, p)
	}
	got := strings.Join(oversized(paths, size), ",")
	for _, want := range []string{"cmd/marlow/marlow", "reports/mini/figures/a.png", "reports/x/y/logs.tar.zst"} {
		if !strings.Contains(got, want) {
			t.Errorf("oversized does not flag %s: %s", want, got)
		}
	}
	for _, ok := range []string{"reports/mini/logs.tar.zst", "seeds/models", "README.md", "logs-a"} {
		if strings.Contains(got, ok) {
			t.Errorf("oversized flags %s: %s", ok, got)
		}
	}
}

// No tracked file over maxTrackedBytes lies outside the report archives
// (the sizes are those of the blobs in the index, so a file staged but not
// yet committed counts too).
func TestNoLargeTrackedFiles(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("not a git checkout (%v): nothing tracked to check", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	ls := exec.Command("git", "ls-files", "--stage", "-z")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var paths, objects []string
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			t.Fatalf("git ls-files --stage: unexpected record %q", rec)
		}
		if f[0] == "160000" { // a submodule: no blob
			continue
		}
		paths = append(paths, path)
		objects = append(objects, f[1])
	}
	cat := exec.Command("git", "cat-file", "--batch-check=%(objectsize)")
	cat.Dir = root
	cat.Stdin = strings.NewReader(strings.Join(objects, "\n") + "\n")
	sizes, err := cat.Output()
	if err != nil {
		t.Fatalf("git cat-file: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(bytes.TrimSpace(sizes))), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("git cat-file gave %d sizes for %d files", len(lines), len(paths))
	}
	size := make(map[string]int64, len(paths))
	for i, l := range lines {
		n, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64)
		if err != nil {
			t.Fatalf("git cat-file: size of %s: %q", paths[i], l)
		}
		size[paths[i]] = n
	}
	if big := oversized(paths, size); len(big) > 0 {
		t.Errorf("tracked files over %d MiB outside reports/<experiment>/*.tar.zst: %s; untrack them (git rm --cached) and ignore them in .gitignore", maxTrackedBytes>>20, strings.Join(big, ", "))
	}
}
