package report

import (
	"fmt"
	"strings"

	"github.com/marlowlab/marlow/analysis"
)

// fewSeedsWarning is the report's warning for cell conditions with fewer
// than analysis.MinSeeds seeds, or "" when there are none.
func fewSeedsWarning(st *analysis.Study) string {
	var one, two []string
	total := 0
	for _, c := range st.Cells {
		total += len(c.Conditions)
		for _, cs := range c.Conditions {
			label := c.Key.String() + " " + cs.Condition
			switch {
			case cs.Seeds == 1:
				one = append(one, label)
			case cs.Seeds < analysis.MinSeeds:
				two = append(two, label)
			}
		}
	}
	if len(one)+len(two) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**Warning: fewer than %d seeds.**", analysis.MinSeeds)
	seedSentence(&b, one, total, "one seed", "cover the sampling of validation problems but not the spread from seed to seed, and cover the truth less often than their level says")
	seedSentence(&b, two, total, "two seeds", "are wide because two seeds barely estimate the spread from seed to seed")
	b.WriteString(" See the measured coverage under *Definitions*.\n")
	return b.String()
}

// seedSentence writes the warning's sentence for the cell conditions
// (labels, of total) that rest on seeds ("one seed"): "every" when that is
// all of them, else their count and list; why says what that does to their
// intervals.
func seedSentence(b *strings.Builder, labels []string, total int, seeds, why string) {
	switch {
	case len(labels) == 0:
	case len(labels) == total:
		fmt.Fprintf(b, " Every cell condition (%d) rests on %s: their intervals %s.", total, seeds, why)
	default:
		fmt.Fprintf(b, " %d cell conditions rest on %s (%s): their intervals %s.", len(labels), seeds, strings.Join(labels, ", "), why)
	}
}

// intervalsDefinition is the Intervals entry of the report's definitions:
// the rule of analysis/interval.go and its measured coverage.
func intervalsDefinition(p analysis.Params) string {
	var b strings.Builder
	d := analysis.Coverage
	fmt.Fprintf(&b, "- **Intervals** (level %g): a condition's number is the mean over its seeds of the metric of each seed's validation curve. "+
		"Its interval is a Student-t interval whose squared standard error adds two parts: the *seed part*, the variance of the per-seed values over the number of seeds (two or more seeds; seeds − 1 degrees of freedom), "+
		"and the *problem part*, from %d bootstrap replicates that resample the validation problems with replacement (the same problems for every seed, since every seed is validated on the same problems) and recompute every metric from the resampled curves (per-problem correctness from the samples rows of role `final`, or the generator's rows in the single workflow; problems − 1 degrees of freedom). "+
		"With two or more seeds the problem part keeps only what the seeds share (the replicates' covariance between seeds), since the seed part already holds the rest. "+
		"Degrees of freedom of the sum: Welch–Satterthwaite. Bounds are clamped to the metric's range. "+
		"A gain adds both conditions' seed parts and takes the problem part from the paired replicates of the difference: every condition of a cell draws the same resampled problems (PCG streams seeded with bootstrap_seed, the cell and the problem list, so intervals are reproducible). "+
		"`CI` names what an interval rests on: `seeds+problems`, `seeds` (no per-problem samples), `problems` (one seed) or `none`. "+
		"A zero-width interval (every resample gave the same value, e.g. the drop of a one-point curve) is shown as it is and never counts as excluding a value.\n",
		p.CI, p.Bootstrap)
	fmt.Fprintf(&b, "- **Coverage of the intervals**, measured by `TestIntervalCoverage` (analysis/coverage_test.go) on simulated studies: %d studies per row, each an untrained and a trained condition validated on the same %d problems (%d rollouts each, %d validations), with per-problem accuracy the logistic of a condition's logit plus normal offsets per seed, per problem and per validation; 200 bootstrap replicates. "+
		"The table gives the fraction of nominal 95%% intervals that contain the population value (the mean over seeds and problems) of the trained condition's final accuracy and of its gain over the untrained condition. "+
		"With one seed the interval leaves out the seed-to-seed spread and undercovers as much as that spread matters; from %d seeds on the coverage is near the nominal level. "+
		"Ceiling, floor and drop are a maximum or minimum over noisy validations, biased upwards (ceiling, drop) or downwards (floor) as estimates of the population curve's; their intervals use the same rule and describe their sampling spread, but their coverage is not claimed.\n\n",
		d.Studies, d.Problems, d.Rollouts, d.Evals, analysis.MinSeeds)
	b.WriteString("| spread (logit SD: seed, problem, validation) | seeds | final | gain over untrained |\n|---|---:|---:|---:|\n")
	for _, sc := range analysis.CoverageScenarios {
		for _, r := range analysis.MeasuredCoverage {
			if r.Scenario != sc.Name {
				continue
			}
			fmt.Fprintf(&b, "| %s (%g, %g, %g) | %d | %.1f%% | %.1f%% |\n", sc.Name, sc.SeedSD, sc.ProblemSD, sc.StepSD, r.Seeds, 100*r.Final, 100*r.Gain)
		}
	}
	b.WriteString("\n")
	return b.String()
}
