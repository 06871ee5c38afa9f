package report

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

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
	Kind       string
	Experiment string
	Workflow   string
	Task       string
	Scale      string
	Condition  string
	// Arm is the spec arm of the row's cell ("" for the main matrix, and
	// in summaries written before the column existed).
	Arm          string
	RunID        string // run rows; "" for cell rows
	Status       string // run rows: manifest status
	CIMethod     string // cell rows: analysis.Method* (seeds+problems, seeds, problems or none)
	DominantRole string // run rows: role with the largest mean gradient share ("" when none)
	SeedIndex    int64  // run rows; 0 for cell rows
	Seeds        int64  // 1 for run rows
	// Problems is the number of validation problems the row's numbers rest
	// on: the problems a cell row's intervals resampled, or those of a run
	// row's per-problem samples; 0 when unknown (and in summaries written
	// before the column existed).
	Problems int64
	// Values holds the numeric metrics, aligned with SummaryMetrics; NaN
	// (null in Parquet) where undefined.
	Values []float64
}

// SummaryMetrics names the numeric columns of summary.parquet. Every
// estimate has _lo/_hi bounds of its interval and the standard error (_se)
// and degrees of freedom (_df, +Inf for a zero standard error) the interval
// was built from (cell rows only; see analysis/interval.go).
var SummaryMetrics = func() []string {
	var out []string
	for _, m := range []string{"base", "ceiling", "final", "floor", "drop", "auc",
		"gain_base_ceiling", "gain_base_final", "gain_sarl_ceiling", "gain_sarl_final"} {
		out = append(out, m, m+"_lo", m+"_hi", m+"_se", m+"_df")
	}
	out = append(out, "ceiling_step", "cliff", "cliff_threshold", "cliff_fall_step", "evals", "amplified_before_cliff", "captured_roles")
	return append(out, strictMetrics...)
}()

// strictMetrics are the columns of strict and lenient final accuracy (the
// mean of the last 3 validations, like final; analysis/roles.go; the bounds
// are the t interval over seeds, cell rows only) and the share of
// supervisory turns whose output did not parse at the last validation (a
// cell row pools its seeds' turns).
var strictMetrics = []string{"strict_final", "strict_final_lo", "strict_final_hi",
	"lenient_final", "lenient_final_lo", "lenient_final_hi", "unparsed_supervisory"}

// Value returns the named metric of a row (NaN when absent).
func (r SummaryRow) Value(name string) float64 {
	for i, m := range SummaryMetrics {
		if m == name && i < len(r.Values) {
			return r.Values[i]
		}
	}
	return math.NaN()
}

// Key identifies a row across summaries: kind, cell (with its arm, if
// any), condition and (for run rows) seed index.
func (r SummaryRow) Key() string {
	k := fmt.Sprintf("%s|%s|%s|%s|%s", r.Kind, r.Task, r.Workflow, r.Scale, r.Condition)
	if r.Arm != "" {
		k += "|arm=" + r.Arm
	}
	if r.Kind == "run" {
		k += fmt.Sprintf("|seed%d", r.SeedIndex)
	}
	return k
}

var intCols = []string{"seed_index", "seeds", "problems"}

func (r *SummaryRow) ints() []*int64 { return []*int64{&r.SeedIndex, &r.Seeds, &r.Problems} }

var stringCols = []string{"kind", "experiment", "workflow", "task", "scale", "condition", "run_id", "status", "ci_method", "dominant_role", "arm"}

func (r *SummaryRow) strs() []*string {
	return []*string{&r.Kind, &r.Experiment, &r.Workflow, &r.Task, &r.Scale, &r.Condition, &r.RunID, &r.Status, &r.CIMethod, &r.DominantRole, &r.Arm}
}

func estVals(e analysis.Estimate) []float64 { return []float64{e.Value, e.Lo, e.Hi, e.SE, e.DF} }

