package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeMaxLines is the README's length limit: what marlow is, the two
// commands, each study's answer and a map of docs/; the rest lives in
// docs/.
const readmeMaxLines = 200

var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)

// The README fits its limit, and every relative link of the README,
// DESIGN.md and docs/*.md names a file or folder of the repository.
func TestDocsShapeAndLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move detail into docs/", n, readmeMaxLines)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 8 {
		t.Fatalf("docs/ holds %d pages", len(pages))
	}
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "DESIGN.md"))
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			abs := filepath.Join(filepath.Dir(p), filepath.FromSlash(target))
			rel, err := filepath.Rel(root, abs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(abs); err != nil {
				rp, _ := filepath.Rel(root, p)
				t.Errorf("%s links %s, which does not exist (%s)", rp, target, filepath.ToSlash(rel))
			}
		}
	}
}
