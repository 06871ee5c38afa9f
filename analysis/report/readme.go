package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

func f3(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.3f", v)
}

func sf3(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%+.3f", v)
}

func est(e analysis.Estimate, signed bool) string {
	v := f3(e.Value)
	if signed {
		v = sf3(e.Value)
	}
	if math.IsNaN(e.Lo) || math.IsNaN(e.Hi) {
		return v
	}
	return fmt.Sprintf("%s [%s, %s]", v, f3(e.Lo), f3(e.Hi))
}

// fenced returns text in a fenced block that its content cannot close.
func fenced(s string, limit int) string {
	r := []rune(s)
	if len(r) > limit {
		s = string(r[:limit]) + " …"
	}
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence + "text\n" + s + "\n" + fence + "\n"
}

func cellEsc(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ")
}

// scaleCol is a cell's scale column in the report's tables (its
// ScaleLabel: the arm follows the scale).
func scaleCol(k analysis.CellKey) string { return cellEsc(k.ScaleLabel()) }

// md appends formatted markdown to the document being built.
type md func(format string, a ...any)

// readme renders README.md with its answer first: a summary (the verdict
// on each of the paper's claims and the computed findings) and an index of
// the figures, then the matrix, each claim's rule and evidence, the
// figures, failure-mode evidence, definitions and parameters, provenance
// and the rebuild command.
func readme(st *analysis.Study, figs []Figure, opts Options) string {
	return readmeClaims(st, analysis.CompareClaims(st), figs, opts)
}

// readmeClaims is readme with the study's claims already compared.
func readmeClaims(st *analysis.Study, cl *analysis.Claims, figs []Figure, opts Options) string {
	var b strings.Builder
	w := md(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) })
	w("# Report: %s\n\n", st.Experiment)
	w("Built by `marlow report` from the stored logs of %d runs (%d run views: an SA-RL run is viewed once per workflow it was evaluated in) in %d cells. Every number, figure and `summary.parquet` is recomputed from the logs; the same logs give byte-identical output.\n\n",
		countRuns(st), len(st.Runs), len(st.Cells))
	writePartial(w, opts.Incomplete)
	w("## Summary\n\n")
	w("The answer first: the verdict on each of the paper's claims, judged from the logs, and the findings computed from them. " +
		"The figure index, the matrix of every cell, each claim's rule, counts and per-cell evidence, and the figures follow.\n\n")
	if warn := fewSeedsWarning(st); warn != "" {
		w("%s\n", warn)
	}
	if main := mainResults(studyHeadline(st, cl)); len(main) > 0 {
		w("### Main results\n\n")
		for _, s := range main {
			w("- %s\n", s)
		}
		if i := slices.IndexFunc(figs, func(f Figure) bool { return f.Kind == kindHeadline }); i >= 0 {
			w("\nFigure: [%s](figures/%s.png) (its caption is under *Figures*).\n", figs[i].Title, figs[i].Name)
		}
		w("\n")
	}
	writeClaimsTable(w, cl)
	w("\n### Findings\n\n")
	if cl.Late != nil {
		w("- %s\n", gateSentence(cl.Late.Gate))
		for _, f := range []string{rateFinding(cl.Late), interventionFinding(cl.Late)} {
			if f != "" {
				w("- %s\n", f)
			}
		}
	}
	for _, s := range premiseFindings(st, cl) {
		w("- %s\n", s)
	}
	for _, s := range findings(st) {
		w("- %s\n", s)
	}
	writeFigureIndex(w, figs)
	w("\n")
	writeMatrix(w, st)
	writeClaims(w, st, cl)
	writeSupervisors(w, st, cl)
	if cl.Late != nil {
		writeLate(w, cl.Late)
	}

	writeFigures(w, figs)
	writeCliffs(w, st)
	writeAmplification(w, st)
	writeDominance(w, st)
	writeCapture(w, st)
	writeDegeneration(w, st)
	writeDefinitions(w, st.Params)
	writeProvenance(w, st)
	w("\n## Rebuild\n\n```sh\nmarlow report %s --out %s\n```\n", opts.Source, opts.Out)
	return b.String()
}

