//go:build duckdb

package runlog

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

// TestDuckDBViews runs the views of SCHEMA.md (DuckDBViews) on the real
// logs of the demo, unpacked into a runs folder, and checks that every
// table row gets its run's experiment, workflow, task, scale, condition
// and seed from the manifests.
func TestDuckDBViews(t *testing.T) {
	// the committed logs predate prompts/ (schema version 1): rewrite them
	// in the current layout, which the views are written for
	root := filepath.Join(t.TempDir(), "runs")
	rewriteRuns(t, realLogs, root)
	root = filepath.Join(root, "demo")
	runs, err := ReadRuns(root)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range strings.Split(strings.ReplaceAll(DuckDBViews, "runs/demo", root), ";") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, r := range runs {
		m := r.Manifest
		for table, n := range map[string]int{"steps": len(r.Steps), "evals": len(r.Evals), "samples": len(r.Samples)} {
			var got, match int
			q := "SELECT count(*), count(*) FILTER (WHERE experiment = ? AND run_workflow = ? AND task = ? AND scale = ? AND condition = ? AND seed_index = ?) FROM " + table + " WHERE run_id = ?"
			if err := db.QueryRow(q, m.Experiment, m.Workflow, m.Task, m.Scale, m.Condition, m.SeedIndex, m.RunID).Scan(&got, &match); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if got != n || match != n {
				t.Errorf("%s %s: %d rows in the view (%d with the manifest's cell), want %d", m.RunID, table, got, match, n)
			}
		}
	}
	// the samples view joins the prompt text back: old queries on
	// samples.prompt see the text of every row
	for _, r := range runs {
		var want int
		for _, sm := range r.Samples {
			want += len(sm.Prompt)
		}
		var got int
		if err := db.QueryRow("SELECT sum(strlen(prompt)) FROM samples WHERE run_id = ?", r.Manifest.RunID).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: the samples view's prompts hold %d bytes, the rows %d", r.Manifest.RunID, got, want)
		}
	}
	var conds int
	if err := db.QueryRow("SELECT count(DISTINCT condition) FROM evals WHERE role = '*'").Scan(&conds); err != nil {
		t.Fatal(err)
	}
	if conds != 4 {
		t.Errorf("%d conditions in the evals view, want the demo's 4", conds)
	}
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
