package datagen

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
)

// Power-law exponents of HugeCTR's PowerLaw_t presets (SPEC §5).
const (
	AlphaLong   = 0.9
	AlphaMedium = 1.1
	AlphaShort  = 1.3
)

// A Sampler draws keys in a closed range [Lo, Hi] from an explicit random
// source. Samplers are immutable after construction and safe for concurrent
// use (each goroutine brings its own source).
type Sampler interface {
	Sample(src rand.Source) int64
	// Range returns the inclusive key range.
	Range() (lo, hi int64)
}

// unitFloat maps a 64-bit random value to x ∈ [0, 1) with 53 random bits,
// as math/rand/v2's Float64 does.
func unitFloat(u uint64) float64 { return float64(u>>11) * (1.0 / (1 << 53)) }

// PowerLawKey is the exact inverse-CDF formula of SPEC §5: for the range
// [lo, hi], M = hi − lo + 1 and x ∈ [0, 1),
//
//	y   = ((M^(1−α) − 1)·x + 1)^(1/(1−α))
//	key = round(y) + lo − 1
//
// so key lo is the hottest. α must be > 0 and ≠ 1 (not checked here).
func PowerLawKey(lo, hi int64, alpha, x float64) int64 {
	m := float64(hi - lo + 1)
	a := math.Pow(m, 1-alpha) - 1
	return powerLawKey(lo, hi, a, 1/(1-alpha), x)
}

// powerLawKey evaluates the formula as y = exp(log(a·x + 1)/(1−α)): the
// same function as math.Pow(a·x+1, 1/(1−α)) to within a few ulps, about
// twice as fast.
func powerLawKey(lo, hi int64, a, inv, x float64) int64 {
	y := math.Exp(inv * math.Log(a*x+1))
	k := int64(math.Round(y)) + lo - 1
	if k < lo || y != y {
		k = lo
	}
	if k > hi {
		k = hi
	}
	return k
}

// PowerLaw samples keys of [lo, hi] with p(y) ∝ y^−α by PowerLawKey. The
// hottest keys are found in a table of the cumulative thresholds
// F(k+½) = ((k+½)^(1−α) − 1)/(M^(1−α) − 1) instead of evaluating math.Pow;
// an x within powerLawMargin of a threshold, and every x beyond the table,
// falls back to the formula, so Sample returns exactly PowerLawKey's key for
// every x.
type PowerLaw struct {
	lo, hi int64
	alpha  float64
	a, inv float64
	// thr[k-1] = F(k+½) for k = 1..len(thr): keys lo..lo+len(thr)-1 are
	// resolved by the table when x < thr[len(thr)-1].
	thr []float64
	// guide[g] describes the x-bucket [g/G, (g+1)/G), G = powerLawGuide:
	// its low 15 bits are the number of thresholds ≤ g/G (where the search
	// starts), and guidePure is set when no threshold lies within
	// powerLawMargin of the bucket, so every x in it maps to that key.
	guide []uint16
	shift uint // 64 − log2(len(guide)−1)
}

const (
	powerLawTable     = 4096
	powerLawGuideBits = 14
	powerLawGuide     = 1 << powerLawGuideBits
	powerLawMargin    = 1e-8
	guidePure         = 1 << 15
)

