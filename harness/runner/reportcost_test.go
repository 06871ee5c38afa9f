package runner

import (
	"testing"

	"github.com/marlowlab/marlow/harness/spec"
)

// TestEstimateReportCost: the report's time falls with jobs and its peak
// rises with them (a segment a job), both grow with the study, and the
// peak never falls below the fixed part.
func TestEstimateReportCost(t *testing.T) {
	s, err := spec.Load("../../seeds/dynamics.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	one, many := EstimateReportCost(runs, 1), EstimateReportCost(runs, 16)
	half := EstimateReportCost(runs[:len(runs)/2], 16)
	switch {
	case one.LogBytes <= 0 || one.Wall <= 0:
		t.Fatalf("no logs or no time: %+v", one)
	case !(many.Wall < one.Wall && many.Peak > one.Peak):
		t.Errorf("16 jobs %+v against 1 job %+v: want less time and more memory", many, one)
	case !(half.Wall < many.Wall && half.Peak <= many.Peak && half.LogBytes < many.LogBytes):
		t.Errorf("half the runs %+v against all %+v: want less of each", half, many)
	case one.Peak < reportFixedBytes:
		t.Errorf("peak %d below the fixed part %d", one.Peak, reportFixedBytes)
	}
}
