package native

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// Kernel selection. Every kernel with a SIMD path (the GEMM tiles,
// attention at head dim 16, softmax, SwiGLU, RMSNorm) has a portable twin
// that gives the same bits, so which one runs is a question of speed only,
// and the answer differs between CPUs: on an Intel Xeon a kernel that an
// AMD EPYC runs faster on SIMD may run slower than its portable twin. The
// first engine of a process therefore times both paths of each kernel on a
// typical shape, one call on each path in turn for a few milliseconds, and
// keeps each path's fastest call: other jobs on the machine can only make
// a call slower, and the fastest call of many is one they did not
// interrupt. The SIMD path runs unless the portable one was faster by more
// than simdMargin. Results never depend on the choice.

// simdMargin is how much faster (as a fraction) a kernel's portable path
// must be for it to replace the SIMD path.
const simdMargin = 0.05

// kernel names a kernel that has a SIMD and a portable path.
type kernel int

const (
	kGemmNT   kernel = iota // GEMM tiles C += A·Bᵀ (linear layers forward, scores)
	kGemmNT8                // GEMM tiles C += A·Bᵀ at k = 8 (LoRA rank 8)
	kGemmAxpy               // GEMM tiles C += A·B and Aᵀ·B (backward)
	kScores16               // attention scores at head dim 16
	kPV16                   // attention weighted sums at head dim 16
	kSoftmax                // softmax of attention rows
	kSwiGLU                 // SwiGLU forward and backward
	kRMSNorm                // RMSNorm's elementwise loops
	numKernels
)

// kernelNames are the names the kernel table prints.
var kernelNames = [numKernels]string{"gemm-nt", "gemm-nt8", "gemm-nn-tn", "attn-scores16", "attn-pv16", "softmax", "swiglu", "rmsnorm"}

// kernelUse says which kernels run on their SIMD path. It starts as
// kernelAvail (every SIMD kernel this build and CPU have; kernels_simd.go,
// kernels_generic.go) and is set once by selectKernels, before the first
// engine of the process runs.
var kernelUse = kernelAvail

// KernelsEnv names the environment variable that overrides the choice of
// kernels: "simd" runs every SIMD kernel the build and CPU have,
// "portable" none, "auto" (or unset) the faster path of each as timed at
// start-up. No choice changes a result.
const KernelsEnv = "MARLOW_KERNELS"

// KernelTiming is one kernel's time per call on each path.
type KernelTiming struct {
	Name  string // the kernel
	Shape string // what one call computes
	// SIMD and Portable are the fastest calls timed; SIMD is 0 where the build
	// or the CPU has no SIMD path for the kernel.
	SIMD, Portable time.Duration
	// UsesSIMD says which path the engines of this process run.
	UsesSIMD bool
}

var (
	selectOnce    sync.Once
	selectErr     error
	selectTimings []KernelTiming
	selectMode    string
)

// selectKernels chooses each kernel's path once per process, as KernelsEnv
// says; it returns an error for a value it does not know.
func selectKernels() error {
	selectOnce.Do(func() {
		mode := os.Getenv(KernelsEnv)
		switch mode {
		case "", "auto":
			mode = "auto"
			selectTimings = calibrateKernels(4 * time.Millisecond)
			for i, t := range selectTimings {
				kernelUse[i] = kernelAvail[i] && float64(t.Portable) >= (1-simdMargin)*float64(t.SIMD)
				selectTimings[i].UsesSIMD = kernelUse[i]
			}
		case "simd":
			kernelUse = kernelAvail
		case "portable":
			kernelUse = [numKernels]bool{}
		default:
			selectErr = fmt.Errorf("native: %s=%q: want auto, simd or portable", KernelsEnv, mode)
		}
		selectMode = mode
	})
	return selectErr
}

// Kernels says how this process chose its kernels: the mode (auto, simd or
// portable, from KernelsEnv) and, under auto, the start-up timings the
// choice was made on. It makes the choice if no engine has yet.
func Kernels() (mode string, timings []KernelTiming, err error) {
	if err := selectKernels(); err != nil {
		return "", nil, err
	}
	return selectMode, append([]KernelTiming(nil), selectTimings...), nil
}

// MeasureKernels times both paths of every kernel, one call on each in
// turn for about perPath·2 per kernel, and reports each path's fastest call
// with the path this process's engines use. It must not run while an
// engine computes: it switches kernels for its measurement.
func MeasureKernels(perPath time.Duration) ([]KernelTiming, error) {
	if err := selectKernels(); err != nil {
		return nil, err
	}
	ts := calibrateKernels(2 * perPath)
	for i := range ts {
		ts[i].UsesSIMD = kernelUse[i]
	}
	return ts, nil
}

