package gpu

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// GEMMs on Float16 and BFloat16 operands (gemm.go, fused.go) against the
// CPU's float64 reference computed from the same rounded inputs: the
// inputs are exact, so what differs is the float32 accumulation and, for a
// half C, the one rounding of the result (the reference is rounded too).
//
//	gpu.test -test.run 'Half' -test.v
//	gpu.test -test.run '^$' -test.bench 'GemmTFLOPs' -test.benchtime 20x

// Bounds of half-operand GEMMs: a float32 C (weight gradients) of short
// sums; a float32 C of long ones (tensor cores accumulate in float32, not
// always rounding to nearest); a Float16 and a BFloat16 C, relative to the
// reference rounded to that dtype.
const (
	tolHalfF32     = 1e-4
	tolHalfF32Long = 1e-3
	tolHalfF16Out  = 1e-3
	tolHalfBF16Out = tolBF16
)

func halfOutTol(dt tensor.DType) float64 {
	switch dt {
	case tensor.Float16:
		return tolHalfF16Out
	case tensor.BFloat16:
		return tolHalfBF16Out
	}
	return tolHalfF32
}

// fakeTensor is a tensor of be that no device holds: for the operand
// checks, which run before anything is launched.
func fakeTensor(be *Backend, dt tensor.DType, addr cuda.Ptr, shape ...int) tensor.Tensor {
	return tensor.Tensor{DType: dt, Shape: shape, Buf: &store{be: be, p: addr, n: tensor.NumElems(shape...)}}
}

