package inspect

import (
	"math"
	"slices"
)

// Fit is the result of a power-law fit of one slot's rank–frequency.
type Fit struct {
	// Alpha is the maximum-likelihood exponent of p(r) ∝ r^−α.
	Alpha float64
	// RMin and RMax bound the ranks fitted; M is the support of the model
	// (the largest rank with non-zero probability).
	RMin, RMax, M int64
	// Samples is the number of key occurrences the fit used.
	Samples int64
}

// Alpha bounds of the fit.
const (
	minAlpha float64 = 0.01
	maxAlpha float64 = 6
)

// FitRankFrequency fits a discrete power law p(r) ∝ r^−α to the counts of a
// slot's keys ranked by frequency (rank 1 = most frequent key), by maximum
// likelihood on ranks r ∈ [rmin, rmax] with the model truncated to
// [rmin, m]: m ≥ rmax; ranks in (rmax, m] are keys never seen (count 0),
// so m is the slot's vocabulary size when it is known. To fit only the head
// of the ranking (conditionally on r ≤ rmax) pass m = rmax. counts need not be
// sorted; they are sorted in place, descending. The log-likelihood
//
//	ℓ(α) = −α Σ_r c_r ln r − N ln Z(α),  Z(α) = Σ_{r=rmin}^{m} r^−α
//
// is concave in α, so a golden-section search on [0.01, 6] finds its
// maximum. Z is summed exactly for the first ranks and by Euler–Maclaurin
// beyond, so the cost does not depend on m. ok is false when fewer than two
// ranks hold counts.
func FitRankFrequency(counts []int64, rmin, rmax, m int64) (f Fit, ok bool) {
	slices.SortFunc(counts, func(a, b int64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	for len(counts) > 0 && counts[len(counts)-1] == 0 {
		counts = counts[:len(counts)-1]
	}
	if rmin < 1 {
		rmin = 1
	}
	if rmax <= 0 || rmax > int64(len(counts)) {
		rmax = int64(len(counts))
	}
	if m < rmax {
		m = rmax
	}
	f = Fit{RMin: rmin, RMax: rmax, M: m, Alpha: math.NaN()}
	if rmax-rmin+1 < 2 {
		return f, false
	}
	var n, sl float64
	for r := rmin; r <= rmax; r++ {
		c := float64(counts[r-1])
		n += c
		sl += c * math.Log(float64(r))
	}
	f.Samples = int64(n)
	if n == 0 {
		return f, false
	}
	ll := func(a float64) float64 { return -a*sl - n*math.Log(zeta(a, rmin, m)) }
	lo, hi := minAlpha, maxAlpha
	const g = 0.6180339887498949
	x1, x2 := hi-g*(hi-lo), lo+g*(hi-lo)
	f1, f2 := ll(x1), ll(x2)
	for hi-lo > 1e-7 {
		if f1 < f2 {
			lo, x1, f1 = x1, x2, f2
			x2 = lo + g*(hi-lo)
			f2 = ll(x2)
		} else {
			hi, x2, f2 = x2, x1, f1
			x1 = hi - g*(hi-lo)
			f1 = ll(x1)
		}
	}
	f.Alpha = (lo + hi) / 2
	return f, true
}

// zetaExact is how many terms of Z are summed directly.
const zetaExact = 2000

// zeta returns Σ_{r=lo}^{hi} r^−a: the first terms exactly, the rest by
// Euler–Maclaurin (integral, end-point and first two derivative
// corrections), accurate to far below what the fit can resolve.
func zeta(a float64, lo, hi int64) float64 {
	var s float64
	r := lo
	for ; r <= hi && r < lo+zetaExact; r++ {
		s += math.Pow(float64(r), -a)
	}
	if r > hi {
		return s
	}
	x0, x1 := float64(r), float64(hi)
	f := func(x float64) float64 { return math.Pow(x, -a) }
	var integral float64
	if math.Abs(a-1) < 1e-12 {
		integral = math.Log(x1 / x0)
	} else {
		integral = (math.Pow(x1, 1-a) - math.Pow(x0, 1-a)) / (1 - a)
	}
	d1 := func(x float64) float64 { return -a * math.Pow(x, -a-1) }
	d3 := func(x float64) float64 { return -a * (a + 1) * (a + 2) * math.Pow(x, -a-3) }
	return s + integral + (f(x0)+f(x1))/2 + (d1(x1)-d1(x0))/12 - (d3(x1)-d3(x0))/720
}
