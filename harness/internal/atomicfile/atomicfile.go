// Package atomicfile writes files so that a crash leaves either the old
// file or the whole new one: the bytes go to a temporary file beside the
// target (its name plus TmpSuffix), which is fsynced, closed and renamed
// over the target, and then the folder is fsynced so that the rename
// itself survives a crash.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// TmpSuffix ends the name of the temporary file of a write in progress; a
// file so named is a leftover of an interrupted write.
const TmpSuffix = ".tmp"

// Write replaces path with data atomically and durably.
func Write(path string, data []byte) error { return WriteHooked(path, data, nil) }

// WriteHooked is Write with a hook for crash tests: hook (when not nil) is
// called with "half-written" after half of data reached the temporary file
// and with "written" before it is fsynced.
func WriteHooked(path string, data []byte, hook func(stage string)) error {
	tmp := path + TmpSuffix
	if err := WriteSynced(tmp, data, hook); err != nil {
		os.Remove(tmp)
		return err
	}
	return publish(tmp, path)
}

// WriteFrom replaces path atomically and durably with what write writes
// (through a 1 MiB buffer).
func WriteFrom(path string, write func(w io.Writer) error) (err error) {
	tmp := path + TmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	return publish(tmp, path)
}

// publish renames a synced temporary file over path and syncs the folder.
func publish(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// WriteSynced creates path (truncating a stale one) with data and fsyncs
// it, in place: for files that are renamed later as a group, or that live
// in a temporary folder. hook is as in WriteHooked.
func WriteSynced(path string, data []byte, hook func(stage string)) error {
	if hook == nil {
		hook = func(string) {}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	half := len(data) / 2
	if _, err := f.Write(data[:half]); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	hook("half-written")
	if _, err := f.Write(data[half:]); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	hook("written")
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// SyncDir fsyncs a folder, making the creations and renames in it durable.
// A file system that cannot sync folders (EINVAL, ENOTSUP) is not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
