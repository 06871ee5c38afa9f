package runlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// ConfigDiff compares two run configs (a decoded manifest config, a
// spec.RunConfig, or anything that encodes to a JSON object) and returns one
// line per differing key path, sorted, as "path: old -> new" (a key present
// on one side only reads "(absent)" on the other).
func ConfigDiff(old, cur any) ([]string, error) {
	a, err := ConfigLeaves(old)
	if err != nil {
		return nil, fmt.Errorf("config diff: old config: %w", err)
	}
	b, err := ConfigLeaves(cur)
	if err != nil {
		return nil, fmt.Errorf("config diff: new config: %w", err)
	}
	return LeavesDiff(a, b), nil
}

// LeavesDiff is ConfigDiff on configs already flattened by ConfigLeaves.
func LeavesDiff(a, b map[string]string) []string {
	keys := maps.Clone(a)
	maps.Copy(keys, b)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		va, oka := a[k]
		vb, okb := b[k]
		if oka && okb && va == vb {
			continue
		}
		if !oka {
			va = "(absent)"
		}
		if !okb {
			vb = "(absent)"
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", k, va, vb))
	}
	return out
}

// ConfigLeaves encodes a config v as JSON and returns its leaves keyed by
// dotted path (array elements as path[i]); each value is its canonical JSON
// text (numbers as written, no HTML escaping).
func ConfigLeaves(v any) (map[string]string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(prefix string, x any) error
	walk = func(prefix string, x any) error {
		switch t := x.(type) {
		case map[string]any:
			if len(t) == 0 && prefix != "" {
				out[prefix] = "{}"
			}
			for k, v := range t {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				if err := walk(p, v); err != nil {
					return err
				}
			}
		case []any:
			if len(t) == 0 {
				out[prefix] = "[]"
			}
			for i, v := range t {
				if err := walk(fmt.Sprintf("%s[%d]", prefix, i), v); err != nil {
					return err
				}
			}
		default:
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(t); err != nil {
				return err
			}
			out[prefix] = string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		}
		return nil
	}
	if err := walk("", generic); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeConfig decodes the manifest's run config (as read back: a generic
// JSON value) into v, a struct naming the keys it wants.
func (m Manifest) DecodeConfig(v any) error {
	b, err := json.Marshal(m.Config)
	if err != nil {
		return fmt.Errorf("run %s: config: %w", m.RunID, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("run %s: config: %w", m.RunID, err)
	}
	return nil
}
