package runner

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/spec"
)

// SplitProblems opens the task of every distinct data config of runs whose
// files are present (synthetic tasks always are) and returns one line for
// each task whose splits cannot give the runs their problems: a validation
// split with fewer than eval.val_size problems, or none at all; a
// train_size above the train split's size; or, for a run that trains, an
// empty train split. A run would otherwise fail at its first validation or
// step, after any pretraining of its base model.
// A task that cannot be opened at all is reported with its error; a missing
// file is left to Needs, which names it. open opens a task as the runs will
// (nil: OpenTask).
func SplitProblems(runs []spec.Run, open func(spec.DataConfig, TaskOptions) (datasets.Task, error)) []string {
	if open == nil {
		open = OpenTask
	}
	var out []string
	seen := map[string]bool{}
	type opened struct {
		t       datasets.Task
		err     error
		charset bool // the tiny models' alphabet was checked
	}
	tasks := map[string]opened{} // each data config is opened once
	for _, r := range runs {
		d, want, train := r.Config.Data, max(r.Config.Eval.ValSize, r.Config.Eval.FirstValSize), r.Config.Train
		if d.Path != "" && dataNeeds(d) != "" {
			continue
		}
		b, err := json.Marshal(d)
		if err != nil {
			out = append(out, fmt.Sprintf("task %s: %v", d.Task, err))
			continue
		}
		key := fmt.Sprintf("%s\x00%d\x00%t", b, want, train)
		if seen[key] {
			continue
		}
		seen[key] = true
		where := "source " + d.Source
		if d.Path != "" {
			where += ", " + d.Path
		}
		o, done := tasks[string(b)]
		if !done {
			o.t, o.err = open(d, TaskOptions{})
			tasks[string(b)] = o
			if o.err != nil {
				// OpenTask's errors name the task and source already.
				msg := o.err.Error()
				if !strings.HasPrefix(msg, "task "+d.Task+" ") && !strings.HasPrefix(msg, "task "+d.Task+":") {
					msg = fmt.Sprintf("task %s (%s): %s", d.Task, where, msg)
				}
				out = append(out, msg)
			}
		}
		if o.err != nil {
			continue
		}
		t := o.t
		if r.Config.Model.Tiny != nil && d.Source == datasets.SourceFile && !o.charset {
			o.charset = true
			tasks[string(b)] = o
			if msg := outsideAlphabet(t); msg != "" {
				out = append(out, fmt.Sprintf("task %s (%s): %s, and a tiny scale's tokenizer (printable ASCII and newlines) cannot encode it: rewrite or drop the row, or use a checkpoint model",
					d.Task, where, msg))
			}
		}
		val, err := t.Validation()
		if err != nil {
			out = append(out, fmt.Sprintf("task %s (%s): validation split: %v", d.Task, where, err))
			continue
		}
		switch {
		case len(val) == 0:
			out = append(out, fmt.Sprintf("task %s (%s): the validation split is empty: use a larger data set or raise tasks.%s.val_frac", d.Task, where, d.Task))
		case want > len(val):
			out = append(out, fmt.Sprintf("task %s (%s): the validation split has %d problems, fewer than eval.val_size (%d): lower eval.val_size to at most %d, or use a larger data set or a larger tasks.%s.val_frac",
				d.Task, where, len(val), want, len(val), d.Task))
		}
		if sized, ok := t.(interface{ TrainSize() int }); ok && train && sized.TrainSize() == 0 {
			out = append(out, fmt.Sprintf("task %s (%s): the train split is empty, but run %s trains on it: lower tasks.%s.val_frac, or use a larger data set",
				d.Task, where, r.ID, d.Task))
		}
	}
	// A line stands once, whichever runs share its data.
	var lines []string
	said := map[string]bool{}
	for _, l := range out {
		if !said[l] {
			said[l] = true
			lines = append(lines, l)
		}
	}
	return lines
}

// outsideAlphabet names the first problem (validation, then the train
// split's) whose prompt holds a character outside the tiny models'
// alphabet, or returns "" when there is none.
func outsideAlphabet(t datasets.Task) string {
	probs, err := t.Validation()
	if err != nil {
		return ""
	}
	if sized, ok := t.(interface{ TrainSize() int }); ok {
		for i := 0; i < sized.TrainSize(); i++ {
			p, err := t.Train(int64(i))
			if err != nil {
				break
			}
			probs = append(probs, p)
		}
	}
	for _, p := range probs {
		if datasets.IsPrintable(p.Prompt) {
			continue
		}
		for _, c := range p.Prompt {
			if c != '\n' && (c < 0x20 || c > 0x7e) {
				return fmt.Sprintf("problem %s has the character %q (U+%04X)", p.ID, c, c)
			}
		}
	}
	return ""
}