// TestGemmHalfOperandTypes (no GPU needed): Gemm's dtype rules. Half A
// and B of one dtype take a float32 C or one of theirs, and map to the
// cuBLAS types; mixed A and B, a C of the other half dtype, a half C of
// float32 operands and float64 are ErrDType naming the operands — in the
// fused methods too, which then report true (the error is sticky, nothing
// falls back).
func TestGemmHalfOperandTypes(t *testing.T) {
	be := &Backend{opts: Options{Fused: true}}
	var addr cuda.Ptr = 1 << 30
	op := func(dt tensor.DType, shape ...int) tensor.Tensor {
		addr += 1 << 20
		return fakeTensor(be, dt, addr, shape...)
	}
	const f32, f16, bf16 = tensor.Float32, tensor.Float16, tensor.BFloat16
	for _, tc := range []struct {
		a, b, c tensor.DType
		want    cuda.Types
	}{
		{f32, f32, f32, cuda.Types{}},
		{f16, f16, f16, cuda.Types{AB: cuda.R16F, C: cuda.R16F}},
		{f16, f16, f32, cuda.Types{AB: cuda.R16F, C: cuda.R32F}},
		{bf16, bf16, bf16, cuda.Types{AB: cuda.R16BF, C: cuda.R16BF}},
		{bf16, bf16, f32, cuda.Types{AB: cuda.R16BF, C: cuda.R32F}},
	} {
		m, k, n, ty, ok := be.gemmShape("gemm", false, true, op(tc.a, 7, 5), op(tc.b, 3, 5), op(tc.c, 7, 3))
		if !ok || be.err != nil || m != 7 || k != 5 || n != 3 || ty != tc.want {
			t.Errorf("%v·%v→%v: ok %v, %d×%d×%d, types %v, err %v; want types %v", tc.a, tc.b, tc.c, ok, m, k, n, ty, be.err, tc.want)
		}
		be.err = nil
	}
	refused := func(name string, run func()) {
		t.Helper()
		be.err = nil
		run()
		err := be.err
		if !errors.Is(err, tensor.ErrDType) {
			t.Errorf("%s: %v, want ErrDType", name, err)
			return
		}
		t.Logf("%s: %v", name, err)
	}
	for _, tc := range [][3]tensor.DType{
		{f16, bf16, f32}, {bf16, f16, bf16}, {f16, f32, f32}, {f32, f16, f16},
		{f16, f16, bf16}, {bf16, bf16, f16}, {f32, f32, f16}, {f32, f32, bf16},
		{tensor.Float64, tensor.Float64, tensor.Float64}, {f16, f16, tensor.Int32},
	} {
		a, b, c := op(tc[0], 8, 4), op(tc[1], 4, 6), op(tc[2], 8, 6)
		name := fmt.Sprintf("Gemm %v·%v→%v", tc[0], tc[1], tc[2])
		refused(name, func() { be.Gemm(false, false, 1, a, b, 0, c) })
		if msg := fmt.Sprint(be.err); be.err != nil && !strings.Contains(msg, tc[0].String()) {
			t.Errorf("%s: the message does not name A's dtype: %s", name, msg)
		}
	}
	// The fused InnerProduct methods check the same rules, and the
	// bias and its gradient stay float32.
	x, w, y := op(f16, 8, 4), op(bf16, 4, 6), op(f16, 8, 6)
	bias, mask := op(f32, 6), op(tensor.Uint32, 8, cuda.AuxLD(6)/32)
	refused("GemmBiasAct float16·bfloat16", func() {
		if !be.GemmBiasAct(tensor.ReLU, x, w, bias, y) {
			t.Error("GemmBiasAct fell back on a dtype error")
		}
	})
	refused("GemmBiasReLUMask float16·bfloat16", func() {
		if !be.GemmBiasReLUMask(x, w, bias, y, mask) {
			t.Error("GemmBiasReLUMask fell back on a dtype error")
		}
	})
	wh := op(f16, 4, 6)
	// A forward's bias is float32 or the half output's own dtype (the
	// layer's half copy); nothing else.
	refused("GemmBiasReLUMask bfloat16 bias, float16 y", func() { be.GemmBiasReLUMask(x, wh, op(bf16, 6), y, mask) })
	refused("GemmBiasAct bfloat16 bias, float16 y", func() { be.GemmBiasAct(tensor.ReLU, x, wh, op(bf16, 6), y) })
	refused("GemmBiasAct float16 bias, float32 y", func() {
		be.GemmBiasAct(tensor.Identity, x, wh, op(f16, 6), op(f32, 8, 6))
	})
	refused("GemmBiasAct float64 bias", func() { be.GemmBiasAct(tensor.ReLU, x, wh, op(tensor.Float64, 6), y) })
	refused("GemmDReLUBgrad float16 db", func() { be.GemmDReLUBgrad(y, wh, mask, op(f16, 8, 4), op(f16, 4)) })
	refused("GemmDReLUBgrad float16 into bfloat16", func() {
		if !be.GemmDReLUBgrad(y, wh, mask, op(bf16, 8, 4), op(f32, 4)) {
			t.Error("GemmDReLUBgrad fell back on a dtype error")
		}
	})
	refused("GemmBgrad float16 x, float32 dy", func() {
		if !be.GemmBgrad(x, op(f32, 8, 6), op(f32, 4, 6), op(f32, 6), false) {
			t.Error("GemmBgrad fell back on a dtype error")
		}
	})
	refused("GemmBgrad float16 db", func() { be.GemmBgrad(x, y, op(f32, 4, 6), op(f16, 6), false) })
}

// halfShape is one GEMM C[m, n] = op(A)[m, k]·op(B)[k, n].
type halfShape struct{ m, k, n int }

// gemmOperands are A, B and C of a GEMM for the harness (C random for
// beta ≠ 0, NaN-poisoned for beta 0: cuBLAS must not read it).
func gemmOperands(h *harness, dt, cdt tensor.DType, s halfShape, ta, tb bool, beta float64) (a, b, c pair) {
	sh := func(r, c int, t bool) []int {
		if t {
			return []int{c, r}
		}
		return []int{r, c}
	}
	a, b = h.RandDT(dt, -1, 1, sh(s.m, s.k, ta)...), h.RandDT(dt, -1, 1, sh(s.k, s.n, tb)...)
	if beta != 0 {
		c = h.RandDT(cdt, -1, 1, s.m, s.n)
	} else {
		c = h.OutDT(cdt, s.m, s.n)
	}
	return a, b, c
}

