package torch

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// ServerSource is the Python server, embedded so that a GPU node needs
// only the marlow binary and a Python environment.
//
//go:embed server/marlow_torch_server.py
var ServerSource []byte

// serverScript writes the embedded server into a cache folder named by its
// hash (once) and returns its path.
func serverScript() (string, error) {
	sum := sha256.Sum256(ServerSource)
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "marlow", "torch-server-"+hex.EncodeToString(sum[:6]))
	path := filepath.Join(dir, "marlow_torch_server.py")
	if b, err := os.ReadFile(path); err == nil && sha256.Sum256(b) == sum {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("torch engine: write server script: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "server-*.py")
	if err != nil {
		return "", fmt.Errorf("torch engine: write server script: %w", err)
	}
	if _, err := tmp.Write(ServerSource); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("torch engine: write server script: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("torch engine: write server script: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("torch engine: write server script: %w", err)
	}
	return path, nil
}