// writeMatrix writes the matrix table: one row per cell condition.
func writeMatrix(w md, st *analysis.Study) {
	ciPct := fmt.Sprintf("%g%%", st.Params.CI*100)
	w("## Matrix\n\n")
	w("Validation accuracy of the workflow's final answer. Cells show the mean over seeds with the %s interval in brackets (see *Definitions*); *seeds* and *problems* are what each number rests on (problems: validation problems per seed that the interval resampled). Gains are on final accuracy.\n\n", ciPct)
	if fewSeedsWarning(st) != "" {
		w("The cell conditions with fewer than %d seeds are named in the warning of the summary, with what that does to their intervals.\n\n", analysis.MinSeeds)
	}
	w("| task | workflow | scale | condition | seeds | problems | base | ceiling | ceiling step | final | floor | drop | AUC | cliffs | gain vs base | gain vs SA-RL | CI |\n")
	w("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, c := range st.Cells {
		for _, cs := range c.Conditions {
			probs := "–"
			if cs.Problems > 0 {
				probs = fmt.Sprint(cs.Problems)
			}
			w("| %s | %s | %s | %s | %d | %s | %s | %s | %.0f | %s | %s | %s | %s | %d/%d | %s | %s | %s |\n",
				cellEsc(c.Key.Task), cellEsc(c.Key.Workflow), scaleCol(c.Key), cellEsc(cs.Condition), cs.Seeds, probs,
				est(cs.Base, false), est(cs.Ceiling, false), cs.CeilingStep, est(cs.Final, false), est(cs.Floor, false),
				est(cs.Drop, false), est(cs.AUC, false), cs.CliffRuns, cs.Seeds,
				est(cs.GainBaseFinal, true), est(cs.GainSARLFinal, true), cs.CIMethod)
		}
	}
	writeRoutings(w, st)
}

// writeRoutings names the declared routings of the study's runs under the
// matrix, one row per cell condition and routing; nothing for a study of
// the built-in conditions only.
func writeRoutings(w md, st *analysis.Study) {
	type row struct {
		key        analysis.CellKey
		cond, name string
		about      string
	}
	var rows []row
	for _, r := range st.Runs {
		rt := r.Routing()
		if rt == nil {
			continue
		}
		x := row{r.Cell, r.Condition, rt.Name, rt.Describe()}
		if !slices.Contains(rows, x) {
			rows = append(rows, x)
		}
	}
	if len(rows) == 0 {
		return
	}
	w("\nRoutings: these cell conditions ran a routing of roles to adapters declared in the spec (a role routed to `base` is the frozen base model, not trained); their runs are judged as runs of the condition the routing starts from.\n\n")
	w("| task | workflow | scale | condition | routing | roles and adapters |\n|---|---|---|---|---|---|\n")
	for _, x := range rows {
		w("| %s | %s | %s | %s | %s | %s |\n", cellEsc(x.key.Task), cellEsc(x.key.Workflow), scaleCol(x.key), cellEsc(x.cond), cellEsc(x.name), cellEsc(x.about))
	}
}

// figureGroups splits figures into the study-wide ones and those of each
// cell, keeping their order; cells are in order of first appearance.
func figureGroups(figs []Figure) (study []Figure, cells []string, byCell map[string][]Figure) {
	byCell = map[string][]Figure{}
	for _, f := range figs {
		if f.Cell == "" {
			study = append(study, f)
			continue
		}
		if byCell[f.Cell] == nil {
			cells = append(cells, f.Cell)
		}
		byCell[f.Cell] = append(byCell[f.Cell], f)
	}
	return study, cells, byCell
}

// figureAbout is the one-line description of a kind of figure.
func figureAbout(kind string) string {
	for _, k := range figureKinds {
		if k.kind == kind {
			return k.about
		}
	}
	return ""
}

