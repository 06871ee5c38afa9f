package runner

import (
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Reporter shows the progress of the runs of a pool. Its methods are called
// from the pool's goroutines and must be safe for concurrent use.
type Reporter interface {
	// Started is called when a run begins (or resumes after step from).
	Started(id string, steps int, from int64)
	// Step is called after step 0's validation and after every step.
	Step(id string, p grpo.Progress)
	// Finished is called once per started run with its final state (one of
	// the State constants) and error.
	Finished(id, state string, err error)
	// Note prints a message line (a skipped run, a refusal).
	Note(format string, args ...any)
	// Close flushes the display; no call may follow.
	Close()
}

func fmtAcc(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.3f", x)
}

// Lines is a Reporter for logs and pipes: one line when a run starts or
// finishes, and a progress line per run at most every Every.
type Lines struct {
	W     io.Writer
	Every time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu   sync.Mutex
	runs map[string]*lineRun
}

type lineRun struct {
	start, last time.Time
	from        int64
}

// NewLines returns a Lines reporter writing to w.
func NewLines(w io.Writer, every time.Duration) *Lines {
	return &Lines{W: w, Every: every}
}

func (l *Lines) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Started implements Reporter.
func (l *Lines) Started(id string, steps int, from int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs == nil {
		l.runs = map[string]*lineRun{}
	}
	t := l.now()
	l.runs[id] = &lineRun{start: t, last: t, from: max(from, 0)}
	if from >= 0 {
		fmt.Fprintf(l.W, "%s: resuming after step %d of %d\n", id, from, steps)
	} else {
		fmt.Fprintf(l.W, "%s: started (%d steps)\n", id, steps)
	}
}

// Step implements Reporter.
func (l *Lines) Step(id string, p grpo.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.runs[id]
	if r == nil {
		return
	}
	t := l.now()
	if p.Step != p.Steps && t.Sub(r.last) < l.Every {
		return
	}
	r.last = t
	eta := "-"
	if done := int64(p.Step) - r.from; done > 0 && p.Steps > p.Step {
		per := t.Sub(r.start) / time.Duration(done)
		eta = (per * time.Duration(int64(p.Steps-p.Step))).Round(time.Second).String()
	}
	fmt.Fprintf(l.W, "%s: step %d/%d reward %s val_acc %s eta %s\n", id, p.Step, p.Steps, fmtAcc(p.Reward), fmtAcc(p.ValAcc), eta)
}

// Finished implements Reporter.
func (l *Lines) Finished(id, state string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var took time.Duration
	if r := l.runs[id]; r != nil {
		took = l.now().Sub(r.start).Round(time.Second)
		delete(l.runs, id)
	}
	if err != nil {
		fmt.Fprintf(l.W, "%s: %s after %s: %v\n", id, state, took, err)
		return
	}
	fmt.Fprintf(l.W, "%s: %s in %s\n", id, state, took)
}

// Note implements Reporter.
func (l *Lines) Note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.W, format+"\n", args...)
}

// Close implements Reporter.
func (l *Lines) Close() {}

// Bars is a Reporter for terminals: one mpb bar per active run with
// step/steps, last reward, last validation accuracy and ETA. A finished
// run's bar stays as a line with its final state.
type Bars struct {
	w    io.Writer
	p    *mpb.Progress
	mu   sync.Mutex
	bars map[string]*barRun
}

type barRun struct {
	mu     sync.Mutex // guards the fields below bar
	bar    *mpb.Bar
	last   time.Time
	reward float64
	acc    float64
	final  string // the final state line, once finished
}

func (r *barRun) info() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final != "" {
		return r.final
	}
	return fmt.Sprintf("reward %s val %s", fmtAcc(r.reward), fmtAcc(r.acc))
}

// NewBars returns a Bars reporter drawing on w (a terminal).
func NewBars(w io.Writer) *Bars {
	return &Bars{w: w, p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(120), mpb.WithRefreshRate(250*time.Millisecond), mpb.WithAutoRefresh()),
		bars: map[string]*barRun{}}
}

// Started implements Reporter.
func (b *Bars) Started(id string, steps int, from int64) {
	r := &barRun{last: time.Now(), reward: math.NaN(), acc: math.NaN()}
	total := int64(max(steps, 1))
	// Built with total 0 and given its total after, the bar never completes
	// by itself: Finished ends it, so its last render shows the final state.
	r.bar = b.p.AddBar(0,
		mpb.PrependDecorators(decor.Name(id, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncSpace)),
		mpb.AppendDecorators(
			decor.Any(func(decor.Statistics) string { return r.info() }, decor.WCSyncSpaceR),
			decor.OnAbort(decor.OnComplete(decor.EwmaETA(decor.ET_STYLE_GO, 10), ""), ""),
		),
	)
	r.bar.SetTotal(total, false)
	if from > 0 {
		r.bar.SetCurrent(min(from, total))
		_ = r.bar.DecoratorAverageAdjust(time.Now())
	}
	b.mu.Lock()
	b.bars[id] = r
	b.mu.Unlock()
}

// Step implements Reporter.
func (b *Bars) Step(id string, p grpo.Progress) {
	b.mu.Lock()
	r := b.bars[id]
	b.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	r.reward, r.acc = p.Reward, p.ValAcc
	now := time.Now()
	dur := now.Sub(r.last)
	r.last = now
	r.mu.Unlock()
	if p.Steps > 0 && p.Step > 0 {
		r.bar.EwmaSetCurrent(int64(p.Step), dur)
	}
}

// Finished implements Reporter: the run's bar stops and shows the state.
func (b *Bars) Finished(id, state string, err error) {
	b.mu.Lock()
	r := b.bars[id]
	delete(b.bars, id)
	b.mu.Unlock()
	line := state
	if err != nil {
		line = fmt.Sprintf("%s: %v", state, err)
	}
	if r == nil {
		b.Note("%s: %s", id, line)
		return
	}
	r.mu.Lock()
	r.final = oneLine(line)
	r.mu.Unlock()
	r.bar.Abort(false)
	r.bar.Wait()
}

// Note implements Reporter: the line is printed above the bars.
func (b *Bars) Note(format string, args ...any) {
	fmt.Fprintf(b.p, format+"\n", args...)
}

// Close implements Reporter.
func (b *Bars) Close() { b.p.Wait() }
