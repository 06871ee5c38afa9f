package main

import (
	"runtime"

	"github.com/spf13/cobra"
)

// addThreadsFlag adds --threads with the default every command shares: 0,
// the machine's cores divided among the runs (or engines) working at once.
func addThreadsFlag(cmd *cobra.Command, v *int, what string) {
	cmd.Flags().IntVar(v, "threads", 0, what+" (0: the cores divided among the runs at once; results do not depend on it)")
}

// resolveThreads turns a --threads value into a thread count: a positive
// value as given, else the cores divided among concurrent jobs (at least 1).
func resolveThreads(threads, concurrent int) int {
	if threads > 0 {
		return threads
	}
	return max(1, runtime.NumCPU()/max(1, concurrent))
}
