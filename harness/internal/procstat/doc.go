// Package procstat reads the resource usage of this process (CPU time, peak
// resident memory) for benchmarks.
package procstat
