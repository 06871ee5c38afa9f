package torch

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
)

// serverFiles is the Python server, the package marlow_torch
// (server/marlow_torch), embedded so that a GPU node needs only the marlow
// binary and a Python environment. Its tests (server/tests) stay out.
//
//go:embed server/marlow_torch/*.py
var serverFiles embed.FS

const (
	serverRoot    = "server/marlow_torch" // the package inside serverFiles
	serverPackage = "marlow_torch"        // its import name and folder name
)

// serverOnce serialises the writes of serverScript within this process;
// across processes the rename into place decides.
var serverOnce sync.Mutex

// serverScript writes the embedded server package into a cache folder named
// by the hash of its files (once) and returns the package folder, which
// Python runs as `python FOLDER` (its __main__.py imports the package from
// the folder above).
func serverScript() (string, error) {
	serverOnce.Lock()
	defer serverOnce.Unlock()
	files, sum, err := serverSources()
	if err != nil {
		return "", fmt.Errorf("torch engine: read the embedded server: %w", err)
	}
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		base = os.TempDir()
	}
	parent := filepath.Join(base, "marlow")
	dir := filepath.Join(parent, "torch-server-"+sum)
	pkg := filepath.Join(dir, serverPackage)
	if holdsFiles(pkg, files) {
		return pkg, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("torch engine: write server package: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "torch-server-*.tmp")
	if err != nil {
		return "", fmt.Errorf("torch engine: write server package: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after a successful rename
	if err := os.Mkdir(filepath.Join(tmp, serverPackage), 0o755); err != nil {
		return "", fmt.Errorf("torch engine: write server package: %w", err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, serverPackage, name), b, 0o644); err != nil {
			return "", fmt.Errorf("torch engine: write server package: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if holdsFiles(pkg, files) { // another process put the same files there first
			return pkg, nil
		}
		// A damaged copy (a file edited or removed): replace it.
		if rerr := os.RemoveAll(dir); rerr != nil {
			return "", fmt.Errorf("torch engine: write server package: replace damaged %s: %w", dir, errors.Join(err, rerr))
		}
		if err := os.Rename(tmp, dir); err != nil {
			return "", fmt.Errorf("torch engine: write server package: %w", err)
		}
	}
	return pkg, nil
}

// serverSources returns the embedded package's files by name and the first
// 12 hex digits of the SHA-256 over their names and contents.
func serverSources() (map[string][]byte, string, error) {
	entries, err := fs.ReadDir(serverFiles, serverRoot)
	if err != nil {
		return nil, "", err
	}
	files := make(map[string][]byte, len(entries))
	h := sha256.New()
	for _, e := range entries { // ReadDir sorts by name
		b, err := serverFiles.ReadFile(path.Join(serverRoot, e.Name()))
		if err != nil {
			return nil, "", err
		}
		files[e.Name()] = b
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
	}
	if _, ok := files["__main__.py"]; !ok {
		return nil, "", fmt.Errorf("%s has no __main__.py", serverRoot)
	}
	return files, hex.EncodeToString(h.Sum(nil)[:6]), nil
}

// holdsFiles reports whether folder dir holds every one of files with the
// same contents (other files, such as Python's __pycache__, may be there).
func holdsFiles(dir string, files map[string][]byte) bool {
	for name, want := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(b, want) {
			return false
		}
	}
	return true
}
