package layers

import (
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// TestConvert: the conversion layer's output takes the Ctx's activation
// dtype, forward converts the value and backward the gradient back; an
// input without a gradient gives an output without one. Ctx.Act chooses
// the blobs' dtype, parameters stay in DT, and RefreshHalf rewrites only the
// params with an operand copy (the CPU stores no half tensors, so float64
// stands in for the activation dtype here).
func TestConvert(t *testing.T) {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCtx(be, tensor.Float32, 1)
	if c.ActDT() != tensor.Float32 || c.Half() {
		t.Fatalf("zero Act: %v", c.ActDT())
	}
	in := c.Blob(2, 3)
	be.Upload(in.Value, []float32{1, 2, 3, 4, 5, 6})
	c.Act = tensor.Float64
	l, err := NewConvert(c, in)
	if err != nil {
		t.Fatal(err)
	}
	out := l.Outputs()[0]
	if out.Value.DType != tensor.Float64 || out.Grad.DType != tensor.Float64 || l.DType() != tensor.Float64 || l.Input() != in {
		t.Fatalf("output %v / %v", out.Value, out.Grad)
	}
	if b := c.Blob(4); b.Value.DType != tensor.Float64 {
		t.Errorf("Ctx.Act Float64: blob %v", b.Value)
	}
	if w := c.weight("w", true, 2, 2); w.Value.DType != tensor.Float32 || !w.Half.IsZero() || w.Operand().Buf != w.Value.Buf {
		t.Errorf("weight outside a half region: %+v", w)
	}
	l.Forward(Pass{})
	got := make([]float64, 6)
	if err := be.Download(got, out.Value); err != nil || !slices.Equal(got, []float64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("forward %v (%v)", got, err)
	}
	be.Upload(out.Grad, []float64{-1, -2, -3, -4, -5, -6})
	l.Backward(Pass{})
	g := make([]float32, 6)
	if err := be.Download(g, in.Grad); err != nil || !slices.Equal(g, []float32{-1, -2, -3, -4, -5, -6}) {
		t.Errorf("backward %v (%v)", g, err)
	}
	nograd, err := NewConvert(c, &Blob{Value: in.Value})
	if err != nil || !nograd.Outputs()[0].Grad.IsZero() {
		t.Errorf("input without a gradient: %v, %v", nograd.Outputs()[0].Grad, err)
	}
	nograd.Backward(Pass{}) // nothing to write
	if _, err := NewConvert(c, &Blob{}); err == nil {
		t.Error("a missing input converted")
	}

	// RefreshHalf: only the params with a copy, from their masters.
	p := Param{Name: "w", Value: be.Alloc(tensor.Float32, 3), Half: be.Alloc(tensor.Float64, 3)}
	q := Param{Name: "b", Value: be.Alloc(tensor.Float32, 3)}
	be.Upload(p.Value, []float32{0.5, 1.5, -2})
	if n := RefreshHalf(be, []Param{p, q}); n != 1 {
		t.Errorf("RefreshHalf rewrote %d copies", n)
	}
	h := make([]float64, 3)
	if err := be.Download(h, p.Operand()); err != nil || !slices.Equal(h, []float64{0.5, 1.5, -2}) {
		t.Errorf("copy %v (%v)", h, err)
	}
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
}
