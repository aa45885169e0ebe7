package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The cuBLASLt algorithm search (cuda.AlgoSearch) on the device: searched
// GEMMs against the CPU's float64 reference for every epilogue and for
// plain GEMMs (beta 0 and 1: the search's timed runs must leave C as the
// call found it), a valid algorithm for every GEMM of the reference DLRM
// and DCNv2 at batch 2048 and 65536, the cache reused by repeated calls,
// and no search inside a stream capture.

// searchBackend is a backend of arithmetic math on the shared device with
// the search on (and the fused kernels, for the epilogue methods).
func searchBackend(t *testing.T, math cuda.Math, search bool) *Backend {
	t.Helper()
	gpuBackend(t)
	be, err := NewOnDevice(sharedBE.Device(), Options{Math: math, Fused: true, NoAlgorithmSearch: !search})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	if be.AlgorithmSearch() != search {
		t.Fatalf("AlgorithmSearch %v, want %v", be.AlgorithmSearch(), search)
	}
	return be
}

// TestAlgoSearchParity: every epilogue and plain GEMMs (all transposes,
// beta 0 and 1) through the search equal the float64 reference within the
// FP32/TF32 bounds. The shapes are this test's own, so each call here is
// its descriptor's first: the search runs, and a repeated call of the same
// descriptor on other buffers does not search again.
func TestAlgoSearchParity(t *testing.T) {
	for i, tc := range []struct {
		name string
		math cuda.Math
		tol  float64
	}{{"fp32", cuda.FP32, tolFP32}, {"tf32", cuda.TF32, tolTF32}} {
		t.Run(tc.name, func(t *testing.T) {
			be := searchBackend(t, tc.math, true)
			h := newHarness(t)
			h.g = be
			// Fused epilogues: RELU_AUX_BIAS, DRELU_BGRAD, BGRADA and none
			// (on the compute and the side stream).
			c := fusedCase{777 + i, 96, 160 + 32*i, 80}
			before := be.AlgoSearch()
			testFusedCase(t, h, c, tc.tol)
			after := be.AlgoSearch()
			if after.Descriptors <= before.Descriptors {
				t.Fatalf("fused calls of new shapes searched nothing: %v → %v", before, after)
			}
			if after.Timed == before.Timed {
				t.Logf("cuBLASLt offered one algorithm per fused descriptor: nothing to time")
			}
			t.Logf("fused %v: %v", c, after)
			// The same descriptors again, on fresh buffers: no new search.
			testFusedCase(t, h, c, tc.tol)
			if again := be.AlgoSearch(); again.Descriptors != after.Descriptors || again.Timed != after.Timed {
				t.Errorf("repeated calls searched again: %v → %v", after, again)
			}

			// Unfused forward: BIAS and RELU_BIAS epilogues.
			for _, act := range []tensor.Activation{tensor.Identity, tensor.ReLU} {
				const b, in, out = 333, 72, 136
				x, w, bias := h.Rand(-1, 1, b, in), h.Rand(-1, 1, in, out+i), h.Rand(-0.5, 0.5, out+i)
				y := h.Out(tensor.Float32, b, out+i)
				n0 := be.AlgoSearch().Descriptors
				if !be.GemmBiasAct(act, x.G, w.G, bias.G, y.G) {
					t.Fatalf("GemmBiasAct(%v) fell back", act)
				}
				if be.AlgoSearch().Descriptors != n0+1 {
					t.Errorf("GemmBiasAct(%v): %d descriptors searched, want %d", act, be.AlgoSearch().Descriptors, n0+1)
				}
				h.c.Gemm(false, false, 1, x.C, w.C, 0, y.C)
				h.c.BiasAct(act, 0, y.C, y.C, bias.C)
				h.Check(fmt.Sprintf("GemmBiasAct(%v)", act), y, tc.tol)
				h.Free(x, w, bias, y)
			}

			testSearchedGemms(t, h, be, tc.tol, i)
			t.Logf("%s: %v", tc.name, be.AlgoSearch())
		})
	}
}

