package layers

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestInnerProductPadsK: a half InnerProduct on an input 13 wide with no
// input gradient (the bottom MLP's first layer) runs its GEMMs on the
// input padded to 16 columns and a weight copy padded to 16 rows; y, dW
// and db equal the unpadded formulas, W.Grad keeps the master's shape, and
// the padded rows of the weight copy stay zero after RefreshHalf. With
// fused kernels (the reference) and without.
func TestInnerProductPadsK(t *testing.T) {
	const B, n, out = 5, 13, 8
	for _, fused := range []bool{false, true} {
		be := newBiasSpy(t, fused)
		c := NewCtx(be, tensor.Float32, 3)
		c.Act = tensor.BFloat16
		rng := rand.New(rand.NewPCG(1, 2))
		xs := make([]float32, B*n)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		in := &Blob{Value: be.Alloc(tensor.BFloat16, B, n)} // no gradient: the dense input
		be.Upload(in.Value, xs)
		l, err := NewInnerProduct(c, in, out, tensor.ReLU)
		if err != nil {
			t.Fatal(err)
		}
		if l.xp.IsZero() || l.W.Half.Rows() != 16 || l.W.Grad.Rows() != n {
			t.Fatalf("fused=%v: padding %v, W.Half %v, W.Grad %v", fused, l.xp, l.W.Half, l.W.Grad)
		}
		RefreshHalf(be, l.Params())
		var w, b, wh []float32
		w, b, wh = make([]float32, n*out), make([]float32, out), make([]float32, 16*out)
		be.Download(w, l.W.Value)
		be.Download(b, l.B.Value)
		be.Download(wh, l.W.Half)
		for i := n * out; i < len(wh); i++ {
			if wh[i] != 0 {
				t.Fatalf("fused=%v: padded weight row element %d = %v", fused, i, wh[i])
			}
		}
		l.Forward(Pass{Training: true})
		dy := make([]float32, B*out)
		for i := range dy {
			dy[i] = float32(rng.NormFloat64())
		}
		be.Upload(l.out.Grad, dy)
		l.Backward(Pass{Training: true})
		y, dw, db := make([]float32, B*out), make([]float32, n*out), make([]float32, out)
		be.Download(y, l.out.Value)
		be.Download(dw, l.W.Grad)
		be.Download(db, l.B.Grad)
		wantDW, wantDB := make([]float64, n*out), make([]float64, out)
		for s := 0; s < B; s++ {
			for j := 0; j < out; j++ {
				z := float64(b[j])
				for k := 0; k < n; k++ {
					z += float64(xs[s*n+k]) * float64(w[k*out+j])
				}
				g := float64(dy[s*out+j])
				if z <= 0 {
					z, g = 0, 0
				}
				if math.Abs(float64(y[s*out+j])-z) > 1e-5 {
					t.Fatalf("fused=%v: y[%d,%d] = %v, want %v", fused, s, j, y[s*out+j], z)
				}
				wantDB[j] += g
				for k := 0; k < n; k++ {
					wantDW[k*out+j] += float64(xs[s*n+k]) * g
				}
			}
		}
		for i := range wantDW {
			if math.Abs(float64(dw[i])-wantDW[i]) > 1e-5 {
				t.Fatalf("fused=%v: dW[%d] = %v, want %v", fused, i, dw[i], wantDW[i])
			}
		}
		for j := range wantDB {
			if math.Abs(float64(db[j])-wantDB[j]) > 1e-5 {
				t.Fatalf("fused=%v: db[%d] = %v, want %v", fused, j, db[j], wantDB[j])
			}
		}
	}
	// Not padded: float32 layers, widths already a multiple of 8, and a
	// layer that computes its input gradient.
	be := newBiasSpy(t, false)
	c := NewCtx(be, tensor.Float32, 3)
	if l, _ := NewInnerProduct(c, &Blob{Value: be.Alloc(tensor.Float32, 4, 13)}, 8, tensor.ReLU); !l.xp.IsZero() {
		t.Error("a float32 layer is padded")
	}
	c.Act = tensor.BFloat16
	if l, _ := NewInnerProduct(c, &Blob{Value: be.Alloc(tensor.BFloat16, 4, 16)}, 8, tensor.ReLU); !l.xp.IsZero() {
		t.Error("a 16-wide input is padded")
	}
	if l, _ := NewInnerProduct(c, c.Blob(4, 13), 8, tensor.ReLU); !l.xp.IsZero() {
		t.Error("a layer with an input gradient is padded")
	}
}
