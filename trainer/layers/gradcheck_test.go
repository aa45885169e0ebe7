package layers

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

func newCtx(t testing.TB, seed uint64) *Ctx {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return NewCtx(be, tensor.Float64, seed)
}

func f64(t tensor.Tensor) []float64 { return cpu.Data[float64](t) }

// input makes a random input blob with a gradient.
func input(c *Ctx, rows, cols int) *Blob {
	b := c.Blob(rows, cols)
	c.Normal(b.Value, 1)
	return b
}

// gradCheck runs the layer forward, backpropagates a random projection R of
// its outputs (objective Σ R⊙out; a Loss's objective is the loss itself),
// and compares every input and parameter gradient with float64 central
// differences on up to 25 random elements per tensor.
func gradCheck(t *testing.T, name string, c *Ctx, l Layer, ins []*Blob, p Pass) {
	t.Helper()
	be := c.BE
	isLoss := l.Outputs()[0].Grad.IsZero() // a loss (or a chain ending in one)
	var rs [][]float64
	for _, o := range l.Outputs() {
		r := make([]float64, o.Value.Len())
		for i := range r {
			r[i] = c.Rand.NormFloat64()
		}
		rs = append(rs, r)
	}
	obj := func() float64 {
		l.Forward(p)
		var s float64
		for k, o := range l.Outputs() {
			for i, v := range f64(o.Value) {
				if isLoss {
					s += v
				} else {
					s += rs[k][i] * v
				}
			}
		}
		return s
	}
	obj()
	if !isLoss {
		for k, o := range l.Outputs() {
			be.Upload(o.Grad, rs[k])
		}
	}
	l.Backward(p)
	if r, ok := l.(*Loss); ok && r.Reg != nil {
		r.Reg.AddGrad()
	}
	if err := be.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	type target struct {
		what      string
		val, grad []float64
	}
	var ts []target
	for i, b := range ins {
		if !b.Grad.IsZero() {
			ts = append(ts, target{"input " + string(rune('0'+i)), f64(b.Value), append([]float64(nil), f64(b.Grad)...)})
		}
	}
	for _, pr := range l.Params() {
		ts = append(ts, target{pr.Name, f64(pr.Value), append([]float64(nil), f64(pr.Grad)...)})
	}
	if len(ts) == 0 {
		t.Fatalf("%s: nothing to check", name)
	}
	const h = 1e-5
	for _, tg := range ts {
		for n := 0; n < 25; n++ {
			i := c.Rand.IntN(len(tg.val))
			v := tg.val[i]
			tg.val[i] = v + h
			fp := obj()
			tg.val[i] = v - h
			fm := obj()
			tg.val[i] = v
			num := (fp - fm) / (2 * h)
			if d := math.Abs(num - tg.grad[i]); d > 1e-6+1e-5*math.Abs(num) {
				t.Errorf("%s: %s[%d]: analytic %.9g, numeric %.9g", name, tg.what, i, tg.grad[i], num)
				return
			}
		}
	}
}

func TestGradInnerProduct(t *testing.T) {
	for _, act := range []tensor.Activation{tensor.Identity, tensor.ReLU} {
		c := newCtx(t, 1)
		b, n, o := 2+c.Rand.IntN(9), 1+c.Rand.IntN(13), 1+c.Rand.IntN(11)
		in := input(c, b, n)
		l, err := NewInnerProduct(c, in, o, act)
		if err != nil {
			t.Fatal(err)
		}
		gradCheck(t, "InnerProduct", c, l, []*Blob{in}, Pass{Training: true})
	}
}

func TestGradActivations(t *testing.T) {
	for _, k := range []tensor.Activation{tensor.ReLU, tensor.Sigmoid, tensor.ELU} {
		c := newCtx(t, 2)
		in := input(c, 3+c.Rand.IntN(5), 1+c.Rand.IntN(9))
		l, _ := NewActivation(c, in, k, 0.7)
		gradCheck(t, "Activation", c, l, []*Blob{in}, Pass{})
	}
}

