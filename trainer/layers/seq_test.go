package layers

import (
	"math"
	"testing"
)

func TestGradLayerNorm(t *testing.T) {
	c := newCtx(t, 31)
	b, n := 2+c.Rand.IntN(5), 2+c.Rand.IntN(9)
	in := input(c, b, 3*n) // [B, 3, n]: three rows a sample
	l, err := NewLayerNorm(c, in, n, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	c.Normal(l.Gamma.Value, 1)
	c.Normal(l.Beta.Value, 1)
	gradCheck(t, "LayerNorm", c, l, []*Blob{in}, Pass{Training: true})
}

// TestLayerNormForward checks one row by hand and HugeCTR's default γ 1, β 0.
func TestLayerNormForward(t *testing.T) {
	c := newCtx(t, 1)
	in := c.Blob(1, 4)
	c.BE.Upload(in.Value, []float64{1, 2, 3, 6})
	l, err := NewLayerNorm(c, in, 4, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	l.Forward(Pass{})
	// μ 3, σ² (4+1+0+9)/4 = 3.5.
	inv := 1 / math.Sqrt(3.5+1e-5)
	for i, x := range []float64{1, 2, 3, 6} {
		if got, want := f64(l.out.Value)[i], (x-3)*inv; math.Abs(got-want) > 1e-12 {
			t.Errorf("y[%d] = %v, want %v", i, got, want)
		}
	}
}

func TestGradMatrixMultiply(t *testing.T) {
	c := newCtx(t, 32)
	b, m, k, n := 2+c.Rand.IntN(4), 1+c.Rand.IntN(4), 1+c.Rand.IntN(5), 1+c.Rand.IntN(4)
	for _, form := range []struct {
		name         string
		arows, acols int
		brows, bcols int
		batch, mm    int
	}{
		{"3-D", b, m * k, b, k * n, b, m},
		{"4-D", b, 2 * m * k, b, 2 * k * n, 2 * b, m},
		{"2-D", b, k, k, n, 1, b},
	} {
		a, bb := input(c, form.arows, form.acols), input(c, form.brows, form.bcols)
		l, err := NewMatrixMultiply(c, a, bb, form.batch, form.mm, k, n)
		if err != nil {
			t.Fatal(form.name, err)
		}
		gradCheck(t, "MatrixMultiply "+form.name, c, l, []*Blob{a, bb}, Pass{})
	}
}

func TestMatrixMultiplyForward(t *testing.T) {
	c := newCtx(t, 1)
	a, b := c.Blob(2, 2), c.Blob(2, 2) // two samples: [1×2]·[2×1]
	c.BE.Upload(a.Value, []float64{1, 2, 3, 4})
	c.BE.Upload(b.Value, []float64{5, 6, 7, 8})
	l, err := NewMatrixMultiply(c, a, b, 2, 1, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.Forward(Pass{})
	if got := f64(l.out.Value); got[0] != 17 || got[1] != 53 {
		t.Errorf("out = %v, want [17 53]", got)
	}
}

// seqLengths uploads random lengths in [lo, max] as a [B, 1] blob.
func seqLengths(c *Ctx, b, lo, max int) *Blob {
	bl := &Blob{Value: c.alloc(b, 1)}
	v := make([]float64, b)
	for i := range v {
		v[i] = float64(lo + c.Rand.IntN(max-lo+1))
	}
	c.BE.Upload(bl.Value, v)
	return bl
}

func TestSequenceMaskForward(t *testing.T) {
	c := newCtx(t, 1)
	from, to := &Blob{Value: c.alloc(2, 1)}, &Blob{Value: c.alloc(2, 1)}
	c.BE.Upload(from.Value, []float64{1, 2})
	c.BE.Upload(to.Value, []float64{2, 0})
	l, err := NewSequenceMask(c, from, to, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	l.Forward(Pass{})
	want := []float64{1, 1, 0, 0, 0, 0 /* sample 1: lenTo 0 */, 0, 0, 0, 0, 0, 0}
	for i, v := range f64(l.out.Value) {
		if v != want[i] {
			t.Fatalf("mask = %v, want %v", f64(l.out.Value), want)
		}
	}
}

func TestGradMaskedSoftmax(t *testing.T) {
	c := newCtx(t, 33)
	b, h, m, n := 2+c.Rand.IntN(3), 1+c.Rand.IntN(3), 1+c.Rand.IntN(3), 2+c.Rand.IntN(4)
	in := input(c, b, h*m*n)
	sm, err := NewSequenceMask(c, seqLengths(c, b, 0, m), seqLengths(c, b, 0, n), m, n)
	if err != nil {
		t.Fatal(err)
	}
	sm.Forward(Pass{})
	l, err := NewMaskedSoftmax(c, in, sm.out, h, m, n, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	gradCheck(t, "MaskedSoftmax", c, l, []*Blob{in}, Pass{})
	// A masked position gets ≈0 probability; a fully unmasked row sums to 1.
	l.Forward(Pass{})
	y, mk := f64(l.out.Value), f64(sm.out.Value)
	for s := range b {
		for hh := range h {
			for i := range m {
				var sum float64
				for j := range n {
					v := y[((s*h+hh)*m+i)*n+j]
					sum += v
					if mk[(s*m+i)*n+j] == 0 && v > 1e-3 && hasOne(mk[(s*m+i)*n:][:n]) {
						t.Fatalf("masked position has probability %v", v)
					}
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Fatalf("row sums to %v", sum)
				}
			}
		}
	}
}

func hasOne(v []float64) bool {
	for _, x := range v {
		if x == 1 {
			return true
		}
	}
	return false
}

func TestGradMultiHeadAttention(t *testing.T) {
	for _, masked := range []bool{false, true} {
		c := newCtx(t, 34)
		b, heads, m, tt := 2+c.Rand.IntN(3), 1+c.Rand.IntN(3), 1+c.Rand.IntN(4), 1+c.Rand.IntN(4)
		d := heads * (1 + c.Rand.IntN(3))
		q, k, v := input(c, b, m*d), input(c, b, tt*d), input(c, b, tt*d)
		var mask *Blob
		if masked {
			// Rows with a kept key: a fully masked row is uniform over
			// scores shifted by −10000, where the central differences
			// lose the digits the gradient check needs.
			sm, err := NewSequenceMask(c, seqLengths(c, b, m, m), seqLengths(c, b, 1, tt), m, tt)
			if err != nil {
				t.Fatal(err)
			}
			sm.Forward(Pass{})
			mask = sm.out
		}
		l, err := NewMultiHeadAttention(c, q, k, v, mask, heads, m, tt, d)
		if err != nil {
			t.Fatal(err)
		}
		gradCheck(t, "MultiHeadAttention", c, l, []*Blob{q, k, v}, Pass{})
	}
}

// TestMultiHeadAttentionForward compares one head of one sample with the
// formula computed here.
func TestMultiHeadAttentionForward(t *testing.T) {
	c := newCtx(t, 35)
	const b, heads, m, tt, d = 2, 2, 3, 4, 6
	q, k, v := input(c, b, m*d), input(c, b, tt*d), input(c, b, tt*d)
	l, err := NewMultiHeadAttention(c, q, k, v, nil, heads, m, tt, d)
	if err != nil {
		t.Fatal(err)
	}
	l.Forward(Pass{})
	Q, K, V, O := f64(q.Value), f64(k.Value), f64(v.Value), f64(l.out.Value)
	dh := d / heads
	for s := range b {
		for h := range heads {
			for i := range m {
				var sc [tt]float64
				mx := math.Inf(-1)
				for j := range tt {
					for e := range dh {
						sc[j] += Q[(s*m+i)*d+h*dh+e] * K[(s*tt+j)*d+h*dh+e]
					}
					sc[j] /= math.Sqrt(float64(dh))
					mx = max(mx, sc[j])
				}
				var sum float64
				for j := range tt {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for e := range dh {
					var o float64
					for j := range tt {
						o += sc[j] / sum * V[(s*tt+j)*d+h*dh+e]
					}
					if got := O[(s*m+i)*d+h*dh+e]; math.Abs(got-o) > 1e-6 {
						t.Fatalf("out[%d,%d,%d] = %v, want %v", s, i, h*dh+e, got, o)
					}
				}
			}
		}
	}
}

func TestGradGRU(t *testing.T) {
	c := newCtx(t, 36)
	b, tt, e, h := 2+c.Rand.IntN(3), 1+c.Rand.IntN(4), 1+c.Rand.IntN(4), 1+c.Rand.IntN(4)
	in := input(c, b, tt*e)
	l, err := NewGRU(c, in, tt, e, h, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Params()[:3] { // HugeCTR starts at 0; check away from it
		c.Normal(p.Value, 0.7)
	}
	gradCheck(t, "GRU", c, l, []*Blob{in}, Pass{Training: true})
}

// TestGRUForward checks one step against cuDNN's GRU equations with gate
// order r, z, n and one input bias.
func TestGRUForward(t *testing.T) {
	c := newCtx(t, 37)
	const b, tt, e, h = 1, 2, 2, 1
	in := input(c, b, tt*e)
	l, err := NewGRU(c, in, tt, e, h, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Params() {
		if f := f64(p.Value); f[c.Rand.IntN(len(f))] != 0 {
			t.Fatalf("%s not zero-initialized (HugeCTR's GRULayer fills zeros)", p.Name)
		}
	}
	W, R, B := []float64{0.1, -0.2, 0.3, 0.4, -0.5, 0.6}, []float64{0.7, -0.8, 0.9}, []float64{0.01, 0.02, -0.03}
	c.BE.Upload(l.W.Value, W)
	c.BE.Upload(l.R.Value, R)
	c.BE.Upload(l.Bias.Value, B)
	l.Forward(Pass{})
	x := f64(in.Value)
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	hp := 0.0
	for s := range tt {
		x0, x1 := x[s*e], x[s*e+1]
		r := sig(W[0]*x0 + W[1]*x1 + B[0] + R[0]*hp)
		z := sig(W[2]*x0 + W[3]*x1 + B[1] + R[1]*hp)
		n := math.Tanh(W[4]*x0 + W[5]*x1 + B[2] + r*(R[2]*hp))
		hp = (1-z)*n + z*hp
		if got := f64(l.out.Value)[s]; math.Abs(got-hp) > 1e-12 {
			t.Fatalf("h[%d] = %v, want %v", s, got, hp)
		}
	}
}

func TestGradConcat3D(t *testing.T) {
	c := newCtx(t, 38)
	b, s := 2+c.Rand.IntN(4), 1+c.Rand.IntN(4)
	x, y, z := input(c, b, s*3), input(c, b, s*1), input(c, b, s*4)
	l, err := NewConcat3D(c, s, x, y, z)
	if err != nil {
		t.Fatal(err)
	}
	gradCheck(t, "Concat3D", c, l, []*Blob{x, y, z}, Pass{})
	l.Forward(Pass{})
	// Sample 0, slot s−1 is x's 3, y's 1, z's 4 values of that slot.
	o, r := f64(l.out.Value), s-1
	want := append(append(append([]float64(nil), f64(x.Value)[r*3:r*3+3]...), f64(y.Value)[r:r+1]...), f64(z.Value)[r*4:r*4+4]...)
	for i, w := range want {
		if o[r*8+i] != w {
			t.Fatalf("slot %d = %v, want %v", r, o[r*8:r*8+8], want)
		}
	}
}
