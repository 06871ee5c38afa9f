package native

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// This file holds the layer kernels, llm.c style: each forward next to its
// backward, shapes in the comments. Backward kernels accumulate (+=) into
// their input-gradient and parameter-gradient buffers.

// pool runs work over a fixed partition of [0, n) into at most threads
// contiguous chunks. Every kernel run through it writes disjoint outputs per
// item, so results do not depend on the partition or on GOMAXPROCS.
type pool struct{ threads int }

// fn receives its worker index w in [0, threads) for per-worker scratch.
func (p pool) run(n int, fn func(w, lo, hi int)) { p.runGrain(n, 1, fn) }

// runGrain is run with at least grain items per goroutine, so that small
// loops are not split into pieces cheaper than starting a goroutine.
func (p pool) runGrain(n, grain int, fn func(w, lo, hi int)) {
	t := min(p.threads, n/max(grain, 1))
	if t < 1 {
		t = 1
	}
	if t <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(t)
	for w := 0; w < t; w++ {
		lo, hi := n*w/t, n*(w+1)/t
		go func() {
			defer wg.Done()
			fn(w, lo, hi)
		}()
	}
	wg.Wait()
}

// Tile sizes of gemm. gonum's Sgemm runs serially (and sums the whole k
// dimension in one pass) when the output has fewer than 4 blocks of 64x64,
// so a tile of 64 rows x 192 columns is always computed by the serial kernel.
// That keeps every output element's summation order a function of its own
// row and column only: the same row gives the same bits in any batch.
const (
	tileM = 64
	tileN = 192
)

var impl = blas32.Implementation()

// gemm computes C = alpha*op(A)*op(B) + beta*C with C [m, n] (row-major,
// stride ldc), op(A) [m, k], op(B) [k, n]. tA: A is stored [k, m]; tB: B is
// stored [n, k]. Output tiles are spread over the pool.
func (p pool) gemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			for j := range row {
				row[j] *= beta
			}
		}
		return
	}
	// Balanced tiles no larger than tileM x tileN, and at least one per
	// thread when the rows allow it.
	nt := (n + tileN - 1) / tileN
	tn := (n + nt - 1) / nt
	mt := (m + tileM - 1) / tileM
	if mt*nt < p.threads {
		mt = min(m, (p.threads+nt-1)/nt)
	}
	tm := (m + mt - 1) / mt
	mt = (m + tm - 1) / tm
	p.run(mt*nt, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			i0, j0 := (t/nt)*tm, (t%nt)*tn
			mm, nn := min(tm, m-i0), min(tn, n-j0)
			var as, bs []float32
			if tA {
				as = a[i0:]
			} else {
				as = a[i0*lda:]
			}
			if tB {
				bs = b[j0*ldb:]
			} else {
				bs = b[j0:]
			}
			gemmTile(tA, tB, mm, nn, k, alpha, as, lda, bs, ldb, beta, c[i0*ldc+j0:], ldc)
		}
	})
}