// calibrateKernels times each kernel's case for about budget: after one
// call on each path, a call on its SIMD path (where it has one) and one on
// its portable path in turn, at least minCalls times each, and keeps each
// path's fastest call. kernelUse is restored when it returns.
func calibrateKernels(budget time.Duration) []KernelTiming {
	const minCalls = 5
	saved := kernelUse
	defer func() { kernelUse = saved }()
	ts := make([]KernelTiming, numKernels)
	for _, c := range kernelCases() {
		t := KernelTiming{Name: kernelNames[c.k], Shape: c.shape}
		paths := []bool{false}
		if kernelAvail[c.k] {
			paths = []bool{true, false}
		}
		for _, simd := range paths {
			kernelUse[c.k] = simd
			c.run() // warm caches and buffers
		}
		start := time.Now()
		for n := 0; n < minCalls || time.Since(start) < budget; n++ {
			for _, simd := range paths {
				kernelUse[c.k] = simd
				t0 := time.Now()
				c.run()
				d := time.Since(t0)
				if simd {
					t.SIMD = minPositive(t.SIMD, d)
				} else {
					t.Portable = minPositive(t.Portable, d)
				}
			}
		}
		ts[c.k] = t
	}
	return ts
}

func minPositive(a, b time.Duration) time.Duration {
	if b <= 0 {
		b = 1 // below the clock's resolution
	}
	if a == 0 || b < a {
		return b
	}
	return a
}

// kernelCase is the work one kernel is timed on.
type kernelCase struct {
	k     kernel
	shape string
	run   func()
}

// kernelCases are shapes of the tiny models' training and decoding (model
// width 64, MLP width 192 per tile, head dim 16, 96 keys).
func kernelCases() []kernelCase {
	const m, d, f, keys, hd = 64, 64, 192, 96, 16
	x, w := calibVec(m*f, 11, 1), calibVec(f*f, 12, 1)
	c := make([]float32, m*f)
	q, kv := calibVec(16*hd, 13, 1), calibVec(keys*hd, 14, 1)
	s, p := make([]float32, 16*keys), calibVec(16*keys, 15, 0.1)
	o := make([]float32, 16*hd)
	g := attnGeom{H: 1, KV: 1, HD: hd}
	sm := calibVec(16*keys, 16, 3)
	row := make([]float32, keys)
	gu, uu, dh := calibVec(m*f, 17, 2), calibVec(m*f, 18, 1), calibVec(m*f, 19, 1)
	h, sig, dg, du := make([]float32, m*f), make([]float32, m*f), make([]float32, m*f), make([]float32, m*f)
	rw, rstd, ry, rdx, rdw := calibVec(d, 20, 1), make([]float32, m), make([]float32, m*d), make([]float32, m*d), make([]float32, d)
	return []kernelCase{
		{kGemmNT, fmt.Sprintf("[%d,%d]x[%d,%d]T", m, d, f, d), func() { gemmTile(false, true, m, f, d, 1, x, d, w, d, 0, c, f) }},
		{kGemmNT8, fmt.Sprintf("[%d,8]x[%d,8]T", m, f), func() { gemmTile(false, true, m, f, 8, 1, x, 8, w, 8, 1, c, f) }},
		{kGemmAxpy, fmt.Sprintf("[%d,%d]x[%d,%d] and transposed", m, d, d, f), func() {
			gemmTile(false, false, m, f, d, 1, x, d, w, f, 1, c, f)
			gemmTile(true, false, m, f, d, 1, x, m, w, f, 1, c, f)
		}},
		{kScores16, fmt.Sprintf("16 rows + 16 single rows x %d keys", keys), func() {
			g.scoreRows(16, keys, 0.25, q, hd, kv, hd, s, keys)
			for i := 0; i < 16; i++ {
				g.scoreRows(1, keys, 0.25, q[i*hd:], hd, kv, hd, s[i*keys:], keys)
			}
		}},
		{kPV16, fmt.Sprintf("16 rows + 16 single rows x %d keys", keys), func() {
			g.pvRows(16, keys, p, keys, kv, hd, false, o, hd)
			for i := 0; i < 16; i++ {
				g.pvRows(1, keys, p[i*keys:], keys, kv, hd, false, o[i*hd:], hd)
			}
		}},
		{kSoftmax, fmt.Sprintf("16 rows of %d", keys), func() {
			for i := 0; i < 16; i++ {
				copy(row, sm[i*keys:(i+1)*keys])
				softmaxInPlace(row)
			}
		}},
		{kSwiGLU, fmt.Sprintf("%d elements forward, recompute, backward", m*f), func() {
			swigluForward(h, gu, uu)
			swigluRecompute(h, sig, gu, uu)
			swigluBackwardSig(dg, du, dh, gu, uu, sig)
		}},
		{kRMSNorm, fmt.Sprintf("[%d,%d] forward and backward", m, d), func() {
			rmsnormForward(ry, rstd, x[:m*d], rw, m, d, 1e-6)
			clear(rdx)
			rmsnormBackward(rdx, dh[:m*d], x[:m*d], rw, rstd, m, d)
			rmsnormWeightBackward(rdw, dh[:m*d], x[:m*d], rstd, m, d)
		}},
	}
}

// calibVec is n floats in [-s, s) from a fixed sequence: the inputs of the
// timed cases (their values do not matter, only that they are ordinary
// numbers with a few zeros, as activations are).
func calibVec(n int, key uint64, s float64) []float32 {
	v := make([]float32, n)
	x := key*0x9e3779b97f4a7c15 | 1
	for i := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[i] = float32(s * (float64(x>>11)/(1<<53)*2 - 1))
	}
	return v
}