// TestGemmHalf: Gemm on Float16 and BFloat16 operands, all four transpose
// combinations, C float32 and of the operands' dtype, beta 1 and 0, odd
// shapes (no multiple of 8: cuBLASLt's half kernels want 16-byte rows)
// and tensor-core-friendly ones, with the algorithm search off and on;
// with it on, each descriptor's first call is searched (the beta 1 call:
// the search must leave a half C as it found it).
func TestGemmHalf(t *testing.T) {
	shapes := []halfShape{{37, 53, 29}, {1, 1, 1}, {5, 3, 7}, {64, 48, 96}, {300, 136, 200}}
	for _, tc := range []struct {
		name   string
		math   cuda.Math
		search bool
	}{{"plain", cuda.TF32, false}, {"search", cuda.FP32, true}} {
		t.Run(tc.name, func(t *testing.T) {
			be := searchBackend(t, tc.math, tc.search)
			h := newHarness(t)
			h.g = be
			for _, dt := range halfDTypes {
				for _, cdt := range []tensor.DType{tensor.Float32, dt} {
					for _, s := range shapes {
						for _, ta := range []bool{false, true} {
							for _, tb := range []bool{false, true} {
								for _, beta := range []float64{1, 0} {
									name := fmt.Sprintf("%v·%v→%v %dx%dx%d ta=%v tb=%v beta=%v", dt, dt, cdt, s.m, s.k, s.n, ta, tb, beta)
									a, b, c := gemmOperands(h, dt, cdt, s, ta, tb, beta)
									n0 := be.AlgoSearch()
									be.Gemm(ta, tb, 0.75, a.G, b.G, beta, c.G)
									h.c.Gemm(ta, tb, 0.75, a.C, b.C, beta, c.C)
									h.RoundC(cdt, c)
									h.Check(name, c, halfOutTol(cdt))
									st := be.AlgoSearch()
									switch {
									case !tc.search && st != (cuda.AlgoSearchStats{}):
										t.Errorf("%s: searched with the search off: %v", name, st)
									case tc.search && beta == 1 && st.Descriptors != n0.Descriptors+1:
										t.Errorf("%s: %d descriptors searched, want %d (a new dtype, shape or transpose is a new descriptor)", name, st.Descriptors, n0.Descriptors+1)
									case tc.search && beta == 0 && st.Descriptors != n0.Descriptors:
										t.Errorf("%s: searched again (%v → %v)", name, n0, st)
									}
									h.Free(a, b, c)
								}
							}
						}
					}
				}
			}
			t.Logf("%s: %v", tc.name, be.AlgoSearch())
		})
	}
}

// TestGemmHalfSearchKeys: the same shape in float32, float16 (C float32
// and float16) and bfloat16 are four descriptors, each searched once, and
// all four results match the reference.
func TestGemmHalfSearchKeys(t *testing.T) {
	be := searchBackend(t, cuda.TF32, true)
	h := newHarness(t)
	h.g = be
	s := halfShape{333, 264, 176}
	for _, ty := range [][2]tensor.DType{
		{tensor.Float32, tensor.Float32}, {tensor.Float16, tensor.Float32}, {tensor.Float16, tensor.Float16}, {tensor.BFloat16, tensor.BFloat16},
	} {
		for rep := 0; rep < 2; rep++ {
			a, b, c := gemmOperands(h, ty[0], ty[1], s, false, false, 0)
			n0 := be.AlgoSearch().Descriptors
			be.Gemm(false, false, 1, a.G, b.G, 0, c.G)
			h.c.Gemm(false, false, 1, a.C, b.C, 0, c.C)
			h.RoundC(ty[1], c)
			tol := halfOutTol(ty[1])
			if ty[0] == tensor.Float32 {
				tol = tolTF32
			}
			h.Check(fmt.Sprintf("%v→%v call %d", ty[0], ty[1], rep+1), c, tol)
			want := n0 + 1
			if rep > 0 {
				want = n0
			}
			if got := be.AlgoSearch().Descriptors; got != want {
				t.Errorf("%v→%v call %d: %d descriptors searched, want %d", ty[0], ty[1], rep+1, got, want)
			}
			h.Free(a, b, c)
		}
	}
}

