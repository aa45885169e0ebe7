package gpu

import (
	"fmt"
	"os"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The fused InnerProduct kernels (fused.go) against the CPU's float64
// reference of their semantics (tensor.FusedDense's comments: the plain
// operations they replace).

// fusedCase is one InnerProduct pair: x [b, in] → y [b, out] (ReLU) → the
// next layer's w2 [out, out2].
type fusedCase struct{ b, in, out, out2 int }

var fusedCases = []fusedCase{
	{300, 64, 96, 48},      // out not a multiple of 128: the mask's rows are padded
	{1024, 512, 256, 128},  // DLRM bottom MLP
	{513, 1024, 1024, 512}, // DLRM top MLP, odd batch
	{256, 13, 512, 256},    // DLRM's first layer: 13 dense features (k = 13)
	{200, 256, 128, 1},     // the last ReLU layer before a 1-wide output
}

// fusedBackend returns a backend of arithmetic math on the shared device.
func fusedBackend(t *testing.T, math cuda.Math, o Options) *Backend {
	t.Helper()
	gpuBackend(t)
	o.Math = math
	o.Fused = true
	be, err := NewOnDevice(sharedBE.Device(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

func TestFusedDense(t *testing.T) {
	for _, tc := range []struct {
		name string
		math cuda.Math
		tol  float64
	}{{"fp32", cuda.FP32, tolFP32}, {"tf32", cuda.TF32, tolTF32}} {
		t.Run(tc.name, func(t *testing.T) {
			be := fusedBackend(t, tc.math, Options{})
			if !be.FusesDense() {
				t.Fatal("FusesDense false")
			}
			for _, c := range fusedCases {
				t.Run(fmt.Sprintf("%dx%d→%d→%d", c.b, c.in, c.out, c.out2), func(t *testing.T) {
					h := newHarness(t)
					h.g = be
					testFusedCase(t, h, c, tc.tol)
				})
			}
		})
	}
}

func testFusedCase(t *testing.T, h *harness, c fusedCase, tol float64) {
	ref := tensor.NewFusedReference(h.c) // the semantics, in float64
	x, w, bias := h.Rand(-1, 1, c.b, c.in), h.Rand(-1, 1, c.in, c.out), h.Rand(-0.5, 0.5, c.out)
	y := h.Out(tensor.Float32, c.b, c.out)
	mask, rmask := h.g.ReLUMask(tensor.Float32, c.b, c.out), ref.ReLUMask(tensor.Float64, c.b, c.out)
	if want := c.b * cuda.AuxLD(c.out) / 32; mask.Len() != want || mask.DType != tensor.Uint32 {
		t.Fatalf("mask %v, want Uint32 of %d words", mask, want)
	}
	defer h.g.Free(mask)
	// Forward: y = ReLU(x·W + b) and the mask.
	if !h.g.GemmBiasReLUMask(x.G, w.G, bias.G, y.G, mask) {
		t.Fatalf("GemmBiasReLUMask fell back (cuBLASLt has no RELU_AUX_BIAS kernel for this shape; CUBLASLT_LOG_LEVEL=2 says why)")
	}
	ref.GemmBiasReLUMask(x.C, w.C, bias.C, y.C, rmask)
	h.Check("forward y", y, tol)

	// The reference's mask is the GPU's own y (a value within rounding of
	// 0 may fall either side of it on the two backends).
	gy := make([]float64, c.b*c.out)
	if err := h.g.Download(gy, y.G); err != nil {
		t.Fatal(err)
	}
	h.c.Upload(rmask, gy)

	// Input gradient of the next layer through this one's ReLU: dz and db.
	w2, dy2 := h.Rand(-1, 1, c.out, c.out2), h.Rand(-1, 1, c.b, c.out2)
	dz, db := h.Out(tensor.Float32, c.b, c.out), h.Out(tensor.Float32, c.out)
	if !h.g.GemmDReLUBgrad(dy2.G, w2.G, mask, dz.G, db.G) {
		t.Fatalf("GemmDReLUBgrad fell back (cuBLASLt has no DRELU_BGRAD kernel for this shape; CUBLASLT_LOG_LEVEL=2 says why)")
	}
	ref.GemmDReLUBgrad(dy2.C, w2.C, rmask, dz.C, db.C)
	h.Check("dReLU dz", dz, tol)
	h.Check("dReLU db", db, tol)

	// Weight and bias gradient in one GEMM, on the compute and the side
	// stream, with and without db.
	for _, side := range []bool{false, true} {
		dw, db1, dw2 := h.Out(tensor.Float32, c.in, c.out), h.Out(tensor.Float32, c.out), h.Out(tensor.Float32, c.in, c.out)
		if !h.g.GemmBgrad(x.G, dz.G, dw.G, db1.G, side) {
			t.Fatalf("GemmBgrad (side %v) fell back (cuBLASLt has no BGRADA kernel for this shape; CUBLASLT_LOG_LEVEL=2 says why)", side)
		}
		if !h.g.GemmBgrad(x.G, dz.G, dw2.G, tensor.Tensor{}, side) {
			t.Fatalf("GemmBgrad without db (side %v) fell back", side)
		}
		h.g.JoinGrads()
		ref.GemmBgrad(x.C, dz.C, dw.C, db1.C, side)
		ref.GemmBgrad(x.C, dz.C, dw2.C, tensor.Tensor{}, side)
		ref.JoinGrads()
		h.Check(fmt.Sprintf("bgrad dW (side %v)", side), dw, tol)
		h.Check(fmt.Sprintf("bgrad db (side %v)", side), db1, tol)
		h.Check(fmt.Sprintf("gemm dW (side %v)", side), dw2, tol)
		h.Free(dw, db1, dw2)
	}
	h.c.Free(rmask)
	h.Free(x, w, bias, y, w2, dy2, dz, db)
}

// TestFusedSideStreamOrder: a side-stream weight gradient waits for the
// compute stream's writes of its operands, and work after JoinGrads waits
// for it. The operands are written just before the GEMM (a side stream
// that did not wait would read the stale zeros), and the result is copied
// on the compute stream right after JoinGrads (without the join the copy
// would read an unfinished gradient, still NaN where not yet written).
func TestFusedSideStreamOrder(t *testing.T) {
	// No algorithm search: a descriptor's first call would synchronise
	// the streams while it times candidates, hiding a missing wait.
	be := fusedBackend(t, cuda.TF32, Options{NoAlgorithmSearch: true})
	h := newHarness(t)
	h.g = be
	const b, in, out = 16384, 512, 1024
	x0, dy0 := h.Rand(-1, 1, b, in), h.Rand(-1, 1, b, out)
	x, dy := h.Out(tensor.Float32, b, in), h.Out(tensor.Float32, b, out)
	h.Sync()
	h.g.Fill(x.G, 0)
	h.g.Fill(dy.G, 0)
	h.Sync()
	h.g.Copy(x.G, x0.G) // compute stream, just before the side GEMM
	h.g.Copy(dy.G, dy0.G)
	dw, db, got := h.Out(tensor.Float32, in, out), h.Out(tensor.Float32, out), h.Out(tensor.Float32, in, out)
	if !h.g.GemmBgrad(x.G, dy.G, dw.G, db.G, true) {
		t.Fatal("GemmBgrad fell back")
	}
	h.g.JoinGrads()
	h.g.Copy(got.G, dw.G) // compute stream, right after the join
	h.c.Gemm(true, false, 1, x0.C, dy0.C, 0, got.C)
	h.c.ColSum(db.C, 0, dy0.C)
	h.Check("dW copied after the join", got, tolTF32)
	h.Check("db", db, tolTF32)
	h.Free(x0, dy0, x, dy, dw, db, got)
}

// TestFusedOff: without Options.Fused (the default; CTRKIT_FUSED=1 sets
// it) the kernels are off: every method reports false and does nothing.
func TestFusedOff(t *testing.T) {
	gpuBackend(t)
	if v := os.Getenv("CTRKIT_FUSED"); v != "" {
		t.Skipf("CTRKIT_FUSED=%s is set", v)
	}
	be, err := NewOnDevice(sharedBE.Device(), Options{Math: cuda.TF32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	if be.FusesDense() {
		t.Fatal("FusesDense by default")
	}
	h := newHarness(t)
	h.g = be
	x, w, bias := h.Rand(-1, 1, 64, 32), h.Rand(-1, 1, 32, 16), h.Rand(-1, 1, 16)
	y, dx, dw := h.Out(tensor.Float32, 64, 16), h.Out(tensor.Float32, 64, 32), h.Out(tensor.Float32, 32, 16)
	mask := be.ReLUMask(tensor.Float32, 64, 16)
	if be.GemmBiasReLUMask(x.G, w.G, bias.G, y.G, mask) || be.GemmDReLUBgrad(y.G, w.G, mask, dx.G, bias.G) ||
		be.GemmBgrad(x.G, y.G, dw.G, bias.G, true) {
		t.Fatal("a fused method ran by default")
	}
	be.JoinGrads()
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	h.Free(x, w, bias, y, dx, dw)
	be.Free(mask)
	t.Setenv("CTRKIT_FUSED", "0")
	if fusedBackend(t, cuda.TF32, Options{}).FusesDense() {
		t.Fatal("FusesDense with CTRKIT_FUSED=0")
	}
}

// TestFusedBadMask: a mask of the wrong size is an error, not a fallback.
func TestFusedBadMask(t *testing.T) {
	be := fusedBackend(t, cuda.FP32, Options{})
	x, w, bias := be.Alloc(tensor.Float32, 64, 32), be.Alloc(tensor.Float32, 32, 16), be.Alloc(tensor.Float32, 16)
	y := be.Alloc(tensor.Float32, 64, 16)
	mask := be.ReLUMask(tensor.Float32, 32, 16) // for 32 rows, not 64
	if !be.GemmBiasReLUMask(x, w, bias, y, mask) {
		t.Fatal("a shape error fell back instead of failing")
	}
	if err := be.Sync(); err == nil {
		t.Fatal("no error for a mask of the wrong size")
	} else {
		t.Log(err)
	}
}
