package runlog

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"testing/fstest"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/marlowlab/marlow/harness/internal/atomicfile"
)

// archiveTime is the modification time of every archive entry.
var archiveTime = time.Unix(0, 0).UTC()

// maxArchiveFile bounds one file unpacked from an archive into memory.
const maxArchiveFile = 4 << 30

// Archive packs the runs under runsDir into a .tar.zst file at out: for
// every run folder (one holding manifest.json), its manifest and committed
// segments, with paths relative to runsDir. Uncommitted temporaries,
// checkpoints (ckpt/) and other files are left out: the archive holds what
// the readers and reports use. A segment that does not match its manifest's
// inventory (missing, unlisted, resized or altered) stops the archive with
// an error naming it. Entries are sorted by path and have fixed
// times, owners and modes, and the zstd encoder is single-threaded, so the
// same runs give the same archive bytes. out is written to a temporary name
// and renamed.
func Archive(runsDir, out string) error {
	_, err := ArchiveRuns(runsDir, out, nil)
	return err
}

// ArchiveRuns is Archive restricted to the runs for which keep (given the
// run folder's path inside runsDir, slash-separated; nil keeps every run)
// returns true. It returns how many runs it packed; none is an error
// wrapping ErrNoRuns.
func ArchiveRuns(runsDir, out string, keep func(runDir string) bool) (int, error) {
	s := source{fsys: os.DirFS(runsDir), label: runsDir}
	if st, err := os.Stat(runsDir); err != nil {
		return 0, fmt.Errorf("archive: %w", err)
	} else if !st.IsDir() {
		return 0, fmt.Errorf("archive: %s is not a folder", runsDir)
	}
	runs, _, err := findRuns(s)
	if err != nil {
		return 0, fmt.Errorf("archive %s: %w", runsDir, err)
	}
	if len(runs) == 0 {
		return 0, fmt.Errorf("archive %s: %w", runsDir, ErrNoRuns)
	}
	var files []string
	n := 0
	for _, d := range runs {
		if keep != nil && !keep(d) {
			continue
		}
		n++
		m, err := readManifestFS(s, d)
		if err != nil {
			return 0, fmt.Errorf("archive: %w", err)
		}
		if probs := verifyInventory(s, d, m, true, false); len(probs) > 0 {
			n := fmt.Sprintf("%d problems", len(probs))
			if len(probs) == 1 {
				n = "1 problem"
			}
			return 0, fmt.Errorf("archive: %s: %w (%s in the run; marlow check lists them)", probs[0].Path, probs[0].Err, n)
		}
		files = append(files, path.Join(d, ManifestFile))
		for _, tb := range Tables {
			segs, err := committedSegments(s, d, tb, m.LastStep)
			if err != nil {
				return 0, fmt.Errorf("archive: %w", err)
			}
			for _, sg := range segs {
				files = append(files, sg.path)
			}
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("archive %s: %w (none of its %d runs selected)", runsDir, ErrNoRuns, len(runs))
	}
	if err := atomicfile.WriteFrom(out, func(w io.Writer) error { return writeArchive(w, s, files) }); err != nil {
		return 0, fmt.Errorf("archive: %w", err)
	}
	return n, nil
}

// writeArchive writes the files of s as a deterministic tar.zst stream.
func writeArchive(w io.Writer, s source, files []string) error {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	dirs := map[string]bool{".": true}
	var addDir func(d string) error
	addDir = func(d string) error {
		if dirs[d] {
			return nil
		}
		if err := addDir(path.Dir(d)); err != nil {
			return err
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: archiveTime})
	}
	for _, p := range files {
		if err := addDir(path.Dir(p)); err != nil {
			return err
		}
		data, err := fs.ReadFile(s.fsys, p)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name(p), err)
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: p, Size: int64(len(data)), Mode: 0o644, ModTime: archiveTime}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", s.name(p), err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("%s: %w", s.name(p), err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// readArchive unpacks a .tar.zst archive into memory.
func readArchive(name string) (fs.FS, error) {
	return readArchiveKeeping(name, nil)
}

// readArchiveKeeping unpacks a .tar.zst archive into memory, keeping the
// bytes only of the files keep returns true for (nil: every file); the
// others are listed empty, so the tree reads the same to findRuns while
// the memory it takes does not grow with the segments it skips.
func readArchiveKeeping(name string, keep func(p string) bool) (fs.FS, error) {
	tr, closeArchive, err := openArchive(name)
	if err != nil {
		return nil, err
	}
	defer closeArchive()
	mfs := fstest.MapFS{}
	for {
		hdr, p, err := nextArchiveEntry(tr, name)
		if err != nil {
			return nil, err
		}
		if hdr == nil {
			break
		}
		if hdr.Typeflag == tar.TypeDir {
			mfs[p] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
			continue
		}
		var data []byte
		if keep == nil || keep(p) {
			data, err = io.ReadAll(tr)
		} else {
			_, err = io.Copy(io.Discard, tr)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: archive entry %s: %w", name, p, err)
		}
		mfs[p] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	return mfs, nil
}

// openArchive opens the .tar.zst archive name for reading entry by entry;
// the caller calls the returned close when done.
func openArchive(name string) (*tar.Reader, func(), error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	zr, err := zstd.NewReader(bufio.NewReader(f), zstd.WithDecoderConcurrency(1))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a zstd archive: %w", name, err)
	}
	return tar.NewReader(zr), func() { zr.Close(); f.Close() }, nil
}

// nextArchiveEntry reads the next entry of the archive name: its header and
// its path without a trailing slash, checked to be a valid path naming a
// folder or a regular file of at most maxArchiveFile bytes. At the end of
// the archive the header is nil.
func nextArchiveEntry(tr *tar.Reader, name string) (*tar.Header, string, error) {
	hdr, err := tr.Next()
	if errors.Is(err, io.EOF) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: not a .tar.zst archive: %w", name, err)
	}
	p := strings.TrimSuffix(hdr.Name, "/")
	if !fs.ValidPath(p) || p == "." {
		return nil, "", fmt.Errorf("%s: archive entry %q has an invalid path", name, hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
	case tar.TypeReg:
		if hdr.Size > maxArchiveFile {
			return nil, "", fmt.Errorf("%s: archive entry %s is %d bytes, over the %d limit", name, p, hdr.Size, int64(maxArchiveFile))
		}
	default:
		return nil, "", fmt.Errorf("%s: archive entry %s has unsupported type %q", name, p, hdr.Typeflag)
	}
	return hdr, p, nil
}