// testSearchedGemms checks plain GEMMs C = op(A)·op(B) + beta·C through
// the search (shapes of their own, varied by salt): each is its
// descriptor's first call and searches, a second call on the same buffers
// does not, and both equal the reference.
func testSearchedGemms(t *testing.T, h *harness, be *Backend, tol float64, i int) {
	t.Helper()
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			for _, beta := range []float64{0, 1} {
				// beta is no part of the descriptor: each gets a
				// shape of its own, so that beta 1 is searched too.
				m, k, n := 301, 203, 157+4*int(beta)
				sh := func(r, c int, t bool) []int {
					if t {
						return []int{c, r}
					}
					return []int{r, c}
				}
				a, b := h.Rand(-1, 1, sh(m, k, ta)...), h.Rand(-1, 1, sh(k, n+i, tb)...)
				cc := h.Rand(-1, 1, m, n+i)
				n0 := be.AlgoSearch()
				be.Gemm(ta, tb, 1, a.G, b.G, beta, cc.G)
				h.c.Gemm(ta, tb, 1, a.C, b.C, beta, cc.C)
				name := fmt.Sprintf("Gemm(transA %v, transB %v, beta %v)", ta, tb, beta)
				h.Check(name, cc, tol)
				if st := be.AlgoSearch(); st.Descriptors != n0.Descriptors+1 || st.Timed <= n0.Timed {
					t.Errorf("%s: search %v → %v, want one more descriptor with candidates timed", name, n0, st)
				}
				// Again on the same buffers: the cached algorithm, no search.
				n1 := be.AlgoSearch()
				be.Gemm(ta, tb, 1, a.G, b.G, beta, cc.G)
				h.c.Gemm(ta, tb, 1, a.C, b.C, beta, cc.C)
				h.Check(name+" again", cc, tol)
				if st := be.AlgoSearch(); st != n1 {
					t.Errorf("%s again: searched again (%v → %v)", name, n1, st)
				}
				h.Free(a, b, cc)
			}
		}
	}
}

// TestAlgoSearchBF16: float32 GEMMs in BF16 arithmetic
// (CUBLAS_COMPUTE_32F_FAST_16BF: bfloat16 tensor cores or better, FP32
// accumulation) through the search equal the reference within the BF16
// bound. GEMMs on BFloat16 tensors are TestGemmHalf's.
func TestAlgoSearchBF16(t *testing.T) {
	be := searchBackend(t, cuda.BF16, true)
	h := newHarness(t)
	h.g = be
	testSearchedGemms(t, h, be, tolBF16, 7)
	t.Logf("bf16: %v", be.AlgoSearch())
}

// TestAlgoSearchOff: without the search (algorithm_search false) nothing
// is timed and results still match.
func TestAlgoSearchOff(t *testing.T) {
	be := searchBackend(t, cuda.TF32, false)
	h := newHarness(t)
	h.g = be
	testFusedCase(t, h, fusedCase{515, 64, 192, 96}, tolTF32)
	a, b, c := h.Rand(-1, 1, 123, 45), h.Rand(-1, 1, 45, 67), h.Rand(-1, 1, 123, 67)
	be.Gemm(false, false, 1, a.G, b.G, 1, c.G)
	h.c.Gemm(false, false, 1, a.C, b.C, 1, c.C)
	h.Check("gemm", c, tolTF32)
	if st := be.AlgoSearch(); st != (cuda.AlgoSearchStats{}) {
		t.Errorf("search off: %v", st)
	}
	h.Free(a, b, c)
}

// modelLayer is one InnerProduct of a reference model: in → out, ReLU
// after it, and next the output width of the InnerProduct chained to it
// (its dx GEMM applies this layer's ReLU gradient: DRELU_BGRAD), 0 for
// none.
type modelLayer struct {
	in, out int
	relu    bool
	next    int
}