// writeFigureIndex lists every figure with a link to its PNG: the
// study-wide figures one a line with their description, then a table of
// the figures of each cell, one column per kind, under a line describing
// each kind.
func writeFigureIndex(w md, figs []Figure) {
	if len(figs) == 0 {
		return
	}
	studyFigs, cells, byCell := figureGroups(figs)
	w("\n## Figure index\n\n")
	w("Every figure of the report; each link opens its PNG, and its section under *Figures* gives the caption and an SVG.\n")
	if len(studyFigs) > 0 {
		w("\n**Study-wide**\n\n")
		for _, f := range studyFigs {
			w("- [%s](figures/%s.png): %s.\n", f.Title, f.Name, figureAbout(f.Kind))
		}
	}
	if len(cells) == 0 {
		return
	}
	var kinds []string // the kinds drawn for some cell, in figureKinds order
	for _, k := range figureKinds {
		for _, c := range cells {
			if slices.ContainsFunc(byCell[c], func(f Figure) bool { return f.Kind == k.kind }) {
				kinds = append(kinds, k.kind)
				break
			}
		}
	}
	w("\n**Per cell** (workflow/task/scale; – where a cell has no such figure, e.g. the single workflow's one role has no gradient cosine)\n\n")
	for _, k := range kinds {
		w("- *%s*: %s.\n", k, figureAbout(k))
	}
	w("\n| cell |")
	for _, k := range kinds {
		w(" %s |", k)
	}
	w("\n|---|%s\n", strings.Repeat("---|", len(kinds)))
	for _, c := range cells {
		w("| %s |", cellEsc(c))
		for _, k := range kinds {
			i := slices.IndexFunc(byCell[c], func(f Figure) bool { return f.Kind == k })
			if i < 0 {
				w(" – |")
				continue
			}
			w(" [PNG](figures/%s.png) |", byCell[c][i].Name)
		}
		w("\n")
	}
}

// writeFigures writes every figure with its caption: the study-wide ones
// first, then those of each cell under the cell's heading.
func writeFigures(w md, figs []Figure) {
	w("\n## Figures\n\n")
	studyFigs, cells, byCell := figureGroups(figs)
	one := func(f Figure) {
		w("#### %s\n\n![%s](figures/%s.png)\n\n%s ([SVG](figures/%s.svg))\n\n", f.Title, f.Title, f.Name, f.Caption, f.Name)
	}
	if len(studyFigs) > 0 {
		w("### Study-wide\n\n")
		for _, f := range studyFigs {
			one(f)
		}
	}
	for _, c := range cells {
		w("### Cell %s\n\n", c)
		for _, f := range byCell[c] {
			one(f)
		}
	}
}

// writeCliffs lists the runs that met the terminal-cliff test.
func writeCliffs(w md, st *analysis.Study) {
	w("## Failure-mode evidence\n\n### Terminal cliffs\n\n")
	cliffRows := 0
	for _, r := range st.Runs {
		if !r.Metrics.Cliff.Cliff {
			continue
		}
		if cliffRows == 0 {
			w("| run | workflow | ceiling @ step | fell to @ step | final | drop | threshold |\n|---|---|---:|---:|---:|---:|---:|\n")
		}
		cliffRows++
		m := r.Metrics
		w("| %s | %s | %s @ %d | %s @ %d | %s | %s | %s |\n", r.RunID, r.Cell.Workflow, f3(m.Ceiling), m.CeilingStep, f3(m.Cliff.FallAcc), m.Cliff.FallStep, f3(m.Final), f3(m.Drop), f3(m.Cliff.Threshold))
	}
	if cliffRows == 0 {
		w("No run met the terminal-cliff test.\n")
	}
}

