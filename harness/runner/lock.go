package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned (wrapped) when another process holds a run's lock.
var ErrLocked = errors.New("run is in use by another process")

// lockPath is the lock file of a run folder: a hidden sibling, so that the
// run folder itself holds only what runlog writes.
func lockPath(runDir string) string {
	return filepath.Join(filepath.Dir(runDir), "."+filepath.Base(runDir)+".lock")
}

// runLock is an exclusive advisory lock on a run; the kernel releases it
// when the process dies, so a crashed run never stays locked.
type runLock struct{ f *os.File }

// lockRun takes the lock of runDir without waiting.
func lockRun(runDir string) (*runLock, error) {
	p := lockPath(runDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", runDir, err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", runDir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w (%s); left to it", runDir, ErrLocked, holderOf(p))
		}
		return nil, fmt.Errorf("lock %s: %w", runDir, err)
	}
	l := &runLock{f: f}
	l.write(holderLine())
	return l, nil
}

func (l *runLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// locked reports whether another process holds runDir's lock.
func locked(runDir string) bool {
	if _, err := os.Stat(lockPath(runDir)); err != nil {
		return false
	}
	f, err := os.Open(lockPath(runDir))
	if err != nil {
		return false
	}
	defer f.Close()
	// A probe only: it takes the lock for an instant and writes nothing,
	// so the holder line and any note stay as they are.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}