// referenceLayers are the InnerProduct (and MultiCross GEMM) shapes of
// the reference DLRM and DCNv2 (bench train --model dlrm, dcnv2).
var referenceLayers = map[string][]modelLayer{
	"dlrm": {{13, 512, true, 256}, {512, 256, true, 128}, {256, 128, true, 0}, // bottom, into the interaction
		{479, 1024, true, 1024}, {1024, 1024, true, 512}, {1024, 512, true, 256}, {512, 256, true, 1}, {256, 1, false, 0}}, // top over the 479-wide interaction
	"dcnv2": {{13, 512, true, 256}, {512, 256, true, 128}, {256, 128, true, 0},
		{3456, 512, false, 0}, {512, 3456, false, 0}, // MultiCross's rank-512 factors
		{3456, 1024, true, 1024}, {1024, 1024, true, 512}, {1024, 512, true, 256}, {512, 256, true, 1}, {256, 1, false, 0}},
}

// TestAlgoSearchModelShapes: every GEMM of the reference models' training
// step (forward with its epilogue, unfused and fused; input and weight
// gradients, plain and fused) runs a searched algorithm whose result
// matches cuBLAS's FP32 GEMM (no search) of the same operands within the
// TF32 bound, at HugeCTR's default batch and at the benchmark's. The fused
// epilogue kernels must not fall back on these shapes.
func TestAlgoSearchModelShapes(t *testing.T) {
	be := searchBackend(t, cuda.TF32, true)
	ref := searchBackend(t, cuda.FP32, false)
	for _, model := range []string{"dlrm", "dcnv2"} {
		for _, batch := range []int{2048, 65536} {
			t.Run(fmt.Sprintf("%s/%d", model, batch), func(t *testing.T) {
				for _, l := range referenceLayers[model] {
					testModelLayer(t, be, ref, batch, l)
				}
				t.Logf("%v", be.AlgoSearch())
			})
		}
	}
}

