package layers

import (
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// InnerProduct is y = x·W + b (W [in, out], b [out]); with Act set it is
// HugeCTR's FusedInnerProduct (y = act(x·W + b)).
//
// On a backend with fused kernels (tensor.FusedDense) the backward pass
// computes dW and db in one GEMM, on the backend's side stream (the model
// joins it before the update), and a layer chained to the ReLU
// InnerProduct that produces its input (ChainReLU) takes that layer's ReLU
// gradient and bias gradient in its own dx GEMM, from the ReLU mask the
// producer's forward recorded.
type InnerProduct struct {
	c    *Ctx
	in   *Blob
	out  *Blob
	W, B Param
	Act  tensor.Activation

	fd   tensor.FusedDense // nil: plain operations
	prev *InnerProduct     // ChainReLU's producer of in
	// mask is out's ReLU mask (allocated when a consumer chains to this
	// layer); maskOK says the last forward wrote it.
	mask   tensor.Tensor
	maskOK bool
	// gradDone: the consumer's dx GEMM left the ReLU gradient in out.Grad
	// and the bias gradient in B.Grad (this backward pass).
	gradDone bool
	// A half layer whose input width is not a multiple of 8 and that
	// computes no input gradient (the bottom MLP's first layer on the 13
	// dense features) runs its GEMMs on the input padded with zero
	// columns to a multiple of 8 (xp, copied each forward), so that every
	// row of the GEMM operands is 16-byte aligned and cuBLASLt takes its
	// tensor-core kernels (and the fused epilogues) instead of the slow
	// unaligned ones: W.Half is [padded, out] with zero rows below the
	// master's, and the weight gradient comes out [padded, out] in gp,
	// whose first rows are copied into W.Grad. The zero columns add
	// nothing to y, and the padded rows' gradient is never used.
	xp, gp tensor.Tensor
}

// padTo is the input width a half GEMM layer pads to: a multiple of 8
// elements (16 bytes of a 16-bit type).
func padTo(n int) int { return (n + 7) &^ 7 }

// NewInnerProduct builds an InnerProduct; inits are HugeCTR's
// initializer_types (weight_init, bias_init; none: Default), drawn as
// InnerProductFiller says.
func NewInnerProduct(c *Ctx, in *Blob, out int, act tensor.Activation, inits ...Init) (*InnerProduct, error) {
	if err := needBatch("InnerProduct", in); err != nil {
		return nil, err
	}
	if out <= 0 {
		return nil, shapeErr("InnerProduct", "num_output %d", out)
	}
	n := in.Value.Cols()
	var fs [2]Filler
	for i := range fs {
		var err error
		if fs[i], err = InnerProductFiller(pick(inits, i), i, n, out); err != nil {
			return nil, err
		}
	}
	l := &InnerProduct{c: c, in: in, out: c.Blob(in.Value.Rows(), out), Act: act,
		W: c.weight("weight", true, n, out),
		B: Param{Name: "bias", Value: c.alloc(out), Grad: c.alloc(out)}}
	if l.fd = FusedDense(c.BE); l.fd != nil && c.Half() {
		// The fused GEMMs' epilogues add the bias in the output's half
		// type (cuBLASLt's bias type for a half D): the bias gets a half
		// operand copy like the weight, refreshed with it (RefreshHalf).
		// The plain path keeps reading the float32 master.
		l.B.Half = c.act(out)
	}
	if c.Half() && in.Grad.IsZero() && n%8 != 0 {
		np := padTo(n)
		l.xp, l.gp = c.act(in.Value.Rows(), np), c.alloc(np, out)
		l.W.Half = c.act(np, out)
		c.BE.Fill(l.xp, 0)
		c.BE.Fill(l.W.Half, 0) // rows n.. stay zero: RefreshHalf writes the first n
	}
	c.fillAll(l.Params(), fs[:])
	return l, nil
}

// x is the forward's GEMM input: the input itself, or (padding) the input
// copied into the zero-padded xp.
func (l *InnerProduct) x() tensor.Tensor {
	if l.xp.IsZero() {
		return l.in.Value
	}
	l.c.BE.CopyCols(l.xp, 0, l.in.Value, 0, l.in.Value.Cols(), 0)
	return l.xp
}

// FusedDense returns be's fused InnerProduct kernels when it has them and
// they are on, else nil.
func FusedDense(be tensor.Backend) tensor.FusedDense {
	if f, ok := be.(tensor.FusedDense); ok && f.FusesDense() {
		return f
	}
	return nil
}

// ChainReLU makes l's input gradient GEMM also apply the ReLU gradient and
// compute the bias gradient of prev, whose output (y = ReLU(…)) is l's
// input. The caller guarantees that nothing else reads that output (or its
// gradient). It reports whether the chain was made: the backend fuses, prev
// has a ReLU and its output is l's input.
func (l *InnerProduct) ChainReLU(prev *InnerProduct) bool {
	if l.fd == nil || prev == nil || prev.fd == nil || prev.Act != tensor.ReLU || prev.out != l.in || l.in.Grad.IsZero() {
		return false
	}
	if l.in.Value.DType.IsHalf() {
		return false // the GPU refuses the mask chain on half activations (gpu.halfMaskRefused)
	}
	if prev.mask.IsZero() {
		y := prev.out.Value
		prev.mask = l.fd.ReLUMask(y.DType, y.Rows(), y.Cols())
	}
	l.prev = prev
	return true
}

// FusedGemm is implemented by backends with a fused InnerProduct forward
// (the GPU's cuBLASLt bias+ReLU epilogue): y = act(x·W + bias) in one call.
// bias is the float32 master or, with a half y, its half copy
// (Param.Operand). It reports false when it does not handle act or the
// shape (the layer then runs Gemm and BiasAct on the float32 bias).
type FusedGemm interface {
	GemmBiasAct(act tensor.Activation, x, w, bias, y tensor.Tensor) bool
}

// Forward computes y (and, training with a chained consumer, its ReLU
// mask).
func (l *InnerProduct) Forward(p Pass) {
	be := l.c.BE
	l.maskOK = false
	x := l.x()
	if p.Training && !l.mask.IsZero() {
		if l.fd.GemmBiasReLUMask(x, l.W.Operand(), l.B.Operand(), l.out.Value, l.mask) {
			l.maskOK = true
			return
		}
	}
	if f, ok := be.(FusedGemm); ok && f.GemmBiasAct(l.Act, x, l.W.Operand(), l.B.Operand(), l.out.Value) {
		return
	}
	be.Gemm(false, false, 1, x, l.W.Operand(), 0, l.out.Value)
	be.BiasAct(l.Act, 1, l.out.Value, l.out.Value, l.B.Value)
}

// Backward computes dW, db, dx.
func (l *InnerProduct) Backward(Pass) {
	be := l.c.BE
	dz := l.out.Grad
	done := l.gradDone
	l.gradDone = false
	if !done && l.Act != tensor.Identity {
		be.ActGrad(l.Act, 1, dz, dz, tensor.Tensor{}, l.out.Value)
	}
	// The weight gradient first: on a side stream it overlaps the dx
	// chain.
	db := l.B.Grad
	if done {
		db = tensor.Tensor{} // written by the consumer's dx GEMM
	}
	x, dw := l.in.Value, l.W.Grad
	if !l.xp.IsZero() {
		x, dw = l.xp, l.gp // xp holds this step's input (Forward)
	}
	// (Padded, on the compute stream: gp is copied right after.)
	if l.fd == nil || !l.fd.GemmBgrad(x, dz, dw, db, l.xp.IsZero()) {
		be.Gemm(true, false, 1, x, dz, 0, dw)
		if !done {
			be.ColSum(l.B.Grad, 0, dz)
		}
	}
	if !l.xp.IsZero() {
		be.Copy(l.W.Grad, l.gp.Prefix(l.W.Grad.Len()).Reshape(l.W.Grad.Shape...))
	}
	if l.in.Grad.IsZero() {
		return
	}
	if pv := l.prev; pv != nil && pv.maskOK && l.fd.GemmDReLUBgrad(dz, l.W.Operand(), pv.mask, l.in.Grad, pv.B.Grad) {
		pv.gradDone = true
		return
	}
	be.Gemm(false, true, 1, dz, l.W.Operand(), 0, l.in.Grad)
}

// Params returns W and b.
func (l *InnerProduct) Params() []Param { return []Param{l.W, l.B} }

// Outputs returns y.
func (l *InnerProduct) Outputs() []*Blob { return []*Blob{l.out} }

// Activation is ReLU, Sigmoid or ELU (Alpha).
type Activation struct {
	c       *Ctx
	in, out *Blob
	Kind    tensor.Activation
	Alpha   float64
}

// NewActivation builds an elementwise activation layer.
func NewActivation(c *Ctx, in *Blob, kind tensor.Activation, alpha float64) (*Activation, error) {
	if err := needBatch("Activation", in); err != nil {
		return nil, err
	}
	return &Activation{c: c, in: in, out: c.Blob(in.Value.Shape...), Kind: kind, Alpha: alpha}, nil
}

// Forward computes act(x).
func (l *Activation) Forward(Pass) { l.c.BE.Act(l.Kind, l.Alpha, l.out.Value, l.in.Value) }

// Backward computes dx.
func (l *Activation) Backward(Pass) {
	if !l.in.Grad.IsZero() {
		l.c.BE.ActGrad(l.Kind, l.Alpha, l.in.Grad, l.out.Grad, l.in.Value, l.out.Value)
	}
}

// Params returns nothing.
func (l *Activation) Params() []Param { return nil }

// Outputs returns y.
func (l *Activation) Outputs() []*Blob { return []*Blob{l.out} }

// Concat joins inputs along the feature axis (HugeCTR axis 1 on [B, …]).
type Concat struct {
	c   *Ctx
	ins []*Blob
	out *Blob
}

// NewConcat builds a Concat.
func NewConcat(c *Ctx, ins ...*Blob) (*Concat, error) {
	if err := needBatch("Concat", ins...); err != nil || len(ins) == 0 {
		return nil, shapeErr("Concat", "need ≥1 inputs of one batch size")
	}
	w := 0
	for _, b := range ins {
		w += b.Value.Cols()
	}
	return &Concat{c: c, ins: ins, out: c.Blob(ins[0].Value.Rows(), w)}, nil
}

// Forward copies each input into its columns.
func (l *Concat) Forward(Pass) {
	off := 0
	for _, b := range l.ins {
		l.c.BE.CopyCols(l.out.Value, off, b.Value, 0, b.Value.Cols(), 0)
		off += b.Value.Cols()
	}
}

// Backward slices the gradient back.
func (l *Concat) Backward(Pass) {
	off := 0
	for _, b := range l.ins {
		if !b.Grad.IsZero() {
			l.c.BE.CopyCols(b.Grad, 0, l.out.Grad, off, b.Value.Cols(), 0)
		}
		off += b.Value.Cols()
	}
}

// Params returns nothing.
func (l *Concat) Params() []Param { return nil }

// Outputs returns the joined blob.
func (l *Concat) Outputs() []*Blob { return []*Blob{l.out} }

// Slice cuts column ranges [start, end) of its input into outputs; ranges
// may overlap (fan-out), and Backward sums them.
type Slice struct {
	c      *Ctx
	in     *Blob
	outs   []*Blob
	ranges [][2]int
}

// NewSlice builds a Slice.
func NewSlice(c *Ctx, in *Blob, ranges [][2]int) (*Slice, error) {
	if err := needBatch("Slice", in); err != nil {
		return nil, err
	}
	l := &Slice{c: c, in: in, ranges: ranges}
	for _, r := range ranges {
		if r[0] < 0 || r[1] <= r[0] || r[1] > in.Value.Cols() {
			return nil, shapeErr("Slice", "range %v of %d columns", r, in.Value.Cols())
		}
		l.outs = append(l.outs, c.Blob(in.Value.Rows(), r[1]-r[0]))
	}
	return l, nil
}

// Forward copies the ranges.
func (l *Slice) Forward(Pass) {
	for i, r := range l.ranges {
		l.c.BE.CopyCols(l.outs[i].Value, 0, l.in.Value, r[0], r[1]-r[0], 0)
	}
}

// Backward sums the outputs' gradients into dx.
func (l *Slice) Backward(Pass) {
	if l.in.Grad.IsZero() {
		return
	}
	l.c.BE.Fill(l.in.Grad, 0)
	for i, r := range l.ranges {
		l.c.BE.CopyCols(l.in.Grad, r[0], l.outs[i].Grad, 0, r[1]-r[0], 1)
	}
}

// Params returns nothing.
func (l *Slice) Params() []Param { return nil }

// Outputs returns one blob per range.
func (l *Slice) Outputs() []*Blob { return l.outs }

// Reshape views [B, S, V] as [B, S·V] (free), or with Selected picks
// slots: out = [B, len(Selected)·V], slots in the given order.
type Reshape struct {
	c        *Ctx
	in, out  *Blob
	vec      int
	Selected []int
}

// NewReshape builds a Reshape to [B·Cols/leading, leading] when selected is
// empty (leading = 0 keeps [B, Cols]), or a slot selection of vec-wide
// slots.
func NewReshape(c *Ctx, in *Blob, leading int, selected []int, vec int) (*Reshape, error) {
	if err := needBatch("Reshape", in); err != nil {
		return nil, err
	}
	l := &Reshape{c: c, in: in, vec: vec, Selected: selected}
	if len(selected) > 0 {
		if vec <= 0 || in.Value.Cols()%vec != 0 {
			return nil, shapeErr("Reshape", "vec %d for %v", vec, in.Value)
		}
		for _, s := range selected {
			if s < 0 || s >= in.Value.Cols()/vec {
				return nil, shapeErr("Reshape", "slot %d of %d", s, in.Value.Cols()/vec)
			}
		}
		l.out = c.Blob(in.Value.Rows(), len(selected)*vec)
		return l, nil
	}
	n := in.Value.Len()
	if leading == 0 {
		leading = in.Value.Cols()
	}
	if leading <= 0 || n%leading != 0 {
		return nil, shapeErr("Reshape", "leading_dim %d for %v", leading, in.Value)
	}
	l.out = &Blob{Value: in.Value.Reshape(n/leading, leading)}
	if !in.Grad.IsZero() {
		l.out.Grad = in.Grad.Reshape(n/leading, leading)
	}
	return l, nil
}

// Forward copies the selected slots (a plain reshape shares storage).
func (l *Reshape) Forward(Pass) {
	for i, s := range l.Selected {
		l.c.BE.CopyCols(l.out.Value, i*l.vec, l.in.Value, s*l.vec, l.vec, 0)
	}
}

// Backward scatters the selected slots' gradients (zeros elsewhere).
func (l *Reshape) Backward(Pass) {
	if len(l.Selected) == 0 || l.in.Grad.IsZero() {
		return
	}
	l.c.BE.Fill(l.in.Grad, 0)
	for i, s := range l.Selected {
		l.c.BE.CopyCols(l.in.Grad, s*l.vec, l.out.Grad, i*l.vec, l.vec, 1)
	}
}

// Params returns nothing.
func (l *Reshape) Params() []Param { return nil }

// Outputs returns the reshaped blob.
func (l *Reshape) Outputs() []*Blob { return []*Blob{l.out} }

// Folded is a layer whose work another layer does — a ReLU folded into the
// InnerProduct before it: its output is that layer's blob, and Forward and
// Backward do nothing.
func Folded(out *Blob) Layer { return folded{out} }

type folded struct{ out *Blob }

func (folded) Forward(Pass)       {}
func (folded) Backward(Pass)      {}
func (folded) Params() []Param    { return nil }
func (f folded) Outputs() []*Blob { return []*Blob{f.out} }
