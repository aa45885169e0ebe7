package layers

import (
	"math"
	"testing"
)

// TestMultiCrossEntropyMask: HugeCTR's MultiCrossEntropy_Kernel (loss.cu)
// gives an entry whose label is below −0.5 loss 0 and gradient 0, and still
// divides by B·T (the mask is not in the denominator). BinaryCrossEntropy
// has no mask: a −1 label there is taken literally.
func TestMultiCrossEntropyMask(t *testing.T) {
	c := newCtx(t, 3)
	const b, cols = 4, 3
	x := []float64{0.3, -1.2, 2.0, -0.7, 0.1, 1.5, 0.9, -2.2, 0.4, 0.0, 1.1, -0.3}
	y := []float64{1, -1, 0, 0, 1, -1, -1, -1, -1, 1, 0, -0.6}
	w := []float64{0.5, 1, 2}
	pred := c.Blob(b, cols)
	c.BE.Upload(pred.Value, x)
	lab := &Blob{Value: c.alloc(b, cols)}
	c.BE.Upload(lab.Value, y)
	l, err := NewLoss(c, MultiCrossEntropy, pred, lab, w)
	if err != nil {
		t.Fatal(err)
	}
	l.Forward(Pass{Training: true})
	var want float64
	for i, xv := range x {
		if y[i] < -0.5 {
			continue
		}
		want += w[i%cols] * (math.Log1p(math.Exp(-math.Abs(xv))) + math.Max(xv, 0) - xv*y[i])
	}
	want /= b * cols
	if got := f64(l.Outputs()[0].Value)[0]; math.Abs(got-want) > 1e-12 {
		t.Errorf("loss %v, want %v (masked entries add 0, still count in B·T)", got, want)
	}
	g := f64(pred.Grad)
	for i, xv := range x {
		wg := 0.0
		if y[i] >= -0.5 {
			wg = w[i%cols] * (1/(1+math.Exp(-xv)) - y[i]) / (b * cols)
		}
		if math.Abs(g[i]-wg) > 1e-12 {
			t.Errorf("dx[%d] (label %v) = %v, want %v", i, y[i], g[i], wg)
		}
	}

	// BinaryCrossEntropy takes a −1 label literally.
	p1 := c.Blob(1, 1)
	c.BE.Upload(p1.Value, []float64{0.5})
	l1 := &Blob{Value: c.alloc(1, 1)}
	c.BE.Upload(l1.Value, []float64{-1})
	bl, err := NewLoss(c, BinaryCrossEntropy, p1, l1, nil)
	if err != nil {
		t.Fatal(err)
	}
	bl.Forward(Pass{Training: true})
	if want := math.Log1p(math.Exp(-0.5)) + 0.5 + 0.5; math.Abs(f64(bl.Outputs()[0].Value)[0]-want) > 1e-12 {
		t.Errorf("BCE with label −1: loss %v, want %v", f64(bl.Outputs()[0].Value)[0], want)
	}
}
