package runner

import (
	"path/filepath"
	"strings"

	"github.com/marlowlab/marlow/harness/pin"
)

// hashFile hashes a file or folder once per executor.
func (x *executor) hashFile(p string) (string, error) {
	x.mu.Lock()
	h, ok := x.hashes[p]
	x.mu.Unlock()
	if ok {
		return h, nil
	}
	h, err := pin.HashFile(p)
	if err != nil {
		return "", err
	}
	x.mu.Lock()
	x.hashes[p] = h
	x.mu.Unlock()
	return h, nil
}

// provenance is the spec's provenance plus the hashes of the run's base
// checkpoint and data files, keyed by path relative to the repository.
func (x *executor) provenance(files ...string) (pin.Provenance, error) {
	p := x.prov
	p.Files = map[string]string{}
	for k, v := range x.prov.Files {
		p.Files[k] = v
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		h, err := x.hashFile(f)
		if err != nil {
			return pin.Provenance{}, err
		}
		p.Files[relTo(p.Repo, f)] = h
	}
	return p, nil
}

// relTo names path relative to repo when it lies inside it, else absolute.
func relTo(repo, p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if repo != "" {
		if rel, err := filepath.Rel(repo, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel)
		}
	}
	return abs
}