// TestGemmHalfCapture: a half GEMM captured into a CUDA graph (its
// descriptor first met there: not searched, the heuristic's choice)
// computes the right product on replay, and its next eager call searches.
func TestGemmHalfCapture(t *testing.T) {
	be := searchBackend(t, cuda.TF32, true)
	h := newHarness(t)
	h.g = be
	// An eager GEMM first makes the stream's cuBLASLt workspace (nothing
	// may be allocated inside the capture).
	w0a, w0b, w0c := h.RandDT(tensor.Float16, -1, 1, 64, 64), h.RandDT(tensor.Float16, -1, 1, 64, 64), h.OutDT(tensor.Float16, 64, 64)
	be.Gemm(false, false, 1, w0a.G, w0b.G, 0, w0c.G)
	h.Sync()
	for _, dt := range halfDTypes {
		const m, k, n = 261, 136, 72
		a, b, c := h.RandDT(dt, -1, 1, m, k), h.RandDT(dt, -1, 1, k, n), h.OutDT(dt, m, n)
		before := be.AlgoSearch()
		var g *cuda.Graph
		if err := be.dev.Do(func(x *cuda.Ctx) error { return x.BeginCapture(be.s) }); err != nil {
			t.Fatal(err)
		}
		be.Gemm(false, false, 1, a.G, b.G, 0, c.G)
		err := be.dev.Do(func(x *cuda.Ctx) error {
			var err error
			g, err = x.EndCapture(be.s)
			return err
		})
		if err != nil || be.Err() != nil {
			t.Fatalf("%v: capturing a half GEMM of a new shape: %v / %v", dt, err, be.Err())
		}
		if during := be.AlgoSearch(); during.Descriptors != before.Descriptors || during.Deferred != before.Deferred+1 {
			t.Errorf("%v: during the capture: %v → %v (want no search, one deferred)", dt, before, during)
		}
		if err := be.dev.Do(func(x *cuda.Ctx) error { return x.LaunchGraph(g, be.s) }); err != nil {
			t.Fatal(err)
		}
		h.c.Gemm(false, false, 1, a.C, b.C, 0, c.C)
		h.RoundC(dt, c)
		h.Check(fmt.Sprintf("%v graph", dt), c, halfOutTol(dt))
		be.dev.Do(func(x *cuda.Ctx) error { x.DestroyGraph(g); return nil })
		n0 := be.AlgoSearch().Descriptors
		be.Gemm(false, false, 1, a.G, b.G, 0, c.G)
		h.Check(fmt.Sprintf("%v eager after the capture", dt), c, halfOutTol(dt))
		if after := be.AlgoSearch(); after.Descriptors != n0+1 {
			t.Errorf("%v: the eager call after the capture did not search: %d → %d descriptors", dt, n0, after.Descriptors)
		}
		h.Free(a, b, c)
	}
	h.Free(w0a, w0b, w0c)
}

// hostHalf is a half operand held on the host as its rounded float32
// values (the large tests' reference reads them directly).
type hostHalf struct {
	t          tensor.Tensor
	v          []float32
	rows, cols int
}

func (h *harness) hostHalf(dt tensor.DType, rows, cols int) hostHalf {
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = tensor.RoundTo(dt, float32(2*h.rng.Float64()-1))
	}
	t := h.g.Alloc(dt, rows, cols)
	h.g.Upload(t, v)
	return hostHalf{t, v, rows, cols}
}

// at is element (i, j) of op(x).
func (x hostHalf) at(trans bool, i, j int) float64 {
	if trans {
		return float64(x.v[j*x.cols+i])
	}
	return float64(x.v[i*x.cols+j])
}