func TestGradShapeLayers(t *testing.T) {
	c := newCtx(t, 3)
	b := 2 + c.Rand.IntN(6)
	x, y, z := input(c, b, 3), input(c, b, 5), input(c, b, 2)
	cc, _ := NewConcat(c, x, y, z)
	gradCheck(t, "Concat", c, cc, []*Blob{x, y, z}, Pass{})

	in := input(c, b, 9)
	sl, err := NewSlice(c, in, [][2]int{{0, 4}, {2, 9}, {0, 9}})
	if err != nil {
		t.Fatal(err)
	}
	gradCheck(t, "Slice", c, sl, []*Blob{in}, Pass{})

	emb := input(c, b, 5*4) // [B, 5 slots, 4]
	rs, err := NewReshape(c, emb, 0, []int{3, 0, 4}, 4)
	if err != nil {
		t.Fatal(err)
	}
	gradCheck(t, "Reshape(selected)", c, rs, []*Blob{emb}, Pass{})
	rp, err := NewReshape(c, emb, 4, nil, 0)
	if err != nil || rp.Outputs()[0].Value.Rows() != b*5 {
		t.Fatal("plain reshape", err)
	}
	gradCheck(t, "Reshape", c, rp, []*Blob{emb}, Pass{})
}

func TestGradInteraction(t *testing.T) {
	c := newCtx(t, 4)
	b, d, n := 2+c.Rand.IntN(4), 1+c.Rand.IntN(6), 1+c.Rand.IntN(5)
	x0, emb := input(c, b, d), input(c, b, n*d)
	l, err := NewInteraction(c, x0, emb)
	if err != nil {
		t.Fatal(err)
	}
	if w := l.Outputs()[0].Value.Cols(); w != d+n*(n+1)/2+1 {
		t.Fatalf("width %d", w)
	}
	gradCheck(t, "Interaction", c, l, []*Blob{x0, emb}, Pass{})
}

func TestInteractionLayout(t *testing.T) {
	c := newCtx(t, 5)
	x0, emb := c.Blob(1, 2), c.Blob(1, 4) // d=2, n=2
	c.BE.Upload(x0.Value, []float64{1, 2})
	c.BE.Upload(emb.Value, []float64{3, 4, 5, 6})
	l, _ := NewInteraction(c, x0, emb)
	l.Forward(Pass{})
	// F = [(1,2),(3,4),(5,6)]: x0, then (0,1)=11, (0,2)=17, (1,2)=39, pad.
	want := []float64{1, 2, 11, 17, 39, 0}
	got := f64(l.Outputs()[0].Value)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("interaction %v, want %v", got, want)
		}
	}
	if w := 128 + 26*27/2 + 1; w != 480 {
		t.Fatal("DLRM width", w)
	}
}

// plainBackend hides the CPU backend's optional fused operations
// (tensor.CrossOps), so layers take their plain-operation paths.
type plainBackend struct{ tensor.Backend }

// sideBackend is the CPU backend with the reference fused InnerProduct
// kernels (tensor.FusedReference: side-stream GEMMs deferred until
// JoinGrads or a host read, so a layer that overwrote a side GEMM's operand
// before the join computes wrong values).
type sideBackend struct {
	*cpu.Backend
	*tensor.FusedReference
}

func (s sideBackend) Sync() error { return s.FusedReference.Sync() }
func (s sideBackend) Download(dst any, src tensor.Tensor) error {
	return s.FusedReference.Download(dst, src)
}

func sideCtx(t testing.TB, seed uint64) *Ctx {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return NewCtx(sideBackend{be, tensor.NewFusedReference(be)}, tensor.Float64, seed)
}

func plainCtx(t testing.TB, seed uint64) *Ctx {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return NewCtx(plainBackend{be}, tensor.Float64, seed)
}

// TestGradMultiCross: v1 and v2, one and three layers, on the fused
// cross operations (tensor.CrossOps, the CPU backend's) and on the plain
// ones.
func TestGradMultiCross(t *testing.T) {
	for _, fused := range []bool{true, false} {
		for _, num := range []int{1, 3} {
			for _, p := range []int{0, 3} {
				c := newCtx(t, 6)
				if !fused {
					c = plainCtx(t, 6)
				}
				in := input(c, 2+c.Rand.IntN(5), 2+c.Rand.IntN(6))
				l, err := NewMultiCross(c, in, num, p)
				if err != nil {
					t.Fatal(err)
				}
				if (l.cx != nil) != fused {
					t.Fatalf("fused %v: CrossOps %v", fused, l.cx != nil)
				}
				for _, pr := range l.Params() {
					c.Normal(pr.Value, 0.5) // non-zero biases too
				}
				gradCheck(t, fmt.Sprintf("MultiCross fused %v, %d layers, projection %d", fused, num, p), c, l, []*Blob{in}, Pass{})
			}
		}
	}
}

