package tensor

import "math"

// MiscOps are the operations behind HugeCTR's PReLU_Dice and Cast layers
// (docs/LAYERS.md, "Cast, PReLU_Dice, …"). Both backends implement them;
// layers type-assert a Backend to MiscOps and fail construction on one that
// does not.
type MiscOps interface {
	// Dice is HugeCTR's PRelu_Dice forward over x [Rows, Cols]: per column
	// c the batch mean mean[c] = E[x] and variance variance[c] = E[x²] −
	// E[x]² (over the rows, biased, clamped at 0; written to the [Cols]
	// tensors mean and variance), then y = p·x + (1−p)·alpha·x with p =
	// 1/(1 + exp((mean − x)/√(variance + eps))). y may alias x.
	Dice(y, x, mean, variance Tensor, alpha, eps float64)
	// DiceGrad is HugeCTR's PRelu_Dice backward from Dice's statistics:
	// dx = dy·((p_s·x + p)(1−alpha) + alpha), the diagonal of the Jacobian
	// (the batch statistics' dependence on x through the element itself,
	// with m = Rows; the other rows' terms are dropped as in HugeCTR), 1/√
	// and 1/√³ of variance+eps taken as 0 when variance+eps < 1e-8. dx may
	// alias dy.
	DiceGrad(dx, dy, x, mean, variance Tensor, alpha, eps float64)
	// RoundHalf sets dst to src rounded to the nearest IEEE binary16 value
	// (ties to even; beyond ±65504 by more than half a step: ±Inf; NaN
	// stays NaN), kept in dst's float dtype: HugeCTR's Cast to __half.
	// dst may alias src.
	RoundHalf(dst, src Tensor)
}

// RoundHalf32 is RoundHalf for one float32 (the CPU's and the reference's
// arithmetic; the CUDA kernel does the same integer steps).
func RoundHalf32(f float32) float32 {
	x := math.Float32bits(f)
	sign := x & 0x80000000
	a := x &^ 0x80000000
	switch {
	case a > 0x7f800000: // NaN
		return f
	case a >= 0x477ff000: // ≥ 65520: beyond the largest half plus half a step
		return math.Float32frombits(sign | 0x7f800000)
	case a < 0x38800000: // below 2^-14: a multiple of 2^-24
		e := a >> 23
		if e == 0 {
			return math.Float32frombits(sign)
		}
		shift := 126 - e // ≥ 14
		if shift > 25 {
			return math.Float32frombits(sign)
		}
		m := a&0x7fffff | 0x800000
		q := m >> shift
		rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && q&1 == 1 {
			q++
		}
		v := float32(q) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	q, rem := a>>13, a&0x1fff
	if rem > 0x1000 || rem == 0x1000 && q&1 == 1 {
		q++
	}
	return math.Float32frombits(sign | q<<13)
}

// CheckDice checks Dice's and DiceGrad's operands: x (and y, dy, dx) of one
// length, mean and variance of x.Cols() elements.
func CheckDice(op string, x, mean, variance Tensor, same ...Tensor) error {
	if err := CheckSameLen(op, append([]Tensor{x}, same...)...); err != nil {
		return err
	}
	for _, t := range same {
		if t.Buf == nil {
			return Errorf(op, ErrShape, "missing operand")
		}
	}
	if x.Buf == nil || mean.Len() != x.Cols() || variance.Len() != x.Cols() {
		return Errorf(op, ErrShape, "x %v with statistics %v, %v", x, mean, variance)
	}
	return nil
}
