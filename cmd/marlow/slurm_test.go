package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Without Slurm on the machine, marlow slurm fails with one clear message
// before it reads anything.
func TestSlurmWithoutSbatch(t *testing.T) {
	smoke := filepath.Join("..", "..", "seeds", "smoke.yaml")
	stdout, stderr, code := runCLI(t, []string{"PATH=" + t.TempDir()}, "slurm", smoke, "--runs", t.TempDir())
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "no sbatch found on PATH") {
		t.Errorf("stderr %q; want one line saying no sbatch was found", stderr)
	}
}
