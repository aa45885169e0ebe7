package layers

import (
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// LossKind selects the loss.
type LossKind uint8

// Losses (HugeCTR loss.cu).
const (
	// BinaryCrossEntropy: fused sigmoid BCE on [B,1] (SPEC §8).
	BinaryCrossEntropy LossKind = iota
	// MultiCrossEntropy: per-column fused sigmoid BCE on [B,T] weighted by
	// TargetWeights (default all 1), averaged over all B·T entries:
	// loss = Σ_b Σ_t w_t·bce / (B·T), dL/dx = w_t·(σ(x)−y)/(B·T). A label
	// below −0.5 masks its entry (loss 0, gradient 0) but still counts in
	// B·T, as HugeCTR's MultiCrossEntropy_Kernel does (loss.cu).
	MultiCrossEntropy
	// CrossEntropy: softmax cross-entropy on [B,C] with class-index labels
	// [B,1]: loss = mean over samples of −log softmax(x)[label].
	CrossEntropy
)

// Loss is a loss layer: its output is the [1] batch loss (a mean over the
// batch's real samples, plus the regularizer's term); Forward in training
// also writes the prediction's gradient, multiplied by Scale.
type Loss struct {
	c           *Ctx
	pred, label *Blob
	out         *Blob
	Kind        LossKind
	weights     tensor.Tensor
	// Scale multiplies the gradient (not the loss): the mixed-precision
	// loss scale, which the optimizers divide out again (0 means 1). A
	// power of two cancels exactly, so training is the same as without.
	Scale float64
	// Valid is the number of real samples in the batch (0: all). Rows from
	// Valid on are padding: they add nothing to the loss, their gradient is
	// zero, and the loss and gradient are means over the Valid rows
	// (HugeCTR's current_batchsize for the last batch of an epoch).
	Valid int
	Reg   *Regularizer
}

// NewLoss builds a loss over pred and label (label.Grad is not used).
func NewLoss(c *Ctx, kind LossKind, pred, label *Blob, targetWeights []float64) (*Loss, error) {
	if err := needBatch("Loss", pred, label); err != nil {
		return nil, err
	}
	switch kind {
	case BinaryCrossEntropy, MultiCrossEntropy:
		if pred.Value.Len() != label.Value.Len() || (kind == BinaryCrossEntropy && pred.Value.Cols() != 1) {
			return nil, shapeErr("Loss", "prediction %v, label %v", pred.Value, label.Value)
		}
	case CrossEntropy:
		if label.Value.Cols() != 1 || pred.Value.Cols() < 2 {
			return nil, shapeErr("Loss", "prediction %v, label %v", pred.Value, label.Value)
		}
	}
	l := &Loss{c: c, pred: pred, label: label, Kind: kind, out: &Blob{Value: c.alloc(1)}}
	if kind == MultiCrossEntropy && len(targetWeights) > 0 {
		if len(targetWeights) != pred.Value.Cols() {
			return nil, shapeErr("Loss", "%d target weights for %d columns", len(targetWeights), pred.Value.Cols())
		}
		l.weights = c.alloc(len(targetWeights))
		c.upload(l.weights, targetWeights)
	}
	return l, nil
}

// rows returns the first n rows of t (all of t when n is 0 or B).
func rows(t tensor.Tensor, n int) tensor.Tensor {
	if n <= 0 || n >= t.Rows() || t.IsZero() {
		return t
	}
	return t.Prefix(n*t.Cols()).Reshape(n, t.Cols())
}

// Forward computes the loss (and, in training, the prediction gradient: the
// loss kernels are fused).
func (l *Loss) Forward(p Pass) {
	dx := tensor.Tensor{}
	if p.Training {
		dx = l.pred.Grad
	}
	n := l.pred.Value.Rows()
	if l.Valid > 0 && l.Valid < n {
		n = l.Valid
		if !dx.IsZero() {
			l.c.BE.Fill(dx, 0)
		}
	}
	x, y, dx := rows(l.pred.Value, n), rows(l.label.Value, n), rows(dx, n)
	scale := l.Scale
	if scale == 0 {
		scale = 1
	}
	if l.Kind == CrossEntropy {
		l.c.BE.SoftmaxCE(l.out.Value, dx, x, y, scale/float64(n))
	} else {
		// The backend's BCE is a mean over rows; MultiCrossEntropy's is over
		// rows and columns.
		t := x.Cols()
		if l.Kind == MultiCrossEntropy {
			l.c.BE.MaskedBCE(l.out.Value, dx, x, y, l.weights, scale/float64(n*t))
		} else {
			l.c.BE.BCE(l.out.Value, dx, x, y, l.weights, scale/float64(n*t))
		}
		if t > 1 {
			l.c.BE.Axpby(l.out.Value, 1/float64(t), l.out.Value, 0, tensor.Tensor{})
		}
	}
	if l.Reg != nil {
		l.Reg.addLoss(l.out.Value)
	}
}

// Backward does nothing: Forward in training already wrote the gradient.
func (l *Loss) Backward(Pass) {}

// Params returns nothing.
func (l *Loss) Params() []Param { return nil }

// Outputs returns the [1] loss.
func (l *Loss) Outputs() []*Blob { return []*Blob{l.out} }

// Regularizer is HugeCTR's L1 or L2 weight regularizer over the weights
// marked Regularize: L1 adds (λ/B)·Σ|w| to the loss and (λ/B)·sign(w) to the
// gradient; L2 adds (λ/2B)·Σw² and (λ/B)·w. B is the global batch size.
type Regularizer struct {
	c      *Ctx
	L1     bool
	Lambda float64
	Batch  int
	// Scale multiplies the gradient, as Loss.Scale (0 means 1).
	Scale  float64
	params []Param
}

// NewRegularizer builds a regularizer over the marked params of layers.
func NewRegularizer(c *Ctx, l1 bool, lambda float64, batch int, ls ...Layer) *Regularizer {
	r := &Regularizer{c: c, L1: l1, Lambda: lambda, Batch: batch}
	for _, l := range ls {
		for _, p := range l.Params() {
			if p.Regularize {
				r.params = append(r.params, p)
			}
		}
	}
	return r
}

func (r *Regularizer) addLoss(loss tensor.Tensor) {
	for _, p := range r.params {
		if r.L1 {
			r.c.BE.SumAbs(loss, p.Value, r.Lambda/float64(r.Batch))
		} else {
			r.c.BE.SumSquares(loss, p.Value, r.Lambda/(2*float64(r.Batch)))
		}
	}
}

// AddGrad adds the regularizer's gradient to the weights' gradients; call
// it after the layers' Backward.
func (r *Regularizer) AddGrad() {
	k := r.Lambda / float64(r.Batch)
	if r.Scale != 0 {
		k *= r.Scale
	}
	for _, p := range r.params {
		if r.L1 {
			r.c.BE.SignAxpy(p.Grad, k, p.Value)
		} else {
			r.c.BE.Axpby(p.Grad, 1, p.Grad, k, p.Value)
		}
	}
}