// optionalColumn reports whether a summary column may be missing: those
// added after the first summaries were committed, so that `marlow diff`
// still reads old revisions (missing values read as NaN, or 0 problems).
func optionalColumn(name string) bool {
	return name == "problems" || name == "arm" || strings.HasSuffix(name, "_se") || strings.HasSuffix(name, "_df") || slices.Contains(strictMetrics, name)
}

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
	na5 := []float64{nan, nan, nan, nan, nan}
	var rows []SummaryRow
	for _, r := range st.Runs {
		m := r.Metrics
		row := SummaryRow{Kind: "run", Experiment: st.Experiment, Workflow: r.Cell.Workflow, Task: r.Cell.Task, Scale: r.Cell.Scale,
			Arm: r.Cell.Arm, Condition: r.Condition, RunID: r.RunID, Status: r.Status, CIMethod: "", SeedIndex: int64(r.SeedIndex), Seeds: 1}
		if r.Problems != nil {
			row.Problems = int64(len(r.Problems.Problems))
		}
		for _, d := range r.Dominance {
			if row.DominantRole == "" {
				row.DominantRole = d.DominantRole
			}
		}
		for _, v := range []float64{m.Base, m.Ceiling, m.Final, m.Floor, m.Drop, m.AUC} {
			row.Values = append(row.Values, v, nan, nan, nan, nan)
		}
		for range 4 {
			row.Values = append(row.Values, na5...)
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
		strict, lenient, _ := r.FinalRates()
		row.Values = append(row.Values, strict, nan, nan, lenient, nan, nan, unparsedShare([]*analysis.RunResult{r}))
		rows = append(rows, row)
	}
	for _, c := range st.Cells {
		for _, cs := range c.Conditions {
			row := SummaryRow{Kind: "cell", Experiment: st.Experiment, Workflow: c.Key.Workflow, Task: c.Key.Task, Scale: c.Key.Scale,
				Arm: c.Key.Arm, Condition: cs.Condition, CIMethod: cs.CIMethod, Seeds: int64(cs.Seeds), Problems: int64(cs.Problems)}
			for _, e := range []analysis.Estimate{cs.Base, cs.Ceiling, cs.Final, cs.Floor, cs.Drop, cs.AUC,
				cs.GainBaseCeiling, cs.GainBaseFinal, cs.GainSARLCeiling, cs.GainSARLFinal} {
				row.Values = append(row.Values, estVals(e)...)
			}
			row.Values = append(row.Values, cs.CeilingStep, float64(cs.CliffRuns), nan, nan, nan, nan, nan)
			row.Values = append(row.Values, cs.StrictFinal.Value, cs.StrictFinal.Lo, cs.StrictFinal.Hi,
				cs.LenientFinal.Value, cs.LenientFinal.Lo, cs.LenientFinal.Hi, unparsedShare(runsOf(st, c.Key, cs.Condition)))
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
	for _, n := range intCols {
		fields = append(fields, arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64})
	}
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
		for j, v := range r.ints() {
			b.Field(n + j).(*array.Int64Builder).Append(*v)
		}
		n += len(intCols)
		for j, v := range r.Values {
			fb := b.Field(n + j).(*array.Float64Builder)
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
		if err != nil && optionalColumn(n) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if c.DataType().ID() != arrow.STRING {
			return nil, fmt.Errorf("%s: column %q has type %s, want string", name, n, c.DataType())
		}
		each(c, func(row int, a arrow.Array, k int) { *rows[row].strs()[j] = a.(*array.String).Value(k) })
	}
	for j, n := range intCols {
		c, err := col(n)
		if err != nil && optionalColumn(n) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if c.DataType().ID() != arrow.INT64 {
			return nil, fmt.Errorf("%s: column %q has type %s, want int64", name, n, c.DataType())
		}
		each(c, func(row int, a arrow.Array, k int) { *rows[row].ints()[j] = a.(*array.Int64).Value(k) })
	}
	for j, n := range SummaryMetrics {
		c, err := col(n)
		if err != nil && optionalColumn(n) {
			for i := range rows {
				rows[i].Values[j] = math.NaN()
			}
			continue
		}
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

// unparsedShare is the share of the runs' supervisory turns at their last
// validation whose output did not parse, NaN without such turns.
func unparsedShare(runs []*analysis.RunResult) float64 {
	turns, unparsed, _ := fallbackTotals(runs)
	if turns == 0 {
		return math.NaN()
	}
	return float64(unparsed) / float64(turns)
}