// TestGemmHalfLarge: the model's large half GEMMs — activations x·W at
// batch 65536 (k 512) and at DCNv2's width (k 3456), the input gradient
// dy·Wᵀ, the weight gradient xᵀ·dy into float32 (k = the batch, 65536) —
// checked on sampled rows (or columns) against a float64 sum of the same
// rounded inputs.
func TestGemmHalfLarge(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name     string
		dt, cdt  tensor.DType
		ta, tb   bool
		m, k, n  int
		sampleTo int // rows of C checked (dW: columns, a row of dW sums the whole batch)
		tol      float64
	}{
		{"x·W", tensor.Float16, tensor.Float16, false, false, 65536, 512, 1024, 48, tolHalfF16Out},
		{"x·W", tensor.BFloat16, tensor.BFloat16, false, false, 65536, 512, 1024, 48, tolHalfBF16Out},
		{"x·W k3456", tensor.Float16, tensor.Float16, false, false, 8192, 3456, 1024, 32, tolHalfF16Out},
		{"dy·Wᵀ k3456", tensor.BFloat16, tensor.BFloat16, false, true, 8192, 1024, 3456, 32, tolHalfBF16Out},
		{"xᵀ·dy", tensor.Float16, tensor.Float32, true, false, 512, 65536, 1024, 4, tolHalfF32Long},
		{"xᵀ·dy", tensor.BFloat16, tensor.Float32, true, false, 512, 65536, 1024, 4, tolHalfF32Long},
	} {
		name := fmt.Sprintf("%s %v→%v %dx%dx%d", tc.name, tc.dt, tc.cdt, tc.m, tc.k, tc.n)
		ar, ac := tc.m, tc.k
		if tc.ta {
			ar, ac = ac, ar
		}
		br, bc := tc.k, tc.n
		if tc.tb {
			br, bc = bc, br
		}
		a, b := h.hostHalf(tc.dt, ar, ac), h.hostHalf(tc.dt, br, bc)
		c := h.g.Alloc(tc.cdt, tc.m, tc.n)
		h.g.Fill(c, math.NaN())
		h.g.Gemm(tc.ta, tc.tb, 1, a.t, b.t, 0, c)
		got := make([]float32, tc.m*tc.n)
		if err := h.g.Download(got, c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var g, ref []float64
		for s := 0; s < tc.sampleTo; s++ {
			i := (s*7919 + 13) % tc.m
			for j := 0; j < tc.n; j++ {
				var sum float64
				for l := 0; l < tc.k; l++ {
					sum += a.at(tc.ta, i, l) * b.at(tc.tb, l, j)
				}
				g = append(g, float64(got[i*tc.n+j]))
				ref = append(ref, float64(tensor.RoundTo(tc.cdt, float32(sum))))
			}
		}
		e := RelErr(g, ref)
		if !(e <= tc.tol) {
			w := worst(g, ref)
			t.Errorf("%s: relative error %.3g on %d sampled rows ≥ %.0e (worst: gpu %v, ref %v)", name, e, tc.sampleTo, tc.tol, g[w], ref[w])
		} else {
			t.Logf("%s: relative error %.2e on %d sampled rows", name, e, tc.sampleTo)
		}
		h.g.Free(a.t)
		h.g.Free(b.t)
		h.g.Free(c)
	}
	h.Sync()
}

// BenchmarkGemmTFLOPs times one GEMM of the model's large shapes in each
// precision (float32 operands in FP32 and TF32; float16 and bfloat16
// operands with a C of their dtype) and reports TFLOP/s (2·m·n·k per call)
// and the operands' bytes.
//
//	gpu.test -test.run '^$' -test.bench GemmTFLOPs -test.benchtime 50x
func BenchmarkGemmTFLOPs(b *testing.B) {
	gpuBackend(b)
	for _, s := range []halfShape{{65536, 512, 1024}, {65536, 1024, 1024}, {8192, 3456, 1024}} {
		for _, tc := range []struct {
			name string
			math cuda.Math
			dt   tensor.DType
		}{{"fp32", cuda.FP32, tensor.Float32}, {"tf32", cuda.TF32, tensor.Float32}, {"fp16", cuda.TF32, tensor.Float16}, {"bf16", cuda.TF32, tensor.BFloat16}} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", s.m, s.k, s.n, tc.name), func(b *testing.B) {
				be, err := NewOnDevice(sharedBE.Device(), Options{Math: tc.math})
				if err != nil {
					b.Fatal(err)
				}
				defer be.Close()
				x, w, y := be.Alloc(tc.dt, s.m, s.k), be.Alloc(tc.dt, s.k, s.n), be.Alloc(tc.dt, s.m, s.n)
				be.Fill(x, 0.5)
				be.Fill(w, 0.25)
				be.Gemm(false, false, 1, x, w, 0, y) // the search, outside the timing
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64((s.m*s.k + s.k*s.n + s.m*s.n) * tc.dt.Size()))
				b.ReportAllocs()
				b.ResetTimer()
				t0 := time.Now()
				for i := 0; i < b.N; i++ {
					be.Gemm(false, false, 1, x, w, 0, y)
				}
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
				sec := time.Since(t0).Seconds()
				b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/sec/1e12, "TFLOP/s")
				be.Free(x)
				be.Free(w)
				be.Free(y)
			})
		}
	}
}
