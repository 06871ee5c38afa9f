package report

import "strings"

// writePartial writes the section of a partial report: the runs of the
// experiment that are not done (none: nothing is written).
func writePartial(w func(format string, a ...any), incomplete []string) {
	if len(incomplete) == 0 {
		return
	}
	w("## Partial experiment\n\n")
	w("**This report is partial** (`marlow report --partial`): %d runs of the experiment are not done, and the numbers below leave them out or use their logs so far (a running or failed run's curve stops where its log stops):\n\n", len(incomplete))
	for _, r := range incomplete {
		w("- %s\n", strings.ReplaceAll(r, "\n", " "))
	}
	w("\n")
}