// TestMultiCrossFusedMatchesPlain: the fused and the plain paths compute
// the same output and gradients (float64, to rounding), with and without
// an input gradient, and the fused backward leaves the output gradient
// alone.
func TestMultiCrossFusedMatchesPlain(t *testing.T) {
	for _, num := range []int{1, 2, 3} {
		for _, p := range []int{0, 4} {
			for _, noGrad := range []bool{false, true} {
				run := func(c *Ctx) ([][]float64, *MultiCross) {
					in := input(c, 7, 12)
					if noGrad {
						in.Grad = tensor.Tensor{}
					}
					l, err := NewMultiCross(c, in, num, p)
					if err != nil {
						t.Fatal(err)
					}
					for _, pr := range l.Params() {
						c.Normal(pr.Value, 0.5)
					}
					l.Forward(Pass{})
					c.Normal(l.out.Grad, 1)
					og := append([]float64(nil), f64(l.out.Grad)...)
					l.Backward(Pass{})
					if f, ok := c.BE.(tensor.FusedDense); ok {
						f.JoinGrads() // as the model does before reading gradients
					}
					if err := c.BE.Err(); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(og, f64(l.out.Grad)) {
						t.Fatalf("%d layers, projection %d: the backward changed the output gradient", num, p)
					}
					vs := [][]float64{f64(l.out.Value)}
					if !noGrad {
						vs = append(vs, f64(in.Grad))
					}
					for _, pr := range l.Params() {
						vs = append(vs, f64(pr.Grad))
					}
					return vs, l
				}
				fv, fl := run(newCtx(t, 11))
				pv, pl := run(plainCtx(t, 11))
				sc := sideCtx(t, 11)
				sv, sl := run(sc)
				if fl.cx == nil || pl.cx != nil || sl.cx == nil || (sl.fd != nil) != (p > 0) {
					t.Fatal("paths not as intended")
				}
				if ref := sc.BE.(sideBackend).FusedReference; p > 0 && ref.Calls["GemmBgrad"] != 2*num {
					t.Fatalf("side-stream weight gradients: %v", ref.Calls)
				}
				for _, o := range []struct {
					name string
					v    [][]float64
				}{{"fused", fv}, {"side stream", sv}} {
					for k := range o.v {
						for i := range o.v[k] {
							if d := math.Abs(o.v[k][i] - pv[k][i]); d > 1e-12*(1+math.Abs(pv[k][i])) {
								t.Fatalf("%d layers, projection %d, no input grad %v: tensor %d [%d] %s %v plain %v",
									num, p, noGrad, k, i, o.name, o.v[k][i], pv[k][i])
							}
						}
					}
				}
			}
		}
	}
}

func TestMultiCrossV1Formula(t *testing.T) {
	c := newCtx(t, 7)
	in := c.Blob(1, 2)
	c.BE.Upload(in.Value, []float64{1, 2})
	l, _ := NewMultiCross(c, in, 1, 0)
	c.BE.Upload(l.W[0].Value, []float64{3, 4}) // x·w = 11
	c.BE.Upload(l.B[0].Value, []float64{0.5, -1})
	l.Forward(Pass{})
	// x0⊙11 + b + x = (11+0.5+1, 22−1+2)
	if got := f64(l.Outputs()[0].Value); got[0] != 12.5 || got[1] != 23 {
		t.Fatalf("DCN v1: %v", got)
	}
}

func TestGradDropoutBatchNorm(t *testing.T) {
	c := newCtx(t, 8)
	in := input(c, 6, 7)
	d, _ := NewDropout(c, in, 0.4)
	gradCheck(t, "Dropout", c, d, []*Blob{in}, Pass{Training: true, Iter: 5})
	in2 := input(c, 5+c.Rand.IntN(5), 1+c.Rand.IntN(6))
	bn, _ := NewBatchNorm(c, in2, tensor.BNParams{Factor: 0.1, Eps: 1e-5})
	c.Normal(bn.Gamma.Value, 1)
	c.Normal(bn.Beta.Value, 1)
	gradCheck(t, "BatchNorm", c, bn, []*Blob{in2}, Pass{Training: true})
}

func TestGradElementwise(t *testing.T) {
	for _, op := range []ElementwiseOp{Add, Sub, Multiply} {
		c := newCtx(t, 9)
		b := 2 + c.Rand.IntN(5)
		ins := []*Blob{input(c, b, 4), input(c, b, 4)}
		if op != Sub {
			ins = append(ins, input(c, b, 4))
		}
		l, err := NewElementwise(c, op, ins...)
		if err != nil {
			t.Fatal(err)
		}
		gradCheck(t, "Elementwise", c, l, ins, Pass{})
	}
}

