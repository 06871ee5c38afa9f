package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the marlow version, the VCS revision it was built from, and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return nil
		},
	}
}

// versionString describes the binary from its embedded build information.
func versionString() string {
	version, rev, dirty := "(devel)", "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (dirty)"
				}
			}
		}
	}
	return fmt.Sprintf("marlow %s commit %s%s %s %s/%s", version, rev, dirty, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
