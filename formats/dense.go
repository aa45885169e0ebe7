package formats

import (
	"math"
	"sync"
)

// DenseFromInt32 is the Raw format's transform of an int32 dense value
// (SPEC §3.1): ln(x+1), with negative x clamped to 0 first. Every reader and
// writer uses it, so a value is the same float32 whichever path produced it.
// Values below 1<<16 come from a table (the hot path of the Raw decoder).
func DenseFromInt32(x int32) float32 {
	if uint32(x) < denseTableLen {
		return denseTable()[x]
	}
	if x < 0 {
		return 0
	}
	return float32(math.Log(float64(x) + 1))
}

// DenseTable returns the table behind DenseFromInt32: t[x] = ln(x+1) for
// 0 ≤ x < len(t). Decoders index it directly; it must not be modified.
func DenseTable() *[denseTableLen]float32 { return denseTable() }

const denseTableLen = 1 << 16

var denseTable = sync.OnceValue(func() *[denseTableLen]float32 {
	t := new([denseTableLen]float32)
	for i := range t {
		t[i] = float32(math.Log(float64(i) + 1))
	}
	return t
})

// inverse buckets: bucket k holds the smallest x with table[x] ≥ k/invScale,
// so the preimage of v is found by a short forward scan from bucket
// ⌊v·invScale⌋ (at most a few steps: the table's slope is ≥ 1/65536).
const invScale = 4096

var inverseTable = sync.OnceValue(func() []int32 {
	t := denseTable()
	top := t[denseTableLen-1]
	inv := make([]int32, int(top*invScale)+2)
	x := 0
	for k := range inv {
		for x < denseTableLen && t[x] < float32(k)/invScale {
			x++
		}
		inv[k] = int32(x)
	}
	return inv
})

// Int32FromDense inverts DenseFromInt32 on the table range: it returns the x
// in [0, 1<<16) with DenseFromInt32(x) == v, and false when v is outside
// the range or no integer there maps exactly to v.
func Int32FromDense(v float32) (int32, bool) {
	t := denseTable()
	if !(v >= 0) || v > t[denseTableLen-1] {
		return 0, false
	}
	inv := inverseTable()
	k := int(v * invScale)
	if k >= len(inv) {
		return 0, false
	}
	for x := inv[k]; x < denseTableLen; x++ {
		if t[x] >= v {
			if t[x] == v {
				return x, true
			}
			return 0, false
		}
	}
	return 0, false
}
