package gpu

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The cross-layer kernels on half activations (multicross.go: the mc_*h
// kernels, a dtype code per activation; bias and db float32) against the
// CPU float64 CrossOps on the same rounded inputs, half outputs rounded
// once (harness RoundC).

// crossDTs are the activations' dtypes of a case: act for every activation
// but x0 (and, backward, dx0), which take x0dt: all one half dtype, or a
// float32 x0 among half ones (each operand its own dtype).
type crossDTs struct{ act, x0dt tensor.DType }

var crossHalfDTs = []crossDTs{
	{tensor.Float16, tensor.Float16}, {tensor.BFloat16, tensor.BFloat16},
	{tensor.Float16, tensor.Float32}, {tensor.BFloat16, tensor.Float16},
}

// crossShapesHalf: DCNv2's 3456 columns (one row chunk and several), odd
// widths (the scalar kernels), vector widths not a multiple of 32.
var crossShapesHalf = [][2]int{{1, 5}, {37, 12}, {29, 7}, {64, 3456}, {2500, 3456}, {3001, 429}, {513, 36}}

// crossHalfTol is the tolerance of an output of dtype dt.
func crossHalfTol(dt tensor.DType) float64 {
	if dt.IsHalf() {
		return tolBF16
	}
	return tolFP32
}

// crossHalfBackend puts a fresh FP32 backend in h and, when the test
// ends, checks that it launched the kernels want and none of avoid.
func crossHalfBackend(t *testing.T, h *harness, want, avoid []string) {
	be, err := NewOnDevice(sharedBE.Device(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.g = be
	t.Cleanup(func() {
		used := kernelsLookedUp(t, be)
		for _, k := range want {
			if !used[k] {
				t.Errorf("%s not launched", k)
			}
		}
		for _, k := range avoid {
			if used[k] {
				t.Errorf("%s launched for half activations", k)
			}
		}
		be.Close()
	})
}

func TestMultiCrossForwardHalf(t *testing.T) {
	h := newHarness(t)
	crossHalfBackend(t, h, []string{"mc_fwd4h", "mc_fwd1h"}, []string{"mc_fwd4", "mc_fwd1"})
	for _, dts := range crossHalfDTs {
		for _, sh := range crossShapesHalf {
			rows, cols := sh[0], sh[1]
			name := fmt.Sprintf("%dx%d %v x0 %v", rows, cols, dts.act, dts.x0dt)
			x0, x, bias := h.RandDT(dts.x0dt, -1, 1, rows, cols), h.RandDT(dts.act, -1, 1, rows, cols), h.Rand(-0.5, 0.5, cols)
			z, s := h.RandDT(dts.act, -1, 1, rows, cols), h.RandDT(dts.act, -1, 1, rows, 1)
			y, y1 := h.OutDT(dts.act, rows, cols), h.OutDT(dts.act, rows, cols)
			denseBoth(h, func(be tensor.Backend, p func(pair) tensor.Tensor) {
				cx := be.(tensor.CrossOps)
				cx.CrossForward(p(y), p(x0), p(z), p(bias), p(x))
				cx.CrossForwardV1(p(y1), p(x0), p(s), p(bias), p(x))
			})
			h.RoundC(dts.act, y)
			h.RoundC(dts.act, y1)
			h.Check("CrossForward "+name, y, tolBF16)
			h.Check("CrossForwardV1 "+name, y1, tolBF16)
			h.Free(x0, x, bias, z, s, y, y1)
		}
	}
}

func TestMultiCrossBackwardHalf(t *testing.T) {
	h := newHarness(t)
	crossHalfBackend(t, h, []string{"mc_bwd4h", "mc_bwd1h"}, []string{"mc_bwd4", "mc_bwd1"})
	for _, dts := range crossHalfDTs {
		for _, sh := range crossShapesHalf {
			for _, mode := range []struct {
				dx0, gcopy bool
				beta, res  float64
			}{{true, true, 0, 0}, {true, false, 1, 1}, {true, true, 0, 1}, {false, false, 0, 0}, {false, true, 1, 1}} {
				rows, cols := sh[0], sh[1]
				name := fmt.Sprintf("%dx%d %v x0 %v dx0 %v gcopy %v beta %v res %v", rows, cols, dts.act, dts.x0dt,
					mode.dx0, mode.gcopy, mode.beta, mode.res)
				g, x0 := h.RandDT(dts.act, -1, 1, rows, cols), h.RandDT(dts.x0dt, -1, 1, rows, cols)
				z, bias := h.RandDT(dts.act, -1, 1, rows, cols), h.Rand(-0.5, 0.5, cols)
				dz, db := h.OutDT(dts.act, rows, cols), h.Out(tensor.Float32, cols)
				dx0, gc := h.Zero(), h.Zero()
				if mode.dx0 {
					if mode.beta != 0 {
						dx0 = h.RandDT(dts.x0dt, -1, 1, rows, cols)
					} else {
						dx0 = h.OutDT(dts.x0dt, rows, cols) // NaN: must not be read
					}
				}
				if mode.gcopy {
					gc = h.OutDT(dts.act, rows, cols)
				}
				denseBoth(h, func(be tensor.Backend, p func(pair) tensor.Tensor) {
					be.(tensor.CrossOps).CrossBackward(p(dz), p(db), p(dx0), mode.beta, mode.res, p(gc), p(g), p(x0), p(z), p(bias))
				})
				h.RoundC(dts.act, dz)
				h.Check("dz "+name, dz, tolBF16)
				// db sums the float32 products: the float32 tolerance.
				h.Check("db "+name, db, tolFP32)
				if mode.dx0 {
					h.RoundC(dts.x0dt, dx0)
					h.Check("dx0 "+name, dx0, crossHalfTol(dts.x0dt))
				}
				if mode.gcopy {
					h.Check("gcopy "+name, gc, 0) // g's values, stored in g's dtype
				}
				h.Free(g, x0, z, bias, dz, db, dx0, gc)
			}
		}
	}
}

// TestMultiCrossHalfDTypes: bias and db must be float32; integer
// activations are refused; both fail with ErrDType.
func TestMultiCrossHalfDTypes(t *testing.T) {
	h := newHarness(t)
	a, hb := h.RandDT(tensor.Float16, -1, 1, 4, 8), h.RandDT(tensor.Float16, -1, 1, 8)
	fb, out := h.Rand(-1, 1, 8), h.OutDT(tensor.Float16, 4, 8)
	ints := h.Ints(tensor.Int32, make([]int64, 32), 4, 8)
	defer h.Free(a, hb, fb, out, ints)
	cx := tensor.CrossOps(h.g)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"forward half bias", func() { cx.CrossForward(out.G, a.G, a.G, hb.G, a.G) }},
		{"v1 half bias", func() { cx.CrossForwardV1(out.G, a.G, a.G.Prefix(4).Reshape(4, 1), hb.G, a.G) }},
		{"forward int32 x0", func() { cx.CrossForward(out.G, ints.G, a.G, fb.G, a.G) }},
		{"backward half db", func() { cx.CrossBackward(out.G, hb.G, tensor.Tensor{}, 0, 0, tensor.Tensor{}, a.G, a.G, a.G, fb.G) }},
		{"backward half bias", func() { cx.CrossBackward(out.G, fb.G, tensor.Tensor{}, 0, 0, tensor.Tensor{}, a.G, a.G, a.G, hb.G) }},
	} {
		c.f()
		if err := h.g.Sync(); !errors.Is(err, tensor.ErrDType) {
			t.Errorf("%s: %v, want ErrDType", c.name, err)
		}
		h.g.Reset()
	}
}