func testModelLayer(t *testing.T, be, ref *Backend, batch int, l modelLayer) {
	t.Helper()
	name := fmt.Sprintf("%d→%d", l.in, l.out)
	rand := func(lo, hi float32, shape ...int) (tensor.Tensor, tensor.Tensor) {
		v := make([]float32, tensor.NumElems(shape...))
		for i := range v {
			v[i] = lo + (hi-lo)*float32(i*2654435761%1000003)/1000003
		}
		g, r := be.Alloc(tensor.Float32, shape...), ref.Alloc(tensor.Float32, shape...)
		be.Upload(g, v)
		ref.Upload(r, v)
		return g, r
	}
	out := func(shape ...int) (tensor.Tensor, tensor.Tensor) {
		g, r := be.Alloc(tensor.Float32, shape...), ref.Alloc(tensor.Float32, shape...)
		be.Fill(g, math.NaN())
		ref.Fill(r, 0)
		return g, r
	}
	// TF32 rounds each operand to 10 mantissa bits; on these (structured,
	// not random) operands cuBLAS's own TF32 GEMM, searched or not, is
	// 1.2e-3 off FP32 at an inner dimension of 1024 and 2.75e-3 at 3456
	// (H200, 2026-12-01): the error grows with the inner dimension k, so
	// the bound is tolTF32·√(k/256) (at least tolTF32). A wrong algorithm
	// is off by O(1).
	bound := func(k int) float64 { return tolTF32 * math.Max(1, math.Sqrt(float64(k)/256)) }
	check := func(what string, g, r tensor.Tensor, k int) {
		t.Helper()
		if err := be.Sync(); err != nil {
			t.Fatalf("%s %s: %v", name, what, err)
		}
		if err := ref.Sync(); err != nil {
			t.Fatalf("%s %s reference: %v", name, what, err)
		}
		a, b := make([]float64, g.Len()), make([]float64, r.Len())
		if err := be.Download(a, g); err != nil {
			t.Fatal(err)
		}
		if err := ref.Download(b, r); err != nil {
			t.Fatal(err)
		}
		if e := RelErr(a, b); !(e <= bound(k)) {
			t.Errorf("%s %s: relative error %.3g against cuBLAS FP32 (bound %.3g at inner dimension %d)", name, what, e, bound(k), k)
		}
	}
	x, rx := rand(-1, 1, batch, l.in)
	w, rw := rand(-0.1, 0.1, l.in, l.out)
	bias, rbias := rand(-0.5, 0.5, l.out)
	dy, rdy := rand(-1, 1, batch, l.out)
	defer func() {
		for _, p := range [][2]tensor.Tensor{{x, rx}, {w, rw}, {bias, rbias}, {dy, rdy}} {
			be.Free(p[0])
			ref.Free(p[1])
		}
	}()
	act := tensor.Identity
	if l.relu {
		act = tensor.ReLU
	}
	// Forward, unfused: y = act(x·W + b) in one BIAS / RELU_BIAS call.
	y, ry := out(batch, l.out)
	if !be.GemmBiasAct(act, x, w, bias, y) {
		be.Gemm(false, false, 1, x, w, 0, y)
		be.BiasAct(act, 0, y, y, bias)
	}
	ref.Gemm(false, false, 1, rx, rw, 0, ry)
	ref.BiasAct(act, 0, ry, ry, rbias)
	check("forward", y, ry, l.in)
	// Backward, plain: dW = xᵀ·dy, dx = dy·Wᵀ.
	dw, rdw := out(l.in, l.out)
	be.Gemm(true, false, 1, x, dy, 0, dw)
	ref.Gemm(true, false, 1, rx, rdy, 0, rdw)
	check("dW", dw, rdw, batch)
	dx, rdx := out(batch, l.in)
	be.Gemm(false, true, 1, dy, w, 0, dx)
	ref.Gemm(false, true, 1, rdy, rw, 0, rdx)
	check("dx", dx, rdx, l.out)
	// Fused: bias gradient with dW (side stream), forward with the mask,
	// and the chained next layer's input gradient through this layer's
	// ReLU (DRELU_BGRAD).
	db, rdb := out(l.out)
	if !be.GemmBgrad(x, dy, dw, db, true) {
		// Legal (the layer then runs Gemm and ColSum), but only expected
		// of the 1-wide output layer.
		if l.out > 1 {
			t.Errorf("%s: GemmBgrad fell back", name)
		} else {
			t.Logf("%s: GemmBgrad falls back", name)
		}
		be.Gemm(true, false, 1, x, dy, 0, dw)
		be.ColSum(db, 0, dy)
	}
	be.JoinGrads()
	ref.Gemm(true, false, 1, rx, rdy, 0, rdw)
	ref.ColSum(rdb, 0, rdy)
	check("fused dW", dw, rdw, batch)
	check("fused db", db, rdb, batch)
	if l.relu {
		mask := be.ReLUMask(tensor.Float32, batch, l.out)
		if !be.GemmBiasReLUMask(x, w, bias, y, mask) {
			t.Errorf("%s: GemmBiasReLUMask fell back", name)
		}
		check("fused forward", y, ry, l.in)
		be.Free(mask)
	}
	if l.next > 0 {
		// The chained next layer's dx GEMM: dz = (g·W2ᵀ)⊙[y > 0] for its
		// W2 [out, next] and its output gradient g [batch, next]. The
		// reference's mask is the GPU's own y (an element within rounding
		// of 0 may fall either side of it).
		mask := be.ReLUMask(tensor.Float32, batch, l.out)
		if !be.GemmBiasReLUMask(x, w, bias, y, mask) {
			t.Fatalf("%s: GemmBiasReLUMask fell back", name)
		}
		w2, rw2 := rand(-0.1, 0.1, l.out, l.next)
		g2, rg2 := rand(-1, 1, batch, l.next)
		dz, rdz := out(batch, l.out)
		db2, rdb2 := out(l.out)
		if !be.GemmDReLUBgrad(g2, w2, mask, dz, db2) {
			t.Errorf("%s: GemmDReLUBgrad fell back", name)
		}
		gy := make([]float32, batch*l.out)
		if err := be.Download(gy, y); err != nil {
			t.Fatal(err)
		}
		ref.Upload(ry, gy)
		ref.Gemm(false, true, 1, rg2, rw2, 0, rdz)
		ref.ActGrad(tensor.ReLU, 0, rdz, rdz, ry, ry)
		ref.ColSum(rdb2, 0, rdz)
		check("fused dReLU dz", dz, rdz, l.next)
		check("fused dReLU db", db2, rdb2, batch)
		be.Free(mask)
		for _, p := range [][2]tensor.Tensor{{w2, rw2}, {g2, rg2}, {dz, rdz}, {db2, rdb2}} {
			be.Free(p[0])
			ref.Free(p[1])
		}
	}
	for _, p := range [][2]tensor.Tensor{{y, ry}, {dw, rdw}, {dx, rdx}, {db, rdb}} {
		be.Free(p[0])
		ref.Free(p[1])
	}
}

