package layers

import (
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Interaction is DLRM's dot interaction (SPEC §8): x0 [B,d] and embeddings
// [B, n·d] → [B, d + n(n+1)/2 + 1].
type Interaction struct {
	c            *Ctx
	x0, emb, out *Blob
}

// NewInteraction builds an Interaction.
func NewInteraction(c *Ctx, x0, emb *Blob) (*Interaction, error) {
	if err := needBatch("Interaction", x0, emb); err != nil {
		return nil, err
	}
	d := x0.Value.Cols()
	if d == 0 || emb.Value.Cols()%d != 0 {
		return nil, shapeErr("Interaction", "x0 %v, embeddings %v", x0.Value, emb.Value)
	}
	n := emb.Value.Cols() / d
	return &Interaction{c: c, x0: x0, emb: emb, out: c.Blob(x0.Value.Rows(), d+n*(n+1)/2+1)}, nil
}

// Forward computes the interaction.
func (l *Interaction) Forward(Pass) { l.c.BE.Interaction(l.out.Value, l.x0.Value, l.emb.Value) }

// Backward computes both input gradients.
func (l *Interaction) Backward(Pass) {
	l.c.BE.InteractionGrad(l.x0.Grad, l.emb.Grad, l.out.Grad, l.x0.Value, l.emb.Value)
}

// Params returns nothing.
func (l *Interaction) Params() []Param { return nil }

// Outputs returns the interaction blob.
func (l *Interaction) Outputs() []*Blob { return []*Blob{l.out} }

// MultiCross is DCN's cross network (SPEC §8): v1 (ProjectionDim 0)
// x_{l+1} = x0 ⊙ (x_l·w_l) + b_l + x_l with w_l [d,1]; v2 x_{l+1} = x0 ⊙
// (x_l·U_l·V_l + b_l) + x_l with U [d,p], V [p,d] (p = ProjectionDim).
//
// On a backend with tensor.CrossOps (the CPU and the GPU) a v2 layer is two
// GEMMs and one CrossForward forward, and one CrossBackward and four GEMMs
// backward (three when x_l is x0 and x0 needs no gradient): the bias, the
// x0 product, the residual, the x0-gradient term, the bias gradient and the
// copy of the incoming gradient ride in the two fused passes, and the
// input-gradient GEMM accumulates (beta 1) into the residual gradient —
// into dL/dx0 itself for the first layer. A v1 layer fuses its forward
// elementwise ops (CrossForwardV1). Without CrossOps the layer runs the
// plain operations, which compute the same values.
//
// With the fused InnerProduct kernels on (tensor.FusedDense), a v2
// layer's weight gradients dV = hᵀ·dz and dU = xᵀ·dh go to the backend's
// side stream (GemmBgrad), overlapping the input-gradient GEMMs and the
// next layer's CrossBackward; each cross layer then keeps its own dz and
// dh, which those GEMMs read until the model joins them.
type MultiCross struct {
	c       *Ctx
	in, out *Blob
	P       int
	W, U, V []Param // v1: W; v2: U, V
	B       []Param
	xs      []tensor.Tensor // x_0 … x_L (x_L is out)
	h       []tensor.Tensor // v1: s_l [B,1]; v2: t_l = x_l·U [B,p]
	z       []tensor.Tensor // v2: t_l·V [B,d] (plain path: + b_l)
	gs, gh  tensor.Tensor
	gx      tensor.Tensor
	cx      tensor.CrossOps   // nil: plain operations
	fd      tensor.FusedDense // nil: weight gradients on the compute stream
	// gsL, ghL: dz and dh of each cross layer (side-stream weight
	// gradients; else nil and every layer uses gs, gh).
	gsL, ghL []tensor.Tensor
}

// NewMultiCross builds num layers of DCN v1 (projDim 0) or v2; inits are
// HugeCTR's initializer_types (weight_init, bias_init; none: Default) over
// the weights in Params order, drawn as MultiCrossFiller says.
func NewMultiCross(c *Ctx, in *Blob, num, projDim int, inits ...Init) (*MultiCross, error) {
	if err := needBatch("MultiCross", in); err != nil {
		return nil, err
	}
	if num <= 0 || projDim < 0 {
		return nil, shapeErr("MultiCross", "num_layers %d, projection_dim %d", num, projDim)
	}
	bs, d := in.Value.Rows(), in.Value.Cols()
	per := 2
	if projDim > 0 {
		per = 3
	}
	fs := make([]Filler, num*per)
	for i := range fs {
		var err error
		if fs[i], err = MultiCrossFiller(pick(inits, i), i, d, projDim); err != nil {
			return nil, err
		}
	}
	l := &MultiCross{c: c, in: in, P: projDim}
	l.cx, _ = c.BE.(tensor.CrossOps)
	l.xs = append(l.xs, in.Value)
	for i := 0; i < num; i++ {
		if projDim == 0 {
			w := c.weight("weight", false, d, 1)
			l.W = append(l.W, w)
			l.h = append(l.h, c.act(bs, 1))
		} else {
			u := c.weight("weight_u", false, d, projDim)
			v := c.weight("weight_v", false, projDim, d)
			l.U, l.V = append(l.U, u), append(l.V, v)
			l.h = append(l.h, c.act(bs, projDim))
			l.z = append(l.z, c.act(bs, d))
		}
		b := Param{Name: "bias", Value: c.alloc(d), Grad: c.alloc(d)}
		l.B = append(l.B, b)
		if i < num-1 {
			l.xs = append(l.xs, c.act(bs, d))
		}
	}
	l.out = c.Blob(bs, d)
	l.xs = append(l.xs, l.out.Value)
	c.fillAll(l.Params(), fs)
	if num > 1 || projDim == 0 || l.cx == nil {
		l.gx = c.act(bs, d) // dL/dx_l below the top layer
	}
	switch {
	case projDim == 0:
		l.gs = c.act(bs, 1)
	case l.cx != nil && FusedDense(c.BE) != nil:
		l.fd = FusedDense(c.BE)
		for range num {
			l.gsL = append(l.gsL, c.act(bs, d))
			l.ghL = append(l.ghL, c.act(bs, projDim))
		}
	default:
		l.gh = c.act(bs, projDim)
		l.gs = c.act(bs, d)
	}
	return l, nil
}

// Forward runs the cross layers.
func (l *MultiCross) Forward(Pass) {
	be := l.c.BE
	x0 := l.xs[0]
	for i := range l.B {
		xi, xn, b := l.xs[i], l.xs[i+1], l.B[i].Value
		if l.P == 0 {
			be.Gemm(false, false, 1, xi, l.W[i].Operand(), 0, l.h[i])
			if l.cx != nil {
				l.cx.CrossForwardV1(xn, x0, l.h[i], b, xi)
				continue
			}
			be.RowScale(xn, 0, x0, l.h[i])
			be.AddBias(xn, b)
			be.Axpby(xn, 1, xn, 1, xi)
			continue
		}
		be.Gemm(false, false, 1, xi, l.U[i].Operand(), 0, l.h[i])
		be.Gemm(false, false, 1, l.h[i], l.V[i].Operand(), 0, l.z[i])
		if l.cx != nil {
			l.cx.CrossForward(xn, x0, l.z[i], b, xi)
			continue
		}
		be.AddBias(l.z[i], b)
		be.Mul(xn, 0, x0, l.z[i])
		be.Axpby(xn, 1, xn, 1, xi)
	}
}

// Backward runs the cross layers in reverse.
func (l *MultiCross) Backward(Pass) {
	if l.P > 0 && l.cx != nil {
		l.backwardFused()
		return
	}
	be := l.c.BE
	x0 := l.xs[0]
	g := l.gx
	be.Copy(g, l.out.Grad) // g = dL/dx_{i+1}
	dx0 := l.in.Grad
	top := len(l.B) - 1
	for i := top; i >= 0; i-- {
		xi := l.xs[i]
		beta := 1.0 // dx0 accumulates; the top layer sets it
		if i == top {
			beta = 0
		}
		if l.P == 0 {
			be.ColSum(l.B[i].Grad, 0, g)
			be.RowDot(l.gs, g, x0) // ds = Σ_c g·x0
			if !dx0.IsZero() {
				be.RowScale(dx0, beta, g, l.h[i])
			}
			be.Gemm(true, false, 1, xi, l.gs, 0, l.W[i].Grad)
			if i > 0 || !dx0.IsZero() { // g_i = g + ds·wᵀ
				be.Gemm(false, true, 1, l.gs, l.W[i].Operand(), 1, g)
			}
		} else {
			be.Mul(l.gs, 0, g, x0) // dz = g ⊙ x0
			if !dx0.IsZero() {
				be.Mul(dx0, beta, g, l.z[i]) // z holds t·V + b here
			}
			be.ColSum(l.B[i].Grad, 0, l.gs)
			be.Gemm(true, false, 1, l.h[i], l.gs, 0, l.V[i].Grad)
			be.Gemm(false, true, 1, l.gs, l.V[i].Operand(), 0, l.gh)
			be.Gemm(true, false, 1, xi, l.gh, 0, l.U[i].Grad)
			if i > 0 || !dx0.IsZero() {
				be.Gemm(false, true, 1, l.gh, l.U[i].Operand(), 1, g)
			}
		}
	}
	if !dx0.IsZero() {
		be.Axpby(dx0, 1, dx0, 1, g)
	}
}

// backwardFused is the v2 backward on CrossOps. g_{l+1} = dL/dx_{l+1}
// enters layer l; CrossBackward writes dz, db and dx0 (set by the top
// layer, accumulated below it, plus the residual g_1 at layer 0) and, at
// the top layer, copies out.Grad into gx; the input-gradient GEMM then
// accumulates dh·Uᵀ into gx (g_l = g_{l+1} + dh·Uᵀ) or, at layer 0, into
// dx0.
func (l *MultiCross) backwardFused() {
	be, cx := l.c.BE, l.cx
	x0, dx0 := l.xs[0], l.in.Grad
	top := len(l.B) - 1
	for i := top; i >= 0; i-- {
		g, gcopy := l.gx, tensor.Tensor{}
		if i == top {
			g = l.out.Grad
			if i > 0 {
				gcopy = l.gx
			}
		}
		beta, res := 1.0, 0.0
		if i == top {
			beta = 0
		}
		if i == 0 {
			res = 1
		}
		dz, dh := l.gs, l.gh
		if l.gsL != nil {
			dz, dh = l.gsL[i], l.ghL[i]
		}
		cx.CrossBackward(dz, l.B[i].Grad, dx0, beta, res, gcopy, g, x0, l.z[i], l.B[i].Value)
		if l.fd == nil || !l.fd.GemmBgrad(l.h[i], dz, l.V[i].Grad, tensor.Tensor{}, true) {
			be.Gemm(true, false, 1, l.h[i], dz, 0, l.V[i].Grad)
		}
		be.Gemm(false, true, 1, dz, l.V[i].Operand(), 0, dh)
		if l.fd == nil || !l.fd.GemmBgrad(l.xs[i], dh, l.U[i].Grad, tensor.Tensor{}, true) {
			be.Gemm(true, false, 1, l.xs[i], dh, 0, l.U[i].Grad)
		}
		switch {
		case i > 0:
			be.Gemm(false, true, 1, dh, l.U[i].Operand(), 1, l.gx)
		case !dx0.IsZero():
			be.Gemm(false, true, 1, dh, l.U[i].Operand(), 1, dx0)
		}
	}
}

// Params returns the per-layer weights and biases.
func (l *MultiCross) Params() []Param {
	var ps []Param
	for i := range l.B {
		if l.P == 0 {
			ps = append(ps, l.W[i])
		} else {
			ps = append(ps, l.U[i], l.V[i])
		}
		ps = append(ps, l.B[i])
	}
	return ps
}

// Outputs returns x_L.
func (l *MultiCross) Outputs() []*Blob { return []*Blob{l.out} }

// Dropout zeroes elements with probability Rate while training and scales
// the rest by 1/(1−Rate); the mask comes from Philox keyed by Seed and the
// iteration, so Backward (and a GPU) reproduces it without storing it.
//
// Over several ranks (Ctx.Shard) the mask is the one the single-rank run of
// the global batch draws for the rank's samples: element i of rank r is
// element r·len + i of the global batch (len = the local element count),
// so the counter is iter·⌈len·W/4⌉ + r·len/4, which needs len % 4 == 0.
type Dropout struct {
	c       *Ctx
	in, out *Blob
	Rate    float64
	Seed    uint64
	shard   Shard
}

// NewDropout builds a Dropout with a seed derived from the context.
func NewDropout(c *Ctx, in *Blob, rate float64) (*Dropout, error) {
	if err := needBatch("Dropout", in); err != nil {
		return nil, err
	}
	if !(rate >= 0 && rate < 1) {
		return nil, shapeErr("Dropout", "rate %v", rate)
	}
	if err := c.Shard.check("Dropout"); err != nil {
		return nil, err
	}
	if n := in.Value.Len(); c.Shard.Sharded() && n%4 != 0 {
		return nil, shapeErr("Dropout", "%v over %d ranks: the batch per rank × the width (%d × %d) must be a multiple of 4",
			in.Value, c.Shard.World, in.Value.Rows(), n/max(in.Value.Rows(), 1))
	}
	c.nextID++
	return &Dropout{c: c, in: in, out: c.Blob(in.Value.Shape...), Rate: rate, Seed: c.Rand.Uint64() ^ c.nextID,
		shard: c.Shard}, nil
}

// counter is the Philox counter of the rank's first element: the
// single-rank run's iter·⌈len·W/4⌉ plus the rank's offset r·len/4 (exact:
// len % 4 == 0 when W > 1).
func (l *Dropout) counter(p Pass) uint64 {
	n, w := uint64(l.in.Value.Len()), uint64(l.shard.Ranks())
	return p.Iter*((n*w+3)/4) + uint64(l.shard.Rank)*n/4
}

// Forward applies the mask (identity when not training).
func (l *Dropout) Forward(p Pass) {
	if !p.Training || l.Rate == 0 {
		l.c.BE.Copy(l.out.Value, l.in.Value)
		return
	}
	l.c.BE.Dropout(l.out.Value, l.in.Value, l.Rate, l.Seed, l.counter(p))
}

// Backward applies the same mask to the gradient.
func (l *Dropout) Backward(p Pass) {
	if l.in.Grad.IsZero() {
		return
	}
	if !p.Training || l.Rate == 0 {
		l.c.BE.Copy(l.in.Grad, l.out.Grad)
		return
	}
	l.c.BE.DropoutGrad(l.in.Grad, l.out.Grad, l.Rate, l.Seed, l.counter(p))
}

// Params returns nothing.
func (l *Dropout) Params() []Param { return nil }

// Outputs returns y.
func (l *Dropout) Outputs() []*Blob { return []*Blob{l.out} }

// BatchNorm normalizes features over the batch (HugeCTR bn_param: factor,
// eps); by default gamma starts at 1, beta at 0; running mean 0, variance 1.
type BatchNorm struct {
	c                 *Ctx
	in, out           *Blob
	Gamma, Beta       Param
	RunMean, RunVar   tensor.Tensor
	saveMean, saveInv tensor.Tensor
	dxScratch         tensor.Tensor // dx when the input needs none
	P                 tensor.BNParams
}

// NewBatchNorm builds a BatchNorm; inits are HugeCTR's initializer_types
// (gamma_init, beta_init; none: Default), as BatchNormFiller says.
func NewBatchNorm(c *Ctx, in *Blob, p tensor.BNParams, inits ...Init) (*BatchNorm, error) {
	if err := needBatch("BatchNorm", in); err != nil {
		return nil, err
	}
	var fs [2]Filler
	for i := range fs {
		var err error
		if fs[i], err = BatchNormFiller(pick(inits, i), i); err != nil {
			return nil, err
		}
	}
	n := in.Value.Cols()
	l := &BatchNorm{c: c, in: in, out: c.Blob(in.Value.Shape...), P: p,
		Gamma:   Param{Name: "gamma", Value: c.alloc(n), Grad: c.alloc(n)},
		Beta:    Param{Name: "beta", Value: c.alloc(n), Grad: c.alloc(n)},
		RunMean: c.alloc(n), RunVar: c.alloc(n), saveMean: c.alloc(n), saveInv: c.alloc(n)}
	c.fillAll(l.Params(), fs[:])
	c.BE.Fill(l.RunVar, 1)
	return l, nil
}

// Forward normalizes.
func (l *BatchNorm) Forward(p Pass) {
	l.c.BE.BatchNorm(l.P, p.Training, l.out.Value, l.in.Value, l.Gamma.Value, l.Beta.Value, l.RunMean, l.RunVar, l.saveMean, l.saveInv)
}

// Backward computes dx, dγ, dβ (training statistics).
func (l *BatchNorm) Backward(Pass) {
	dx := l.in.Grad
	if dx.IsZero() {
		if l.dxScratch.IsZero() {
			l.dxScratch = l.c.alloc(l.in.Value.Shape...)
		}
		dx = l.dxScratch
	}
	l.c.BE.BatchNormGrad(dx, l.Gamma.Grad, l.Beta.Grad, l.out.Grad, l.in.Value, l.Gamma.Value, l.saveMean, l.saveInv)
}

// Params returns γ and β.
func (l *BatchNorm) Params() []Param { return []Param{l.Gamma, l.Beta} }

// Outputs returns y.
func (l *BatchNorm) Outputs() []*Blob { return []*Blob{l.out} }

// Elementwise is Add (N inputs), Sub (2) or ElementwiseMultiply (N).
type Elementwise struct {
	c   *Ctx
	ins []*Blob
	out *Blob
	Op  ElementwiseOp
}

// ElementwiseOp selects Add, Sub or Multiply.
type ElementwiseOp uint8

// Elementwise operations.
const (
	Add ElementwiseOp = iota
	Sub
	Multiply
)

// NewElementwise builds an Add, Sub or ElementwiseMultiply layer.
func NewElementwise(c *Ctx, op ElementwiseOp, ins ...*Blob) (*Elementwise, error) {
	if err := needBatch("Elementwise", ins...); err != nil || len(ins) < 2 || (op == Sub && len(ins) != 2) {
		return nil, shapeErr("Elementwise", "need ≥2 inputs (Sub exactly 2) of one shape")
	}
	for _, b := range ins {
		if b.Value.Len() != ins[0].Value.Len() {
			return nil, shapeErr("Elementwise", "%v and %v", ins[0].Value, b.Value)
		}
	}
	return &Elementwise{c: c, ins: ins, out: c.Blob(ins[0].Value.Shape...), Op: op}, nil
}

// Forward combines the inputs.
func (l *Elementwise) Forward(Pass) {
	be := l.c.BE
	switch l.Op {
	case Sub:
		be.Axpby(l.out.Value, 1, l.ins[0].Value, -1, l.ins[1].Value)
	case Add:
		be.Axpby(l.out.Value, 1, l.ins[0].Value, 1, l.ins[1].Value)
		for _, b := range l.ins[2:] {
			be.Axpby(l.out.Value, 1, l.out.Value, 1, b.Value)
		}
	case Multiply:
		be.Mul(l.out.Value, 0, l.ins[0].Value, l.ins[1].Value)
		for _, b := range l.ins[2:] {
			be.Mul(l.out.Value, 0, l.out.Value, b.Value)
		}
	}
}

// Backward distributes the gradient.
func (l *Elementwise) Backward(Pass) {
	be := l.c.BE
	for i, b := range l.ins {
		if b.Grad.IsZero() {
			continue
		}
		switch {
		case l.Op == Add || (l.Op == Sub && i == 0):
			be.Copy(b.Grad, l.out.Grad)
		case l.Op == Sub:
			be.Axpby(b.Grad, -1, l.out.Grad, 0, tensor.Tensor{})
		default:
			be.Copy(b.Grad, l.out.Grad)
			for j, o := range l.ins {
				if j != i {
					be.Mul(b.Grad, 0, b.Grad, o.Value)
				}
			}
		}
	}
}

// Params returns nothing.
func (l *Elementwise) Params() []Param { return nil }

// Outputs returns the result.
func (l *Elementwise) Outputs() []*Blob { return []*Blob{l.out} }

// WeightMultiply: in [B, d0] → out [B, d0·d1], out[b,i,j] = in[b,i]·W[i,j].
type WeightMultiply struct {
	c         *Ctx
	in, out   *Blob
	W         Param
	xe, we, t tensor.Tensor
	d0, d1    int
}

// NewWeightMultiply builds a WeightMultiply with weight_dims [d0, d1]
// (d0 = input width); inits are HugeCTR's initializer_types (weight_init;
// none: Default), drawn as WeightMultiplyFiller says.
func NewWeightMultiply(c *Ctx, in *Blob, d1 int, inits ...Init) (*WeightMultiply, error) {
	if err := needBatch("WeightMultiply", in); err != nil {
		return nil, err
	}
	b, d0 := in.Value.Rows(), in.Value.Cols()
	if d1 <= 0 {
		return nil, shapeErr("WeightMultiply", "weight_dims [%d,%d]", d0, d1)
	}
	f, err := WeightMultiplyFiller(pick(inits, 0), d0, d1)
	if err != nil {
		return nil, err
	}
	l := &WeightMultiply{c: c, in: in, out: c.Blob(b, d0*d1), d0: d0, d1: d1,
		W:  Param{Name: "weight", Value: c.alloc(d0, d1), Grad: c.alloc(d0, d1)},
		xe: c.alloc(b, d0*d1), we: c.alloc(b, d0*d1), t: c.alloc(b, d0*d1)}
	c.Fill(l.W.Value, f)
	return l, nil
}

// Forward expands x and W and multiplies.
func (l *WeightMultiply) Forward(Pass) {
	be, b := l.c.BE, l.in.Value.Rows()
	be.Broadcast(l.xe, 0, l.in.Value, b*l.d0, l.d1, 1, 1)
	be.Broadcast(l.we, 0, l.W.Value, 1, b, l.d0*l.d1, 1)
	be.Mul(l.out.Value, 0, l.xe, l.we)
}

// Backward: dW = Σ_b dy⊙x, dx = Σ_j dy⊙W.
func (l *WeightMultiply) Backward(Pass) {
	be, b := l.c.BE, l.in.Value.Rows()
	be.Mul(l.t, 0, l.out.Grad, l.xe)
	be.Reduce(l.W.Grad, l.t, 1, b, l.d0*l.d1, 1)
	if !l.in.Grad.IsZero() {
		be.Mul(l.t, 0, l.out.Grad, l.we)
		be.Reduce(l.in.Grad, l.t, b*l.d0, l.d1, 1, 1)
	}
}

// Params returns W.
func (l *WeightMultiply) Params() []Param { return []Param{l.W} }

// Outputs returns the product.
func (l *WeightMultiply) Outputs() []*Blob { return []*Blob{l.out} }

// FmOrder2 is the factorization machine's second-order term on [B, f·k].
type FmOrder2 struct {
	c       *Ctx
	in, out *Blob
}

// NewFmOrder2 builds FmOrder2 with vector width k.
func NewFmOrder2(c *Ctx, in *Blob, k int) (*FmOrder2, error) {
	if err := needBatch("FmOrder2", in); err != nil {
		return nil, err
	}
	if k <= 0 || in.Value.Cols()%k != 0 {
		return nil, shapeErr("FmOrder2", "width %d for %v", k, in.Value)
	}
	return &FmOrder2{c: c, in: in, out: c.Blob(in.Value.Rows(), k)}, nil
}

// Forward computes ½((Σv)² − Σv²).
func (l *FmOrder2) Forward(Pass) { l.c.BE.FmOrder2(l.out.Value, l.in.Value) }

// Backward computes dv.
func (l *FmOrder2) Backward(Pass) {
	if !l.in.Grad.IsZero() {
		l.c.BE.FmOrder2Grad(l.in.Grad, l.out.Grad, l.in.Value)
	}
}

// Params returns nothing.
func (l *FmOrder2) Params() []Param { return nil }

// Outputs returns [B, k].
func (l *FmOrder2) Outputs() []*Blob { return []*Blob{l.out} }

// Reduce is ReduceSum or ReduceMean over one axis of [B, d1, d2] (axis 1 or
// 2; a 2-D input is [B, d1, 1]); the reduced dimension becomes 1.
type Reduce struct {
	c               *Ctx
	in, out         *Blob
	outer, n, inner int
	scale           float64
}

// NewReduce builds ReduceSum (mean false) or ReduceMean over axis of the
// input seen as dims (B first).
func NewReduce(c *Ctx, in *Blob, dims []int, axis int, mean bool) (*Reduce, error) {
	if err := needBatch("Reduce", in); err != nil {
		return nil, err
	}
	if tensor.NumElems(dims...) != in.Value.Len() || axis < 0 || axis >= len(dims) {
		return nil, shapeErr("Reduce", "dims %v axis %d for %v", dims, axis, in.Value)
	}
	outer, inner := tensor.NumElems(dims[:axis]...), tensor.NumElems(dims[axis+1:]...)
	l := &Reduce{c: c, in: in, outer: outer, n: dims[axis], inner: inner, scale: 1}
	if mean {
		l.scale = 1 / float64(dims[axis])
	}
	l.out = c.Blob(in.Value.Rows(), outer*inner/in.Value.Rows())
	return l, nil
}

// Forward reduces.
func (l *Reduce) Forward(Pass) {
	l.c.BE.Reduce(l.out.Value, l.in.Value, l.outer, l.n, l.inner, l.scale)
}

// Backward broadcasts.
func (l *Reduce) Backward(Pass) {
	if !l.in.Grad.IsZero() {
		l.c.BE.Broadcast(l.in.Grad, 0, l.out.Grad, l.outer, l.n, l.inner, l.scale)
	}
}

// Params returns nothing.
func (l *Reduce) Params() []Param { return nil }

// Outputs returns the reduced blob.
func (l *Reduce) Outputs() []*Blob { return []*Blob{l.out} }

// Scale repeats elements (HugeCTR Scale, [B, n] input): axis 0 → [B, n·f]
// with each element repeated f times in place; axis 1 → [B·f, n] with each
// row repeated f times.
type Scale struct {
	c               *Ctx
	in, out         *Blob
	outer, n, inner int
}

// NewScale builds a Scale layer.
func NewScale(c *Ctx, in *Blob, axis, factor int) (*Scale, error) {
	if err := needBatch("Scale", in); err != nil {
		return nil, err
	}
	if factor <= 0 || axis < 0 || axis > 1 {
		return nil, shapeErr("Scale", "axis %d factor %d", axis, factor)
	}
	b, n := in.Value.Rows(), in.Value.Cols()
	if axis == 0 {
		return &Scale{c: c, in: in, out: c.Blob(b, n*factor), outer: b * n, n: factor, inner: 1}, nil
	}
	return &Scale{c: c, in: in, out: c.Blob(b*factor, n), outer: b, n: factor, inner: n}, nil
}

// Forward repeats.
func (l *Scale) Forward(Pass) {
	l.c.BE.Broadcast(l.out.Value, 0, l.in.Value, l.outer, l.n, l.inner, 1)
}

// Backward sums the repeats.
func (l *Scale) Backward(Pass) {
	if !l.in.Grad.IsZero() {
		l.c.BE.Reduce(l.in.Grad, l.out.Grad, l.outer, l.n, l.inner, 1)
	}
}

// Params returns nothing.
func (l *Scale) Params() []Param { return nil }

// Outputs returns the repeated blob.
func (l *Scale) Outputs() []*Blob { return []*Blob{l.out} }

// Softmax over the feature axis.
type Softmax struct {
	c       *Ctx
	in, out *Blob
}

// NewSoftmax builds a Softmax.
func NewSoftmax(c *Ctx, in *Blob) (*Softmax, error) {
	if err := needBatch("Softmax", in); err != nil {
		return nil, err
	}
	return &Softmax{c: c, in: in, out: c.Blob(in.Value.Shape...)}, nil
}

// Forward computes softmax rows.
func (l *Softmax) Forward(Pass) { l.c.BE.Softmax(l.out.Value, l.in.Value) }

// Backward computes dx.
func (l *Softmax) Backward(Pass) {
	if !l.in.Grad.IsZero() {
		l.c.BE.SoftmaxGrad(l.in.Grad, l.out.Grad, l.out.Value)
	}
}

// Params returns nothing.
func (l *Softmax) Params() []Param { return nil }

// Outputs returns the probabilities.
func (l *Softmax) Outputs() []*Blob { return []*Blob{l.out} }