func TestGradWeightMultiplyFmReduceScaleSoftmax(t *testing.T) {
	c := newCtx(t, 10)
	b := 2 + c.Rand.IntN(5)
	in := input(c, b, 3)
	wm, _ := NewWeightMultiply(c, in, 4)
	gradCheck(t, "WeightMultiply", c, wm, []*Blob{in}, Pass{})

	in = input(c, b, 5*3)
	fm, _ := NewFmOrder2(c, in, 3)
	gradCheck(t, "FmOrder2", c, fm, []*Blob{in}, Pass{})

	for _, axis := range []int{1, 2} {
		for _, mean := range []bool{false, true} {
			in = input(c, b, 4*3)
			rd, err := NewReduce(c, in, []int{b, 4, 3}, axis, mean)
			if err != nil {
				t.Fatal(err)
			}
			gradCheck(t, "Reduce", c, rd, []*Blob{in}, Pass{})
		}
	}
	for axis := 0; axis < 2; axis++ {
		in = input(c, b, 3)
		sc, _ := NewScale(c, in, axis, 3)
		gradCheck(t, "Scale", c, sc, []*Blob{in}, Pass{})
	}
	in = input(c, b, 6)
	sm, _ := NewSoftmax(c, in)
	gradCheck(t, "Softmax", c, sm, []*Blob{in}, Pass{})
}

