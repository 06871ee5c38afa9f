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
	threads := opt.Threads
	if threads <= 0 {
		threads = 1
	}
	eng, err := native.New(job.Model, tok, native.InitWeights(job.Model, job.Pretrain.Seed), native.Options{Threads: threads})
	if err != nil {
		return res, fmt.Errorf("pretrain: scale %s: %w", job.Scale, err)
	}
	defer eng.Close()
	res.Params = job.Model.NumParams()

	cfg := job.Pretrain
	steps := job.Steps()
	res.Steps = steps
	sched := engine.Schedule{Kind: "cosine", Warmup: cfg.WarmupSteps, Total: steps, MinRatio: cfg.MinLRRatio}
	every := opt.LogEvery
	if every <= 0 {
		every = max(1, steps/20)
	}
	var bar *mpb.Bar
	var prog *mpb.Progress
	if opt.Progress != nil && opt.Bar {
		prog = mpb.New(mpb.WithOutput(opt.Progress), mpb.WithWidth(40))
		bar = prog.AddBar(int64(steps),
			mpb.PrependDecorators(decor.Name("pretrain "+job.Scale+" "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Percentage(), decor.Name(" "), decor.AverageETA(decor.ET_STYLE_GO)))
	}
	finishBar := func() {
		if prog != nil {
			bar.Abort(false)
			prog.Wait()
			prog = nil
		}
	}
	defer finishBar()

	if opt.Progress != nil {
		fmt.Fprintf(opt.Progress, "pretrain %s: %d parameters, %s, key %s\n", job.Scale, res.Params, cfg.String(), key[:12])
	}
	rows := make([]LossRow, 0, steps)
	next := int64(0) // next transcript index
	maxLen := job.Model.MaxPositionEmbeddings + 1
	for step := 0; step < steps; step++ {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("pretrain: scale %s: stopped at step %d: %w", job.Scale, step, err)
		}
		batch := make([]native.Example, 0, cfg.BatchSize)
		for len(batch) < cfg.BatchSize {
			tr, err := teacher.Transcript(next)
			if err != nil {
				return res, err
			}
			next++
			ex, err := Encode(tok, tr)
			if err != nil {
				return res, err
			}
			if len(ex.IDs) > maxLen {
				res.Skipped++
				if res.Skipped > 1000 && res.Skipped > int(next)/2 {
					return res, fmt.Errorf("pretrain: scale %s: most transcripts are longer than max_positions %d; raise it", job.Scale, job.Model.MaxPositionEmbeddings)
				}
				continue
			}
			batch = append(batch, ex)
		}
		lr := sched.LR(cfg.LR, step)
		st, err := eng.Supervised(ctx, batch, engine.TrainOptions{
			LR: lr, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: 1e-8, WeightDecay: cfg.WeightDecay, GradClip: cfg.GradClip,
		})
		if err != nil {
			return res, fmt.Errorf("pretrain: scale %s: step %d: %w", job.Scale, step, err)
		}
		if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) {
			return res, fmt.Errorf("pretrain: scale %s: step %d: loss is %v; lower pretrain.lr", job.Scale, step, st.Loss)
		}
		rows = append(rows, LossRow{Step: int64(step), LR: lr, Loss: st.Loss, Tokens: int64(st.Tokens), GradNorm: st.GradNormPre})
		res.Tokens += int64(st.Tokens)
		res.FinalLoss = st.Loss
		if bar != nil {
			bar.Increment()
		} else if opt.Progress != nil && ((step+1)%every == 0 || step+1 == steps) {
			fmt.Fprintf(opt.Progress, "pretrain %s: step %d/%d loss %.4f lr %.3g tokens %d elapsed %s\n",
				job.Scale, step+1, steps, st.Loss, lr, res.Tokens, time.Since(start).Round(time.Second))
		}
	}
	finishBar()

	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return res, fmt.Errorf("pretrain: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return res, fmt.Errorf("pretrain: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := eng.SaveBase(tmp); err != nil {
		return res, fmt.Errorf("pretrain: scale %s: %w", job.Scale, err)
	}
	pq, err := LossParquet(rows)
	if err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(tmp, LossFile), pq, 0o644); err != nil {
		return res, fmt.Errorf("pretrain: %w", err)
	}
	kj, err := job.KeyJSON()
	if err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(tmp, JobFile), kj, 0o644); err != nil {
		return res, fmt.Errorf("pretrain: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return res, fmt.Errorf("pretrain: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, JobFile)); statErr == nil {
			// Another process finished the same build first; its bytes are ours.
			res.Wall = time.Since(start)
			return res, nil
		}
		return res, fmt.Errorf("pretrain: move checkpoint into place: %w", err)
	}
	res.Wall = time.Since(start)
	return res, nil
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
