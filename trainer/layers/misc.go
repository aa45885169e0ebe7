package layers

import (
	"fmt"
	"math"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// HugeCTR's PReLU_Dice, Cast, FusedReshapeConcat, FusedReshapeConcatGeneral
// and MLP layers, and the plumbing tops of its fused MLPerf forms
// (docs/LAYERS.md, "Cast, PReLU_Dice, …").

func miscOps(layer string, be tensor.Backend) (tensor.MiscOps, error) {
	ops, ok := be.(tensor.MiscOps)
	if !ok {
		return nil, fmt.Errorf("%s: backend %s has no %s operations", layer, be.Name(), layer)
	}
	return ops, nil
}

// Dice is HugeCTR's PReLU_Dice: per column the batch mean E and variance V
// (biased, over the rows of this batch, in training and in evaluation
// alike: HugeCTR keeps no running statistics), p = σ((x−E)/√(V+Eps)) and
// y = p·x + (1−p)·Alpha·x. Alpha is a fixed hyper-parameter, not trained.
// Backward is HugeCTR's: the diagonal of the Jacobian only
// (tensor.MiscOps.DiceGrad).
type Dice struct {
	c            *Ctx
	ops          tensor.MiscOps
	in, out      *Blob
	Alpha, Eps   float64
	mean, varnce tensor.Tensor
}

// NewDice builds a PReLU_Dice over a [B, D] input.
func NewDice(c *Ctx, in *Blob, alpha, eps float64) (*Dice, error) {
	if err := needBatch("PReLU_Dice", in); err != nil {
		return nil, err
	}
	ops, err := miscOps("PReLU_Dice", c.BE)
	if err != nil {
		return nil, err
	}
	if !(eps >= 0) || math.IsInf(alpha, 0) || math.IsNaN(alpha) {
		return nil, fmt.Errorf("PReLU_Dice: alpha %v, eps %v: want finite alpha and eps ≥ 0", alpha, eps)
	}
	n := in.Value.Cols()
	return &Dice{c: c, ops: ops, in: in, out: c.Blob(in.Value.Shape...), Alpha: alpha, Eps: eps,
		mean: c.alloc(n), varnce: c.alloc(n)}, nil
}

// Forward computes the batch statistics and y.
func (l *Dice) Forward(Pass) {
	l.ops.Dice(l.out.Value, l.in.Value, l.mean, l.varnce, l.Alpha, l.Eps)
}

// Backward computes dx from the last Forward's statistics.
func (l *Dice) Backward(Pass) {
	if !l.in.Grad.IsZero() {
		l.ops.DiceGrad(l.in.Grad, l.out.Grad, l.in.Value, l.mean, l.varnce, l.Alpha, l.Eps)
	}
}

// Params returns nothing (alpha is not trained).
func (l *Dice) Params() []Param { return nil }

// Outputs returns y.
func (l *Dice) Outputs() []*Blob { return []*Blob{l.out} }

// Cast is HugeCTR's Cast. In a mixed-precision model (Half) it is
// CastLayer<float, __half>: the output holds the input rounded to binary16
// values (ctrkit keeps them in float32 storage); otherwise it is
// CastLayer<__half, float>, exact, so the output shares the input's
// storage. The gradient passes through unchanged (HugeCTR's bprop is
// empty: its Cast only ever follows the data reader, which takes none).
type Cast struct {
	c       *Ctx
	ops     tensor.MiscOps
	in, out *Blob
	Half    bool
}

// NewCast builds a Cast.
func NewCast(c *Ctx, in *Blob, half bool) (*Cast, error) {
	if err := needBatch("Cast", in); err != nil {
		return nil, err
	}
	l := &Cast{c: c, in: in, Half: half}
	if !half {
		l.out = &Blob{Value: in.Value, Grad: in.Grad}
		return l, nil
	}
	ops, err := miscOps("Cast", c.BE)
	if err != nil {
		return nil, err
	}
	l.ops = ops
	// The gradient passes through: the output's gradient is the input's.
	l.out = &Blob{Value: c.alloc(in.Value.Shape...), Grad: in.Grad}
	return l, nil
}

// Forward rounds (Half) or does nothing (the output is the input).
func (l *Cast) Forward(Pass) {
	if l.Half {
		l.ops.RoundHalf(l.out.Value, l.in.Value)
	}
}

// Backward does nothing: the output's gradient is the input's storage.
func (l *Cast) Backward(Pass) {}

// Params returns nothing.
func (l *Cast) Params() []Param { return nil }

// Outputs returns the cast blob.
func (l *Cast) Outputs() []*Blob { return []*Blob{l.out} }

// FusedReshapeConcat is HugeCTR's FusedReshapeConcat (DIN): inputs k of
// [B, S, V_k] (stored [B, S·V_k]) are concatenated per slot into rows of W
// = Σ V_k; slot S−1 of sample b becomes row b of the second output [B, W]
// (the target item), slots 0…S−2 rows b·(S−1)+s of the first [B·(S−1), W]
// (the history).
type FusedReshapeConcat struct {
	c        *Ctx
	ins      []*Blob
	hist, ad *Blob
	slots    int
	general  bool
	out      *Blob // General
}

func newFRC(c *Ctx, name string, ins []*Blob, slots int) (w int, err error) {
	if len(ins) == 0 {
		return 0, shapeErr(name, "no inputs")
	}
	if err := needBatch(name, ins...); err != nil {
		return 0, err
	}
	if slots <= 0 {
		return 0, shapeErr(name, "%d slots", slots)
	}
	for i, b := range ins {
		if b.Value.Cols()%slots != 0 {
			return 0, shapeErr(name, "input %d %v does not hold %d slots", i, b.Value, slots)
		}
		w += b.Value.Cols() / slots
	}
	return w, nil
}

// NewFusedReshapeConcat builds a FusedReshapeConcat over inputs of slots
// slots each (slots ≥ 2).
func NewFusedReshapeConcat(c *Ctx, ins []*Blob, slots int) (*FusedReshapeConcat, error) {
	w, err := newFRC(c, "FusedReshapeConcat", ins, slots)
	if err != nil {
		return nil, err
	}
	if slots < 2 {
		return nil, shapeErr("FusedReshapeConcat", "%d slots: needs at least 2", slots)
	}
	b := ins[0].Value.Rows()
	return &FusedReshapeConcat{c: c, ins: ins, slots: slots,
		hist: c.Blob(b*(slots-1), w), ad: c.Blob(b, w)}, nil
}

// NewFusedReshapeConcatGeneral builds HugeCTR's FusedReshapeConcatGeneral:
// inputs k of [B, S, V_k] → one output [B·S, W], row b·S+s the
// concatenation of slot s of every input.
func NewFusedReshapeConcatGeneral(c *Ctx, ins []*Blob, slots int) (*FusedReshapeConcat, error) {
	w, err := newFRC(c, "FusedReshapeConcatGeneral", ins, slots)
	if err != nil {
		return nil, err
	}
	return &FusedReshapeConcat{c: c, ins: ins, slots: slots, general: true,
		out: c.Blob(ins[0].Value.Rows()*slots, w)}, nil
}

// copy moves every element between the inputs (Value or Grad) and the
// outputs, forward (inputs → outputs) or back.
func (l *FusedReshapeConcat) copy(grad bool) {
	be := l.c.BE
	pick := func(b *Blob) tensor.Tensor {
		if grad {
			return b.Grad
		}
		return b.Value
	}
	s := l.slots
	off := 0
	for _, in := range l.ins {
		x := pick(in)
		v := in.Value.Cols() / s
		if grad && x.IsZero() {
			off += v
			continue
		}
		if l.general {
			o := pick(l.out)
			xs := x.Reshape(x.Rows()*s, v)
			if grad {
				be.CopyCols(xs, 0, o, off, v, 0)
			} else {
				be.CopyCols(o, off, xs, 0, v, 0)
			}
			off += v
			continue
		}
		h, a := pick(l.hist), pick(l.ad)
		w := a.Cols()
		hs := h.Reshape(a.Rows(), (s-1)*w) // row b: its S−1 history rows
		for k := 0; k < s; k++ {
			dst, dc := hs, k*w+off
			if k == s-1 {
				dst, dc = a, off
			}
			if grad {
				be.CopyCols(x, k*v, dst, dc, v, 0)
			} else {
				be.CopyCols(dst, dc, x, k*v, v, 0)
			}
		}
		off += v
	}
}

// Forward scatters the slots into the outputs.
func (l *FusedReshapeConcat) Forward(Pass) { l.copy(false) }

// Backward gathers the outputs' gradients back (each input element has
// exactly one output element).
func (l *FusedReshapeConcat) Backward(Pass) { l.copy(true) }

// Params returns nothing.
func (l *FusedReshapeConcat) Params() []Param { return nil }

// Outputs returns [history, item], or the one General output.
func (l *FusedReshapeConcat) Outputs() []*Blob {
	if l.general {
		return []*Blob{l.out}
	}
	return []*Blob{l.hist, l.ad}
}

// MLP is HugeCTR's MLP layer: a chain of fully connected layers y_i =
// act_i(y_{i−1}·W_i + b_i) over a [B, D] input. Every sub-layer owns a
// bias in the dense file, used or not (HugeCTR allocates it either way):
// without use_bias it is drawn, saved and loaded but takes no part and
// gets a zero gradient.
type MLP struct {
	c     *Ctx
	in    *Blob
	hs    []*Blob // outputs of each sub-layer (the last is the layer's)
	W, B  []Param
	Bias  []bool
	Acts  []tensor.Activation
	fused FusedGemm
	// With fused dense kernels (tensor.FusedDense, see InnerProduct):
	// sub-layer i with a ReLU and a bias records masks[i] in training, and
	// sub-layer i+1's dx GEMM applies it and writes B[i].Grad (done[i]).
	fd     tensor.FusedDense
	masks  []tensor.Tensor
	maskOK []bool
	done   []bool
}

// MLPFiller is HugeCTR's MLPLayer initializer of weight index (2i the
// kernel [in_i, out_i] of sub-layer i, 2i+1 its bias): Default and Uniform
// U(±√(1/in_i)) for both; XavierUniform / XavierNorm VarianceScaling over
// (in_i, out_i) with fan_avg for even sub-layers and fan_out for odd ones
// (HugeCTR picks the mode by the sub-layer's parity), both tensors alike;
// Zero 0.
func MLPFiller(i Init, index, in, out int) (Filler, error) {
	mode := FanAvg
	if (index/2)%2 == 1 {
		mode = FanOut
	}
	switch i {
	case InitDefault, InitUniform:
		return uniform(math.Sqrt(1 / float64(in))), nil
	case InitXavierUniform:
		return VarianceScaling(mode, true, float64(in), float64(out), true), nil
	case InitXavierNorm:
		return VarianceScaling(mode, false, float64(in), float64(out), true), nil
	case InitZero:
		return constant(0), nil
	}
	return Filler{}, badInit("MLP", i, index)
}

// NewMLP builds an MLP with outs[i] outputs, bias[i] and acts[i] per
// sub-layer (Identity or ReLU); inits are {weight_init, bias_init}.
func NewMLP(c *Ctx, in *Blob, outs []int, bias []bool, acts []tensor.Activation, inits ...Init) (*MLP, error) {
	if err := needBatch("MLP", in); err != nil {
		return nil, err
	}
	if len(outs) == 0 || len(bias) != len(outs) || len(acts) != len(outs) {
		return nil, shapeErr("MLP", "%d layers, %d biases, %d activations", len(outs), len(bias), len(acts))
	}
	l := &MLP{c: c, in: in, Bias: bias, Acts: acts}
	l.fused, _ = c.BE.(FusedGemm)
	b, prev := in.Value.Rows(), in.Value.Cols()
	var fs []Filler
	for i, o := range outs {
		if o <= 0 {
			return nil, shapeErr("MLP", "num_outputs[%d] = %d", i, o)
		}
		if a := acts[i]; a != tensor.Identity && a != tensor.ReLU {
			return nil, shapeErr("MLP", "activation %d of layer %d (Relu or None)", a, i)
		}
		for k := 0; k < 2; k++ {
			f, err := MLPFiller(pick(inits, 2*i+k), 2*i+k, prev, o)
			if err != nil {
				return nil, err
			}
			fs = append(fs, f)
		}
		l.W = append(l.W, c.weight("weight", true, prev, o))
		l.B = append(l.B, Param{Name: "bias", Value: c.alloc(o), Grad: c.alloc(o)})
		l.hs = append(l.hs, c.Blob(b, o))
		prev = o
	}
	c.fillAll(l.Params(), fs)
	if l.fd = FusedDense(c.BE); l.fd != nil {
		for i, o := range outs {
			if bias[i] && c.Half() {
				l.B[i].Half = c.act(o) // as InnerProduct's: the epilogues' half bias
			}
		}
		l.masks, l.maskOK, l.done = make([]tensor.Tensor, len(outs)), make([]bool, len(outs)), make([]bool, len(outs))
		for i := 0; i+1 < len(outs); i++ {
			if acts[i] == tensor.ReLU && bias[i] {
				y := l.hs[i].Value
				l.masks[i] = l.fd.ReLUMask(y.DType, y.Rows(), y.Cols())
			}
		}
	}
	return l, nil
}

func (l *MLP) x(i int) *Blob {
	if i == 0 {
		return l.in
	}
	return l.hs[i-1]
}

// Forward runs the sub-layers.
func (l *MLP) Forward(p Pass) {
	be := l.c.BE
	for i := range l.W {
		x, y := l.x(i).Value, l.hs[i].Value
		if l.fd != nil {
			l.maskOK[i] = p.Training && !l.masks[i].IsZero() && l.fd.GemmBiasReLUMask(x, l.W[i].Operand(), l.B[i].Operand(), y, l.masks[i])
			if l.maskOK[i] {
				continue
			}
		}
		if l.Bias[i] {
			if l.fused != nil && l.fused.GemmBiasAct(l.Acts[i], x, l.W[i].Operand(), l.B[i].Operand(), y) {
				continue
			}
			be.Gemm(false, false, 1, x, l.W[i].Operand(), 0, y)
			be.BiasAct(l.Acts[i], 1, y, y, l.B[i].Value)
			continue
		}
		be.Gemm(false, false, 1, x, l.W[i].Operand(), 0, y)
		if l.Acts[i] != tensor.Identity {
			be.Act(l.Acts[i], 1, y, y)
		}
	}
}

// Backward runs the sub-layers in reverse.
func (l *MLP) Backward(Pass) {
	be := l.c.BE
	for i := len(l.W) - 1; i >= 0; i-- {
		dz := l.hs[i].Grad
		done := l.fd != nil && l.done[i] // sub-layer i+1's GEMM did ReLU' and db
		if done {
			l.done[i] = false
		}
		if !done && l.Acts[i] != tensor.Identity {
			be.ActGrad(l.Acts[i], 1, dz, dz, tensor.Tensor{}, l.hs[i].Value)
		}
		x := l.x(i)
		db := l.B[i].Grad
		if !l.Bias[i] || done {
			db = tensor.Tensor{}
		}
		if l.fd == nil || !l.fd.GemmBgrad(x.Value, dz, l.W[i].Grad, db, true) {
			be.Gemm(true, false, 1, x.Value, dz, 0, l.W[i].Grad)
			if !db.IsZero() {
				be.ColSum(db, 0, dz)
			}
		}
		if x.Grad.IsZero() {
			continue
		}
		if i > 0 && l.fd != nil && l.maskOK[i-1] && l.fd.GemmDReLUBgrad(dz, l.W[i].Operand(), l.masks[i-1], x.Grad, l.B[i-1].Grad) {
			l.done[i-1] = true
			continue
		}
		be.Gemm(false, true, 1, dz, l.W[i].Operand(), 0, x.Grad)
	}
}

// Params returns W_0, b_0, W_1, b_1, … (HugeCTR's dense-file order).
func (l *MLP) Params() []Param {
	var ps []Param
	for i := range l.W {
		ps = append(ps, l.W[i], l.B[i])
	}
	return ps
}

// Outputs returns the last sub-layer's output.
func (l *MLP) Outputs() []*Blob { return []*Blob{l.hs[len(l.hs)-1]} }

// WithAux gives a layer extra output blobs after its own first output:
// the plumbing tops of HugeCTR's fused forms (a FusedInnerProduct
// Head/Body's mask, dRelu and db tensors, Interaction's gradient top),
// which exist so HugeCTR's next fused layer can write the gradient in
// place. In ctrkit they are views (the output, its gradient, the bias
// gradient) that only the matching consumer may name; it reads the first
// output's blob instead.
func WithAux(l Layer, aux ...*Blob) Layer { return &auxLayer{Layer: l, aux: aux} }

type auxLayer struct {
	Layer
	aux []*Blob
}

func (a *auxLayer) Outputs() []*Blob {
	return append([]*Blob{a.Layer.Outputs()[0]}, a.aux...)
}

// Unwrap returns the wrapped layer.
func (a *auxLayer) Unwrap() Layer { return a.Layer }
