package reports

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/marlowlab/marlow/analysis"
)

// SummaryRow is one row of summary.parquet: Kind "run" (one run seen in one
// workflow) or "cell" (one condition of a cell, over its seeds).
type SummaryRow struct {
	Kind         string
	Experiment   string
	Workflow     string
	Task         string
	Scale        string
	Condition    string
	RunID        string // run rows; "" for cell rows
	Status       string // run rows: manifest status
	CIMethod     string // cell rows: seeds, problems or none
	DominantRole string // run rows: role with the largest mean gradient share ("" when none)
	SeedIndex    int64  // run rows; 0 for cell rows
	Seeds        int64  // 1 for run rows
	// Values holds the numeric metrics, aligned with SummaryMetrics; NaN
	// (null in Parquet) where undefined.
	Values []float64
}

// SummaryMetrics names the numeric columns of summary.parquet. Every
// estimate has _lo/_hi bounds of its bootstrap interval (cell rows only).
var SummaryMetrics = func() []string {
	var out []string
	for _, m := range []string{"base", "ceiling", "final", "floor", "drop", "auc",
		"gain_base_ceiling", "gain_base_final", "gain_sarl_ceiling", "gain_sarl_final"} {
		out = append(out, m, m+"_lo", m+"_hi")
	}
	return append(out, "ceiling_step", "cliff", "cliff_threshold", "cliff_fall_step", "evals", "amplified_before_cliff", "captured_roles")
}()

// Value returns the named metric of a row (NaN when absent).
func (r SummaryRow) Value(name string) float64 {
	for i, m := range SummaryMetrics {
		if m == name && i < len(r.Values) {
			return r.Values[i]
		}
	}
	return math.NaN()
}

// Key identifies a row across summaries: kind, cell, condition and (for
// run rows) seed index.
func (r SummaryRow) Key() string {
	k := fmt.Sprintf("%s|%s|%s|%s|%s", r.Kind, r.Task, r.Workflow, r.Scale, r.Condition)
	if r.Kind == "run" {
		k += fmt.Sprintf("|seed%d", r.SeedIndex)
	}
	return k
}

var stringCols = []string{"kind", "experiment", "workflow", "task", "scale", "condition", "run_id", "status", "ci_method", "dominant_role"}

func (r *SummaryRow) strs() []*string {
	return []*string{&r.Kind, &r.Experiment, &r.Workflow, &r.Task, &r.Scale, &r.Condition, &r.RunID, &r.Status, &r.CIMethod, &r.DominantRole}
}

func estVals(e analysis.Estimate) []float64 { return []float64{e.Value, e.Lo, e.Hi} }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SummaryRows lays out a study as summary rows: run rows in the study's
// order, then cell rows by cell and condition.
func SummaryRows(st *analysis.Study) []SummaryRow {
	nan := math.NaN()
	na3 := []float64{nan, nan, nan}
	var rows []SummaryRow
	for _, r := range st.Runs {
		m := r.Metrics
		row := SummaryRow{Kind: "run", Experiment: st.Experiment, Workflow: r.Cell.Workflow, Task: r.Cell.Task, Scale: r.Cell.Scale,
			Condition: r.Condition, RunID: r.RunID, Status: r.Status, CIMethod: "", SeedIndex: int64(r.SeedIndex), Seeds: 1}
		for _, d := range r.Dominance {
			if row.DominantRole == "" {
				row.DominantRole = d.DominantRole
			}
		}
		for _, v := range []float64{m.Base, m.Ceiling, m.Final, m.Floor, m.Drop, m.AUC} {
			row.Values = append(row.Values, v, nan, nan)
		}
		for range 4 {
			row.Values = append(row.Values, na3...)
		}
		amp, capt := false, 0
		for _, a := range r.Amplification {
			amp = amp || a.BeforeCliff
		}
		for _, c := range r.Capture {
			if c.Captured {
				capt++
			}
		}
		row.Values = append(row.Values, float64(m.CeilingStep), b2f(m.Cliff.Cliff), m.Cliff.Threshold, float64(m.Cliff.FallStep), float64(m.Evals), b2f(amp), float64(capt))
		rows = append(rows, row)
	}
	for _, c := range st.Cells {
		for _, cs := range c.Conditions {
			row := SummaryRow{Kind: "cell", Experiment: st.Experiment, Workflow: c.Key.Workflow, Task: c.Key.Task, Scale: c.Key.Scale,
				Condition: cs.Condition, CIMethod: cs.CIMethod, Seeds: int64(cs.Seeds)}
			for _, e := range []analysis.Estimate{cs.Base, cs.Ceiling, cs.Final, cs.Floor, cs.Drop, cs.AUC,
				cs.GainBaseCeiling, cs.GainBaseFinal, cs.GainSARLCeiling, cs.GainSARLFinal} {
				row.Values = append(row.Values, estVals(e)...)
			}
			row.Values = append(row.Values, cs.CeilingStep, float64(cs.CliffRuns), nan, nan, nan, nan, nan)
			rows = append(rows, row)
		}
	}
	return rows
}

