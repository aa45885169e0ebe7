package layers

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestGradDice checks HugeCTR's PReLU_Dice backward by finite differences
// of exactly what it computes: dx[i] = dy[i]·∂y[i]/∂x[i], the diagonal of
// the Jacobian with the batch statistics moving with x[i]
// (docs/LAYERS.md: HugeCTR drops the other rows' terms).
func TestGradDice(t *testing.T) {
	for _, alpha := range []float64{0.2, 0, 1.5} {
		c := newCtx(t, 11)
		b, n := 2+c.Rand.IntN(9), 1+c.Rand.IntN(7)
		in := input(c, b, n)
		l, err := NewDice(c, in, alpha, 1e-8)
		if err != nil {
			t.Fatal(err)
		}
		l.Forward(Pass{Training: true})
		dy := make([]float64, b*n)
		for i := range dy {
			dy[i] = c.Rand.NormFloat64()
		}
		c.BE.Upload(l.out.Grad, dy)
		l.Backward(Pass{Training: true})
		dx := append([]float64(nil), f64(in.Grad)...)
		x := f64(in.Value)
		const h = 1e-6
		for i := range x {
			v := x[i]
			x[i] = v + h
			l.Forward(Pass{})
			fp := f64(l.out.Value)[i]
			x[i] = v - h
			l.Forward(Pass{})
			fm := f64(l.out.Value)[i]
			x[i] = v
			num := dy[i] * (fp - fm) / (2 * h)
			if d := math.Abs(num - dx[i]); d > 1e-6+1e-5*math.Abs(num) {
				t.Fatalf("alpha %v, [%d]: analytic %.9g, numeric %.9g", alpha, i, dx[i], num)
			}
		}
	}
}

// TestDiceForward: y against the formula with batch statistics, the same
// in evaluation as in training (HugeCTR keeps no running statistics).
func TestDiceForward(t *testing.T) {
	c := newCtx(t, 12)
	x := []float64{1, -2, 3, 0.5, 5, 4, -1, 2}
	in := c.Blob(4, 2)
	c.BE.Upload(in.Value, x)
	l, err := NewDice(c, in, 0.25, 1e-8)
	if err != nil {
		t.Fatal(err)
	}
	for _, train := range []bool{true, false} {
		l.Forward(Pass{Training: train})
		y := f64(l.out.Value)
		for col := 0; col < 2; col++ {
			var e, e2 float64
			for r := 0; r < 4; r++ {
				e += x[r*2+col] / 4
				e2 += x[r*2+col] * x[r*2+col] / 4
			}
			v := e2 - e*e
			for r := 0; r < 4; r++ {
				s := x[r*2+col]
				p := 1 / (1 + math.Exp((e-s)/math.Sqrt(v+1e-8)))
				want := p*s + (1-p)*0.25*s
				if math.Abs(y[r*2+col]-want) > 1e-12 {
					t.Fatalf("training %v: y[%d,%d] = %v, want %v", train, r, col, y[r*2+col], want)
				}
			}
		}
	}
	if _, err := NewDice(c, in, 0.2, -1); err == nil {
		t.Error("eps −1 accepted")
	}
}

// TestCast: the fp16→fp32 form is exact and shares storage; the fp32→fp16
// form rounds to binary16 values; the gradient passes through both.
func TestCast(t *testing.T) {
	c := newCtx(t, 13)
	in := input(c, 3, 4)
	l, err := NewCast(c, in, false)
	if err != nil {
		t.Fatal(err)
	}
	gradCheck(t, "Cast", c, l, []*Blob{in}, Pass{})

	x := []float64{1 + 1.0/4096, 1 + 3.0/4096, 65504, 65520, 1e-8, -0.1, 3.14159, 2.9802322387695312e-08}
	want := []float64{1, 1 + 4.0/4096, 65504, math.Inf(1), 0, -0.0999755859375, 3.140625, 0}
	in = c.Blob(2, 4)
	c.BE.Upload(in.Value, x)
	h, err := NewCast(c, in, true)
	if err != nil {
		t.Fatal(err)
	}
	h.Forward(Pass{})
	for i, v := range f64(h.Outputs()[0].Value) {
		if v != want[i] {
			t.Errorf("half cast of %v = %v, want %v", x[i], v, want[i])
		}
	}
	g := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	c.BE.Upload(h.Outputs()[0].Grad, g)
	h.Backward(Pass{})
	for i, v := range f64(in.Grad) {
		if v != g[i] {
			t.Fatalf("gradient [%d] = %v, want %v (passes through)", i, v, g[i])
		}
	}
}

// TestRoundHalfAllHalves: every finite binary16 value rounds to itself and
// every midpoint between neighbours rounds to the even one.
func TestRoundHalfAllHalves(t *testing.T) {
	half := func(h uint16) float64 {
		e, m := int(h>>10&0x1f), float64(h&0x3ff)
		v := math.Ldexp(m, -24)
		if e > 0 {
			v = math.Ldexp(1024+m, e-25)
		}
		if h&0x8000 != 0 {
			v = -v
		}
		return v
	}
	for h := uint16(0); h < 0x7c00; h++ {
		v := half(h)
		if got := tensor.RoundHalf32(float32(v)); float64(got) != v {
			t.Fatalf("%#x (%v) rounds to %v", h, v, got)
		}
		if h+1 < 0x7c00 {
			mid, hi := (v+half(h+1))/2, half(h+1)
			want := v
			if h&1 == 1 {
				want = hi
			}
			if got := tensor.RoundHalf32(float32(mid)); float64(got) != want {
				t.Fatalf("midpoint %v of %#x: %v, want %v", mid, h, got, want)
			}
		}
	}
	if got := tensor.RoundHalf32(-65520); !math.IsInf(float64(got), -1) {
		t.Errorf("−65520 → %v, want −Inf", got)
	}
	if got := tensor.RoundHalf32(float32(math.NaN())); !math.IsNaN(float64(got)) {
		t.Errorf("NaN → %v", got)
	}
}

