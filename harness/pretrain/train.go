package pretrain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/model"
)

// Files written next to the checkpoint.
const (
	LossFile = "loss.parquet"  // the loss curve, one row per optimizer step
	JobFile  = "pretrain.json" // the job's KeyJSON
)

// Options tune a build; none of them changes its result.
type Options struct {
	// Threads is the native engine's goroutine count (default 1).
	Threads int
	// Progress receives progress output; nil is silent.
	Progress io.Writer
	// Bar draws an mpb progress bar on Progress (for terminals); otherwise
	// a plain line is printed every LogEvery steps.
	Bar bool
	// LogEvery is the plain-line period in steps (default steps/20).
	LogEvery int
}

// Encode turns a transcript into a training example: the chat prompt with
// the generation prompt, then the completion and the end-of-turn token; the
// loss covers the completion and the end-of-turn token only.
func Encode(tok *model.Tokenizer, tr Transcript) (native.Example, error) {
	prompt, err := tok.EncodeChat(tr.Prompt, true)
	if err != nil {
		return native.Example{}, fmt.Errorf("pretrain: encode prompt of transcript %d: %w", tr.Index, err)
	}
	comp, err := tok.Encode(tr.Completion)
	if err != nil {
		return native.Example{}, fmt.Errorf("pretrain: encode completion of transcript %d: %w", tr.Index, err)
	}
	ids := append(append(prompt, comp...), tok.ID(model.ImEnd))
	mask := make([]bool, len(ids))
	for i := len(prompt); i < len(ids); i++ {
		mask[i] = true
	}
	return native.Example{IDs: ids, LossMask: mask}, nil
}

// LossRow is one row of the loss curve.
type LossRow struct {
	Step     int64   // 0-based optimizer step
	LR       float64 // learning rate of the step
	Loss     float64 // mean completion-token cross-entropy before the step
	Tokens   int64   // completion tokens in the batch
	GradNorm float64 // global gradient norm before clipping
}

// Result summarises a build.
type Result struct {
	Dir       string
	Key       string
	Steps     int
	Params    int64
	Tokens    int64 // completion tokens trained on
	Skipped   int   // transcripts longer than the context, not trained on
	FinalLoss float64
	Wall      time.Duration
}

// Train pretrains the job's model from its initial weights and writes the
// checkpoint (config.json, model.safetensors, tokenizer.json,
// tokenizer_config.json), the loss curve (loss.parquet) and the job
// description (pretrain.json) into dir, which must not exist yet. It builds
// in a sibling temporary folder and renames it into place, so dir is either
// complete or absent.
func Train(ctx context.Context, job Job, dir string, opt Options) (Result, error) {
	start := time.Now()
	res := Result{Dir: dir}
	if err := job.Validate(); err != nil {
		return res, err
	}
	key, err := job.Key()
	if err != nil {
		return res, err
	}
	res.Key = key
	if _, err := os.Stat(dir); err == nil {
		return res, fmt.Errorf("pretrain: %s already exists", dir)
	}
	tok, err := model.NewCharTokenizer(job.Alphabet)
	if err != nil {
		return res, fmt.Errorf("pretrain: %w", err)
	}
	teacher, err := job.NewTeacher()
	if err != nil {
		return res, err
	}
	eng, err := native.New(job.Model, tok, native.InitWeights(job.Model, job.Pretrain.Seed), native.Options{Threads: max(opt.Threads, 1)})
	if err != nil {
		return res, fmt.Errorf("pretrain: scale %s: %w", job.Scale, err)
	}
	defer eng.Close()
	res.Params = job.Model.NumParams()
	res.Steps = job.Steps()
	if opt.Progress != nil {
		fmt.Fprintf(opt.Progress, "pretrain %s: %d parameters, %s, key %s\n", job.Scale, res.Params, job.Pretrain.String(), key[:12])
	}
	src := &batches{job: job, teacher: teacher, tok: tok, maxLen: job.Model.MaxPositionEmbeddings + 1}
	rows, err := trainSteps(ctx, eng, job, src, newTrainProgress(opt, job.Scale, res.Steps, start), &res)
	if err != nil {
		return res, err
	}
	if err := publishCheckpoint(eng, job, dir, rows); err != nil {
		return res, err
	}
	res.Wall = time.Since(start)
	return res, nil
}

// trainSteps runs the job's optimizer steps and returns the loss curve.
func trainSteps(ctx context.Context, eng *native.Engine, job Job, src *batches, prog *trainProgress, res *Result) ([]LossRow, error) {
	defer prog.finish()
	cfg := job.Pretrain
	sched := engine.Schedule{Kind: "cosine", Warmup: cfg.WarmupSteps, Total: res.Steps, MinRatio: cfg.MinLRRatio}
	rows := make([]LossRow, 0, res.Steps)
	for step := 0; step < res.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("pretrain: scale %s: stopped at step %d: %w", job.Scale, step, err)
		}
		batch, err := src.next(cfg.BatchSize, res)
		if err != nil {
			return nil, err
		}
		lr := sched.LR(cfg.LR, step)
		st, err := eng.Supervised(ctx, batch, supervisedOptions(cfg, lr))
		if err != nil {
			return nil, fmt.Errorf("pretrain: scale %s: step %d: %w", job.Scale, step, err)
		}
		if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) {
			return nil, fmt.Errorf("pretrain: scale %s: step %d: loss is %v; lower pretrain.lr", job.Scale, step, st.Loss)
		}
		rows = append(rows, LossRow{Step: int64(step), LR: lr, Loss: st.Loss, Tokens: int64(st.Tokens), GradNorm: st.GradNormPre})
		res.Tokens += int64(st.Tokens)
		res.FinalLoss = st.Loss
		prog.step(step, st.Loss, lr, res.Tokens)
	}
	return rows, nil
}

