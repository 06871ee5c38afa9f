package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// IgnoreFile is the .gitignore marlow writes into every experiment folder
// of a runs root: it ignores everything there (itself included), so run
// folders never make a repository dirty, wherever --runs points.
const IgnoreFile = ".gitignore"

// ignoreContent is what IgnoreFile holds.
const ignoreContent = "# Written by marlow: run logs are outputs, never part of a commit\n" +
	"# (archive them with `marlow archive` to keep them).\n*\n"

// IgnoreRuns makes sure the experiment folder <runsDir>/<experiment> exists
// and holds a .gitignore that ignores everything in it, so that runs
// written there never count as uncommitted changes of a repository that
// holds the runs root. An existing .gitignore is left as it is. The runner
// calls it before it checks the tree for changes, so a runs folder written
// by an older marlow is covered from the next run on.
func IgnoreRuns(runsDir, experiment string) error {
	dir := RunDir(runsDir, experiment, "")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("runs folder: %w", err)
	}
	p := filepath.Join(dir, IgnoreFile)
	if _, err := os.Lstat(p); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("runs folder: %w", err)
	}
	if err := os.WriteFile(p, []byte(ignoreContent), 0o644); err != nil {
		return fmt.Errorf("runs folder: %w", err)
	}
	return nil
}
