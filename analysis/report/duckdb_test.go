//go:build duckdb

// The DuckDB interop test links DuckDB through cgo, which is slow to build,
// so it runs only with -tags duckdb:
//
//	go test -tags duckdb -run DuckDB ./analysis/report

package report

import (
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

// TestDuckDBSummary reads summary.parquet with DuckDB and checks row
// counts, a value and that NaN metrics are nulls.
func TestDuckDBSummary(t *testing.T) {
	rows := SummaryRows(fixtureStudy(t))
	data, err := EncodeSummary(rows)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "summary.parquet")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := fmt.Sprintf("read_parquet('%s')", p)
	var runs, cells, nullLo int
	if err := db.QueryRow("SELECT count(*) FILTER (WHERE kind = 'run'), count(*) FILTER (WHERE kind = 'cell'), count(*) FILTER (WHERE final_lo IS NULL) FROM "+src).Scan(&runs, &cells, &nullLo); err != nil {
		t.Fatal(err)
	}
	var wantRuns, wantCells, wantNull int
	for _, r := range rows {
		if r.Kind == "run" {
			wantRuns++
		} else {
			wantCells++
		}
		if math.IsNaN(r.Value("final_lo")) {
			wantNull++
		}
	}
	if runs != wantRuns || cells != wantCells || nullLo != wantNull {
		t.Errorf("duckdb counts run %d cell %d null final_lo %d; want %d %d %d", runs, cells, nullLo, wantRuns, wantCells, wantNull)
	}
	var final float64
	if err := db.QueryRow("SELECT final FROM " + src + " WHERE kind = 'cell' AND workflow = 'voting' AND scale = 's' AND condition = 'ip'").Scan(&final); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Kind == "cell" && r.Workflow == "voting" && r.Scale == "s" && r.Condition == "ip" && r.Value("final") != final {
			t.Errorf("duckdb final %v, want %v", final, r.Value("final"))
		}
	}
}
