//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package native

// peakRSS is not measured on this platform.
func peakRSS() int64 { return 0 }

// cpuTime is not measured on this platform.
func cpuTime() float64 { return 0 }
