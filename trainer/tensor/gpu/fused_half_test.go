package gpu

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The fused InnerProduct on half operands (fused.go, gemm.go: cuBLASLt
// epilogues with a half D) against the CPU's float64 reference computed
// from the same rounded inputs, and against the plain kernels.
//
//	gpu.test -test.run 'FusedDenseHalf' -test.v
//	gpu.test -test.run '^$' -test.bench 'FusedDenseHalf' -test.benchtime 20x

// ldAligned reports whether every leading dimension of a fused case is a
// multiple of 8 elements (16 bytes of half): the shapes cuBLASLt's half
// epilogue kernels are expected to take, so a fallback there is a failure.
// Other shapes (DLRM's 13 dense features, a 1-wide output) may fall back;
// then the call must have written nothing.
func (c fusedCase) ldAligned() bool { return c.in%8 == 0 && c.out%8 == 0 && c.out2%8 == 0 }

// poisoned reports whether every element of t is still NaN (a call that
// reported false wrote nothing).
func poisoned(t *testing.T, h *harness, x tensor.Tensor) bool {
	t.Helper()
	v := make([]float32, x.Len())
	if err := h.g.Download(v, x); err != nil {
		t.Fatal(err)
	}
	for _, f := range v {
		if f == f {
			return false
		}
	}
	return true
}

// TestFusedDenseHalf: a two-layer chain y₁ = ReLU(x·W₁ + b₁) → y₂ = y₁·W₂ +
// b₂ in float16 and bfloat16 — forward y₁ and its mask (RELU_AUX_BIAS),
// y₂ (BIAS), and backward dW₂ and db₂ (BGRADA, float32), dz₁ = (dy₂·W₂ᵀ)⊙mask
// with db₁ (DRELU_BGRAD: half dz₁, float32 db₁), dW₁ (no epilogue) — each
// against the float64 reference, with half biases (the layers' half copies:
// cuBLASLt's bias type for a half D). On 16-byte-aligned shapes none may
// fall back (FusedStats counts every call); the plain kernels give the
// same values within half tolerance. The weight gradients run both ways:
// by default as the plain searched GEMM and ColSum (FusedStats.Plain),
// with Options.HalfBgradEpilogue as BGRADA epilogue GEMMs on the side
// stream.
func TestFusedDenseHalf(t *testing.T) {
	for _, epi := range []bool{false, true} {
		be := fusedBackend(t, cuda.TF32, Options{HalfBgradEpilogue: epi})
		h := newHarness(t)
		h.g = be
		for _, dt := range halfDTypes {
			for _, c := range fusedCases {
				t.Run(fmt.Sprintf("bgrad-epilogue=%v/%v/%dx%d→%d→%d", be.opts.HalfBgradEpilogue, dt, c.b, c.in, c.out, c.out2), func(t *testing.T) {
					testFusedHalfChain(t, h, be, dt, c)
				})
			}
		}
	}
}

func testFusedHalfChain(t *testing.T, h *harness, be *Backend, dt tensor.DType, c fusedCase) {
	ref := tensor.NewFusedReference(h.c)
	tol := halfOutTol(dt)
	strict := c.ldAligned()
	before := be.FusedStats()
	ran := func(name string, ok bool) bool {
		t.Helper()
		if !ok && strict {
			t.Errorf("%s fell back to the plain kernels on a 16-byte-aligned %v shape (CUBLASLT_LOG_LEVEL=2 says why)", name, dt)
		}
		return ok
	}
	download := func(p pair) []float64 {
		t.Helper()
		v := make([]float64, p.G.Len())
		if err := h.g.Download(v, p.G); err != nil {
			t.Fatal(err)
		}
		return v
	}
	x, w1, b1 := h.RandDT(dt, -1, 1, c.b, c.in), h.RandDT(dt, -1, 1, c.in, c.out), h.RandDT(dt, -0.5, 0.5, c.out)
	w2, b2 := h.RandDT(dt, -1, 1, c.out, c.out2), h.RandDT(dt, -0.5, 0.5, c.out2)
	y1, y2 := h.OutDT(dt, c.b, c.out), h.OutDT(dt, c.b, c.out2)
	mask, rmask := h.g.ReLUMask(dt, c.b, c.out), ref.ReLUMask(tensor.Float64, c.b, c.out)
	defer h.g.Free(mask)
	defer h.c.Free(rmask)

	// Forward, layer 1: the masked epilogue is refused with a half output
	// (halfMaskRefused), having written nothing; the RELU_BIAS epilogue
	// (GemmBiasAct) computes y₁.
	if h.g.GemmBiasReLUMask(x.G, w1.G, b1.G, y1.G, mask) || !poisoned(t, h, y1.G) {
		t.Fatalf("GemmBiasReLUMask ran with a half output (it is refused)")
	}
	fwd := ran("GemmBiasAct(ReLU)", h.g.GemmBiasAct(tensor.ReLU, x.G, w1.G, b1.G, y1.G))
	ref.GemmBiasReLUMask(x.C, w1.C, b1.C, y1.C, rmask)
	h.RoundC(dt, y1)
	if !fwd {
		if err := h.g.Err(); err != nil || !poisoned(t, h, y1.G) {
			t.Fatalf("GemmBiasReLUMask reported false but wrote y or failed: %v", err)
		}
		t.Logf("GemmBiasReLUMask fell back (allowed for this shape)")
		h.Free(x, w1, b1, w2, b2, y1, y2)
		return
	}
	h.Check("forward y₁", y1, tol)
	gy1 := download(y1)
	h.c.Upload(y1.C, gy1)  // the next layer reads the GPU's own y₁
	h.c.Upload(rmask, gy1) // and values within rounding of 0 follow it

	// Forward, layer 2 (no ReLU: the BIAS epilogue).
	if ran("GemmBiasAct", h.g.GemmBiasAct(tensor.Identity, y1.G, w2.G, b2.G, y2.G)) {
		h.c.Gemm(false, false, 1, y1.C, w2.C, 0, y2.C)
		h.c.BiasAct(tensor.Identity, 0, y2.C, y2.C, b2.C)
		h.RoundC(dt, y2)
		h.Check("forward y₂", y2, tol)
	}

	// Backward, layer 2: dW₂ and db₂ in one GEMM (float32), then dz₁ and
	// db₁ through layer 1's ReLU mask.
	dy2 := h.RandDT(dt, -1, 1, c.b, c.out2)
	dw2, db2 := h.Out(tensor.Float32, c.out, c.out2), h.Out(tensor.Float32, c.out2)
	if ran("GemmBgrad", h.g.GemmBgrad(y1.G, dy2.G, dw2.G, db2.G, true)) {
		h.g.JoinGrads()
		ref.GemmBgrad(y1.C, dy2.C, dw2.C, db2.C, false)
		h.Check("dW₂", dw2, tolHalfF32Long)
		h.Check("db₂", db2, tolHalfF32Long)
	}
	dz1, db1 := h.OutDT(dt, c.b, c.out), h.Out(tensor.Float32, c.out)
	if h.g.GemmDReLUBgrad(dy2.G, w2.G, mask, dz1.G, db1.G) || !poisoned(t, h, dz1.G) || !poisoned(t, h, db1.G) {
		t.Fatalf("GemmDReLUBgrad ran with a half dz (it is refused)")
	}
	// The layers' backward instead: dz₁ = (dy₂·W₂ᵀ)⊙(y₁ > 0), db₁ = Σ dz₁.
	h.g.Gemm(false, true, 1, dy2.G, w2.G, 0, dz1.G)
	h.g.ActGrad(tensor.ReLU, 0, dz1.G, dz1.G, tensor.Tensor{}, y1.G)
	h.g.ColSum(db1.G, 0, dz1.G)
	h.c.Gemm(false, true, 1, dy2.C, w2.C, 0, dz1.C)
	h.RoundC(dt, dz1)
	h.c.ActGrad(tensor.ReLU, 0, dz1.C, dz1.C, tensor.Tensor{}, rmask0(h, gy1, dz1.C))
	h.c.ColSum(db1.C, 0, dz1.C)
	h.Check("dz₁ = (dy₂·W₂ᵀ)⊙(y₁ > 0)", dz1, tol)
	h.Check("db₁", db1, tol)

	// Backward, layer 1: dW₁ from the GPU's own dz₁, no bias gradient (the
	// chained GEMM wrote it).
	h.c.Upload(dz1.C, download(dz1))
	dw1 := h.Out(tensor.Float32, c.in, c.out)
	if ran("GemmBgrad without db", h.g.GemmBgrad(x.G, dz1.G, dw1.G, tensor.Tensor{}, true)) {
		h.g.JoinGrads()
		h.c.Gemm(true, false, 1, x.C, dz1.C, 0, dw1.C)
		h.Check("dW₁", dw1, tolHalfF32Long)
	}

	st := be.FusedStats()
	t.Logf("%v: ran %v, fell back %v, half bias gradients %d (since %v)", dt, st.Ran, st.Fallback, st.HalfBiasGrad, before)
	ops := []string{"gemm_bias_act"}
	if be.opts.HalfBgradEpilogue {
		ops = append(ops, "gemm_bgrad")
	} else if st.Plain["gemm_bgrad"] != before.Plain["gemm_bgrad"]+2 || st.Ran["gemm_bgrad"] != before.Ran["gemm_bgrad"] ||
		st.Fallback["gemm_bgrad"] != before.Fallback["gemm_bgrad"] {
		t.Errorf("FusedStats: half weight gradients not both run plain: %v → %v", before, st)
	}
	if strict {
		for _, op := range ops {
			if st.Fallback[op] != before.Fallback[op] || st.Ran[op] == before.Ran[op] {
				t.Errorf("FusedStats: %s ran %d→%d, fell back %d→%d", op, before.Ran[op], st.Ran[op], before.Fallback[op], st.Fallback[op])
			}
		}
	}
	h.Free(x, w1, b1, w2, b2, y1, y2, dy2, dw2, db2, dz1, db1, dw1)
}

// TestFusedDenseHalfF32Bias: a float32 bias with a half output is asked of
// cuBLASLt as such (BIAS_DATA_TYPE float32); it may refuse it, and then
// the call reports false having written nothing, counted as a fallback.
// Either way the layers never pass one (they pass the half copy).
func TestFusedDenseHalfF32Bias(t *testing.T) {
	be := fusedBackend(t, cuda.TF32, Options{})
	h := newHarness(t)
	h.g = be
	c := fusedCases[1]
	for _, dt := range halfDTypes {
		x, w, bias := h.RandDT(dt, -1, 1, c.b, c.in), h.RandDT(dt, -1, 1, c.in, c.out), h.Rand(-0.5, 0.5, c.out)
		y := h.OutDT(dt, c.b, c.out)
		mask := h.g.ReLUMask(dt, c.b, c.out)
		before := be.FusedStats()
		if be.GemmBiasReLUMask(x.G, w.G, bias.G, y.G, mask) {
			ref := tensor.NewFusedReference(h.c)
			rmask := ref.ReLUMask(tensor.Float64, c.b, c.out)
			ref.GemmBiasReLUMask(x.C, w.C, bias.C, y.C, rmask)
			h.RoundC(dt, y)
			h.Check("y with a float32 bias", y, halfOutTol(dt))
			h.c.Free(rmask)
			t.Logf("%v: cuBLASLt takes a float32 bias with a half output", dt)
		} else {
			if err := h.g.Err(); err != nil || !poisoned(t, h, y.G) {
				t.Fatalf("%v: reported false but wrote y or failed: %v", dt, err)
			}
			if st := be.FusedStats(); st.Fallback["gemm_bias_relu_mask"] != before.Fallback["gemm_bias_relu_mask"]+1 {
				t.Errorf("%v: the fallback was not counted: %v → %v", dt, before.Fallback, st.Fallback)
			}
			t.Logf("%v: cuBLASLt refuses a float32 bias with a half output (the layers pass their half copy)", dt)
		}
		h.g.Free(mask)
		h.Free(x, w, bias, y)
	}
}

// TestFusedDenseHalfGraph: the half fused calls the layers make (the
// RELU_BIAS forward epilogue, the weight gradient's plain GEMM and ColSum)
// inside a CUDA graph step give the eager step's values; the refused mask
// chain stays refused there.
func TestFusedDenseHalfGraph(t *testing.T) {
	be := fusedBackend(t, cuda.TF32, Options{})
	h := newHarness(t)
	h.g = be
	const b, out, out2 = 1024, 256, 128
	dt := tensor.BFloat16
	dy, w := h.RandDT(dt, -1, 1, b, out2), h.RandDT(dt, -1, 1, out, out2)
	ya := h.RandDT(dt, -1, 1, b, out)
	x, wx, bx := h.RandDT(dt, -1, 1, b, 64), h.RandDT(dt, -1, 1, 64, out), h.RandDT(dt, -0.5, 0.5, out)
	mask := be.ReLUMask(dt, b, out)
	defer be.Free(mask)
	dz, db := h.OutDT(dt, b, out), h.Out(tensor.Float32, out2)
	dw, dbz := h.Out(tensor.Float32, out, out2), h.Out(tensor.Float32, out)
	defer h.Free(dw, dbz)
	step := func() {
		if be.GemmBiasReLUMask(x.G, wx.G, bx.G, ya.G, mask) || be.GemmDReLUBgrad(dy.G, w.G, mask, dz.G, dbz.G) {
			t.Fatal("the refused mask chain ran")
		}
		if !be.GemmBiasAct(tensor.ReLU, x.G, wx.G, bx.G, ya.G) || !be.GemmBgrad(ya.G, dy.G, dw.G, db.G, false) {
			t.Fatal("a fused call fell back")
		}
	}
	step() // eager: plans (and refusals) settled, algorithms searched
	step()
	h.Sync()
	want := make([]float32, out2)
	if err := be.Download(want, db.G); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ { // past the warm-up and the capture
		be.Fill(db.G, 0)
		if err := be.BeginGraphStep(); err != nil {
			t.Fatal(err)
		}
		step()
		if res := be.EndGraphStep(false); res.Why != "" || !res.Replayed {
			t.Fatalf("graph step %d ran eagerly: %+v", i, res)
		}
		got := make([]float32, out2)
		if err := be.Download(got, db.G); err != nil {
			t.Fatal(err)
		}
		for j := range got {
			if d := float64(got[j] - want[j]); d > 1e-5*(1+math.Abs(float64(want[j]))) || d < -1e-5*(1+math.Abs(float64(want[j]))) || got[j] != got[j] {
				t.Fatalf("graph step %d: db[%d] %g, eager %g", i, j, got[j], want[j])
			}
		}
	}
	t.Logf("graph replays %d; fused %+v", be.GraphReplays(), be.FusedStats())
	h.Free(dy, w, ya, x, wx, bx, dz, db)
}

// BenchmarkFusedDenseHalf times one chained InnerProduct + ReLU of
// DLRM's top MLP (65536 × 1024 → 1024, bfloat16) fused and plain, and
// reports milliseconds per forward and per backward:
//
//	fused forward   GemmBiasReLUMask                    (RELU_AUX_BIAS)
//	plain forward   Gemm, BiasAct(ReLU)
//	fused backward  GemmBgrad (dW, db), GemmDReLUBgrad   (plain Gemm + ColSum, DRELU_BGRAD)
//	fused-bgrad-epilogue backward  the same, GemmBgrad as BGRADA (Options.HalfBgradEpilogue)
//	plain backward  Gemm (dW), ColSum (db), Gemm (dx), ActGrad (ReLU of x), ColSum (x's db)
//
//	gpu.test -test.run '^$' -test.bench FusedDenseHalf -test.benchtime 50x
func BenchmarkFusedDenseHalf(b *testing.B) {
	gpuBackend(b)
	const rows, in, out = 65536, 1024, 1024
	for _, mode := range []string{"fused", "fused-bgrad-epilogue", "plain"} {
		fused := mode != "plain"
		b.Run("bf16/"+mode, func(b *testing.B) {
			be, err := NewOnDevice(sharedBE.Device(), Options{Math: cuda.TF32, Fused: true, HalfBgradEpilogue: mode == "fused-bgrad-epilogue"})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			dt := tensor.BFloat16
			x, w, y := be.Alloc(dt, rows, in), be.Alloc(dt, in, out), be.Alloc(dt, rows, out)
			dy, dx := be.Alloc(dt, rows, out), be.Alloc(dt, rows, in)
			bh, bf := be.Alloc(dt, out), be.Alloc(tensor.Float32, out)
			dw, db, dbx := be.Alloc(tensor.Float32, in, out), be.Alloc(tensor.Float32, out), be.Alloc(tensor.Float32, in)
			mask, maskX := be.ReLUMask(dt, rows, out), be.ReLUMask(dt, rows, in)
			for _, t := range []tensor.Tensor{w, dy} {
				be.Fill(t, 0.01)
			}
			be.Fill(bh, 0.1)
			be.Fill(bf, 0.1)
			// x and its mask, as its producer's forward writes them.
			xin, wx, bx := be.Alloc(dt, rows, 64), be.Alloc(dt, 64, in), be.Alloc(dt, in)
			be.Fill(xin, 0.01)
			be.Fill(wx, 0.01)
			be.Fill(bx, -0.003) // x = ReLU(0.0064 - 0.003) > 0: the timing does not depend on the values
			if !be.GemmBiasAct(tensor.ReLU, xin, wx, bx, x) {
				b.Fatal("the producer's GemmBiasAct fell back")
			}
			forward := func() {
				if fused {
					if !be.GemmBiasAct(tensor.ReLU, x, w, bh, y) { // the mask chain is refused in half (halfMaskRefused)
						b.Fatal("GemmBiasAct fell back")
					}
					return
				}
				be.Gemm(false, false, 1, x, w, 0, y)
				be.BiasAct(tensor.ReLU, 0, y, y, bf)
			}
			backward := func() {
				if fused {
					if !be.GemmBgrad(x, dy, dw, db, false) {
						b.Fatal("a fused backward GEMM fell back")
					}
					be.Gemm(false, true, 1, dy, w, 0, dx)
					be.ActGrad(tensor.ReLU, 0, dx, dx, tensor.Tensor{}, x)
					be.ColSum(dbx, 0, dx)
					return
				}
				be.Gemm(true, false, 1, x, dy, 0, dw)
				be.ColSum(db, 0, dy)
				be.Gemm(false, true, 1, dy, w, 0, dx)
				be.ActGrad(tensor.ReLU, 0, dx, dx, tensor.Tensor{}, x)
				be.ColSum(dbx, 0, dx)
			}
			forward() // the algorithm search, outside the timing
			backward()
			if err := be.Sync(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64((rows*in + in*out + rows*out) * dt.Size()))
			b.ReportAllocs()
			b.ResetTimer()
			t0 := time.Now()
			for i := 0; i < b.N; i++ {
				forward()
			}
			if err := be.Sync(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			for i := 0; i < b.N; i++ {
				backward()
			}
			if err := be.Sync(); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			n := float64(b.N)
			b.ReportMetric(t1.Sub(t0).Seconds()*1e3/n, "fwd-ms")
			b.ReportMetric(t2.Sub(t1).Seconds()*1e3/n, "bwd-ms")
			b.ReportMetric(t2.Sub(t0).Seconds()*1e3/n, "ms/step")
			st := be.FusedStats()
			if fused && (len(st.Fallback) != 0) {
				b.Errorf("fused calls fell back: %+v", st)
			}
			b.Logf("%s: %v", mode, st)
			for _, t := range []tensor.Tensor{x, w, y, dy, dx, bh, bf, dw, db, dbx, mask, maskX, xin, wx, bx} {
				be.Free(t)
			}
		})
	}
}

// TestFusedStatsString (no GPU needed): the counters' log line.
func TestFusedStatsString(t *testing.T) {
	be := &Backend{}
	if s := be.FusedStats().String(); s != "no fused calls" {
		t.Errorf("empty: %q", s)
	}
	be.fusedRan("gemm_bias_act", false)
	be.fusedRan("gemm_drelu_bgrad", true)
	be.fusedRan("gemm_bias_act", true)
	be.fstats.halfBgrad++
	be.fusedCounts().plain["gemm_bgrad"] += 2
	st := be.FusedStats()
	if want := "gemm_bgrad 0 ran 2 plain, gemm_bias_act 1 ran 1 fell back, gemm_drelu_bgrad 1 ran; 1 half bias gradients"; st.String() != want {
		t.Errorf("%q, want %q", st.String(), want)
	}
	st.Ran["gemm_bgrad"] = 9 // a copy: the backend's counters stay
	if be.FusedStats().Ran["gemm_bgrad"] != 0 {
		t.Error("FusedStats shares the backend's maps")
	}
}

// rmask0 is the reference's ReLU input for ActGrad: the GPU's own y₁
// (values within rounding of 0 follow it), shaped like like.
func rmask0(h *harness, gy1 []float64, like tensor.Tensor) tensor.Tensor {
	y := h.c.Alloc(like.DType, like.Shape...)
	h.c.Upload(y, gy1)
	return y
}
