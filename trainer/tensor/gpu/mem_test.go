package gpu

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

func TestMemoryOps(t *testing.T) {
	h := newHarness(t)
	x := h.Rand(-3, 3, 1000, 7)
	y := h.Out(tensor.Float32, 1000, 7)
	h.g.Copy(y.G, x.G)
	h.c.Copy(y.C, x.C)
	h.Check("copy", y, 0)

	h.g.Fill(y.G, 2.5)
	h.c.Fill(y.C, 2.5)
	h.Check("fill f32", y, 0)

	keys := h.Out(tensor.Int64, 999)
	h.g.Fill(keys.G, float64(tensor.EmptyKey))
	h.c.Fill(keys.C, float64(tensor.EmptyKey))
	h.Check("fill empty keys", keys, 0)

	// Convert across every dtype pair from float and int sources.
	vals := make([]int64, 3001)
	for i := range vals {
		vals[i] = int64(i*7919%100003) - 50000
	}
	for _, sdt := range []tensor.DType{tensor.Int32, tensor.Int64} {
		src := h.Ints(sdt, vals, len(vals))
		for _, ddt := range []tensor.DType{tensor.Float32, tensor.Int32, tensor.Int64} {
			dst := h.Out(ddt, len(vals))
			h.g.Convert(dst.G, src.G)
			h.c.Convert(dst.C, src.C)
			h.Check(fmt.Sprintf("convert %v→%v", sdt, ddt), dst, 0)
		}
	}
	u := make([]int64, 5000)
	for i := range u {
		u[i] = int64(uint32(i) * 2654435761)
	}
	us := h.Ints(tensor.Uint32, u, len(u))
	wide := h.Out(tensor.Int64, len(u))
	h.g.Convert(wide.G, us.G)
	h.c.Convert(wide.C, us.C)
	h.Check("convert uint32→int64", wide, 0)

	// Upload of more than one staging chunk.
	big := make([]float32, 20<<20)
	for i := range big {
		big[i] = float32(i % 1013)
	}
	bt := h.g.Alloc(tensor.Float32, len(big))
	h.g.Upload(bt, big)
	back := make([]float32, len(big))
	if err := h.g.Download(back, bt); err != nil {
		t.Fatal(err)
	}
	for i := range back {
		if back[i] != big[i] {
			t.Fatalf("round trip [%d] %v vs %v", i, back[i], big[i])
		}
	}
	h.g.Free(bt)

	// Float64 is refused with ErrDType.
	h.g.Alloc(tensor.Float64, 4)
	if err := h.g.Err(); !errors.Is(err, tensor.ErrDType) {
		t.Fatalf("float64 alloc: %v", err)
	}
	h.g.Reset()
}

func TestGemm(t *testing.T) {
	h := newHarness(t)
	for _, sh := range [][3]int{{1, 1, 1}, {7, 5, 3}, {64, 33, 129}, {513, 257, 100}, {4096, 16, 512}} {
		m, k, n := sh[0], sh[1], sh[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				ash := []int{m, k}
				if ta {
					ash = []int{k, m}
				}
				bsh := []int{k, n}
				if tb {
					bsh = []int{n, k}
				}
				a, b := h.Rand(-1, 1, ash...), h.Rand(-1, 1, bsh...)
				c := h.Rand(-1, 1, m, n)
				h.g.Gemm(ta, tb, 0.75, a.G, b.G, 0.5, c.G)
				h.c.Gemm(ta, tb, 0.75, a.C, b.C, 0.5, c.C)
				h.Check(fmt.Sprintf("gemm %dx%dx%d ta=%v tb=%v", m, k, n, ta, tb), c, tolFP32)
				h.Free(a, b, c)
			}
		}
	}
}

func TestGemmReducedPrecision(t *testing.T) {
	gpuBackend(t)
	for _, tc := range []struct {
		name string
		opt  Options
		tol  float64
	}{{"tf32", Options{Math: 1}, tolTF32}, {"bf16", Options{Math: 2}, tolBF16}} {
		t.Run(tc.name, func(t *testing.T) {
			be, err := NewOnDevice(sharedBE.Device(), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			h := newHarness(t)
			h.g = be
			a, b, c := h.Rand(-1, 1, 1000, 300), h.Rand(-1, 1, 300, 200), h.Out(tensor.Float32, 1000, 200)
			h.g.Gemm(false, false, 1, a.G, b.G, 0, c.G)
			h.c.Gemm(false, false, 1, a.C, b.C, 0, c.C)
			e := h.Check("gemm "+tc.name, c, tc.tol)
			t.Logf("%s relative error %.2e", tc.name, e)
		})
	}
}

func TestGemmBiasAct(t *testing.T) {
	h := newHarness(t)
	for _, act := range []tensor.Activation{tensor.Identity, tensor.ReLU} {
		x, w, bias := h.Rand(-1, 1, 300, 64), h.Rand(-1, 1, 64, 96), h.Rand(-1, 1, 96)
		y := h.Out(tensor.Float32, 300, 96)
		if !h.g.GemmBiasAct(act, x.G, w.G, bias.G, y.G) {
			t.Fatalf("act %v not fused", act)
		}
		h.c.Gemm(false, false, 1, x.C, w.C, 0, y.C)
		h.c.BiasAct(act, 0, y.C, y.C, bias.C)
		h.Check(fmt.Sprintf("gemm+bias+act %d", act), y, tolFP32)
	}
	_ = math.Pi
}

// TestMemInfo: tensor.DeviceMemory reports the device's memory (the
// device cache may hold freed blocks, so free bytes need not move with one
// allocation).
func TestMemInfo(t *testing.T) {
	g := gpuBackend(t)
	var _ tensor.DeviceMemory = g
	free, total, err := g.MemInfo()
	if err != nil || free <= 0 || total < free || total < 1<<30 {
		t.Fatalf("free %d, total %d: %v", free, total, err)
	}
}
