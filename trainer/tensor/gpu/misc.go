package gpu

import (
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The tensor.MiscOps operations (kernels/misc.cu); shapes and arithmetic
// mirror cpu/misc.go.

// Dice is HugeCTR's PRelu_Dice forward.
func (be *Backend) Dice(y, x, mean, variance tensor.Tensor, alpha, eps float64) {
	const op = "dice"
	if !be.floats(op, y, x, mean, variance) || !be.check(tensor.CheckDice(op, x, mean, variance, y)) {
		return
	}
	n, total := x.Cols(), x.Len()
	if n == 0 || total == 0 {
		return
	}
	m := total / n
	be.do(op, func(c *cuda.Ctx) error {
		blocks := min((n+31)/32, be.sms*8)
		if err := be.launch(c, "misc_dice_stats", cuda.D1(blocks), cuda.Dim3{X: 32, Y: 32, Z: 1}, 0,
			p(mean), p(variance), p(x), int64(m), n); err != nil {
			return err
		}
		return be.launch1(c, "misc_dice_fwd", total, p(y), p(x), p(mean), p(variance), int64(total), n, alpha, eps)
	})
}

// DiceGrad is HugeCTR's PRelu_Dice backward.
func (be *Backend) DiceGrad(dx, dy, x, mean, variance tensor.Tensor, alpha, eps float64) {
	const op = "dice_grad"
	if !be.floats(op, dx, dy, x, mean, variance) || !be.check(tensor.CheckDice(op, x, mean, variance, dx, dy)) {
		return
	}
	n, total := x.Cols(), x.Len()
	if n == 0 || total == 0 {
		return
	}
	inv := 1 / float64(total/n)
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "misc_dice_bwd", total, p(dx), p(dy), p(x), p(mean), p(variance), int64(total), n, inv, alpha, eps)
	})
}

// RoundHalf rounds to binary16 values.
func (be *Backend) RoundHalf(dst, src tensor.Tensor) {
	const op = "round_half"
	if !be.floats(op, dst, src) || !be.nnPresent(op, dst, src) || !be.check(tensor.CheckSameLen(op, dst, src)) {
		return
	}
	n := src.Len()
	if n == 0 {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "misc_round_half", n, p(dst), p(src), int64(n))
	})
}

var _ tensor.MiscOps = (*Backend)(nil)
