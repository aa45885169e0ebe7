package layers

import (
	"math"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The sequence and attention layers (docs/LAYERS.md, "Sequence and
// attention layers"):
//
//	LayerNorm                 NewLayerNorm
//	MatrixMultiply            NewMatrixMultiply
//	Softmax with a mask       NewMaskedSoftmax
//	SequenceMask              NewSequenceMask
//	MultiHeadAttention        NewMultiHeadAttention
//	GRU                       NewGRU
//	Concat of 3-D, axis 2     NewConcat3D

// LayerNorm normalizes each row of its last dimension n: y = γ(x−μ)/√(σ²+eps)
// + β (biased variance), γ and β of n elements (HugeCTR ln_param).
type LayerNorm struct {
	c           *Ctx
	in, out     *Blob
	Gamma, Beta Param
	Eps         float64
	mean, rstd  tensor.Tensor
	xs, ys, dxs tensor.Tensor // the blobs seen as [rows, n]
	dScratch    tensor.Tensor
	rows, n     int
}

// NewLayerNorm builds a LayerNorm over the last dimension n of in; inits are
// HugeCTR's (gamma_init, beta_init): Default, Uniform and the Xavier names
// give γ 1, β 0; Zero gives 0 (LayerNormLayer overrides only its default).
func NewLayerNorm(c *Ctx, in *Blob, n int, eps float64, inits ...Init) (*LayerNorm, error) {
	if err := needBatch("LayerNorm", in); err != nil {
		return nil, err
	}
	if n <= 0 || in.Value.Len()%n != 0 || !(eps > 0) {
		return nil, shapeErr("LayerNorm", "input %v, last dimension %d, eps %v", in.Value, n, eps)
	}
	var fs [2]Filler
	for i := range fs {
		var err error
		if fs[i], err = BatchNormFiller(pick(inits, i), i); err != nil {
			return nil, err
		}
	}
	rows := in.Value.Len() / n
	l := &LayerNorm{c: c, in: in, out: c.Blob(in.Value.Shape...), Eps: eps, rows: rows, n: n,
		Gamma: Param{Name: "gamma", Value: c.alloc(n), Grad: c.alloc(n)},
		Beta:  Param{Name: "beta", Value: c.alloc(n), Grad: c.alloc(n)},
		mean:  c.alloc(rows), rstd: c.alloc(rows)}
	l.xs, l.ys = in.Value.Reshape(rows, n), l.out.Value.Reshape(rows, n)
	c.fillAll(l.Params(), fs[:])
	return l, nil
}

// Forward normalizes.
func (l *LayerNorm) Forward(Pass) {
	l.c.BE.LayerNorm(l.ys, l.xs, l.Gamma.Value, l.Beta.Value, l.mean, l.rstd, l.Eps)
}

// Backward computes dx, dγ, dβ.
func (l *LayerNorm) Backward(Pass) {
	var dx tensor.Tensor
	if !l.in.Grad.IsZero() {
		dx = l.in.Grad.Reshape(l.rows, l.n)
	}
	l.c.BE.LayerNormGrad(dx, l.Gamma.Grad, l.Beta.Grad, l.out.Grad.Reshape(l.rows, l.n), l.xs, l.Gamma.Value, l.mean, l.rstd)
}

// Params returns γ and β (the dense file's order).
func (l *LayerNorm) Params() []Param { return []Param{l.Gamma, l.Beta} }

// Outputs returns y.
func (l *LayerNorm) Outputs() []*Blob { return []*Blob{l.out} }

// MatrixMultiply is HugeCTR's batched matrix product: for i < Batch, C_i
// [M, N] = A_i [M, K] · B_i [K, N], the operands holding Batch consecutive
// matrices (3-D: Batch = B; 4-D: Batch = B·h; 2-D: one product of the whole
// tensors, M = B).
type MatrixMultiply struct {
	c              *Ctx
	a, b, out      *Blob
	Batch, M, K, N int
}

// NewMatrixMultiply builds C = A·B over batch matrices of m×k and k×n.
func NewMatrixMultiply(c *Ctx, a, b *Blob, batch, m, k, n int) (*MatrixMultiply, error) {
	if a == nil || b == nil || a.Value.IsZero() || b.Value.IsZero() {
		return nil, shapeErr("MatrixMultiply", "missing input")
	}
	if batch <= 0 || m <= 0 || k <= 0 || n <= 0 || a.Value.Len() != batch*m*k || b.Value.Len() != batch*k*n ||
		a.Value.Rows() == 0 || (batch*m*n)%a.Value.Rows() != 0 {
		return nil, shapeErr("MatrixMultiply", "%v · %v as %d products of %d×%d · %d×%d", a.Value, b.Value, batch, m, k, k, n)
	}
	rows := a.Value.Rows()
	return &MatrixMultiply{c: c, a: a, b: b, out: c.Blob(rows, batch*m*n/rows), Batch: batch, M: m, K: k, N: n}, nil
}

// Forward multiplies.
func (l *MatrixMultiply) Forward(Pass) {
	l.c.BE.BatchedGemm(false, false, l.Batch, l.M, l.N, l.K, 1, l.a.Value, l.b.Value, 0, l.out.Value)
}

// Backward: dA_i = dC_i·B_iᵀ, dB_i = A_iᵀ·dC_i.
func (l *MatrixMultiply) Backward(Pass) {
	be := l.c.BE
	if !l.a.Grad.IsZero() {
		be.BatchedGemm(false, true, l.Batch, l.M, l.K, l.N, 1, l.out.Grad, l.b.Value, 0, l.a.Grad)
	}
	if !l.b.Grad.IsZero() {
		be.BatchedGemm(true, false, l.Batch, l.K, l.N, l.M, 1, l.a.Value, l.out.Grad, 0, l.b.Grad)
	}
}

// Params returns nothing.
func (l *MatrixMultiply) Params() []Param { return nil }

// Outputs returns C.
func (l *MatrixMultiply) Outputs() []*Blob { return []*Blob{l.out} }

// MaskedSoftmax is HugeCTR's Softmax with two bottoms (MaskedSoftmaxLayer):
// scores [B, h, m, n] and a mask [B, 1, m, n] (1 keeps, 0 masks); y =
// softmax(Scale·x − 10000·(1 − mask)) over n, the sum increased by 1e-6.
// The mask gets no gradient.
type MaskedSoftmax struct {
	c             *Ctx
	in, mask, out *Blob
	Heads         int
	Scale         float64
	x4, y4        tensor.Tensor
	rows, n       int
}

// NewMaskedSoftmax builds the masked softmax of in ([B, heads·m·n]) under
// mask ([B, m·n]); n is the last dimension.
func NewMaskedSoftmax(c *Ctx, in, mask *Blob, heads, m, n int, scale float64) (*MaskedSoftmax, error) {
	if err := needBatch("Softmax", in, mask); err != nil {
		return nil, err
	}
	b := in.Value.Rows()
	if heads <= 0 || m <= 0 || n <= 0 || in.Value.Len() != b*heads*m*n || mask.Value.Len() != b*m*n {
		return nil, shapeErr("Softmax", "scores %v and mask %v for [B, %d, %d, %d]", in.Value, mask.Value, heads, m, n)
	}
	l := &MaskedSoftmax{c: c, in: in, mask: mask, out: c.Blob(in.Value.Shape...), Heads: heads, Scale: scale, rows: b * heads * m, n: n}
	l.x4, l.y4 = in.Value.Reshape(b, heads, m, n), l.out.Value.Reshape(b, heads, m, n)
	return l, nil
}

// Forward computes the masked softmax.
func (l *MaskedSoftmax) Forward(Pass) {
	l.c.BE.MaskedSoftmax(l.y4, l.x4, l.mask.Value, l.Heads, l.Scale)
}

// Backward: dx = Scale·y⊙(dy − Σ dy⊙y); the mask's gradient (if wanted) is 0.
func (l *MaskedSoftmax) Backward(Pass) {
	be := l.c.BE
	if !l.in.Grad.IsZero() {
		dx := l.in.Grad.Reshape(l.rows, l.n)
		be.SoftmaxGrad(dx, l.out.Grad.Reshape(l.rows, l.n), l.out.Value.Reshape(l.rows, l.n))
		if l.Scale != 1 {
			be.Axpby(dx, l.Scale, dx, 0, tensor.Tensor{})
		}
	}
	if !l.mask.Grad.IsZero() {
		be.Fill(l.mask.Grad, 0)
	}
}

// Params returns nothing.
func (l *MaskedSoftmax) Params() []Param { return nil }

// Outputs returns y.
func (l *MaskedSoftmax) Outputs() []*Blob { return []*Blob{l.out} }

// SequenceMask builds HugeCTR's attention padding mask from two length
// tensors [B, 1]: out [B, 1, From, To], 1 where i < lenFrom[b] and j <
// lenTo[b], else 0. It has no gradient (its inputs get 0).
type SequenceMask struct {
	c              *Ctx
	from, to, out  *Blob
	MaxFrom, MaxTo int
}

// NewSequenceMask builds a SequenceMask.
func NewSequenceMask(c *Ctx, lenFrom, lenTo *Blob, maxFrom, maxTo int) (*SequenceMask, error) {
	if err := needBatch("SequenceMask", lenFrom, lenTo); err != nil {
		return nil, err
	}
	b := lenFrom.Value.Rows()
	if maxFrom <= 0 || maxTo <= 0 || lenFrom.Value.Len() != b || lenTo.Value.Len() != b {
		return nil, shapeErr("SequenceMask", "lengths %v and %v (want [B, 1]), max lengths %d, %d", lenFrom.Value, lenTo.Value, maxFrom, maxTo)
	}
	return &SequenceMask{c: c, from: lenFrom, to: lenTo, out: c.Blob(b, maxFrom*maxTo), MaxFrom: maxFrom, MaxTo: maxTo}, nil
}

// Forward builds the mask.
func (l *SequenceMask) Forward(Pass) {
	l.c.BE.SequenceMask(l.out.Value, l.from.Value, l.to.Value, l.MaxFrom, l.MaxTo)
}

// Backward zeroes the inputs' gradients (the mask is a step function).
func (l *SequenceMask) Backward(Pass) {
	for _, b := range []*Blob{l.from, l.to} {
		if !b.Grad.IsZero() {
			l.c.BE.Fill(b.Grad, 0)
		}
	}
}

// Params returns nothing.
func (l *SequenceMask) Params() []Param { return nil }

// Outputs returns the mask.
func (l *SequenceMask) Outputs() []*Blob { return []*Blob{l.out} }

// MultiHeadAttention is HugeCTR's MultiHeadAttentionLayer: query [B, M, D],
// key and value [B, T, D], optional mask [B, 1, M, T]; the hidden size D
// splits into Heads heads of d = D/Heads (column h·d + j of a row is head h,
// element j); per head O = softmax(Q·Kᵀ/√d [masked])·V, and the heads are
// joined back into [B, M, D]. No weights.
type MultiHeadAttention struct {
	c                 *Ctx
	q, k, v, mask     *Blob
	out               *Blob
	Heads, M, T, D    int
	qh, kh, vh, s, pr tensor.Tensor
	oh                tensor.Tensor
	dOh, dP, dS, dqh  tensor.Tensor
	dkh, dvh          tensor.Tensor
}

// NewMultiHeadAttention builds attention over q [B, m·D], k and v [B, t·D]
// and an optional mask [B, m·t] (nil: none).
func NewMultiHeadAttention(c *Ctx, q, k, v, mask *Blob, heads, m, t, d int) (*MultiHeadAttention, error) {
	bs := []*Blob{q, k, v}
	if mask != nil {
		bs = append(bs, mask)
	}
	if err := needBatch("MultiHeadAttention", bs...); err != nil {
		return nil, err
	}
	b := q.Value.Rows()
	if heads <= 0 || m <= 0 || t <= 0 || d <= 0 || d%heads != 0 || q.Value.Len() != b*m*d ||
		k.Value.Len() != b*t*d || v.Value.Len() != b*t*d || (mask != nil && mask.Value.Len() != b*m*t) {
		return nil, shapeErr("MultiHeadAttention", "query %v, key %v, value %v as [B, %d, %d], [B, %d, %d], %d heads", q.Value, k.Value, v.Value, m, d, t, d, heads)
	}
	l := &MultiHeadAttention{c: c, q: q, k: k, v: v, mask: mask, out: c.Blob(b, m*d), Heads: heads, M: m, T: t, D: d}
	bh := b * heads
	l.qh, l.kh, l.vh = c.alloc(b*m*d), c.alloc(b*t*d), c.alloc(b*t*d)
	l.s, l.pr = c.alloc(bh*m, t), c.alloc(bh*m, t)
	l.oh = c.alloc(b * m * d)
	l.dOh, l.dP, l.dS, l.dqh = c.alloc(b*m*d), c.alloc(bh*m, t), c.alloc(bh*m, t), c.alloc(b*m*d)
	l.dkh, l.dvh = c.alloc(b*t*d), c.alloc(b*t*d)
	return l, nil
}

func (l *MultiHeadAttention) alpha() float64 {
	return float64(float32(1 / math.Sqrt(float64(l.D/l.Heads))))
}

// Forward computes the attention.
func (l *MultiHeadAttention) Forward(Pass) {
	be := l.c.BE
	b, h, dh := l.q.Value.Rows(), l.Heads, l.D/l.Heads
	be.Permute0213(l.qh, l.q.Value, b, l.M, h, dh)
	be.Permute0213(l.kh, l.k.Value, b, l.T, h, dh)
	be.Permute0213(l.vh, l.v.Value, b, l.T, h, dh)
	be.BatchedGemm(false, true, b*h, l.M, l.T, dh, l.alpha(), l.qh, l.kh, 0, l.s)
	if l.mask != nil {
		be.MaskedSoftmax(l.pr.Reshape(b, h, l.M, l.T), l.s.Reshape(b, h, l.M, l.T), l.mask.Value, h, 1)
	} else {
		be.Softmax(l.pr, l.s)
	}
	be.BatchedGemm(false, false, b*h, l.M, dh, l.T, 1, l.pr, l.vh, 0, l.oh)
	be.Permute0213(l.out.Value, l.oh, b, h, l.M, dh)
}

// Backward computes the query, key and value gradients (the mask gets 0).
func (l *MultiHeadAttention) Backward(Pass) {
	be := l.c.BE
	b, h, dh := l.q.Value.Rows(), l.Heads, l.D/l.Heads
	be.Permute0213(l.dOh, l.out.Grad, b, l.M, h, dh)
	be.BatchedGemm(false, true, b*h, l.M, l.T, dh, 1, l.dOh, l.vh, 0, l.dP)
	be.BatchedGemm(true, false, b*h, l.T, dh, l.M, 1, l.pr, l.dOh, 0, l.dvh)
	be.SoftmaxGrad(l.dS, l.dP, l.pr)
	be.BatchedGemm(false, false, b*h, l.M, dh, l.T, l.alpha(), l.dS, l.kh, 0, l.dqh)
	be.BatchedGemm(true, false, b*h, l.T, dh, l.M, l.alpha(), l.dS, l.qh, 0, l.dkh)
	if !l.q.Grad.IsZero() {
		be.Permute0213(l.q.Grad, l.dqh, b, h, l.M, dh)
	}
	if !l.k.Grad.IsZero() {
		be.Permute0213(l.k.Grad, l.dkh, b, h, l.T, dh)
	}
	if !l.v.Grad.IsZero() {
		be.Permute0213(l.v.Grad, l.dvh, b, h, l.T, dh)
	}
	if l.mask != nil && !l.mask.Grad.IsZero() {
		be.Fill(l.mask.Grad, 0)
	}
}

// Params returns nothing.
func (l *MultiHeadAttention) Params() []Param { return nil }

// Outputs returns the attention output.
func (l *MultiHeadAttention) Outputs() []*Blob { return []*Blob{l.out} }

// GRU is HugeCTR's GRULayer (cuDNN CUDNN_GRU, one layer, unidirectional,
// CUDNN_RNN_SINGLE_INP_BIAS, h₀ = 0) over each sample's sequence of T
// vectors of E: input [B, T·E], output every step's hidden state [B, T·H].
// Per step, with gates r, z, n:
//
//	r = σ(W_r x + R_r h + b_r), z = σ(W_z x + R_z h + b_z)
//	n = tanh(W_n x + b_n + r ⊙ (R_n h)), h' = (1−z)⊙n + z⊙h
//
// Params in the dense file's order (cuDNN's weight space, then HugeCTR's
// hx): W [3H, E] (rows r, z, n), R [3H, H], b [3H], hx [batchsize, H]
// (HugeCTR's second weight, never read: h₀ is 0).
type GRU struct {
	c               *Ctx
	in, out         *Blob
	W, R, Bias, Hx  Param
	T, E, H         int
	x2, xw, xwt, hw tensor.Tensor
	hs, save        []tensor.Tensor
	dh, dhTot, dhp  tensor.Tensor
	dxw, dhw, dXW   tensor.Tensor
}

// NewGRU builds a GRU of hidden size h over sequences of t vectors of e;
// hxRows is gru_param.batchsize (the rows of hx). HugeCTR's GRULayer
// overrides no initializer, so every initializer_type fills zeros; inits are
// checked (weight_init, bias_init) and Sinusoidal is refused.
func NewGRU(c *Ctx, in *Blob, t, e, h, hxRows int, inits ...Init) (*GRU, error) {
	if err := needBatch("GRU", in); err != nil {
		return nil, err
	}
	if t <= 0 || e <= 0 || h <= 0 || hxRows <= 0 || in.Value.Len()%(t*e) != 0 {
		return nil, shapeErr("GRU", "input %v as [B, %d, %d], hidden %d, batchsize %d", in.Value, t, e, h, hxRows)
	}
	for i := range 2 {
		if v := pick(inits, i); v == InitSinusoidal || v > InitZero {
			return nil, badInit("GRU", v, i)
		}
	}
	b := in.Value.Len() / (t * e) // one sequence a sample
	l := &GRU{c: c, in: in, out: c.Blob(b, t*h), T: t, E: e, H: h,
		W:    Param{Name: "weight", Value: c.alloc(3*h, e), Grad: c.alloc(3*h, e)},
		R:    Param{Name: "recurrent_weight", Value: c.alloc(3*h, h), Grad: c.alloc(3*h, h)},
		Bias: Param{Name: "bias", Value: c.alloc(3 * h), Grad: c.alloc(3 * h)},
		Hx:   Param{Name: "hx", Value: c.alloc(hxRows, h), Grad: c.alloc(hxRows, h)}}
	l.x2 = in.Value.Reshape(b*t, e)
	l.xw = c.alloc(b*t, 3*h)
	l.xwt, l.hw = c.alloc(b, 3*h), c.alloc(b, 3*h)
	for range t {
		l.hs = append(l.hs, c.alloc(b, h))
		l.save = append(l.save, c.alloc(b, 4*h))
	}
	l.dh, l.dhTot, l.dhp = c.alloc(b, h), c.alloc(b, h), c.alloc(b, h)
	l.dxw, l.dhw, l.dXW = c.alloc(b, 3*h), c.alloc(b, 3*h), c.alloc(b*t, 3*h)
	return l, nil
}

// Forward runs the recurrence.
func (l *GRU) Forward(Pass) {
	be := l.c.BE
	b, h := l.out.Value.Rows(), l.H
	be.Gemm(false, true, 1, l.x2, l.W.Value, 0, l.xw)
	be.AddBias(l.xw, l.Bias.Value)
	xwv := l.xw.Reshape(b, l.T*3*h)
	for t := range l.T {
		be.CopyCols(l.xwt, 0, xwv, t*3*h, 3*h, 0)
		var prev tensor.Tensor
		if t > 0 {
			prev = l.hs[t-1]
			be.Gemm(false, true, 1, prev, l.R.Value, 0, l.hw)
		} else {
			be.Fill(l.hw, 0)
		}
		be.GRUCell(l.hs[t], l.save[t], l.xwt, l.hw, prev)
		be.CopyCols(l.out.Value, t*h, l.hs[t], 0, h, 0)
	}
}

// Backward runs backpropagation through time.
func (l *GRU) Backward(Pass) {
	be := l.c.BE
	b, h := l.out.Value.Rows(), l.H
	dxwv := l.dXW.Reshape(b, l.T*3*h)
	be.Fill(l.R.Grad, 0)
	be.Fill(l.Hx.Grad, 0)
	be.Fill(l.dh, 0)
	for t := l.T - 1; t >= 0; t-- {
		be.CopyCols(l.dhTot, 0, l.out.Grad, t*h, h, 0)
		be.Axpby(l.dhTot, 1, l.dhTot, 1, l.dh)
		var prev tensor.Tensor
		if t > 0 {
			prev = l.hs[t-1]
		}
		be.GRUCellGrad(l.dxw, l.dhw, l.dhp, l.dhTot, l.save[t], prev)
		be.CopyCols(dxwv, t*3*h, l.dxw, 0, 3*h, 0)
		if t > 0 {
			be.Gemm(true, false, 1, l.dhw, prev, 1, l.R.Grad)
			be.Gemm(false, false, 1, l.dhw, l.R.Value, 1, l.dhp)
			be.Copy(l.dh, l.dhp)
		}
	}
	be.Gemm(true, false, 1, l.dXW, l.x2, 0, l.W.Grad)
	be.ColSum(l.Bias.Grad, 0, l.dXW)
	if !l.in.Grad.IsZero() {
		be.Gemm(false, false, 1, l.dXW, l.W.Value, 0, l.in.Grad.Reshape(b*l.T, l.E))
	}
}

// Params returns W, R, b, hx.
func (l *GRU) Params() []Param { return []Param{l.W, l.R, l.Bias, l.Hx} }

// Outputs returns the hidden states.
func (l *GRU) Outputs() []*Blob { return []*Blob{l.out} }

// Concat3D joins 3-D inputs [B, S, V_i] on axis 2 into [B, S, ΣV_i]
// (HugeCTR Concat3DLayer, axis 2; axis 1 is NewConcat).
type Concat3D struct {
	c      *Ctx
	ins    []*Blob
	out    *Blob
	S      int
	widths []int
}

// NewConcat3D builds the axis-2 concatenation of inputs of s slots each.
func NewConcat3D(c *Ctx, s int, ins ...*Blob) (*Concat3D, error) {
	if err := needBatch("Concat", ins...); err != nil || len(ins) == 0 || s <= 0 {
		return nil, shapeErr("Concat", "need ≥1 3-D inputs of one batch size")
	}
	l := &Concat3D{c: c, ins: ins, S: s}
	w := 0
	for _, b := range ins {
		if b.Value.Cols()%s != 0 {
			return nil, shapeErr("Concat", "input %v does not hold %d slots", b.Value, s)
		}
		l.widths = append(l.widths, b.Value.Cols()/s)
		w += b.Value.Cols() / s
	}
	l.out = c.Blob(ins[0].Value.Rows(), s*w)
	return l, nil
}

func (l *Concat3D) view(t tensor.Tensor, w int) tensor.Tensor {
	return t.Reshape(t.Len()/w, w)
}

// Forward copies each input into its columns of every slot.
func (l *Concat3D) Forward(Pass) {
	total := l.out.Value.Cols() / l.S
	off := 0
	for i, b := range l.ins {
		l.c.BE.CopyCols(l.view(l.out.Value, total), off, l.view(b.Value, l.widths[i]), 0, l.widths[i], 0)
		off += l.widths[i]
	}
}

// Backward slices the gradient back.
func (l *Concat3D) Backward(Pass) {
	total := l.out.Value.Cols() / l.S
	off := 0
	for i, b := range l.ins {
		if !b.Grad.IsZero() {
			l.c.BE.CopyCols(l.view(b.Grad, l.widths[i]), 0, l.view(l.out.Grad, total), off, l.widths[i], 0)
		}
		off += l.widths[i]
	}
}

// Params returns nothing.
func (l *Concat3D) Params() []Param { return nil }

// Outputs returns the joined blob.
func (l *Concat3D) Outputs() []*Blob { return []*Blob{l.out} }
