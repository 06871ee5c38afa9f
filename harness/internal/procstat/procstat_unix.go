//go:build linux || darwin || freebsd || netbsd || openbsd

package procstat

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// PeakRSS returns the process's peak resident set size in bytes.
func PeakRSS() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return ru.Maxrss // bytes on darwin
	}
	return ru.Maxrss * 1024 // kilobytes elsewhere
}

// CPUTime returns the user + system CPU time of the process in seconds.
func CPUTime() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
