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