// NewPowerLaw returns a power-law sampler on [lo, hi] with exponent alpha
// (> 0, ≠ 1).
func NewPowerLaw(lo, hi int64, alpha float64) (*PowerLaw, error) {
	if hi < lo {
		return nil, fmt.Errorf("empty key range [%d, %d]", lo, hi)
	}
	if !(alpha > 0) || alpha == 1 || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("power-law alpha %v must be > 0 and ≠ 1", alpha)
	}
	m := float64(hi - lo + 1)
	p := &PowerLaw{lo: lo, hi: hi, alpha: alpha, a: math.Pow(m, 1-alpha) - 1, inv: 1 / (1 - alpha), shift: 64}
	k := int64(powerLawTable)
	if hi-lo+1 < k {
		k = hi - lo + 1
	}
	if p.a == 0 || k < 2 {
		// One key, or M so close to 1 that every x maps to lo: a guide of
		// one pure bucket (indexed by u >> 64, always 0).
		p.guide = []uint16{guidePure, guidePure}
		return p, nil
	}
	p.thr = make([]float64, k-1)
	for i := range p.thr {
		y := float64(i+1) + 0.5
		p.thr[i] = (math.Pow(y, 1-alpha) - 1) / p.a
	}
	p.guide = make([]uint16, powerLawGuide+1)
	p.shift = 64 - powerLawGuideBits
	j := 0
	for i := range p.guide {
		lower, upper := float64(i)/powerLawGuide, float64(i+1)/powerLawGuide
		for j < len(p.thr) && p.thr[j] <= lower {
			j++
		}
		p.guide[i] = uint16(j)
		if j < len(p.thr) && p.thr[j] >= upper+powerLawMargin && (j == 0 || lower-p.thr[j-1] >= powerLawMargin) {
			p.guide[i] |= guidePure
		}
	}
	return p, nil
}

// Range implements Sampler.
func (p *PowerLaw) Range() (lo, hi int64) { return p.lo, p.hi }

// Alpha returns the exponent.
func (p *PowerLaw) Alpha() float64 { return p.alpha }

// Sample implements Sampler.
func (p *PowerLaw) Sample(src rand.Source) int64 { return p.draw(src.Uint64()) }

// draw returns the key for the random value u, x = unitFloat(u). It is
// small enough to be inlined in the generator's loop.
func (p *PowerLaw) draw(u uint64) int64 {
	// floor(x·G) for x = (u>>11)·2^-53 is u >> (64 − log2 G); a
	// one-bucket guide has shift 64 (Go shifts ≥ 64 give 0).
	if e := p.guide[u>>p.shift]; e&guidePure != 0 {
		return p.lo + int64(e&^guidePure)
	}
	return p.At(unitFloat(u))
}

// At returns the key for x ∈ [0, 1): PowerLawKey(lo, hi, α, x).
func (p *PowerLaw) At(x float64) int64 {
	t := p.thr
	if len(t) == 0 || x >= t[len(t)-1]-powerLawMargin {
		return powerLawKey(p.lo, p.hi, p.a, p.inv, x)
	}
	// First j with t[j] > x: then key index j (0-based), t[j-1] ≤ x.
	g := int(x * powerLawGuide)
	j, hiJ := int(p.guide[g]&^guidePure), int(p.guide[g+1]&^guidePure)
	// t[guide[g]-1] ≤ g/G ≤ x and t[guide[g+1]] > (g+1)/G > x.
	for j < hiJ {
		mid := int(uint(j+hiJ) >> 1)
		if t[mid] <= x {
			j = mid + 1
		} else {
			hiJ = mid
		}
	}
	if t[j]-x < powerLawMargin || (j > 0 && x-t[j-1] < powerLawMargin) {
		return powerLawKey(p.lo, p.hi, p.a, p.inv, x)
	}
	return p.lo + int64(j)
}

// Uniform samples keys uniformly on [lo, hi].
type Uniform struct {
	lo int64
	n  uint64
}

// NewUniform returns a uniform sampler on [lo, hi].
func NewUniform(lo, hi int64) (*Uniform, error) {
	if hi < lo {
		return nil, fmt.Errorf("empty key range [%d, %d]", lo, hi)
	}
	return &Uniform{lo: lo, n: uint64(hi-lo) + 1}, nil
}

// Range implements Sampler.
func (u *Uniform) Range() (lo, hi int64) { return u.lo, u.lo + int64(u.n-1) }

// Sample implements Sampler.
func (u *Uniform) Sample(src rand.Source) int64 { return u.lo + int64(uint64n(src.Uint64(), u.n)) }

// uint64n maps a random 64-bit value to [0, n) by Lemire's multiply-shift.
// Its bias is below n/2^64, far under any statistical test's resolution, and
// it uses exactly one random value per key, which keeps streams aligned.
func uint64n(r, n uint64) uint64 {
	hi, _ := bits.Mul64(r, n)
	return hi
}