// gonumTile computes C = alpha*op(A)*op(B) + beta*C on gonum's Sgemm, which
// runs serially at tile sizes (see tileM, tileN).
func gonumTile(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := blas.NoTrans, blas.NoTrans
	if tA {
		ta = blas.Trans
	}
	if tB {
		tb = blas.Trans
	}
	impl.Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// linear: y[n, out] = x[n, in] · W[out, in]ᵀ.
func (p pool) linear(y, x, w []float32, n, in, out int) {
	p.gemm(false, true, n, out, in, 1, x, in, w, in, 0, y, out)
}

// linearBackward: dx[n, in] += dy[n, out] · W[out, in]; when dw != nil,
// dw[out, in] += dy[n, out]ᵀ · x[n, in].
func (p pool) linearBackward(dx, dw, dy, x, w []float32, n, in, out int) {
	if dx != nil {
		p.gemm(false, false, n, in, out, 1, dy, out, w, in, 1, dx, in)
	}
	if dw != nil {
		p.gemm(true, false, out, in, n, 1, dy, out, x, in, 1, dw, in)
	}
}

// rmsnormForward: y[n, d] = x * rsqrt(mean(x²) + eps) * w[d]; rstd[n] keeps
// the reciprocal root mean square of each row.
func rmsnormForward(y, rstd, x, w []float32, n, d int, eps float32) {
	for i := 0; i < n; i++ {
		xr := x[i*d : i*d+d]
		var ss float32
		for _, v := range xr {
			ss += v * v
		}
		r := float32(1 / math.Sqrt(float64(ss/float32(d)+eps)))
		rstd[i] = r
		yr := y[i*d : i*d+d]
		for j := rmsnormScale8(yr, xr, r, w); j < d; j++ {
			yr[j] = xr[j] * r * w[j]
		}
	}
}

// rmsnormBackward: dx[n, d] += rstd*(w*dy) - rstd³/d * x * Σ(w*dy*x).
func rmsnormBackward(dx, dy, x, w, rstd []float32, n, d int) {
	for i := 0; i < n; i++ {
		xr, dyr, dxr := x[i*d:i*d+d], dy[i*d:i*d+d], dx[i*d:i*d+d]
		r := rstd[i]
		var dot float32
		for j := range xr {
			dot += w[j] * dyr[j] * xr[j]
		}
		c := r * r * r * dot / float32(d)
		for j := rmsnormBackwardRow8(dxr, dyr, xr, w, r, c); j < d; j++ {
			dxr[j] += r*w[j]*dyr[j] - c*xr[j]
		}
	}
}

// rmsnormWeightBackward: dw[d] += Σ_rows dy * x * rstd (sequential over rows).
func rmsnormWeightBackward(dw, dy, x, rstd []float32, n, d int) {
	j0 := rmsnormWeight8(dw, dy, x, rstd, n, d)
	for i := 0; i < n; i++ {
		r := rstd[i]
		xr, dyr := x[i*d:i*d+d], dy[i*d:i*d+d]
		for j := j0; j < d; j++ {
			dw[j] += dyr[j] * xr[j] * r
		}
	}
}

// rope holds cos/sin tables [maxPos, hd/2] of the rotate-half rotary
// embedding: inv_freq[i] = theta^(-2i/hd), angle = pos * inv_freq[i].
type rope struct {
	half     int
	cos, sin []float32
}

func newRope(maxPos, hd int, theta float64) rope {
	half := hd / 2
	r := rope{half: half, cos: make([]float32, maxPos*half), sin: make([]float32, maxPos*half)}
	for i := 0; i < half; i++ {
		inv := float32(1 / math.Pow(theta, float64(2*i)/float64(hd)))
		for p := 0; p < maxPos; p++ {
			a := float64(float32(p) * inv)
			r.cos[p*half+i] = float32(math.Cos(a))
			r.sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return r
}

// forward rotates, in place, the heads of x[n, heads*hd] at positions pos[n]:
// y[i] = x[i] c - x[i+h] s; y[i+h] = x[i+h] c + x[i] s.
func (r rope) forward(x []float32, pos []int32, heads, hd int) {
	h := r.half
	for row, p := range pos {
		cs, sn := r.cos[int(p)*h:int(p)*h+h], r.sin[int(p)*h:int(p)*h+h]
		for hh := 0; hh < heads; hh++ {
			v := x[(row*heads+hh)*hd : (row*heads+hh+1)*hd]
			for i := 0; i < h; i++ {
				a, b := v[i], v[i+h]
				v[i] = a*cs[i] - b*sn[i]
				v[i+h] = b*cs[i] + a*sn[i]
			}
		}
	}
}

// backward applies the transposed rotation to dx in place:
// dx[i] = dy[i] c + dy[i+h] s; dx[i+h] = dy[i+h] c - dy[i] s.
func (r rope) backward(dx []float32, pos []int32, heads, hd int) {
	h := r.half
	for row, p := range pos {
		cs, sn := r.cos[int(p)*h:int(p)*h+h], r.sin[int(p)*h:int(p)*h+h]
		for hh := 0; hh < heads; hh++ {
			v := dx[(row*heads+hh)*hd : (row*heads+hh+1)*hd]
			for i := 0; i < h; i++ {
				a, b := v[i], v[i+h]
				v[i] = a*cs[i] + b*sn[i]
				v[i+h] = b*cs[i] - a*sn[i]
			}
		}
	}
}

// dot returns Σ a[i] b[i] with four partial sums combined in a fixed order
// (the same bits wherever the slices live in memory).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy computes y += alpha x.
func axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		ys[0] += alpha * xs[0]
		ys[1] += alpha * xs[1]
		ys[2] += alpha * xs[2]
		ys[3] += alpha * xs[3]
	}
	for ; i < len(x); i++ {
		y[i] += alpha * x[i]
	}
}

// swigluForward: h[n] = silu(g) * u with silu(g) = g * sigmoid(g).
func swigluForward(h, g, u []float32) {
	u = u[:len(g)]
	h = h[:len(g)]
	for i := swigluForward8(h, g, u); i < len(g); i++ {
		gv := g[i]
		s := 1 / (1 + expf(-gv))
		h[i] = gv * s * u[i]
	}
}

// swigluRecompute recomputes h = silu(g) * u for the backward pass and keeps
// σ(g) in sig for swigluBackwardSig (one exponential per element).
func swigluRecompute(h, sig, g, u []float32) {
	u, h, sig = u[:len(g)], h[:len(g)], sig[:len(g)]
	for i := swigluRecompute8(h, sig, g, u); i < len(g); i++ {
		gv := g[i]
		s := 1 / (1 + expf(-gv))
		sig[i] = s
		h[i] = gv * s * u[i]
	}
}

// swigluBackwardSig: dg = dh * u * (σ + g σ (1-σ)); du = dh * silu(g)
// (both overwritten), with σ(g) given in sig; dg may alias sig.
func swigluBackwardSig(dg, du, dh, g, u, sig []float32) {
	u, dh, du, dg, sig = u[:len(g)], dh[:len(g)], du[:len(g)], dg[:len(g)], sig[:len(g)]
	for i := swigluBackwardSig8(dg, du, dh, g, u, sig); i < len(g); i++ {
		gv := g[i]
		s := sig[i]
		dg[i] = dh[i] * u[i] * (s + gv*s*(1-s))
		du[i] = dh[i] * gv * s
	}
}

// logSoftmaxRow returns, for z = logits / temp, the log-probability of
// target, the entropy of softmax(z), and leaves softmax(z) in probs when
// probs is not nil. Sums are in float64.
func logSoftmaxRow(logits []float32, temp float64, target int32, probs []float32) (lp, ent float64) {
	mx := math.Inf(-1)
	for _, v := range logits {
		if z := float64(v) / temp; z > mx {
			mx = z
		}
	}
	var sum, sz float64
	for _, v := range logits {
		z := float64(v)/temp - mx
		e := math.Exp(z)
		sum += e
		sz += e * z
	}
	lse := math.Log(sum)
	if probs != nil {
		inv := 1 / sum
		for j, v := range logits {
			probs[j] = float32(math.Exp(float64(v)/temp-mx) * inv)
		}
	}
	lp = float64(logits[target])/temp - mx - lse
	ent = lse - sz/sum
	return lp, ent
}

// The constants of expf, which expf8 and expf16 (expf_simd.go) share: the
// Cody-Waite split of ln 2, the cut-offs and the Taylor coefficients.
const (
	expLog2e = 1.44269504088896341
	expLn2hi = 0.693359375
	expLn2lo = -2.12194440e-4
	expOver  = 88.72
	expUnder = -87.33
	expC2    = 0.5
	expC3    = 1.0 / 6
	expC4    = 1.0 / 24
	expC5    = 1.0 / 120
	expC6    = 1.0 / 720
	expC7    = 1.0 / 5040
)

// expf returns e^x in float32 (within about 2 ulp): x = n ln2 + r with
// |r| <= ln2/2 (Cody-Waite reduction), e^r by its degree-7 Taylor
// polynomial, scaled by 2^n. It is pure arithmetic, so it gives the same
// bits on every platform, and is several times faster than math.Exp.
func expf(x float32) float32 {
	if x > expOver {
		return float32(math.Inf(1))
	}
	if x < expUnder {
		return 0
	}
	t := x * expLog2e
	var n float32
	if t >= 0 {
		n = float32(int32(t + 0.5))
	} else {
		n = float32(int32(t - 0.5))
	}
	r := x - n*expLn2hi - n*expLn2lo
	p := 1 + r*(1+r*(expC2+r*(expC3+r*(expC4+r*(expC5+r*(expC6+r*expC7))))))
	if n > 127 {
		return p * math.Float32frombits(uint32(127+127)<<23) * 2
	}
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}
