package runner

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// The preflight's disk check refuses a runs folder with less free space
// than the estimate of the runs still to write, says what to do, and
// passes when there is room.
func TestCheckDisk(t *testing.T) {
	_, runs := planOf(t, filepath.Join("..", "..", "seeds", "demo.yaml"))
	var need int64
	for _, r := range runs {
		need += EstimateFootprint(r).Bytes()
	}
	old := freeBytes
	t.Cleanup(func() { freeBytes = old })
	for _, tc := range []struct {
		free int64
		ok   bool
	}{{need - 1, false}, {need, true}} {
		freeBytes = func(string) (int64, error) { return tc.free, nil }
		err := checkDisk(t.TempDir(), "demo", runs)
		if tc.ok != (err == nil) {
			t.Errorf("free %d, need %d: err %v", tc.free, need, err)
		}
		if err != nil && (!errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "--only") || !strings.Contains(err.Error(), "4 runs")) {
			t.Errorf("message %q does not say how many runs or what to do", err)
		}
	}
}
