package inspect

import (
	"math"
	"math/bits"
)

// hllP is the HyperLogLog precision: 2^14 registers, ≈ 0.81 % error.
const hllP = 14

// hll is a HyperLogLog sketch of 64-bit keys.
type hll struct {
	reg [1 << hllP]uint8
}

// mix64 is SplitMix64's finaliser, a good 64-bit hash of a key.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (h *hll) add(k int64) {
	x := mix64(uint64(k))
	i := x >> (64 - hllP)
	r := uint8(bits.LeadingZeros64(x<<hllP|1<<(hllP-1))) + 1
	if r > h.reg[i] {
		h.reg[i] = r
	}
}

// estimate returns the estimated number of distinct keys added.
func (h *hll) estimate() float64 {
	const m = 1 << hllP
	var sum float64
	zeros := 0
	for _, r := range h.reg {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	alpha := 0.7213 / (1 + 1.079/m)
	e := alpha * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		return m * math.Log(float64(m)/float64(zeros)) // linear counting
	}
	return e
}