func summarySchema() *arrow.Schema {
	var fields []arrow.Field
	for _, n := range stringCols {
		fields = append(fields, arrow.Field{Name: n, Type: arrow.BinaryTypes.String})
	}
	fields = append(fields, arrow.Field{Name: "seed_index", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "seeds", Type: arrow.PrimitiveTypes.Int64})
	for _, n := range SummaryMetrics {
		fields = append(fields, arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

// EncodeSummary writes rows as a zstd-compressed Parquet file. The bytes
// depend only on the rows.
func EncodeSummary(rows []SummaryRow) ([]byte, error) {
	sc := summarySchema()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, r := range rows {
		if len(r.Values) != len(SummaryMetrics) {
			return nil, fmt.Errorf("summary row %d (%s): %d values, want %d", i, r.Key(), len(r.Values), len(SummaryMetrics))
		}
		for j, s := range r.strs() {
			b.Field(j).(*array.StringBuilder).Append(*s)
		}
		n := len(stringCols)
		b.Field(n).(*array.Int64Builder).Append(r.SeedIndex)
		b.Field(n + 1).(*array.Int64Builder).Append(r.Seeds)
		for j, v := range r.Values {
			fb := b.Field(n + 2 + j).(*array.Float64Builder)
			if math.IsNaN(v) {
				fb.AppendNull()
			} else {
				fb.Append(v)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithCreatedBy("marlow reports"))
	w, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, fmt.Errorf("summary.parquet: creating writer: %w", err)
	}
	if err := w.Write(rec); err != nil {
		w.Close()
		return nil, fmt.Errorf("summary.parquet: writing rows: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("summary.parquet: closing: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeSummary reads a summary.parquet file written by EncodeSummary.
// name is used in errors.
func DecodeSummary(name string, data []byte) ([]SummaryRow, error) {
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: not a Parquet file: %w", name, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: reading table: %w", name, err)
	}
	defer tbl.Release()
	col := func(n string) (*arrow.Chunked, error) {
		idx := tbl.Schema().FieldIndices(n)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%s: column %q missing (not a marlow summary?)", name, n)
		}
		return tbl.Column(idx[0]).Data(), nil
	}
	nrows := int(tbl.NumRows())
	rows := make([]SummaryRow, nrows)
	for i := range rows {
		rows[i].Values = make([]float64, len(SummaryMetrics))
	}
	each := func(c *arrow.Chunked, f func(row int, a arrow.Array, k int)) {
		row := 0
		for _, ch := range c.Chunks() {
			for k := 0; k < ch.Len(); k++ {
				f(row, ch, k)
				row++
			}
		}
	}
	for j, n := range stringCols {
		c, err := col(n)
		if err != nil {
			return nil, err
		}
		if c.DataType().ID() != arrow.STRING {
			return nil, fmt.Errorf("%s: column %q has type %s, want string", name, n, c.DataType())
		}
		each(c, func(row int, a arrow.Array, k int) { *rows[row].strs()[j] = a.(*array.String).Value(k) })
	}
	for _, n := range []string{"seed_index", "seeds"} {
		c, err := col(n)
		if err != nil {
			return nil, err
		}
		if c.DataType().ID() != arrow.INT64 {
			return nil, fmt.Errorf("%s: column %q has type %s, want int64", name, n, c.DataType())
		}
		each(c, func(row int, a arrow.Array, k int) {
			v := a.(*array.Int64).Value(k)
			if n == "seed_index" {
				rows[row].SeedIndex = v
			} else {
				rows[row].Seeds = v
			}
		})
	}
	for j, n := range SummaryMetrics {
		c, err := col(n)
		if err != nil {
			return nil, err
		}
		if c.DataType().ID() != arrow.FLOAT64 {
			return nil, fmt.Errorf("%s: column %q has type %s, want double", name, n, c.DataType())
		}
		each(c, func(row int, a arrow.Array, k int) {
			if a.IsNull(k) {
				rows[row].Values[j] = math.NaN()
			} else {
				rows[row].Values[j] = a.(*array.Float64).Value(k)
			}
		})
	}
	return rows, nil
}