// TestAlgoSearchCapture: a descriptor first met while the stream is being
// captured into a CUDA graph is not searched there (no timing, no
// synchronisation: the capture would fail); the graph computes the right
// product, and the descriptor's next call outside the capture searches.
func TestAlgoSearchCapture(t *testing.T) {
	be := searchBackend(t, cuda.TF32, true)
	h := newHarness(t)
	h.g = be
	// An eager GEMM first: it makes the stream's cuBLASLt workspace (no
	// allocation is allowed inside the capture).
	w0a, w0b, w0c := h.Rand(-1, 1, 64, 64), h.Rand(-1, 1, 64, 64), h.Out(tensor.Float32, 64, 64)
	be.Gemm(false, false, 1, w0a.G, w0b.G, 0, w0c.G)
	h.Sync()
	const m, k, n = 259, 131, 67
	a, b, c := h.Rand(-1, 1, m, k), h.Rand(-1, 1, k, n), h.Out(tensor.Float32, m, n)
	before := be.AlgoSearch()
	var g *cuda.Graph
	err := be.dev.Do(func(x *cuda.Ctx) error { return x.BeginCapture(be.s) })
	if err != nil {
		t.Fatal(err)
	}
	be.Gemm(false, false, 1, a.G, b.G, 0, c.G)
	err = be.dev.Do(func(x *cuda.Ctx) error {
		var err error
		g, err = x.EndCapture(be.s)
		return err
	})
	if err != nil || be.Err() != nil {
		t.Fatalf("capturing a GEMM of a new shape: %v / %v", err, be.Err())
	}
	during := be.AlgoSearch()
	if during.Descriptors != before.Descriptors || during.Deferred != before.Deferred+1 {
		t.Errorf("during the capture: %v → %v (want no search, one deferred)", before, during)
	}
	if err := be.dev.Do(func(x *cuda.Ctx) error { return x.LaunchGraph(g, be.s) }); err != nil {
		t.Fatal(err)
	}
	h.c.Gemm(false, false, 1, a.C, b.C, 0, c.C)
	h.Check("graph", c, tolTF32)
	be.dev.Do(func(x *cuda.Ctx) error { x.DestroyGraph(g); return nil })
	be.Gemm(false, false, 1, a.G, b.G, 0, c.G)
	h.Check("eager after the capture", c, tolTF32)
	if after := be.AlgoSearch(); after.Descriptors != during.Descriptors+1 {
		t.Errorf("the eager call after the capture did not search: %v → %v", during, after)
	}
	h.Free(w0a, w0b, w0c, a, b, c)
}
