package tensor

import "math"

// Half-precision bit patterns, as the GPU stores Float16 and BFloat16
// tensors (2 bytes an element, little-endian):
//
//	Float16   IEEE 754 binary16: sign 1, exponent 5 (bias 15), fraction 10;
//	          largest finite 65504, smallest normal 2^-14, subnormals to 2^-24.
//	BFloat16  the upper 16 bits of a float32: sign 1, exponent 8 (bias 127),
//	          fraction 7; float32's range, 8 significant bits.
//
// Rounding from float32 is to nearest, ties to even; NaN stays NaN (a quiet
// NaN); a Float16 beyond 65504 by half a step or more is ±Inf. The CUDA
// kernels round the same way (cvt.rn.f16.f32, cvt.rn.bf16.f32), so the
// host's and the device's values are equal bit for bit.

// F16Bits rounds f to the nearest binary16 and returns its bits.
func F16Bits(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	a := x &^ 0x80000000
	switch {
	case a > 0x7f800000: // NaN: keep it quiet
		return sign | 0x7e00 | uint16(a>>13)&0x1ff
	case a >= 0x477ff000: // ≥ 65520: Inf
		return sign | 0x7c00
	case a < 0x38800000: // below 2^-14: subnormal or zero
		r := RoundHalf32(math.Float32frombits(a)) // a multiple of 2^-24
		return sign | uint16(r*(1<<24))
	}
	// Normal: rebias the exponent (127 → 15) and round the fraction.
	q, rem := a>>13, a&0x1fff
	if rem > 0x1000 || rem == 0x1000 && q&1 == 1 {
		q++ // may carry into the exponent, up to 0x7c00 (Inf) at most
	}
	return sign | uint16(q-(112<<10))
}

// F16Value is the float32 value of binary16 bits (exact).
func F16Value(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e, m := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch {
	case e == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	case e == 0: // zero, subnormal: m·2^-24
		v := float32(m) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}

// BF16Bits rounds f to the nearest bfloat16 and returns its bits.
func BF16Bits(f float32) uint16 {
	x := math.Float32bits(f)
	if x&0x7fffffff > 0x7f800000 { // NaN: keep it quiet
		return uint16(x>>16) | 0x40
	}
	x += 0x7fff + (x>>16)&1
	return uint16(x >> 16)
}

// BF16Value is the float32 value of bfloat16 bits (exact).
func BF16Value(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// RoundTo rounds f to the nearest value of the float dtype dt (Float16,
// BFloat16; other dtypes: f itself), kept in a float32: the reference's
// model of a value stored in half precision.
func RoundTo(dt DType, f float32) float32 {
	switch dt {
	case Float16:
		return F16Value(F16Bits(f))
	case BFloat16:
		return BF16Value(BF16Bits(f))
	}
	return f
}
