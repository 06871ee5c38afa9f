package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

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

// buildCommit is the commit the Makefile stamps into the binary with
// -ldflags "-X main.buildCommit=<sha>[-dirty]"; versionString uses it when
// the Go toolchain recorded no VCS revision (a build with -buildvcs=false,
// or one whose VCS could not be read).
var buildCommit string

// buildInfo is the binary's module version and the commit it was built
// from, with whether the tree had uncommitted changes: the Go toolchain's
// VCS stamp, else the Makefile's buildCommit.
func buildInfo() (version, rev string, dirty bool) {
	version, rev = "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "unknown" && buildCommit != "" {
		rev, dirty = strings.TrimSuffix(buildCommit, "-dirty"), strings.HasSuffix(buildCommit, "-dirty")
	}
	return version, rev, dirty
}

// versionString describes the binary from its embedded build information.
func versionString() string {
	version, rev, dirty := buildInfo()
	mark := ""
	if dirty {
		mark = " (dirty)"
	}
	return fmt.Sprintf("marlow %s commit %s%s %s %s/%s", version, rev, mark, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