// TestFusedReshapeConcat: DIN's layout (slot S−1 → the item output, slots
// 0…S−2 → history rows b·(S−1)+s), the General layout, and both gradients.
func TestFusedReshapeConcat(t *testing.T) {
	c := newCtx(t, 14)
	const B, S = 3, 4
	a, b := input(c, B, S*2), input(c, B, S*3)
	l, err := NewFusedReshapeConcat(c, []*Blob{a, b}, S)
	if err != nil {
		t.Fatal(err)
	}
	l.Forward(Pass{})
	av, bv := f64(a.Value), f64(b.Value)
	hist, item := f64(l.Outputs()[0].Value), f64(l.Outputs()[1].Value)
	if l.Outputs()[0].Value.Rows() != B*(S-1) || l.Outputs()[1].Value.Rows() != B {
		t.Fatalf("outputs %v, %v", l.Outputs()[0].Value, l.Outputs()[1].Value)
	}
	for s := 0; s < B; s++ {
		for k := 0; k < S; k++ {
			row := item[s*5 : s*5+5]
			if k < S-1 {
				r := s*(S-1) + k
				row = hist[r*5 : r*5+5]
			}
			want := append(append([]float64(nil), av[s*S*2+k*2:s*S*2+k*2+2]...), bv[s*S*3+k*3:s*S*3+k*3+3]...)
			for j := range want {
				if row[j] != want[j] {
					t.Fatalf("sample %d slot %d: %v, want %v", s, k, row, want)
				}
			}
		}
	}
	gradCheck(t, "FusedReshapeConcat", c, l, []*Blob{a, b}, Pass{})

	g, err := NewFusedReshapeConcatGeneral(c, []*Blob{a, b}, S)
	if err != nil {
		t.Fatal(err)
	}
	g.Forward(Pass{})
	out := f64(g.Outputs()[0].Value)
	for r := 0; r < B*S; r++ {
		s, k := r/S, r%S
		want := append(append([]float64(nil), av[s*S*2+k*2:s*S*2+k*2+2]...), bv[s*S*3+k*3:s*S*3+k*3+3]...)
		for j := range want {
			if out[r*5+j] != want[j] {
				t.Fatalf("General row %d: %v, want %v", r, out[r*5:r*5+5], want)
			}
		}
	}
	gradCheck(t, "FusedReshapeConcatGeneral", c, g, []*Blob{a, b}, Pass{})
	if _, err := NewFusedReshapeConcat(c, []*Blob{a}, 1); err == nil {
		t.Error("one slot accepted")
	}
	if _, err := NewFusedReshapeConcat(c, []*Blob{a, input(c, B, 7)}, S); err == nil {
		t.Error("an input of 7 columns in 4 slots accepted")
	}
}

// TestGradMLP: every weight, used bias and the input against finite
// differences; an unused bias changes nothing and gets a zero gradient.
func TestGradMLP(t *testing.T) {
	c := newCtx(t, 15)
	in := input(c, 5, 6)
	l, err := NewMLP(c, in, []int{7, 4, 3}, []bool{true, false, true},
		[]tensor.Activation{tensor.ReLU, tensor.ReLU, tensor.Identity}, InitXavierUniform, InitUniform)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Params()) != 6 {
		t.Fatalf("%d params, want 6 (a bias per layer, used or not)", len(l.Params()))
	}
	gradCheck(t, "MLP", c, l, []*Blob{in}, Pass{Training: true})
	for _, v := range f64(l.B[1].Grad) {
		if v != 0 {
			t.Fatalf("unused bias gradient %v", v)
		}
	}
	l.Forward(Pass{})
	y0 := append([]float64(nil), f64(l.Outputs()[0].Value)...)
	c.BE.Fill(l.B[1].Value, 100)
	l.Forward(Pass{})
	for i, v := range f64(l.Outputs()[0].Value) {
		if v != y0[i] {
			t.Fatal("the unused bias changed the output")
		}
	}
	if _, err := NewMLP(c, in, []int{3}, []bool{true, true}, []tensor.Activation{tensor.ReLU}); err == nil {
		t.Error("2 biases for 1 layer accepted")
	}
}

// TestMLPFiller: HugeCTR's MLP initializers (the sub-layer's parity picks
// the Xavier fan mode).
func TestMLPFiller(t *testing.T) {
	f, _ := MLPFiller(InitDefault, 1, 16, 8)
	if f.Kind != FillUniform || f.B != 0.25 {
		t.Errorf("Default bias: %v, want uniform ±0.25", f)
	}
	even, _ := MLPFiller(InitXavierNorm, 0, 16, 8)
	odd, _ := MLPFiller(InitXavierNorm, 2, 16, 8)
	if even != VarianceScaling(FanAvg, false, 16, 8, true) || odd != VarianceScaling(FanOut, false, 16, 8, true) {
		t.Errorf("XavierNorm: %v, %v", even, odd)
	}
	z, _ := MLPFiller(InitZero, 3, 1, 1)
	if z.Kind != FillConstant || z.A != 0 {
		t.Errorf("Zero: %v", z)
	}
}
