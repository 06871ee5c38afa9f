package analysis

import (
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// valSampleKeeper is the sample reduction the analysis reads runs with
// (runlog.SampleReducer): of a run's sample rows it keeps the validation
// rows, which every sample-based number rests on (the problem matrix,
// strict and lenient accuracy, fallbacks, token caps, the degeneration and
// capture detectors), and of their completions only those the detectors
// read: the rows at the first and the last validation step of each
// workflow and policy (Degeneration and Capture compare those two). Other
// completions are dropped as the rows arrive, segment by segment, so a run
// costs its validation rows without text, plus the text of two
// validations, whatever its training samples weigh. A run logged before
// the fallback column (schema version < loggedFallbacks) keeps of an
// aggregator's completion the part up to its first digit, all that
// derivedFallbackOf reads.
//
// The strings a decoded row holds point into its segment's column
// buffers, so a kept row would hold on to the whole column: the keeper
// stores copies instead (the short fields interned, the completions
// cloned).
type valSampleKeeper struct {
	logged bool
	rows   []runlog.SampleRow
	groups map[[2]string]*valBounds
	names  map[string]string
}

// valBounds are the first and last validation steps seen of one workflow
// and policy, and the kept rows at each.
type valBounds struct {
	min, max     int64
	atMin, atMax []int
}

func newValSampleKeeper(m runlog.Manifest) runlog.SampleReducer {
	return &valSampleKeeper{logged: m.SchemaVersion >= loggedFallbacks, groups: map[[2]string]*valBounds{}, names: map[string]string{}}
}

// intern returns the keeper's copy of a short string.
func (k *valSampleKeeper) intern(s string) string {
	if v, ok := k.names[s]; ok {
		return v
	}
	v := strings.Clone(s)
	k.names[v] = v
	return v
}

// own replaces the row's strings with the keeper's copies.
func (k *valSampleKeeper) own(s *runlog.SampleRow) {
	for _, f := range []*string{&s.RunID, &s.Workflow, &s.Split, &s.ProblemID, &s.Agent, &s.Role, &s.Policy, &s.Parsed, &s.Finish, &s.Fallback} {
		*f = k.intern(*f)
	}
	s.Prompt = ""
}

// strip drops the completion of a kept row that is not at a boundary.
func (k *valSampleKeeper) strip(i int) {
	s := &k.rows[i]
	if !k.logged && s.Role == study.Aggregator {
		if j := strings.IndexAny(s.Completion, "0123456789"); j >= 0 {
			s.Completion = strings.Clone(s.Completion[:j+1])
			return
		}
	}
	s.Completion = ""
}

func (k *valSampleKeeper) Add(rows []runlog.SampleRow) {
	for _, s := range rows {
		if s.Split != "val" {
			continue
		}
		i := len(k.rows)
		k.own(&s)
		k.rows = append(k.rows, s)
		if s.Role == "final" {
			k.strip(i)
			continue
		}
		key := [2]string{s.Workflow, s.Policy}
		b := k.groups[key]
		if b == nil {
			k.groups[key] = &valBounds{min: s.Step, max: s.Step, atMin: []int{i}, atMax: []int{i}}
			k.rows[i].Completion = strings.Clone(s.Completion)
			continue
		}
		if s.Step < b.min {
			for _, j := range b.atMin {
				if k.rows[j].Step != b.max {
					k.strip(j)
				}
			}
			b.min, b.atMin = s.Step, nil
		}
		if s.Step > b.max {
			for _, j := range b.atMax {
				if k.rows[j].Step != b.min {
					k.strip(j)
				}
			}
			b.max, b.atMax = s.Step, nil
		}
		if s.Step == b.min {
			b.atMin = append(b.atMin, i)
		}
		if s.Step == b.max {
			b.atMax = append(b.atMax, i)
		}
		if s.Step != b.min && s.Step != b.max {
			k.strip(i)
		} else {
			k.rows[i].Completion = strings.Clone(s.Completion)
		}
	}
}

func (k *valSampleKeeper) Rows() []runlog.SampleRow {
	rows := k.rows
	k.rows, k.groups = nil, nil
	return rows
}
