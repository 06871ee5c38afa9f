package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// On a fresh clone (no runs folder) the error of a command reading a
// spec's runs names the committed archives: one logs.tar.zst for the demo,
// one archive per seed for mini, all of them in one `marlow report`.
func TestFreshCloneHintNamesEveryArchive(t *testing.T) {
	runs := t.TempDir()
	cases := []struct {
		spec string
		want []string
	}{
		{"demo", []string{"reports/demo/logs.tar.zst"}},
		{"mini", []string{"reports/mini/logs-seed1.tar.zst", "reports/mini/logs-seed2.tar.zst", "reports/mini/logs-seed3.tar.zst"}},
		{"dynamics", []string{"reports/dynamics/logs-a.tar.zst"}},
	}
	for _, tc := range cases {
		_, _, err := execCLI(t, "check", filepath.Join("..", "..", "seeds", tc.spec+".yaml"), "--runs", runs)
		if err == nil {
			t.Fatalf("%s: check of an empty runs root succeeded", tc.spec)
		}
		msg := filepath.ToSlash(err.Error())
		if !strings.Contains(msg, "`marlow report ") {
			t.Errorf("%s: %q does not suggest marlow report", tc.spec, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not name %s", tc.spec, msg, w)
			}
		}
	}
}
