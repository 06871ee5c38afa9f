//go:build duckdb

// The DuckDB interop test links DuckDB through cgo, which is slow to build,
// so it runs only with -tags duckdb:
//
//	go test -tags duckdb -run DuckDB ./harness/runlog

package runlog

import (
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duckdb/duckdb-go/v2"
)

// TestDuckDB reads every table of a run (and of a runs tree) with DuckDB's
// read_parquet and checks types, row counts, nulls for NaN, the map column
// and sample values against the rows that were written.
func TestDuckDB(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "exp", "r")
	if err := writeScenario(dir, "r", 8); err != nil {
		t.Fatal(err)
	}
	if err := writeScenario(filepath.Join(root, "exp", "q"), "q", 4); err != nil {
		t.Fatal(err)
	}
	want := scenarioRun("r", 7)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := func(table string) string {
		return fmt.Sprintf("read_parquet('%s')", filepath.Join(dir, table, "*.parquet"))
	}
	one := func(t *testing.T, dst any, query string, args ...any) {
		t.Helper()
		if err := db.QueryRow(query, args...).Scan(dst); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}

	t.Run("types", func(t *testing.T) {
		for _, ti := range tableInfos() {
			rows, err := db.Query("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM " + src(ti.name) + ")")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for rows.Next() {
				var name, typ string
				if err := rows.Scan(&name, &typ); err != nil {
					t.Fatal(err)
				}
				got[name] = typ
			}
			rows.Close()
			if len(got) != len(ti.cols) {
				t.Fatalf("%s: DuckDB sees %d columns, want %d: %v", ti.name, len(got), len(ti.cols), got)
			}
			for _, c := range ti.cols {
				wantType := map[kind]string{kString: "VARCHAR", kInt64: "BIGINT", kFloat64: "DOUBLE", kBool: "BOOLEAN", kFloatMap: "MAP(VARCHAR, DOUBLE)"}[c.kind]
				if got[c.name] != wantType {
					t.Errorf("%s.%s: DuckDB type %q, want %q", ti.name, c.name, got[c.name], wantType)
				}
			}
		}
	})

	t.Run("counts", func(t *testing.T) {
		for table, n := range map[string]int{TableSteps: len(want.Steps), TableEvals: len(want.Evals), TableSamples: len(want.Samples), TableTiming: len(want.Timing)} {
			var got int
			one(t, &got, "SELECT count(*) FROM "+src(table))
			if got != n {
				t.Errorf("%s: %d rows, want %d", table, got, n)
			}
		}
		var all int
		one(t, &all, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(root, "*", "*", "steps", "*.parquet")))
		if wantAll := len(want.Steps) + len(scenarioRun("q", 3).Steps); all != wantAll {
			t.Errorf("runs tree glob: %d steps rows, want %d", all, wantAll)
		}
	})

	t.Run("steps values and map", func(t *testing.T) {
		var nulls, wantNulls int
		for _, r := range want.Steps {
			if math.IsNaN(r.AgentCosMin) {
				wantNulls++
			}
		}
		one(t, &nulls, "SELECT count(*) FROM "+src(TableSteps)+" WHERE agent_cos_min IS NULL")
		if nulls != wantNulls {
			t.Errorf("agent_cos_min: %d nulls, want %d (NaN)", nulls, wantNulls)
		}
		for _, r := range want.Steps {
			if r.Step != 5 {
				continue
			}
			var loss, lr float64
			var tokens int64
			var cosAny any
			var ncos sql.NullInt64
			q := "SELECT loss, lr, tokens, role_cos, cardinality(role_cos) FROM " + src(TableSteps) + " WHERE step = ? AND policy = ? AND role = ?"
			err := db.QueryRow(q, r.Step, r.Policy, r.Role).Scan(&loss, &lr, &tokens, &cosAny, &ncos)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if loss != r.Loss || lr != r.LR || tokens != r.Tokens {
				t.Errorf("step 5 %s: loss %v lr %v tokens %d, want %v %v %d", r.Role, loss, lr, tokens, r.Loss, r.LR, r.Tokens)
			}
			if r.RoleCos == nil {
				if ncos.Valid || cosAny != nil {
					t.Errorf("step 5 %s: role_cos %v, want NULL", r.Role, cosAny)
				}
				continue
			}
			cos, ok := cosAny.(duckdb.OrderedMap)
			if !ok {
				t.Fatalf("step 5 %s: role_cos scanned as %T", r.Role, cosAny)
			}
			if int(ncos.Int64) != len(r.RoleCos) || cos.Len() != len(r.RoleCos) {
				t.Errorf("step 5 %s: role_cos has %d entries, want %d", r.Role, ncos.Int64, len(r.RoleCos))
			}
			keys := cos.Keys()
			for i := 1; i < len(keys); i++ {
				if keys[i-1].(string) >= keys[i].(string) {
					t.Errorf("step 5 %s: role_cos keys not sorted: %v", r.Role, keys)
				}
			}
			for k, v := range r.RoleCos {
				got, ok := cos.Get(k)
				switch {
				case !ok:
					t.Errorf("step 5 %s: role_cos lacks %q", r.Role, k)
				case math.IsNaN(v) && got != nil:
					t.Errorf("step 5 %s: role_cos[%q] = %v, want NULL", r.Role, k, got)
				case !math.IsNaN(v) && got != v:
					t.Errorf("step 5 %s: role_cos[%q] = %v, want %v", r.Role, k, got, v)
				}
			}
		}
	})

	t.Run("evals samples timing", func(t *testing.T) {
		var selNull, wantSelNull int
		var accSum, wantAccSum float64
		for _, r := range want.Evals {
			if math.IsNaN(r.SelectionAcc) {
				wantSelNull++
			}
			wantAccSum += r.Accuracy
		}
		one(t, &selNull, "SELECT count(*) FROM "+src(TableEvals)+" WHERE selection_acc IS NULL")
		one(t, &accSum, "SELECT sum(accuracy) FROM "+src(TableEvals))
		if selNull != wantSelNull || math.Abs(accSum-wantAccSum) > 1e-9 {
			t.Errorf("evals: %d null selection_acc, accuracy sum %v; want %d, %v", selNull, accSum, wantSelNull, wantAccSum)
		}

		s := want.Samples[len(want.Samples)/2]
		var completion, parsed, finish string
		var compliant, correct bool
		var adv sql.NullFloat64
		q := "SELECT completion, parsed, finish, compliant, correct, advantage FROM " + src(TableSamples) + " s JOIN " + src(TablePrompts) +
			" p USING (run_id, prompt_id) WHERE s.step = ? AND p.prompt = ?"
		if err := db.QueryRow(q, s.Step, s.Prompt).Scan(&completion, &parsed, &finish, &compliant, &correct, &adv); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if completion != s.Completion || parsed != s.Parsed || finish != s.Finish || compliant != s.Compliant || correct != s.Correct ||
			adv.Valid == math.IsNaN(s.Advantage) || (adv.Valid && adv.Float64 != s.Advantage) {
			t.Errorf("sample: got %q %q %q %v %v %v, want %+v", completion, parsed, finish, compliant, correct, adv, s)
		}
		if !strings.Contains(s.Prompt, "ünïcödé") {
			t.Fatalf("test sample lost its non-ASCII text: %q", s.Prompt)
		}

		var sec, wantSec float64
		for _, r := range want.Timing {
			wantSec += r.TotalSec
		}
		one(t, &sec, "SELECT sum(total_sec) FROM "+src(TableTiming))
		if sec != wantSec {
			t.Errorf("timing: total_sec sum %v, want %v", sec, wantSec)
		}
	})
}
