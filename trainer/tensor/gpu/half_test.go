package gpu

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// The half-precision harness: a half operand is stored on the GPU in dt
// (Float16 or BFloat16) and on the CPU in float64 holding the same rounded
// values, so the reference computes from exactly the GPU's inputs.

// FloatsDT uploads vals as a GPU tensor of dt (Float32, Float16,
// BFloat16); the CPU side holds the values rounded to dt.
func (h *harness) FloatsDT(dt tensor.DType, vals []float64, shape ...int) pair {
	h.t.Helper()
	f32 := make([]float32, len(vals))
	f64 := make([]float64, len(vals))
	for i, v := range vals {
		f32[i] = tensor.RoundTo(dt, float32(v))
		f64[i] = float64(f32[i])
	}
	p := pair{h.g.Alloc(dt, shape...), h.c.Alloc(tensor.Float64, shape...)}
	h.g.Upload(p.G, f32)
	h.c.Upload(p.C, f64)
	return p
}

// RandDT is a float operand of dt uniform in [lo, hi).
func (h *harness) RandDT(dt tensor.DType, lo, hi float64, shape ...int) pair {
	v := make([]float64, tensor.NumElems(shape...))
	for i := range v {
		v[i] = lo + (hi-lo)*h.rng.Float64()
	}
	return h.FloatsDT(dt, v, shape...)
}

// OutDT is a float output operand of dt on the GPU, NaN-poisoned, and a
// float64 zero on the CPU.
func (h *harness) OutDT(dt tensor.DType, shape ...int) pair {
	h.t.Helper()
	p := pair{h.g.Alloc(dt, shape...), h.c.Alloc(tensor.Float64, shape...)}
	h.g.Fill(p.G, math.NaN())
	return p
}

// RoundC rounds p's CPU side to dt in place: the reference of an output
// the GPU stores in dt (compare within a tolerance anyway: the GPU rounds
// its float32 result, the reference its float64 one).
func (h *harness) RoundC(dt tensor.DType, p pair) {
	c := cpu.Data[float64](p.C)
	for i, v := range c {
		c[i] = float64(tensor.RoundTo(dt, float32(v)))
	}
}

// halfDTypes are the half-precision dtypes every half test covers.
var halfDTypes = []tensor.DType{tensor.Float16, tensor.BFloat16}

// TestHalfMemory: Upload rounds like tensor.F16Bits/BF16Bits, Download
// widens exactly, Fill writes the rounded bits, and the device's Convert
// between float32, float16 and bfloat16 rounds as the host does, bit for
// bit (ties, subnormals, overflow to Inf, NaN).
func TestHalfMemory(t *testing.T) {
	h := newHarness(t)
	vals := []float32{0, 1, -2, 0.1, 65504, 65519, 65520, 1e6, -1e6, 1.0 / (1 << 24), 1.5 / (1 << 24), 3e-8,
		1 + 1.0/2048, 1 + 3.0/2048, 1 + 1.0/256, 1 + 3.0/256, 3.0e38, float32(math.Inf(-1))}
	for i := 0; i < 4000; i++ {
		vals = append(vals, float32(h.rng.NormFloat64()*math.Pow(10, float64(h.rng.IntN(12)-6))))
	}
	n := len(vals)
	src := h.g.Alloc(tensor.Float32, n)
	h.g.Upload(src, vals)
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		up := h.g.Alloc(dt, n)
		h.g.Upload(up, vals)
		conv := h.g.Alloc(dt, n)
		h.g.Convert(conv, src)
		back := h.g.Alloc(tensor.Float32, n)
		h.g.Convert(back, conv)
		a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
		if err := h.g.Download(a, up); err != nil {
			t.Fatal(err)
		}
		if err := h.g.Download(b, conv); err != nil {
			t.Fatal(err)
		}
		if err := h.g.Download(c, back); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			want := tensor.RoundTo(dt, v)
			if math.Float32bits(a[i]) != math.Float32bits(want) || math.Float32bits(b[i]) != math.Float32bits(want) || c[i] != want {
				t.Fatalf("%v %g: upload %g, device convert %g, back %g, host %g", dt, v, a[i], b[i], c[i], want)
			}
		}
		f64 := make([]float64, n)
		if err := h.g.Download(f64, conv); err != nil || f64[1] != 1 {
			t.Fatalf("%v into []float64: %v %v", dt, f64[1], err)
		}
		h.g.Fill(up, 0.1)
		if err := h.g.Download(a, up); err != nil || a[7] != tensor.RoundTo(dt, 0.1) {
			t.Fatalf("%v fill 0.1: %v %v", dt, a[7], err)
		}
		nan := h.g.Alloc(dt, 1)
		h.g.Fill(nan, math.NaN())
		if err := h.g.Download(a[:1], nan); err != nil || a[0] == a[0] {
			t.Fatalf("%v fill NaN: %v %v", dt, a[0], err)
		}
		for _, x := range []tensor.Tensor{up, conv, back, nan} {
			h.g.Free(x)
		}
	}
	h.g.Free(src)
}
