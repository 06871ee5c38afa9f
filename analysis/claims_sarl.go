package analysis

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/harness/study"
)

// The gains of SP and IP over SA-RL per cell, and the paper's headline
// numbers beside them.

// sarlGains lists the gains of SP and IP over SA-RL per cell.
func sarlGains(st *Study) []SARLGain {
	var out []SARLGain
	for _, c := range st.Cells {
		sarl, sp, ip := c.Cond(study.SARL), c.Cond(study.SP), c.Cond(study.IP)
		if sarl == nil || (sp == nil && ip == nil) {
			continue
		}
		g := SARLGain{Cell: c.Key, SARLSeeds: sarl.Seeds, SP: noCI(math.NaN()), IP: noCI(math.NaN())}
		if sp != nil {
			g.SP, g.SPSeeds = sp.GainSARLFinal, sp.Seeds
		}
		if ip != nil {
			g.IP, g.IPSeeds = ip.GainSARLFinal, ip.Seeds
		}
		out = append(out, g)
	}
	return out
}

// headlines matches the paper's headline cells: the scale by rank among
// the study's three scales (PaperScales), the task by a name containing
// "math", the workflow and condition by name.
func headlines(st *Study, gains []SARLGain) []Headline {
	scales, tasks := map[string]bool{}, map[string]bool{}
	for _, c := range st.Cells {
		if c.Key.Arm != "" {
			continue // an arm's scale or task is a variant, not one of the study's
		}
		scales[c.Key.Scale] = true
		tasks[c.Key.Task] = true
	}
	sl := slices.Collect(maps.Keys(scales))
	sort.Slice(sl, func(i, j int) bool { return ScaleLess(sl[i], sl[j]) })
	var mathTasks []string
	for _, t := range slices.Sorted(maps.Keys(tasks)) {
		if strings.Contains(strings.ToLower(t), "math") {
			mathTasks = append(mathTasks, t)
		}
	}
	var out []Headline
	for _, ph := range paperHeadlines {
		h := Headline{PaperScale: PaperScales[ph.scale], PaperWorkflow: ph.workflow, Condition: ph.cond, PaperGain: ph.gain,
			Scales: len(sl), MathTasks: len(mathTasks), Gain: noCI(math.NaN())}
		switch {
		case len(sl) != len(PaperScales):
			h.Match = ScalesUnmatched
		case len(mathTasks) != 1:
			h.Match = TaskUnmatched
		default:
			h.Match = Matched
			h.Cell = CellKey{Workflow: ph.workflow, Task: mathTasks[0], Scale: sl[ph.scale]}
			for _, g := range gains {
				if g.Cell != h.Cell {
					continue
				}
				e := g.SP
				if ph.cond == study.IP {
					e = g.IP
				}
				if !math.IsNaN(e.Value) {
					h.Found, h.Gain = true, e
				}
			}
		}
		out = append(out, h)
	}
	return out
}
