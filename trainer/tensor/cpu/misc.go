package cpu

import (
	"math"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The tensor.MiscOps operations (PReLU_Dice, Cast).

// Dice is HugeCTR's PRelu_Dice forward (tensor.MiscOps).
func (be *Backend) Dice(y, x, mean, variance tensor.Tensor, alpha, eps float64) {
	const op = "dice"
	dt, ok := be.floats(op, y, x, mean, variance)
	if !ok || !be.check(tensor.CheckDice(op, x, mean, variance, y)) {
		return
	}
	if dt == tensor.Float32 {
		dice(be, data[float32](y), data[float32](x), data[float32](mean), data[float32](variance), x.Cols(), alpha, eps)
	} else {
		dice(be, data[float64](y), data[float64](x), data[float64](mean), data[float64](variance), x.Cols(), alpha, eps)
	}
}

func dice[T float](be *Backend, y, x, mean, variance []T, n int, alpha, eps float64) {
	if n == 0 || len(x) == 0 {
		return
	}
	m := len(x) / n
	be.par(n, max(1, elemGrain/m), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var s, s2 float64
			for r := 0; r < m; r++ {
				v := float64(x[r*n+c])
				s += v
				s2 += v * v
			}
			e := s / float64(m)
			mean[c], variance[c] = T(e), T(max(0, s2/float64(m)-e*e))
		}
	})
	be.par(m, max(1, elemGrain/n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			for c := 0; c < n; c++ {
				v := float64(x[r*n+c])
				p := 1 / (1 + math.Exp((float64(mean[c])-v)/math.Sqrt(float64(variance[c])+eps)))
				y[r*n+c] = T(p*v + (1-p)*alpha*v)
			}
		}
	})
}

// DiceGrad is HugeCTR's PRelu_Dice backward (tensor.MiscOps).
func (be *Backend) DiceGrad(dx, dy, x, mean, variance tensor.Tensor, alpha, eps float64) {
	const op = "dice_grad"
	dt, ok := be.floats(op, dx, dy, x, mean, variance)
	if !ok || !be.check(tensor.CheckDice(op, x, mean, variance, dx, dy)) {
		return
	}
	if dt == tensor.Float32 {
		diceGrad(be, data[float32](dx), data[float32](dy), data[float32](x), data[float32](mean), data[float32](variance), x.Cols(), alpha, eps)
	} else {
		diceGrad(be, data[float64](dx), data[float64](dy), data[float64](x), data[float64](mean), data[float64](variance), x.Cols(), alpha, eps)
	}
}

func diceGrad[T float](be *Backend, dx, dy, x, mean, variance []T, n int, alpha, eps float64) {
	if n == 0 || len(x) == 0 {
		return
	}
	m := len(x) / n
	inv := 1 / float64(m)
	be.par(m, max(1, elemGrain/n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			for c := 0; c < n; c++ {
				i := r*n + c
				dx[i] = T(DiceDeriv(float64(x[i]), float64(mean[c]), float64(variance[c]), inv, alpha, eps) * float64(dy[i]))
			}
		}
	})
}

// DiceDeriv is ∂y/∂x of one Dice element as HugeCTR's bprop computes it
// (tensor.MiscOps.DiceGrad): s the input, e and v its column's batch mean
// and variance, inv = 1/rows.
func DiceDeriv(s, e, v, inv, alpha, eps float64) float64 {
	var r1, r3 float64 // 1/√(v+eps), 1/√(v+eps)³
	if v+eps >= 1e-8 {
		r1 = 1 / math.Sqrt(v+eps)
		r3 = r1 * r1 * r1
	}
	ysS := (inv-1)*r1 - inv*(e-s)*r3*(s-e)
	p := 1 / (1 + math.Exp((e-s)*r1))
	// HugeCTR's −e^ys·ys_s/(1+e^ys)² written as −ys_s·p(1−p), which does
	// not overflow for large ys.
	pS := -ysS * p * (1 - p)
	return (pS*s+p)*(1-alpha) + alpha
}

// RoundHalf rounds to binary16 values (tensor.MiscOps).
func (be *Backend) RoundHalf(dst, src tensor.Tensor) {
	const op = "round_half"
	dt, ok := be.floats(op, dst, src)
	if !ok || !be.check(tensor.CheckSameLen(op, dst, src)) {
		return
	}
	if dt == tensor.Float32 {
		d, s := data[float32](dst), data[float32](src)
		be.par(len(s), elemGrain, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				d[i] = tensor.RoundHalf32(s[i])
			}
		})
		return
	}
	d, s := data[float64](dst), data[float64](src)
	be.par(len(s), elemGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			// Through float32 first: a float64 between float32 values
			// could round differently directly (double rounding aside,
			// HugeCTR's Cast input is float32).
			d[i] = float64(tensor.RoundHalf32(float32(s[i])))
		}
	})
}

var _ tensor.MiscOps = (*Backend)(nil)
