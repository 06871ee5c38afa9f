//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package procstat

// PeakRSS is not measured on this platform.
func PeakRSS() int64 { return 0 }

// CPUTime is not measured on this platform.
func CPUTime() float64 { return 0 }
