package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
)

// StoredConfigHash recomputes ConfigHash from a run config as a manifest
// stores it (decoded JSON: maps, slices, json.Number or float64 leaves),
// without decoding it into RunConfig, so that a config written by an older
// build hashes as that build hashed it. The same two parts are left out:
// every analysis parameter counts as zero, and the checkpoint and data
// paths count by base name.
func StoredConfigHash(config any) (string, error) {
	raw, err := json.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("stored config: %w", err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return "", fmt.Errorf("stored config: not a JSON object: %w", err)
	}
	if a, ok := m["analysis"].(map[string]any); ok {
		for k := range a {
			a[k] = json.Number("0")
		}
	}
	for _, f := range [][2]string{{"model", "checkpoint"}, {"data", "path"}} {
		sub, ok := m[f[0]].(map[string]any)
		if !ok {
			continue
		}
		if p, ok := sub[f[1]].(string); ok && p != "" {
			sub[f[1]] = filepath.Base(p)
		}
	}
	b, err := CanonicalJSON(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
