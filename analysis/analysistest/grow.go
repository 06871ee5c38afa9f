package analysistest

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/marlowlab/marlow/harness/runlog"
)

// GrowCommitEvery is how many logged steps GrowRuns commits at once.
const GrowCommitEvery = 10

// fillerBytesPerChar is about what a character of filler costs once
// stored in a segment (measured on the dynamics study's logs).
const fillerBytesPerChar = 0.95

// GrowRuns writes every run of src (a runs tree or a .tar.zst archive)
// into dst as a runs tree of about factor times its stored size: its
// training samples' completions lengthened by filler words drawn
// deterministically from the run, step and row, so as to add factor-1
// times the run's stored segment bytes (its inventory's; a run without
// one, or without training samples, is written as it was), and every
// other row as it was: steps, evals, timing and the validation samples the
// analysis reads. The grown runs are schema-valid logs made without
// training, whose analysis is that of the same logs grown by any other
// factor (the scale test and `marlow bench report` compare them). Runs
// are written in the current schema version, committing every
// GrowCommitEvery logged steps. It returns how many runs it wrote.
func GrowRuns(src, dst string, factor int) (int, error) {
	if factor < 1 {
		return 0, fmt.Errorf("grow runs: factor %d: give 1 or more", factor)
	}
	var mu sync.Mutex
	n := 0
	_, err := runlog.StreamRuns(context.Background(), src, runlog.StreamOptions{Jobs: 1}, func(sr runlog.StreamedRun) error {
		r := sr.Run
		rel := r.Manifest.RunID
		if err := growRun(filepath.Join(dst, rel), r, factor); err != nil {
			return fmt.Errorf("grow run %s: %w", r.Manifest.RunID, err)
		}
		mu.Lock()
		n++
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("grow runs of %s: %w", src, err)
	}
	return n, nil
}

// filler returns about n characters of words, a function of key alone.
func filler(key string, n int) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := h.Sum64()
	var b strings.Builder
	b.Grow(n + 8)
	for b.Len() < n {
		// splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		var buf [8]byte
		binary.LittleEndian.PutUint64(buf[:], z)
		b.WriteByte(' ')
		for _, c := range buf[:3+int(z%6)] {
			b.WriteByte('a' + c%26)
		}
	}
	return b.String()
}

func growRun(dir string, r *runlog.Run, factor int) (err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	m := r.Manifest
	status, errText, last := m.Status, m.Error, m.LastStep
	w, _, err := runlog.Open(dir, m)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}()
	var steps []int64
	for _, s := range r.Steps {
		steps = append(steps, s.Step)
	}
	for _, e := range r.Evals {
		steps = append(steps, e.Step)
	}
	for _, s := range r.Samples {
		steps = append(steps, s.Step)
	}
	for _, t := range r.Timing {
		steps = append(steps, t.Step)
	}
	slices.Sort(steps)
	steps = slices.Compact(steps)
	var stored int64
	if m.Inventory != nil {
		for _, sg := range m.Inventory.Segments {
			stored += sg.Bytes
		}
	}
	train := 0
	for _, s := range r.Samples {
		if s.Split != "val" {
			train++
		}
	}
	perRow := 0
	if train > 0 {
		perRow = int(float64(factor-1) * float64(stored) / fillerBytesPerChar / float64(train))
	}
	var si, ei, pi, ti int
	for k, st := range steps {
		if (k+1)%GrowCommitEvery != 0 && k != len(steps)-1 {
			continue
		}
		for ; si < len(r.Steps) && r.Steps[si].Step <= st; si++ {
			if err := w.AddSteps(r.Steps[si]); err != nil {
				return err
			}
		}
		for ; ei < len(r.Evals) && r.Evals[ei].Step <= st; ei++ {
			if err := w.AddEvals(r.Evals[ei]); err != nil {
				return err
			}
		}
		for ; pi < len(r.Samples) && r.Samples[pi].Step <= st; pi++ {
			s := r.Samples[pi]
			if s.Split != "val" && perRow > 0 {
				s.Completion += filler(fmt.Sprintf("%s/%d/%d", m.RunID, s.Step, pi), perRow)
			}
			if err := w.AddSamples(s); err != nil {
				return err
			}
		}
		for ; ti < len(r.Timing) && r.Timing[ti].Step <= st; ti++ {
			if err := w.AddTiming(r.Timing[ti]); err != nil {
				return err
			}
		}
		if err := w.Commit(st); err != nil {
			return err
		}
	}
	if last > w.Manifest().LastStep {
		if err := w.Commit(last); err != nil {
			return err
		}
	}
	return w.SetStatus(status, errText)
}
