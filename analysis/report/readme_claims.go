package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/analysis"
)

// writeClaimsTable writes the verdict on each of the paper's claims, one
// row per claim, for the report's summary.
func writeClaimsTable(w md, cl *analysis.Claims) {
	w("### Verdicts on the paper's claims\n\n")
	w("| claim | verdict | rests on |\n|---|---|---|\n")
	for _, c := range claimTexts(cl) {
		rests := restsOn(c)
		if c.id == "a" && cl.Better.NoBase {
			rests = "this study has no base runs (its matrix has no base condition)"
		}
		w("| %s. %s | **%s** | %s |\n", c.id, cellEsc(c.statement), c.verdict, cellEsc(rests))
	}
	w("\nEach verdict's rule, full counts and per-cell evidence are under *The paper's claims* below the matrix.\n")
}

// restsOn is a claim's cell in the summary's table: one short phrase per
// test (testText.short, else its outcome), named by the test when the
// claim has several, and said once when every test reads the same. The
// counts are in the claim's own section (writeClaims).
func restsOn(c claimText) string {
	var phrases, names []string
	for _, t := range c.tests {
		s := t.short
		if s == "" {
			s = t.outcome
		}
		phrases = append(phrases, s)
		names = append(names, t.name)
	}
	switch {
	case len(phrases) == 0:
		return ""
	case len(phrases) == 1:
		return phrases[0]
	case !slices.ContainsFunc(phrases, func(s string) bool { return s != phrases[0] }):
		return strings.Join(names, ", ") + ": " + phrases[0]
	}
	parts := make([]string, len(phrases))
	for i := range phrases {
		parts[i] = names[i] + ": " + phrases[i]
	}
	return strings.Join(parts, "; ")
}

// writeClaims writes the comparison with the paper's four claims (its
// verdicts are in the summary, writeClaimsTable), the gains over SA-RL per
// cell and the paper's headline gains, all computed by
// analysis.CompareClaims and worded here (claims_prose.go).
func writeClaims(w md, st *analysis.Study, cl *analysis.Claims) {
	ciPct := fmt.Sprintf("%g%%", cl.CI*100)
	w("\n## The paper's claims\n\n")
	w("Each claim of the paper is judged from the logs by the rule printed under it; no verdict is written by hand (the summary at the top gathers the verdicts). "+
		"Intervals are %s intervals by the rule of *Definitions* (over seeds and validation problems; the capture rate and the aggregator's length ratio, which are not recomputed on resampled problems, over seeds alone). "+
		"A cell is judged only when every condition it compares has %d or more seeds; otherwise it counts as *%s* and the claim cannot rest on it.\n\n",
		ciPct, analysis.MinClaimSeeds, outcomeWord(analysis.NoData))
	w("%s\n\n", controlsText(st))
	claims := claimTexts(cl)
	for _, c := range claims {
		w("### %s. %s\n\n**Verdict: %s.** %s\n\n", c.id, c.statement, c.verdict, c.why)
		if len(c.tests) > 1 {
			w("%s\n\n", c.rule)
		}
		for _, t := range c.tests {
			if len(c.tests) > 1 {
				w("#### %s: %s\n\n%s\n\n", t.name, t.outcome, t.why)
			}
			w("Rule: %s\n\n", t.rule)
			w("Counts: %s.\n\n", countsText(t))
			if len(t.evidence) > 0 {
				for _, e := range t.evidence {
					w("- %s: %s\n", e.name, evidenceText(e))
				}
				w("\n")
			}
			if len(t.units) > 0 || t.countsLine == "" {
				writeUnits(w, t.units)
			}
		}
	}
	writeSARLGains(w, cl, ciPct)
	writeStrict(w, st, cl)
}

// countsText lists a test's counts: "holds 3, against 1, ...".
func countsText(t testText) string {
	if t.countsLine != "" {
		return t.countsLine
	}
	parts := make([]string, len(t.counts))
	for i, c := range t.counts {
		parts[i] = fmt.Sprintf("%s %d", c.label, c.n)
	}
	return strings.Join(parts, ", ")
}

func evidenceText(e evidence) string {
	if e.count != "" {
		return e.count
	}
	return est(e.value, e.signed)
}

// writeUnits writes the table of a test's units (cells, or runs when any
// unit names a run).
func writeUnits(w md, units []unitText) {
	if len(units) == 0 {
		w("No cell or run to show.\n\n")
		return
	}
	runs := units[0].run != ""
	head := "| task | workflow | scale |"
	align := "|---|---|---|"
	if runs {
		head += " run |"
		align += "---|"
	}
	for _, e := range units[0].evidence {
		head += " " + cellEsc(e.name) + " |"
		if e.count != "" {
			align += "---|"
		} else {
			align += "---:|"
		}
	}
	w("%s outcome | why |\n%s---|---|\n", head, align)
	for _, u := range units {
		row := fmt.Sprintf("| %s | %s | %s |", cellEsc(u.cell.Task), cellEsc(u.cell.Workflow), scaleCol(u.cell))
		if runs {
			row += " " + cellEsc(u.run) + " |"
		}
		for _, e := range u.evidence {
			row += " " + cellEsc(evidenceText(e)) + " |"
		}
		w("%s %s | %s |\n", row, u.outcome, cellEsc(u.why))
	}
	w("\n")
}