// writeAmplification lists the roles whose gradient norm was amplified.
func writeAmplification(w md, st *analysis.Study) {
	p := st.Params
	w("\n### Gradient amplification\n\n")
	ampRows := 0
	for _, r := range st.Runs {
		for _, a := range r.Amplification {
			if !a.Amplified {
				continue
			}
			if ampRows == 0 {
				w("Roles amplified (sustained: %d of %d consecutive steps after a %d-step LoRA warm-up; the same-role cosine is tested only where the role has two or more agents; the cosine to the role's gradient EMA, where the logs have it, is evidence beside the test: its value at the first step over and how many of the steps over had it above amp_cos; – where there is none).\n\n", analysis.AmpSustainK, analysis.AmpSustainN, analysis.AmpWarmupSteps)
				w("| run | policy | role | early median | first step over | norm | cosine | EMA cosine | EMA-aligned steps | sustained at | peak norm @ step | cliff fall step | before cliff |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
			}
			ampRows++
			cliff := "–"
			if a.CliffStep >= 0 {
				cliff = fmt.Sprint(a.CliffStep)
			}
			aligned := "–"
			if a.EMA {
				aligned = fmt.Sprintf("%d of %d", a.EMAAligned, len(a.Steps))
			}
			w("| %s | %s | %s | %.4g | %d | %.4g | %s | %s | %s | %d | %.4g @ %d | %s | %v |\n", r.RunID, a.Policy, a.Role, a.EarlyMedian, a.Steps[0], a.Norms[0], f3(a.Cos[0]), f3(a.EMACos[0]), aligned, a.Sustained, a.PeakNorm, a.PeakStep, cliff, a.BeforeCliff)
		}
	}
	writeAgentCos(w, st)
	if ampRows == 0 {
		w("No role's gradient norm rose above %g x its early median (after a %d-step warm-up) in %d of %d consecutive steps with same-role cosine above %[5]g where it has two or more agents.\n", p.AmpK, analysis.AmpWarmupSteps, analysis.AmpSustainK, analysis.AmpSustainN, p.AmpCos)
	}
}

// writeAgentCos places the signature of each amplified role with several
// agents on its agents: each agent's mean gradient cosine with the other
// same-role agents at the role's first step over (steps' agent_cos, logged
// since schema 4; nothing for older logs).
func writeAgentCos(w md, st *analysis.Study) {
	n := 0
	for _, r := range st.Runs {
		for _, a := range r.Amplification {
			if !a.Amplified || len(a.AgentCos) == 0 {
				continue
			}
			if n == 0 {
				w("\nThe same-role agents of the amplified roles at the first step over: each agent's mean gradient cosine with the role's other agents (their mean is the table's cosine).\n\n")
				w("| run | policy | role | step | agents |\n|---|---|---|---:|---|\n")
			}
			n++
			var parts []string
			for _, ag := range slices.Sorted(maps.Keys(a.AgentCos)) {
				parts = append(parts, fmt.Sprintf("%s %s", ag, f3(a.AgentCos[ag])))
			}
			w("| %s | %s | %s | %d | %s |\n", r.RunID, a.Policy, a.Role, a.Steps[0], strings.Join(parts, ", "))
		}
	}
}

// writeDominance lists each multi-role policy's gradient-mass shares.
func writeDominance(w md, st *analysis.Study) {
	w("\n### Gradient-mass dominance\n\n")
	domRows := 0
	for _, r := range st.Runs {
		for _, d := range r.Dominance {
			if domRows == 0 {
				w("| run | policy | dominant role | steps dominated | mean share per role |\n|---|---|---|---:|---|\n")
			}
			domRows++
			var parts []string
			for j, role := range d.Roles {
				parts = append(parts, fmt.Sprintf("%s %s", role, f3(d.MeanShare[j])))
			}
			w("| %s | %s | %s | %.0f%% | %s |\n", r.RunID, d.Policy, d.DominantRole, 100*d.DominantFrac, strings.Join(parts, ", "))
		}
	}
	if domRows == 0 {
		w("No policy trained two or more roles.\n")
	}
}

// roleCapture is one role-capture verdict of a run.
type roleCapture struct {
	run string
	c   analysis.Capture
}

// writeCapture lists the role-capture verdicts and examples of captured
// roles.
func writeCapture(w md, st *analysis.Study) {
	w("\n### Role capture\n\n")
	var caps []roleCapture
	for _, r := range st.Runs {
		for _, c := range r.Capture {
			caps = append(caps, roleCapture{r.RunID, c})
		}
	}
	if len(caps) == 0 {
		w("No shared-policy run had validation samples of two roles at two steps.\n")
	} else {
		w("Each row is one role against its policy's dominant role, by the definition of *Definitions* (role capture): (1) format collapse, (2) the n-gram similarity's rise, (3) the length ratio's move toward 1 within the overshoot, (4) degenerate outputs at the last validation (which rule capture out).\n\n")
		w("| run | role | dominant | format base → end | (1) collapse | n-gram similarity base → end | (2) rise | length ratio base → end | (3) toward 1 | (4) degenerate | captured |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range caps {
			c := x.c
			w("| %s | %s | %s | %s → %s | %s | %s → %s | %s | %s → %s | %s | %s | %s |\n", x.run, c.Role, c.Dominant, f3(c.FormatBase), f3(c.FormatEnd), yesNo(c.FormatCollapse),
				f3(c.SimBase), f3(c.SimEnd), yesNo(c.SimRise), f3(c.LenRatioBase), f3(c.LenRatioEnd), yesNo(c.LengthToward), yesNo(c.Degenerate), yesNo(c.Captured))
		}
		w("\n")
		shown := 0
		for _, x := range caps {
			if !x.c.Captured || shown >= 6 {
				continue
			}
			shown++
			c := x.c
			w("#### %s: %s captured by %s\n\n%s output at step %d (base):\n\n%s\n%s output at step %d:\n\n%s\n%s output at step %d:\n\n%s\n",
				x.run, c.Role, c.Dominant, c.Role, c.BaseStep, fenced(c.ExampleBase, 600), c.Role, c.EndStep, fenced(c.ExampleEnd, 600),
				c.Dominant, c.EndStep, fenced(c.DominantExampleEnd, 600))
		}
		if shown == 0 {
			w("No role was captured, so no examples are shown.\n")
		}
	}

}

// writeDefinitions writes the definitions of every number and the
// parameters they used.
func writeDefinitions(w md, p analysis.Params) {
	w("\n## Definitions and parameters\n\n")
	w("- **Validation accuracy**: fraction of validation problems whose final answer was correct (evals rows with role `*`, split `val`). An SA-RL run's curve in a cell is its evals rows for the cell's workflow.\n")
	w("- **base**: accuracy at the first validation (step 0). **ceiling**: highest validation accuracy, at its first step. **final**: mean of the last 3 validations. **floor**: lowest validation accuracy over the last 25%% of the step span. **drop** = ceiling − final. **AUC**: trapezoidal area under the validation curve divided by the step span (a mean accuracy).\n")
	w("- **Terminal cliff**: drop ≥ max(cliff_abs, cliff_rel × (ceiling − base)), and the first validation after the ceiling at or below ceiling − that threshold comes after the midpoint of the step span.\n")
	w("- **Gradient amplification**: a role's gradient norm above amp_k × its median over the first early_frac of the steps while the mean pairwise cosine of its same-role agents' gradients is above amp_cos; it is *before a cliff* when the first such step is at or before the cliff's fall.\n")
	w("- **Gradient-mass dominance**: each role's share of its policy's summed squared gradient norm per step; the dominant role has the largest mean share.\n")
	w("- **Role capture**: %s.\n", analysis.CaptureDefinition(p))
	w("- **Degeneration**: %s.\n", analysis.DegenerationDefinition())
	w("%s", intervalsDefinition(p))
	w("| parameter | value |\n|---|---|\n")
	for _, e := range p.Entries() {
		w("| %s | %s |\n", e[0], e[1])
	}

}

// writeProvenance writes commits, engines, seeds, statuses and file hashes.
func writeProvenance(w md, st *analysis.Study) {
	pv := st.Provenance
	w("\n## Provenance\n\n")
	w("- Commits: %s\n", codeList(pv.Commits))
	w("- Engines: %s\n", codeList(pv.Engines))
	if len(pv.GoVersions) > 0 {
		w("- Go: %s\n", codeList(pv.GoVersions))
	}
	var ms []string
	for _, s := range pv.MasterSeeds {
		ms = append(ms, fmt.Sprint(s))
	}
	w("- Master seeds: %s\n", codeList(ms))
	var stt []string
	for _, s := range pv.Status {
		stt = append(stt, s[0]+" "+s[1])
	}
	w("- Run status: %s\n", strings.Join(stt, ", "))
	w("- Run seeds: %s\n", codeList(pv.Seeds))
	if len(st.Skipped) > 0 {
		w("- Skipped: %s\n", strings.Join(st.Skipped, "; "))
	}
	if len(pv.Files) > 0 {
		w("\n| data or checkpoint | sha256 |\n|---|---|\n")
		for _, f := range pv.Files {
			w("| %s | `%s` |\n", cellEsc(f[0]), f[1])
		}
	}
}

func codeList(xs []string) string {
	if len(xs) == 0 {
		return "(none recorded)"
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "`" + x + "`"
	}
	return strings.Join(out, ", ")
}

func countRuns(st *analysis.Study) int {
	ids := map[string]bool{}
	for _, r := range st.Runs {
		ids[r.RunID] = true
	}
	return len(ids)
}

// findings computes the report's headline sentences from the data.
func findings(st *analysis.Study) []string {
	var out []string
	out = append(out, conditionFindings(st)...)
	out = append(out, cliffFindings(st)...)
	out = append(out, amplificationFindings(st)...)
	out = append(out, dominanceFindings(st)...)
	out = append(out, captureFindings(st)...)
	if len(out) == 0 {
		out = append(out, "No comparison could be made: the runs hold no trained condition next to another.")
	}
	return out
}

// conditionFindings compare the conditions' accuracy across cells.
func conditionFindings(st *analysis.Study) []string {
	var out []string
	var both, ipPeak, ipFinal, peakTies, finalTies, withBase, marlBase, baseTies, withSARL, marlSARL, marlSARLsig int
	for _, c := range st.Cells {
		sp, ip, base, sarl := c.Cond(study.SP), c.Cond(study.IP), c.Cond(study.Base), c.Cond(study.SARL)
		if sp != nil && ip != nil {
			both++
			switch analysis.CompareMeans(ip.Ceiling.Value, sp.Ceiling.Value) {
			case 1:
				ipPeak++
			case 0:
				peakTies++
			}
			switch analysis.CompareMeans(ip.Final.Value, sp.Final.Value) {
			case 1:
				ipFinal++
			case 0:
				finalTies++
			}
		}
		best := c.BetterMultiAgent()
		if best != nil && base != nil {
			withBase++
			switch analysis.CompareMeans(best.Final.Value, base.Final.Value) {
			case 1:
				marlBase++
			case 0:
				baseTies++
			}
		}
		if best != nil && sarl != nil {
			withSARL++
			if analysis.CompareMeans(best.GainSARLFinal.Value, 0) > 0 {
				marlSARL++
				if best.GainSARLFinal.Excludes(0) {
					marlSARLsig++
				}
			}
		}
	}
	if both > 0 {
		out = append(out, fmt.Sprintf("IP peaked above SP in %d of %d cells with both conditions (ceiling, mean over seeds; %s), and ended above SP in %d of %d (final; %s).", ipPeak, both, tiesText(peakTies), ipFinal, both, tiesText(finalTies)))
	}
	if withBase > 0 {
		out = append(out, fmt.Sprintf("The better multi-agent condition (SP or IP, by final accuracy) ended above base in %d of %d cells (%s).", marlBase, withBase, tiesText(baseTies)))
	}
	if withSARL > 0 {
		out = append(out, fmt.Sprintf("It ended above SA-RL evaluated in the same workflow in %d of %d cells; in %d of those the %g%% interval of the gain excludes zero.", marlSARL, withSARL, marlSARLsig, st.Params.CI*100))
	}
	return out
}

// tiesText counts the cells where two means were equal (CompareMeans).
func tiesText(n int) string {
	switch n {
	case 0:
		return "no tie"
	case 1:
		return "1 tie"
	}
	return fmt.Sprintf("%d ties", n)
}

// cliffFindings count the terminal cliffs per trained condition.
func cliffFindings(st *analysis.Study) []string {
	var out []string
	cliffs := map[string][2]int{}
	var conds []string
	for _, r := range st.Runs {
		if r.Condition == study.Base {
			continue
		}
		v, ok := cliffs[r.Condition]
		if !ok {
			conds = append(conds, r.Condition)
		}
		v[1]++
		if r.Metrics.Cliff.Cliff {
			v[0]++
		}
		cliffs[r.Condition] = v
	}
	sort.Slice(conds, func(i, j int) bool { return analysis.CondOrder(conds[i]) < analysis.CondOrder(conds[j]) })
	if len(conds) > 0 {
		var parts []string
		for _, c := range conds {
			parts = append(parts, fmt.Sprintf("%d of %d %s runs", cliffs[c][0], cliffs[c][1], c))
		}
		out = append(out, "Terminal cliffs: "+strings.Join(parts, ", ")+" fell off a cliff (SA-RL counted once per workflow it was evaluated in).")
	}
	return out
}

// amplificationFindings count the cliffs preceded by gradient
// amplification.
func amplificationFindings(st *analysis.Study) []string {
	var out []string
	var cliffRuns, ampBefore int
	for _, r := range st.Runs {
		if !r.Metrics.Cliff.Cliff || len(r.Amplification) == 0 {
			continue
		}
		cliffRuns++
		for _, a := range r.Amplification {
			if a.BeforeCliff {
				ampBefore++
				break
			}
		}
	}
	if cliffRuns > 0 {
		out = append(out, fmt.Sprintf("Gradient amplification preceded the cliff in %d of %d trained runs with a cliff.", ampBefore, cliffRuns))
	}
	return out
}

// dominanceFindings count which role dominated shared policies.
func dominanceFindings(st *analysis.Study) []string {
	var out []string
	domBy := map[string]int{}
	var domTotal, domNone int
	for _, r := range st.Runs {
		for _, d := range r.Dominance {
			domTotal++
			if d.DominantRole == "" {
				// every gradient share of the view was undefined
				domNone++
				continue
			}
			domBy[d.DominantRole]++
		}
	}
	if domTotal > 0 && domNone == domTotal {
		out = append(out, fmt.Sprintf("In the %d shared-policy run views no role had a defined gradient share (every share was undefined), so no role dominated.", domTotal))
	} else if domTotal > 0 {
		roles := make([]string, 0, len(domBy))
		for r := range domBy {
			roles = append(roles, r)
		}
		sort.Slice(roles, func(i, j int) bool {
			if domBy[roles[i]] != domBy[roles[j]] {
				return domBy[roles[i]] > domBy[roles[j]]
			}
			return roles[i] < roles[j]
		})
		var parts []string
		for _, r := range roles {
			parts = append(parts, fmt.Sprintf("%s in %d", r, domBy[r]))
		}
		line := fmt.Sprintf("In the %d shared-policy run views the role with the largest mean gradient share was %s", domTotal, strings.Join(parts, ", "))
		if domNone > 0 {
			line += fmt.Sprintf("; in %d no role had a defined gradient share", domNone)
		}
		out = append(out, line+".")
	}
	return out
}

// captureFindings count the role-capture verdicts.
func captureFindings(st *analysis.Study) []string {
	var out []string
	var capN, capYes, capFmtOnly int
	for _, r := range st.Runs {
		for _, c := range r.Capture {
			capN++
			if c.Captured {
				capYes++
			} else if c.FormatCollapse {
				capFmtOnly++
			}
		}
	}
	if capN > 0 {
		out = append(out, fmt.Sprintf("Role capture (format collapse with outputs converging on the dominant role's, not degenerate) in %d of %d role comparisons; format collapse without it in %d.", capYes, capN, capFmtOnly))
	}
	return append(out, degenerationFindings(st)...)
}
