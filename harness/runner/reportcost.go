package runner

import (
	"fmt"
	"time"

	"github.com/marlowlab/marlow/harness/spec"
)

// The cost of `marlow report` over a study's logs (DESIGN.md, "Reading
// logs at scale"), from rates measured on the dynamics study's logs
// (reports/dynamics: 120 runs, 93 MB of segments in 54 MB of archives,
// 183,600 step rows, 1.7 million validation sample rows), read in 42 s at
// two jobs on a 2-vCPU Intel Xeon under load, with a peak RSS of 380 MB
// and 93 MB of reduced runs held once read:
const (
	// reportBytesPerSecPerJob is the segment bytes a job reads and
	// reduces a second (93 MB / 42 s / 2 jobs, rounded down). Training
	// samples, which the report skips after decoding their split
	// column, read several times faster (9 MB/s at two jobs on the
	// dynamics logs grown ten-fold by marlow bench report).
	reportBytesPerSecPerJob = 1_000_000
	// reportStepRowBytes and reportValRowBytes are what a step row and a
	// validation sample row cost once reduced (the step rows whole, the
	// samples as per-validation aggregates): 50 MB and 25 MB of the
	// dynamics study's 93 MB held, rounded up.
	reportStepRowBytes = 300
	reportValRowBytes  = 16
	// reportFixedBytes is the rest of the peak: the binary, the runtime,
	// the report's tables and figures.
	reportFixedBytes = 150 << 20
	// reportSegmentFactor is what decoding a segment takes, as a multiple
	// of its stored bytes: the bytes, and its decompressed columns as the
	// rows are decoded a batch at a time (runlog.SampleBatchRows); and
	// reportReadAhead the archive bytes read ahead per job
	// (runlog.BufferBytesPerJob).
	reportSegmentFactor = 3
	reportReadAhead     = 1 << 20
)

// ReportCost is the estimated wall time and peak memory of `marlow report`
// over the logs of a set of runs.
type ReportCost struct {
	LogBytes int64
	Jobs     int
	Wall     time.Duration
	Peak     int64
}

// EstimateReportCost estimates `marlow report --jobs jobs` over the runs'
// logs: the segment bytes at reportBytesPerSecPerJob a job, and a peak of
// the reduced runs (twice, the garbage collector's headroom), the fixed
// part and, per job, one decoded segment (the largest) and the read-ahead.
func EstimateReportCost(runs []spec.Run, jobs int) ReportCost {
	jobs = max(jobs, 1)
	c := ReportCost{Jobs: jobs}
	var held, largest int64
	for _, r := range runs {
		f := EstimateFootprint(r)
		c.LogBytes += f.LogBytes
		held += int64(f.StepRows)*reportStepRowBytes + int64(f.ValSampleRows)*reportValRowBytes
		largest = max(largest, f.LargestSegment)
	}
	c.Wall = time.Duration(float64(c.LogBytes) / float64(reportBytesPerSecPerJob*jobs) * float64(time.Second))
	c.Peak = reportFixedBytes + 2*held + int64(jobs)*(reportSegmentFactor*largest+reportReadAhead)
	return c
}

// String is the plan's line about the report.
func (c ReportCost) String() string {
	return fmt.Sprintf("report (marlow report --jobs %d): about %s and %s of memory at its peak for the footprint's %s of logs, which errs large "+
		"(at the rates measured on the dynamics study's logs: %.0f MB/s of segments per job, %d B per step row and %d B per validation sample row held)",
		c.Jobs, c.Wall.Round(time.Second), HumanBytes(c.Peak), HumanBytes(c.LogBytes),
		float64(reportBytesPerSecPerJob)/1e6, reportStepRowBytes, reportValRowBytes)
}