// differs names how a gain's interval stands against 0.
func differs(e analysis.Estimate) string {
	switch {
	case math.IsNaN(e.Value):
		return "–"
	case e.Excludes(0) && e.Value > 0:
		return "above"
	case e.Excludes(0) && e.Value < 0:
		return "below"
	}
	return "no"
}

// writeSARLGains writes the gains of SP and IP over SA-RL per cell, the
// cells that differ, and the paper's headline gains beside the study's.
func writeSARLGains(w md, cl *analysis.Claims, ciPct string) {
	w("### Gains over SA-RL\n\n")
	if len(cl.Gains) == 0 {
		w("No cell has SA-RL next to SP or IP.\n")
	} else {
		w("Final accuracy of SP and IP minus that of SA-RL evaluated in the same workflow, with the %s interval of the difference; *differs* says whether the interval lies above or below 0.\n\n", ciPct)
		w("| task | workflow | scale | seeds SA-RL/SP/IP | SP − SA-RL | differs | IP − SA-RL | differs |\n|---|---|---|---|---:|---|---:|---|\n")
		var sig []string
		for _, g := range cl.Gains {
			w("| %s | %s | %s | %d/%d/%d | %s | %s | %s | %s |\n", cellEsc(g.Cell.Task), cellEsc(g.Cell.Workflow), scaleCol(g.Cell),
				g.SARLSeeds, g.SPSeeds, g.IPSeeds, est(g.SP, true), differs(g.SP), est(g.IP, true), differs(g.IP))
			for _, x := range []struct {
				name string
				e    analysis.Estimate
			}{{"SP", g.SP}, {"IP", g.IP}} {
				if d := differs(x.e); d == "above" || d == "below" {
					sig = append(sig, fmt.Sprintf("%s %s (%s, %s)", g.Cell, x.name, sf3(x.e.Value), d))
				}
			}
		}
		few := false
		for _, g := range cl.Gains {
			for _, n := range []int{g.SARLSeeds, g.SPSeeds, g.IPSeeds} {
				if n > 0 && n < analysis.MinSeeds {
					few = true
				}
			}
		}
		if few {
			w("\nSome rows rest on fewer than %d seeds per condition: as the warning in the summary says, their intervals leave out or barely estimate the seed-to-seed spread.\n", analysis.MinSeeds)
		}
		if len(sig) == 0 {
			w("\nNo cell's SP or IP differs from SA-RL at the %s level.\n", ciPct)
		} else {
			w("\nDiffering from SA-RL at the %s level: %s.\n", ciPct, strings.Join(sig, "; "))
		}
	}
	w("\nThe paper's headline gains over SA-RL, beside the study's cells that stand in for them (the study's three scales, smallest first, for 0.6B, 1.7B and 4B):\n\n")
	w("| paper's cell | paper's gain | study's cell | study's gain | differs | direction | matched |\n|---|---:|---|---:|---|---|---|\n")
	for _, h := range cl.Headlines {
		cell, gain, d, dir := "–", "–", "–", "–"
		if h.Cell != (analysis.CellKey{}) {
			cell = h.Cell.String() + " " + h.Condition
		}
		if h.Found {
			gain, d, dir = est(h.Gain, true), differs(h.Gain), direction(h.Gain, h.PaperGain)
		}
		w("| %s | %+.3f (%+.1f points) | %s | %s | %s | %s | %s |\n", headlineLabel(h), h.PaperGain, 100*h.PaperGain, cellEsc(cell), gain, d, dir, cellEsc(headlineWhy(h)))
	}
}

// direction compares the sign of the study's gain with the paper's: the
// same or the opposite, and whether the study's interval excludes 0.
func direction(e analysis.Estimate, paper float64) string {
	same := e.Value*paper > 0
	switch {
	case e.Excludes(0) && same:
		return "as the paper's, significantly"
	case e.Excludes(0):
		return "opposite to the paper's, significantly"
	case same:
		return "as the paper's, not significantly"
	case e.Value == 0:
		return "zero"
	}
	return "opposite to the paper's, not significantly"
}

// detectorNames name the failure-mode detectors.
var detectorNames = map[analysis.Detector]string{
	analysis.CliffDetector:         "terminal cliff",
	analysis.AmplificationDetector: "gradient amplification",
	analysis.CaptureDetector:       "role capture",
	analysis.CollapseDetector:      "format collapse",
	analysis.LateEventDetector:     "late events",
	analysis.DegenerationDetector:  "degeneration",
}

// controlsText states which detectors have a shown positive control and
// the rule for those that have none.
func controlsText(st *analysis.Study) string {
	var shown, missing []string
	for _, d := range analysis.Detectors {
		if test, ok := st.Controls[d]; ok {
			shown = append(shown, fmt.Sprintf("%s (%s)", detectorNames[d], test))
		} else {
			missing = append(missing, detectorNames[d])
		}
	}
	text := "A detector's silence counts against a claim only where the detector has been shown to fire on real training built to trigger it (a positive control) and to stay silent on a control that must not; a test resting on a detector without one is *not testable*, its units still judged and shown. "
	if len(shown) > 0 {
		text += "Detectors with a shown positive control (real training on the native engine of the demo's cell, voting × synth-math × the tiny model s, at a learning rate far too high, 1e-2, which must trigger the detector, and at a stable one, 1e-3, which must not: the tests of analysis/controls_slow_test.go, run by `make check-slow`): " + strings.Join(shown, ", ") + ". "
	}
	if len(missing) > 0 {
		text += "Detectors without one in this regime: " + strings.Join(missing, ", ") + "."
	}
	return strings.TrimSpace(text)
}
