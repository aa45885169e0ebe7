package layers

import (
	"fmt"
	"math"
)

// LossSum is the loss of a multi-task model (HugeCTR compile(loss_names,
// loss_weights)): the weighted sum Σ_i w_i·L_i of its loss layers' losses
// plus the regularizer's term once. Each loss layer's gradient is scaled
// by its weight (NewLossSum sets the losses' Scale), so training follows
// the gradient of the reported loss.
//
// HugeCTR's kernels weight only the reported loss (loss.cu's
// BinaryCrossEntropy_Kernel multiplies the summary, not the gradient, by
// label_weight, and MultiCrossEntropyLoss ignores it): there the weights
// change the displayed loss but not training. ctrkit trains the weighted
// sum the compile() documentation describes.
type LossSum struct {
	c       *Ctx
	losses  []*Loss
	weights []float64
	out     *Blob
	// Reg, when set, adds the regularizer's term to the sum (attach it here,
	// not to the losses).
	Reg *Regularizer
}

// NewLossSum builds the weighted sum of losses; scale is the mixed-precision
// loss scale (0 means 1). Weights must be finite and ≥ 0; a loss of weight
// 0 is computed and reported but gets no gradient.
func NewLossSum(c *Ctx, losses []*Loss, weights []float64, scale float64) (*LossSum, error) {
	if len(losses) == 0 || len(losses) != len(weights) {
		return nil, fmt.Errorf("LossSum: %d losses, %d weights", len(losses), len(weights))
	}
	if scale == 0 {
		scale = 1
	}
	for i, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("LossSum: loss weight %v: want a finite weight ≥ 0", w)
		}
		losses[i].Scale = scale * w
		if losses[i].Reg != nil {
			return nil, fmt.Errorf("LossSum: loss %d has a regularizer of its own", i)
		}
	}
	return &LossSum{c: c, losses: losses, weights: weights, out: &Blob{Value: c.alloc(1)}}, nil
}

// Forward sums the losses (run it after the loss layers' Forward); in
// training it clears the gradient of a loss of weight 0 (a Scale of 0
// means 1 to the loss layer).
func (l *LossSum) Forward(p Pass) {
	for i, ll := range l.losses {
		w := l.weights[i]
		if i == 0 {
			l.c.BE.Axpby(l.out.Value, w, ll.out.Value, 0, ll.out.Value)
		} else {
			l.c.BE.Axpby(l.out.Value, 1, l.out.Value, w, ll.out.Value)
		}
		if w == 0 && p.Training && !ll.pred.Grad.IsZero() {
			l.c.BE.Fill(ll.pred.Grad, 0)
		}
	}
	if l.Reg != nil {
		l.Reg.addLoss(l.out.Value)
	}
}

// Backward does nothing: the loss layers wrote the gradients.
func (l *LossSum) Backward(Pass) {}

// Params returns nothing.
func (l *LossSum) Params() []Param { return nil }

// Outputs returns the [1] total loss.
func (l *LossSum) Outputs() []*Blob { return []*Blob{l.out} }
