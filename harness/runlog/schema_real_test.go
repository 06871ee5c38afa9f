package runlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/marlowlab/marlow/harness/spec"
)

// realLogs is a small real study: the demo's stored logs (four runs of
// voting x synth-math x s, written by the harness).
const realLogs = "../../reports/demo/logs.tar.zst"

// TestSchemaAgainstRealLogs checks SCHEMA.md against real logs: every
// documented column exists in every segment of every table with the
// documented type and nullability, in the documented order, and no other
// column does; and the facts the document states hold in the data.
func TestSchemaAgainstRealLogs(t *testing.T) {
	src, err := openSource(realLogs)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := ReadRuns(realLogs)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) < 4 {
		t.Fatalf("%d runs in %s, want the demo's 4", len(runs), realLogs)
	}
	doc := SchemaMarkdown()

	t.Run("columns", func(t *testing.T) {
		dirs, _, err := findRuns(src)
		if err != nil {
			t.Fatal(err)
		}
		segments := 0
		for _, dir := range dirs {
			m, err := readManifestFS(src, dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range Tables {
				// the definition of the run's schema version (the
				// committed logs predate version 2's prompts/)
				ti, _ := tableInfoByName(name, m.SchemaVersion)
				segs, err := committedSegments(src, dir, ti.name, m.LastStep)
				if err != nil {
					t.Fatal(err)
				}
				for _, sg := range segs {
					segments++
					data, err := fs.ReadFile(src.fsys, sg.path)
					if err != nil {
						t.Fatal(err)
					}
					pf, err := file.NewParquetReader(bytes.NewReader(data))
					if err != nil {
						t.Fatalf("%s: %v", sg.path, err)
					}
					sc, err := pqarrow.FromParquet(pf.MetaData().Schema, nil, pf.MetaData().KeyValueMetadata())
					if err != nil {
						t.Fatalf("%s: %v", sg.path, err)
					}
					ver, err := strconv.Atoi(*pf.MetaData().KeyValueMetadata().FindValue(MetaSchemaVersion))
					if err != nil {
						t.Fatalf("%s: %v", sg.path, err)
					}
					checkColumns(t, sg.path, ti, ti.colsAt(ver), sc)
					pf.Close()
				}
			}
		}
		if segments < 20 {
			t.Errorf("only %d segments checked", segments)
		}
		for _, ti := range tableInfos() {
			for _, c := range ti.cols {
				if !strings.Contains(doc, fmt.Sprintf("| `%s` | %s |", c.name, c.kind.docType())) {
					t.Errorf("SCHEMA.md lacks the row of %s.%s", ti.name, c.name)
				}
			}
		}
	})

	t.Run("version-1 files read the columns of versions 3 and 4 as null", func(t *testing.T) {
		for _, r := range runs {
			if r.Manifest.SchemaVersion != 1 {
				t.Fatalf("%s: manifest version %d; this check needs the demo's version-1 logs", r.Manifest.RunID, r.Manifest.SchemaVersion)
			}
			for _, s := range r.Steps {
				if !math.IsNaN(s.CoherenceCos) || !math.IsNaN(s.CoherenceScale) {
					t.Fatalf("%s step %d: coherence %v %v, want NaN", r.Manifest.RunID, s.Step, s.CoherenceCos, s.CoherenceScale)
				}
				if s.AgentCos != nil {
					t.Fatalf("%s step %d: agent_cos %v in a version-1 file, want null", r.Manifest.RunID, s.Step, s.AgentCos)
				}
			}
			for _, e := range r.Evals {
				if !math.IsNaN(e.StrictAccuracy) || e.FallbackRate != nil {
					t.Fatalf("%s step %d: strict %v fallbacks %v, want NaN and nil", r.Manifest.RunID, e.Step, e.StrictAccuracy, e.FallbackRate)
				}
			}
			for _, s := range r.Samples {
				if s.Fallback != "" {
					t.Fatalf("%s: fallback %q in a version-1 sample", r.Manifest.RunID, s.Fallback)
				}
			}
		}
	})

	t.Run("steps start at 1", func(t *testing.T) {
		for _, r := range runs {
			if r.Manifest.Condition == "base" {
				if len(r.Steps) != 0 {
					t.Errorf("%s: base run has %d steps rows", r.Manifest.RunID, len(r.Steps))
				}
				continue
			}
			if len(r.Steps) == 0 || r.Steps[0].Step != 1 {
				t.Errorf("%s: first steps row at step %v, want 1", r.Manifest.RunID, r.Steps)
			}
			if r.Steps[len(r.Steps)-1].Step != r.Manifest.LastStep {
				t.Errorf("%s: last steps row at step %d, manifest last_step %d", r.Manifest.RunID, r.Steps[len(r.Steps)-1].Step, r.Manifest.LastStep)
			}
		}
	})

	t.Run("validation advantage is 0", func(t *testing.T) {
		n := 0
		for _, r := range runs {
			for _, s := range r.Samples {
				if s.Split == "val" {
					n++
					if s.Advantage != 0 {
						t.Fatalf("%s: val row with advantage %v", r.Manifest.RunID, s.Advantage)
					}
				}
			}
		}
		if n == 0 {
			t.Fatal("no val rows")
		}
	})

	t.Run("final pseudo-role", func(t *testing.T) {
		for _, r := range runs {
			type ep struct {
				step             int64
				wf, prob         string
				rollout          int64
				finals, lastSeen int
			}
			eps := map[string]*ep{}
			for i, s := range r.Samples {
				if s.Split != "val" {
					continue
				}
				k := fmt.Sprint(s.Step, s.Workflow, s.ProblemID, s.Rollout)
				e := eps[k]
				if e == nil {
					e = &ep{}
					eps[k] = e
				}
				e.lastSeen = i
				if s.Role == "final" {
					e.finals++
					if s.Agent != "final" || s.Policy != "" || s.Prompt != "" || s.Finish != "" || s.Tokens != 0 || s.Compliant != (s.Parsed != "") {
						t.Errorf("%s: final row %+v differs from its documentation", r.Manifest.RunID, s)
					}
					if i+1 < len(r.Samples) && fmt.Sprint(r.Samples[i+1].Step, r.Samples[i+1].Workflow, r.Samples[i+1].ProblemID, r.Samples[i+1].Rollout) == k && r.Samples[i+1].Split == "val" {
						t.Errorf("%s: final row is not the last of its episode", r.Manifest.RunID)
					}
				}
			}
			for k, e := range eps {
				if e.finals != 1 {
					t.Errorf("%s: episode %s has %d final rows", r.Manifest.RunID, k, e.finals)
				}
			}
			if len(eps) == 0 {
				t.Errorf("%s: no validation episodes", r.Manifest.RunID)
			}
		}
	})

	t.Run("policy names", func(t *testing.T) {
		for _, r := range runs {
			var want []string
			switch r.Manifest.Condition {
			case "sa-rl":
				want = []string{"policy"}
			case "sp":
				want = []string{"shared"}
			case "ip":
				for _, s := range r.Steps {
					if s.Role != "*" {
						want = append(want, s.Role)
					}
				}
			}
			slices.Sort(want)
			want = slices.Compact(want)
			var got []string
			for _, s := range r.Steps {
				got = append(got, s.Policy)
			}
			slices.Sort(got)
			got = slices.Compact(got)
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("%s (%s): policies %v, want %v", r.Manifest.RunID, r.Manifest.Condition, got, want)
			}
			for _, s := range r.Samples {
				if s.Policy != "" && !slices.Contains(want, s.Policy) {
					t.Errorf("%s: sample policy %q not among %v", r.Manifest.RunID, s.Policy, want)
					break
				}
			}
		}
	})

	t.Run("seqs counts turns with non-zero advantage", func(t *testing.T) {
		checked := 0
		for _, r := range runs {
			var cfg struct {
				GRPO struct {
					Rollouts        int64 `json:"rollouts"`
					ProblemsPerStep int64 `json:"problems_per_step"`
				} `json:"grpo"`
			}
			if data, err := json.Marshal(r.Manifest.Config); err != nil || json.Unmarshal(data, &cfg) != nil {
				t.Fatalf("%s: config %T: %v", r.Manifest.RunID, r.Manifest.Config, err)
			}
			perGroup, problems := cfg.GRPO.Rollouts, cfg.GRPO.ProblemsPerStep
			if r.Manifest.Condition != "base" && perGroup*problems == 0 {
				t.Fatalf("%s: config without grpo.rollouts or problems_per_step", r.Manifest.RunID)
			}
			turns := map[string]int64{} // role -> turns per step
			for _, s := range r.Steps {
				if s.Role == "*" {
					continue
				}
				if s.ZeroVarFrac == 1 {
					if s.Seqs != 0 {
						t.Errorf("%s step %d %s: seqs %d with every group of zero variance", r.Manifest.RunID, s.Step, s.Role, s.Seqs)
					}
					continue
				}
				n := float64(s.Seqs) / (1 - s.ZeroVarFrac)
				if math.Abs(n-math.Round(n)) > 1e-6 {
					t.Errorf("%s step %d %s: seqs %d is not (1 - zero_var_frac %v) x a whole number of turns", r.Manifest.RunID, s.Step, s.Role, s.Seqs, s.ZeroVarFrac)
					continue
				}
				k := s.Policy + "/" + s.Role
				if old, ok := turns[k]; ok && old != int64(math.Round(n)) {
					t.Errorf("%s step %d %s: %v turns, %d at other steps", r.Manifest.RunID, s.Step, s.Role, n, old)
				}
				turns[k] = int64(math.Round(n))
				checked++
			}
			for k, n := range turns {
				if n%(perGroup*problems) != 0 {
					t.Errorf("%s %s: %d turns per step, not a multiple of rollouts x problems_per_step (%d)", r.Manifest.RunID, k, n, perGroup*problems)
				}
			}
			// a sampled train turn of advantage 0 belongs to a step where some group had zero variance
			zv := map[string]float64{}
			for _, s := range r.Steps {
				zv[fmt.Sprint(s.Step, s.Policy, s.Role)] = s.ZeroVarFrac
			}
			for _, s := range r.Samples {
				if s.Split == "train" && s.Advantage == 0 && zv[fmt.Sprint(s.Step, s.Policy, s.Role)] == 0 {
					t.Errorf("%s step %d: %s turn with advantage 0 but no zero-variance group", r.Manifest.RunID, s.Step, s.Agent)
				}
			}
		}
		if checked < 30 {
			t.Errorf("only %d steps rows checked", checked)
		}
	})

	t.Run("evals at step 0, every eval.every steps and the last", func(t *testing.T) {
		for _, r := range runs {
			var cfg struct {
				Eval struct {
					Every int64 `json:"every"`
				} `json:"eval"`
			}
			if data, err := json.Marshal(r.Manifest.Config); err != nil || json.Unmarshal(data, &cfg) != nil || cfg.Eval.Every < 1 {
				t.Fatalf("%s: no eval.every in the config", r.Manifest.RunID)
			}
			var got, want []int64
			for _, e := range r.Evals {
				got = append(got, e.Step)
			}
			slices.Sort(got)
			got = slices.Compact(got)
			for s := int64(0); s <= r.Manifest.LastStep; s++ {
				if s%cfg.Eval.Every == 0 || s == r.Manifest.LastStep {
					want = append(want, s)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: evals at steps %v, want %v", r.Manifest.RunID, got, want)
			}
		}
	})

	t.Run("spec keys and example ids", func(t *testing.T) {
		if strings.Contains(doc, "eval_every") || !strings.Contains(doc, "`eval.every`") {
			t.Error("SCHEMA.md must name the spec key eval.every")
		}
		if !hasYAMLKey(reflect.TypeFor[spec.Spec](), "eval") || !hasYAMLKey(reflect.TypeFor[spec.Eval](), "every") || !hasYAMLKey(reflect.TypeFor[spec.Eval](), "before_training") {
			t.Error("the spec has no key eval.every or eval.before_training")
		}
		ids := map[string]bool{}
		for _, r := range runs {
			ids[r.Manifest.RunID] = true
		}
		for _, id := range []string{"voting-ip-s-synth-math-seed1", "sa-rl-s-synth-math-seed1"} {
			if !strings.Contains(doc, "`"+id+"`") || !ids[id] {
				t.Errorf("example id %s: in SCHEMA.md %v, a real run %v", id, strings.Contains(doc, id), ids[id])
			}
		}
		for _, r := range runs {
			m := r.Manifest
			if !slices.Contains(spec.Sources, m.Task) || !slices.Contains(spec.Workflows, m.Workflow) || !slices.Contains(spec.Conditions, m.Condition) {
				t.Errorf("%s: task %s, workflow %s or condition %s is not a name of the spec", m.RunID, m.Task, m.Workflow, m.Condition)
			}
		}
	})
}

// checkColumns checks that sc holds the first n documented columns of ti
// (all of them for the current schema version).
func checkColumns(t *testing.T, where string, ti tableInfo, n int, sc *arrow.Schema) {
	t.Helper()
	var names []string
	for _, f := range sc.Fields() {
		names = append(names, f.Name)
	}
	var want []string
	for _, c := range ti.cols[:n] {
		want = append(want, c.name)
	}
	if !slices.Equal(names, want) {
		t.Fatalf("%s: columns %v, documented %v", where, names, want)
	}
	for i, c := range ti.cols[:n] {
		f := sc.Field(i)
		if !arrow.TypeEqual(f.Type, c.kind.arrowType()) || f.Nullable != c.kind.nullable() {
			t.Errorf("%s: column %s is %s (nullable %v), documented %s", where, c.name, f.Type, f.Nullable, c.kind.docType())
		}
	}
}

func hasYAMLKey(t reflect.Type, key string) bool {
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == key {
			return true
		}
	}
	return false
}
