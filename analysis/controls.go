package analysis

import "maps"

// Positive controls of the failure-mode detectors. A detector's silence is
// evidence against a claim only where the detector has been shown to fire
// on real training dynamics built to trigger it (a positive control), and
// to stay silent on a control that must not: otherwise "no cliff" or "no
// capture" may say more about the detector than about the runs. A test that
// rests on a detector without a shown positive control is NotTestable
// (reason NoControl).

// Detector names a failure-mode detector.
type Detector int

// The detectors the claims rest on.
const (
	CliffDetector         Detector = iota // the terminal-cliff test (metrics.go), claim c
	AmplificationDetector                 // sustained gradient amplification (detect.go), claim c
	CaptureDetector                       // role capture (detect.go), claim d
	CollapseDetector                      // format collapse (collapse.go)
	LateEventDetector                     // lasting cliffs and format collapses, early or late (late.go), the late rules
	DegenerationDetector                  // truncation or repetition of a role's outputs (degenerate.go), capture's specificity
)

// Detectors lists every detector, in order.
var Detectors = []Detector{CliffDetector, AmplificationDetector, CaptureDetector, CollapseDetector, LateEventDetector, DegenerationDetector}

// PositiveControls maps each detector whose positive and negative controls
// from real tiny training pass to the test that shows them
// (controls_slow_test.go, run by `.ci/run check-slow`), in the regime of
// the CPU studies (the native engine's tiny models): the demo's cell
// (voting x synth-math x s) trained at a learning rate far too high
// (testdata/controls/late.yaml, IP, and early.yaml, SP) must trigger the
// detector, and at a stable one (steady.yaml, SP and IP) must not. A
// detector is added here only together with its passing control test
// (TestPositiveControlsNamed checks that the names match).
var PositiveControls = map[Detector]string{
	CliffDetector:         "TestControlCliff",
	AmplificationDetector: "TestControlAmplification",
	CaptureDetector:       "TestControlCapture",
	CollapseDetector:      "TestControlCollapse",
	LateEventDetector:     "TestControlLateEvents",
	DegenerationDetector:  "TestControlDegeneration",
}

// controlled reports whether a detector's positive control is shown in
// the study's regime (Study.Controls).
func (st *Study) controlled(d Detector) bool {
	_, ok := st.Controls[d]
	return ok
}

// defaultControls is a copy of PositiveControls for a new study.
func defaultControls() map[Detector]string { return maps.Clone(PositiveControls) }