func TestGradLosses(t *testing.T) {
	c := newCtx(t, 11)
	b := 3 + c.Rand.IntN(6)
	labels := func(cols int, classes int) *Blob {
		l := &Blob{Value: c.alloc(b, cols)}
		v := make([]float64, b*cols)
		for i := range v {
			v[i] = float64(c.Rand.IntN(classes))
		}
		c.BE.Upload(l.Value, v)
		return l
	}
	pred := input(c, b, 1)
	bce, _ := NewLoss(c, BinaryCrossEntropy, pred, labels(1, 2), nil)
	gradCheck(t, "BCE", c, bce, []*Blob{pred}, Pass{Training: true})

	pred = input(c, b, 3)
	mce, err := NewLoss(c, MultiCrossEntropy, pred, labels(3, 2), []float64{0.5, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	gradCheck(t, "MultiCrossEntropy", c, mce, []*Blob{pred}, Pass{Training: true})

	pred = input(c, b, 4)
	ce, _ := NewLoss(c, CrossEntropy, pred, labels(1, 4), nil)
	gradCheck(t, "CrossEntropy", c, ce, []*Blob{pred}, Pass{Training: true})

	// Regularized BCE: the gradient of the weights includes the penalty.
	for _, l1 := range []bool{false, true} {
		x := input(c, b, 5)
		fc, _ := NewInnerProduct(c, x, 1, tensor.Identity)
		loss, _ := NewLoss(c, BinaryCrossEntropy, fc.Outputs()[0], labels(1, 2), nil)
		loss.Reg = NewRegularizer(c, l1, 0.3, b, fc)
		gradCheck(t, "regularized FC+BCE", c, &chain{fc, loss}, []*Blob{x}, Pass{Training: true})
	}
}

// chain runs layers in order (forward) and reverse (backward), exposing the
// last one's outputs and all parameters: a two-layer network for the
// regularizer check.
type chain []Layer

func (ch *chain) Forward(p Pass) {
	for _, l := range *ch {
		l.Forward(p)
	}
}

func (ch *chain) Backward(p Pass) {
	for i := len(*ch) - 1; i >= 0; i-- {
		(*ch)[i].Backward(p)
		if r, ok := (*ch)[i].(*Loss); ok && r.Reg != nil {
			defer r.Reg.AddGrad()
		}
	}
}

func (ch *chain) Params() []Param {
	var ps []Param
	for _, l := range *ch {
		ps = append(ps, l.Params()...)
	}
	return ps
}

func (ch *chain) Outputs() []*Blob { return (*ch)[len(*ch)-1].Outputs() }

func TestBCEFormula(t *testing.T) {
	c := newCtx(t, 12)
	pred, lab := c.Blob(2, 1), &Blob{Value: c.alloc(2, 1)}
	c.BE.Upload(pred.Value, []float64{2, -3})
	c.BE.Upload(lab.Value, []float64{1, 0})
	l, _ := NewLoss(c, BinaryCrossEntropy, pred, lab, nil)
	l.Forward(Pass{Training: true})
	want := (math.Log1p(math.Exp(-2)) + math.Log1p(math.Exp(-3))) / 2
	if got := f64(l.Outputs()[0].Value)[0]; math.Abs(got-want) > 1e-15 {
		t.Fatalf("BCE %v, want %v", got, want)
	}
	g := f64(pred.Grad)
	if math.Abs(g[0]-(1/(1+math.Exp(-2))-1)/2) > 1e-15 {
		t.Fatalf("dL/dx %v", g)
	}
}

func TestGradSparseEmbedding(t *testing.T) {
	for _, kind := range []EmbeddingKind{DistributedHash, LocalizedHash, LocalizedOneHot} {
		for _, comb := range []tensor.Combiner{tensor.Sum, tensor.Mean} {
			c := newCtx(t, 13)
			const b, slots, vec = 5, 3, 4
			sizes := []int64{4, 6, 3}
			var keys []int64
			off := []int32{0}
			for i := 0; i < b*slots; i++ {
				for k := c.Rand.IntN(4); k > 0; k-- {
					keys = append(keys, c.Rand.Int64N(sizes[i%slots]))
				}
				off = append(off, int32(len(keys)))
			}
			in := &SparseInput{Keys: c.BE.Alloc(tensor.Int64, 64), Offsets: c.BE.Alloc(tensor.Int32, len(off)), NNZ: len(keys)}
			c.BE.Upload(in.Keys.Prefix(len(keys)), keys)
			c.BE.Upload(in.Offsets, off)
			cfg := EmbeddingConfig{Kind: kind, VecSize: vec, Slots: slots, Combiner: comb, WorkspaceMB: 0.001, StateCopies: 2, SlotSizes: sizes, MaxNNZ: 64}
			l, err := NewSparseEmbedding(c, cfg, in, b)
			if err != nil {
				t.Fatal(err)
			}
			p := Pass{Training: true}
			r := make([]float64, b*slots*vec)
			for i := range r {
				r[i] = c.Rand.NormFloat64()
			}
			obj := func() float64 {
				l.Forward(p)
				var s float64
				for i, v := range f64(l.Outputs()[0].Value) {
					s += r[i] * v
				}
				return s
			}
			obj()
			c.BE.Upload(l.Outputs()[0].Grad, r)
			l.Backward(p)
			if err := c.BE.Err(); err != nil {
				t.Fatal(err)
			}
			tab := f64(l.Table)
			nu := int(cpu.Data[int32](l.NumUniq)[0])
			for u := 0; u < nu; u++ {
				row := int(cpu.Data[int32](l.UniqRows)[u])
				for j := 0; j < vec; j++ {
					i := row*vec + j
					v := tab[i]
					tab[i] = v + 1e-5
					fp := obj()
					tab[i] = v - 1e-5
					fm := obj()
					tab[i] = v
					num := (fp - fm) / 2e-5
					if got := f64(l.UniqGrad)[u*vec+j]; math.Abs(got-num) > 1e-6+1e-5*math.Abs(num) {
						t.Fatalf("kind %d combiner %d row %d: analytic %v numeric %v", kind, comb, row, got, num)
					}
				}
			}
			if nu == 0 {
				t.Fatal("no rows touched")
			}
		}
	}
}

func TestEmbeddingTableFull(t *testing.T) {
	c := newCtx(t, 14)
	// 1 KiB / (3·4·4 B) = 21 rows.
	cfg := EmbeddingConfig{Kind: DistributedHash, VecSize: 4, Slots: 1, WorkspaceMB: 1.0 / 1024, StateCopies: 2, MaxNNZ: 64}
	if cfg.MaxRows() != 21 {
		t.Fatalf("max rows %d", cfg.MaxRows())
	}
	in := &SparseInput{Keys: c.BE.Alloc(tensor.Int64, 64), Offsets: c.BE.Alloc(tensor.Int32, 2)}
	l, err := NewSparseEmbedding(c, cfg, in, 1)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]int64, 30)
	for i := range keys {
		keys[i] = int64(i * 1000)
	}
	in.NNZ = 30
	c.BE.Upload(in.Keys.Prefix(30), keys)
	c.BE.Upload(in.Offsets, []int32{0, 30})
	l.Forward(Pass{Training: true})
	if err := c.BE.Err(); err == nil || !errorsIs(err, tensor.ErrTableFull) {
		t.Fatalf("want ErrTableFull, got %v", err)
	}
}
