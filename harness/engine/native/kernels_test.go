package native

import (
	"os"
	"testing"
	"time"
)

// TestMain runs the package's tests with every SIMD kernel the build and
// CPU have (unless MARLOW_KERNELS says otherwise), so that the tests
// comparing SIMD kernels with their portable twins compare two paths
// whatever the start-up timing would have chosen.
func TestMain(m *testing.M) {
	if os.Getenv(KernelsEnv) == "" {
		os.Setenv(KernelsEnv, "simd")
	}
	os.Exit(m.Run())
}

// TestCalibrateKernels: every kernel is timed on its portable path, on its
// SIMD path exactly where the build and CPU have one, and the calibration
// leaves the choice as it found it.
func TestCalibrateKernels(t *testing.T) {
	before := kernelUse
	ts := calibrateKernels(50 * time.Microsecond)
	if kernelUse != before {
		t.Errorf("calibration changed the kernels in use: %v, was %v", kernelUse, before)
	}
	if len(ts) != int(numKernels) {
		t.Fatalf("%d timings, want %d", len(ts), numKernels)
	}
	for k, tm := range ts {
		if tm.Name != kernelNames[k] || tm.Shape == "" || tm.Portable <= 0 {
			t.Errorf("kernel %d: %+v", k, tm)
		}
		if (tm.SIMD > 0) != kernelAvail[k] {
			t.Errorf("%s: SIMD time %v, but SIMD available %v", tm.Name, tm.SIMD, kernelAvail[k])
		}
	}
}

// TestKernelsEnv: the mode the tests run under is reported, with no
// timings (they are made only under auto).
func TestKernelsEnv(t *testing.T) {
	mode, ts, err := Kernels()
	if err != nil {
		t.Fatal(err)
	}
	if want := os.Getenv(KernelsEnv); mode != want {
		t.Errorf("mode %q, want %q", mode, want)
	}
	if mode == "simd" && (kernelUse != kernelAvail || ts != nil) {
		t.Errorf("under simd: in use %v, available %v, timings %v", kernelUse, kernelAvail, ts)
	}
}
