package spec

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestStoredConfigHash recomputes every planned run's hash from its config
// as a manifest stores it, and sees a changed value change it.
func TestStoredConfigHash(t *testing.T) {
	for _, f := range []string{"../../seeds/smoke.yaml", "../../seeds/mini.yaml", "../../seeds/paper.yaml"} {
		s, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			raw, err := json.Marshal(r.Config)
			if err != nil {
				t.Fatal(err)
			}
			var stored map[string]any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&stored); err != nil {
				t.Fatal(err)
			}
			got, err := StoredConfigHash(stored)
			if err != nil {
				t.Fatal(err)
			}
			if got != r.ConfigHash {
				t.Fatalf("%s %s: stored config hashes to %s, plan says %s", f, r.ID, got, r.ConfigHash)
			}
			stored["analysis"].(map[string]any)["cliff_abs"] = json.Number("0.7")
			if got, _ := StoredConfigHash(stored); got != r.ConfigHash {
				t.Fatalf("%s %s: an analysis parameter changed the hash", f, r.ID)
			}
			stored["grpo"].(map[string]any)["lr"] = json.Number("0.123")
			if got, _ := StoredConfigHash(stored); got == r.ConfigHash {
				t.Fatalf("%s %s: a changed lr kept the hash", f, r.ID)
			}
		}
	}
}
