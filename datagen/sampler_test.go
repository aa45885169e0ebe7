package datagen

import (
	"math"
	"math/rand/v2"
	"testing"
)

// powerLawCDF is F(y) = (y^(1−α) − 1)/(M^(1−α) − 1), clamped to [0, 1].
func powerLawCDF(y, m, alpha float64) float64 {
	if y <= 1 {
		return 0
	}
	if y >= m {
		return 1
	}
	return (math.Pow(y, 1-alpha) - 1) / (math.Pow(m, 1-alpha) - 1)
}

// keyProb is the probability of the 1-based key range [a, b] under the
// rounded power law: F(b+½) − F(a−½).
func keyProb(a, b int64, m, alpha float64) float64 {
	return powerLawCDF(float64(b)+0.5, m, alpha) - powerLawCDF(float64(a)-0.5, m, alpha)
}

// mleAlpha estimates α by maximum likelihood from key counts (1-based keys
// 1..M): keys ≤ 1000 individually, the rest in log-spaced bins, which is
// the exact likelihood of the binned data.
func mleAlpha(counts []int64, m int64) float64 {
	type bin struct {
		a, b int64
		c    float64
	}
	var bins []bin
	for k := int64(1); k <= m; {
		hi := k
		if k > 1000 {
			hi = min(m, int64(float64(k)*1.05))
		}
		var c int64
		for j := k; j <= hi; j++ {
			c += counts[j]
		}
		bins = append(bins, bin{k, hi, float64(c)})
		k = hi + 1
	}
	ll := func(alpha float64) float64 {
		var s float64
		for _, b := range bins {
			if b.c > 0 {
				s += b.c * math.Log(keyProb(b.a, b.b, float64(m), alpha))
			}
		}
		return s
	}
	// Golden-section search for the maximum.
	lo, hi := 0.3, 2.5
	g := (math.Sqrt(5) - 1) / 2
	x1, x2 := hi-g*(hi-lo), lo+g*(hi-lo)
	f1, f2 := ll(x1), ll(x2)
	for hi-lo > 1e-5 {
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
	return (lo + hi) / 2
}

func TestPowerLawMLE(t *testing.T) {
	const m = 1_000_000
	const n = 1_000_000
	for i, alpha := range []float64{0.9, 1.2, 1.5} {
		lo := int64(1000 * i) // a range not starting at 0
		pl, err := NewPowerLaw(lo, lo+m-1, alpha)
		if err != nil {
			t.Fatal(err)
		}
		src := rand.NewPCG(uint64(i), 42)
		counts := make([]int64, m+1)
		for range n {
			k := pl.Sample(src)
			if k < lo || k > lo+m-1 {
				t.Fatalf("α %v: key %d outside [%d, %d]", alpha, k, lo, lo+m-1)
			}
			counts[k-lo+1]++
		}
		// Key 1 only gets y ∈ [1, 1.5); from key 2 on, smaller is hotter.
		if counts[2] < counts[3] || counts[3] < counts[10] || counts[10] < counts[1000] {
			t.Errorf("α %v: smallest keys not hottest: %d %d %d %d", alpha, counts[2], counts[3], counts[10], counts[1000])
		}
		est := mleAlpha(counts, m)
		t.Logf("α %v: MLE %.4f", alpha, est)
		if math.Abs(est-alpha) > 0.03 {
			t.Errorf("α %v: MLE %.4f off by more than 0.03", alpha, est)
		}
	}
}

// chiSquareP returns the upper tail probability of a chi-square statistic
// with k degrees of freedom (Wilson–Hilferty approximation).
func chiSquareP(x float64, k int) float64 {
	kf := float64(k)
	z := (math.Cbrt(x/kf) - (1 - 2/(9*kf))) / math.Sqrt(2/(9*kf))
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

func TestUniformChiSquare(t *testing.T) {
	for _, c := range []struct{ lo, m int64 }{{0, 1000}, {123456, 5000}, {7, 2}} {
		u, err := NewUniform(c.lo, c.lo+c.m-1)
		if err != nil {
			t.Fatal(err)
		}
		src := rand.NewPCG(7, uint64(c.m))
		const n = 1_000_000
		counts := make([]float64, c.m)
		for range n {
			k := u.Sample(src)
			if k < c.lo || k >= c.lo+c.m {
				t.Fatalf("key %d outside [%d, %d)", k, c.lo, c.lo+c.m)
			}
			counts[k-c.lo]++
		}
		e := float64(n) / float64(c.m)
		var x2 float64
		for _, o := range counts {
			x2 += (o - e) * (o - e) / e
		}
		p := chiSquareP(x2, int(c.m-1))
		t.Logf("uniform [%d, +%d): χ² %.1f, p %.3f", c.lo, c.m, x2, p)
		if p <= 0.001 {
			t.Errorf("uniform [%d, +%d): χ² %.1f, p %.4g ≤ 0.001", c.lo, c.m, x2, p)
		}
	}
	// The chi-square test must be able to fail: 20% of keys 0..9 moved.
	counts := make([]float64, 1000)
	src := rand.NewPCG(1, 2)
	for range 1_000_000 {
		k := uint64n(src.Uint64(), 1000)
		if k < 10 && src.Uint64()%5 == 0 {
			k += 500
		}
		counts[k]++
	}
	var x2 float64
	for _, o := range counts {
		x2 += (o - 1000) * (o - 1000) / 1000
	}
	if p := chiSquareP(x2, 999); p > 0.001 {
		t.Errorf("skewed sampler passed the chi-square test (p %.4g)", p)
	}
}

// TestPowerLawFastPath checks that the table path returns exactly the
// formula's key, on random x and on x next to every table threshold.
func TestPowerLawFastPath(t *testing.T) {
	cases := []struct {
		lo, hi int64
		alpha  float64
	}{
		{0, 999_999, 1.2}, {5, 5, 1.2}, {0, 1, 0.9}, {100, 102, 1.3}, {0, 9999, 0.5},
		{0, 1 << 32, 1.1}, {0, 4095, 3}, {1 << 20, 1<<20 + 4096, 0.9}, {0, 99, 1.0000001},
	}
	src := rand.NewPCG(3, 4)
	for _, c := range cases {
		pl, err := NewPowerLaw(c.lo, c.hi, c.alpha)
		if err != nil {
			t.Fatal(err)
		}
		check := func(x float64) {
			if x < 0 || x >= 1 {
				return
			}
			got, want := pl.At(x), PowerLawKey(c.lo, c.hi, c.alpha, x)
			if got != want {
				t.Fatalf("[%d,%d] α %v x %.17g: fast %d, formula %d", c.lo, c.hi, c.alpha, x, got, want)
			}
		}
		for range 200_000 {
			u := src.Uint64()
			x := unitFloat(u)
			check(x)
			if got, want := pl.draw(u), PowerLawKey(c.lo, c.hi, c.alpha, x); got != want {
				t.Fatalf("[%d,%d] α %v x %.17g: guide %d, formula %d", c.lo, c.hi, c.alpha, x, got, want)
			}
		}
		// Every bucket edge through the guide path.
		for g := uint64(0); g < powerLawGuide; g++ {
			for _, u := range []uint64{g << (64 - powerLawGuideBits), (g+1)<<(64-powerLawGuideBits) - 1} {
				if got, want := pl.draw(u), PowerLawKey(c.lo, c.hi, c.alpha, unitFloat(u)); got != want {
					t.Fatalf("[%d,%d] α %v bucket %d: guide %d, formula %d", c.lo, c.hi, c.alpha, g, got, want)
				}
			}
		}
		for _, th := range pl.thr {
			for _, d := range []float64{0, 1e-7, -1e-7, 1e-9, -1e-9, 1e-12, -1e-12} {
				check(th + d)
				check(math.Nextafter(th+d, 2))
				check(math.Nextafter(th+d, -1))
			}
		}
		check(0)
		check(math.Nextafter(1, 0))
	}
}

func TestSamplerErrors(t *testing.T) {
	for _, a := range []float64{0, -1, 1, math.NaN(), math.Inf(1)} {
		if _, err := NewPowerLaw(0, 10, a); err == nil {
			t.Errorf("alpha %v accepted", a)
		}
	}
	if _, err := NewPowerLaw(5, 4, 1.2); err == nil {
		t.Error("empty range accepted")
	}
	if _, err := NewUniform(5, 4); err == nil {
		t.Error("empty uniform range accepted")
	}
}

func BenchmarkPowerLaw(b *testing.B) {
	for _, alpha := range []float64{0.9, 1.2} {
		pl, _ := NewPowerLaw(0, 1_000_000, alpha)
		src := rand.NewPCG(1, 2)
		b.Run(map[float64]string{0.9: "alpha0.9", 1.2: "alpha1.2"}[alpha], func(b *testing.B) {
			var s int64
			for b.Loop() {
				s += pl.Sample(src)
			}
			_ = s
		})
	}
	b.Run("formula", func(b *testing.B) {
		src := rand.NewPCG(1, 2)
		var s int64
		for b.Loop() {
			s += PowerLawKey(0, 1_000_000, 1.2, unitFloat(src.Uint64()))
		}
		_ = s
	})
}