// supervisedOptions are a pretraining step's optimizer settings at rate lr.
func supervisedOptions(cfg Config, lr float64) engine.TrainOptions {
	return engine.TrainOptions{LR: lr, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: 1e-8, WeightDecay: cfg.WeightDecay, GradClip: cfg.GradClip}
}

// batches draws training batches from the teacher's transcript stream,
// skipping transcripts longer than the context.
type batches struct {
	job     Job
	teacher *Teacher
	tok     *model.Tokenizer
	maxLen  int   // longest encoded transcript trained on
	cursor  int64 // next transcript index
}

// next returns the next batch of n examples, counting skipped transcripts
// in res.
func (b *batches) next(n int, res *Result) ([]native.Example, error) {
	batch := make([]native.Example, 0, n)
	for len(batch) < n {
		tr, err := b.teacher.Transcript(b.cursor)
		if err != nil {
			return nil, err
		}
		b.cursor++
		ex, err := Encode(b.tok, tr)
		if err != nil {
			return nil, err
		}
		if len(ex.IDs) > b.maxLen {
			res.Skipped++
			if res.Skipped > 1000 && res.Skipped > int(b.cursor)/2 {
				return nil, fmt.Errorf("pretrain: scale %s: most transcripts are longer than max_positions %d; raise it", b.job.Scale, b.job.Model.MaxPositionEmbeddings)
			}
			continue
		}
		batch = append(batch, ex)
	}
	return batch, nil
}

// trainProgress shows pretraining progress: a bar on a terminal, else a
// line every few steps, else nothing.
type trainProgress struct {
	opt   Options
	scale string
	steps int
	every int
	start time.Time
	prog  *mpb.Progress
	bar   *mpb.Bar
}

func newTrainProgress(opt Options, scale string, steps int, start time.Time) *trainProgress {
	p := &trainProgress{opt: opt, scale: scale, steps: steps, every: opt.LogEvery, start: start}
	if p.every <= 0 {
		p.every = max(1, steps/20)
	}
	if opt.Progress != nil && opt.Bar {
		p.prog = mpb.New(mpb.WithOutput(opt.Progress), mpb.WithWidth(40))
		p.bar = p.prog.AddBar(int64(steps),
			mpb.PrependDecorators(decor.Name("pretrain "+scale+" "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Percentage(), decor.Name(" "), decor.AverageETA(decor.ET_STYLE_GO)))
	}
	return p
}

// step reports the end of a step (0-based).
func (p *trainProgress) step(step int, loss, lr float64, tokens int64) {
	if p.bar != nil {
		p.bar.Increment()
	} else if p.opt.Progress != nil && ((step+1)%p.every == 0 || step+1 == p.steps) {
		fmt.Fprintf(p.opt.Progress, "pretrain %s: step %d/%d loss %.4f lr %.3g tokens %d elapsed %s\n",
			p.scale, step+1, p.steps, loss, lr, tokens, time.Since(p.start).Round(time.Second))
	}
}

// finish removes the bar; later calls do nothing.
func (p *trainProgress) finish() {
	if p.prog != nil {
		p.bar.Abort(false)
		p.prog.Wait()
		p.prog = nil
	}
}

// publishCheckpoint writes the checkpoint, loss curve and job description
// into a sibling temporary folder and renames it to dir. When another
// process finished the same build first, its folder is kept.
func publishCheckpoint(eng *native.Engine, job Job, dir string, rows []LossRow) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := eng.SaveBase(tmp); err != nil {
		return fmt.Errorf("pretrain: scale %s: %w", job.Scale, err)
	}
	pq, err := LossParquet(rows)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, LossFile), pq, 0o644); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	kj, err := job.KeyJSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, JobFile), kj, 0o644); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, JobFile)); statErr == nil {
			// Another process finished the same build first; its bytes are ours.
			return nil
		}
		return fmt.Errorf("pretrain: move checkpoint into place: %w", err)
	}
	return nil
}

// lossSchema is the schema of loss.parquet.
var lossSchema = arrow.NewSchema([]arrow.Field{
	{Name: "step", Type: arrow.PrimitiveTypes.Int64},
	{Name: "lr", Type: arrow.PrimitiveTypes.Float64},
	{Name: "loss", Type: arrow.PrimitiveTypes.Float64},
	{Name: "tokens", Type: arrow.PrimitiveTypes.Int64},
	{Name: "grad_norm", Type: arrow.PrimitiveTypes.Float64},
}, nil)

// LossParquet encodes the loss curve as a zstd-compressed Parquet file with
// columns step, lr, loss, tokens and grad_norm. The same rows always give
// the same bytes.
func LossParquet(rows []LossRow) ([]byte, error) {
	mem := memory.NewGoAllocator()
	b := array.NewRecordBuilder(mem, lossSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.Step)
		b.Field(1).(*array.Float64Builder).Append(r.LR)
		b.Field(2).(*array.Float64Builder).Append(r.Loss)
		b.Field(3).(*array.Int64Builder).Append(r.Tokens)
		b.Field(4).(*array.Float64Builder).Append(r.GradNorm)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCreatedBy("marlow pretrain"),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(math.MaxInt32),
	)
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(lossSchema, &buf, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		return nil, fmt.Errorf("pretrain: loss table: %w", err)
	}
	if err := fw.Write(rec); err != nil {
		return nil, errors.Join(fmt.Errorf("pretrain: loss table: %w", err), fw.Close())
	}
	if err := fw.Close(); err != nil {
		return nil, fmt.Errorf("pretrain: loss table: %w", err)
	}
	return buf.Bytes(), nil
}
