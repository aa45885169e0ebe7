package inspect

import (
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/formats"
)

// TestAlphaRecovery: 10⁶ samples whose slot 0 keys follow HugeCTR's power
// law with α = 0.9 and slot 1's with α = 1.2 (datagen's sampler, SPEC §5),
// 10⁴ keys per slot, ids shuffled so that key ids do not follow ranks.
func TestAlphaRecovery(t *testing.T) {
	const n, M = 1_000_000, 10_000
	alphas := []float64{0.9, 1.2}
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyU32)
	c, err := NewCollector(&s, Options{SlotSizes: []int64{M, M}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := formats.NewBatch(&s, 4096, nil)
	src := rand.NewPCG(1, 2)
	perm := rand.New(rand.NewPCG(3, 4)).Perm(M)
	var samplers []*datagen.PowerLaw
	for _, a := range alphas {
		p, err := datagen.NewPowerLaw(0, M-1, a)
		if err != nil {
			t.Fatal(err)
		}
		samplers = append(samplers, p)
	}
	for done := 0; done < n; {
		b.SetLen(0)
		m := min(b.Cap(), n-done)
		labels, dense, offsets, keys, _ := b.Full()
		for i := 0; i < m; i++ {
			labels[i] = float32(i % 2)
			dense[i] = 0.5
			for si, p := range samplers {
				keys[2*i+si] = uint32(perm[p.Sample(src)])
				offsets[2*i+si+1] = int32(2*i + si + 1)
			}
		}
		b.SetLen(m)
		c.Add(b)
		done += m
	}
	r := c.Report()
	if r.Samples != n {
		t.Fatalf("samples %d", r.Samples)
	}
	for si, a := range alphas {
		st := r.Slots[si]
		if st.Alpha == nil || math.Abs(*st.Alpha-a) > 0.05 {
			t.Errorf("slot %d: α %v, want %v ± 0.05 (fit %+v)", si, st.Alpha, a, st.Fit)
		}
		t.Logf("slot %d: α %.4f (true %.1f), %d distinct", si, *st.Alpha, a, st.Distinct)
	}
	if r.Labels[0].Mean != 0.5 {
		t.Errorf("label mean %v", r.Labels[0].Mean)
	}

	dir := t.TempDir()
	paths, err := WritePlots(dir, r, PlotOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("wrote %v", paths)
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
			t.Errorf("%s: %v", p, b)
		}
	}
}

// TestHLL: the sketch is within 3 % on 10⁵ and 10⁶ distinct keys, and the
// collector switches to it past ExactKeys.
func TestHLL(t *testing.T) {
	for _, n := range []int{100_000, 1_000_000} {
		var h hll
		for i := 0; i < n; i++ {
			h.add(int64(i) * 7919)
		}
		if e := h.estimate(); math.Abs(e/float64(n)-1) > 0.03 {
			t.Errorf("%d keys: estimate %v", n, e)
		}
	}
	s := formats.NewSchema(0, 0, []int{1}, nil, formats.KeyI64)
	c, _ := NewCollector(&s, Options{ExactKeys: 1000})
	b, _ := formats.NewBatch(&s, 5000, nil)
	for i := 0; i < 5000; i++ {
		b.AppendSample(nil, nil, [][]int64{{int64(i % 3000)}})
	}
	c.Add(b)
	st := c.Report().Slots[0]
	if st.Exact || math.Abs(float64(st.Distinct)/3000-1) > 0.03 || st.MinKey != 0 || st.MaxKey != 2999 {
		t.Errorf("distinct %d exact %v range %d..%d", st.Distinct, st.Exact, st.MinKey, st.MaxKey)
	}
}

func TestFitExact(t *testing.T) {
	// Counts exactly proportional to r^−1.5 fit α = 1.5.
	var c []int64
	for r := 1; r <= 5000; r++ {
		c = append(c, int64(math.Round(1e9*math.Pow(float64(r), -1.5))))
	}
	f, ok := FitRankFrequency(c, 1, 0, 5000)
	if !ok || math.Abs(f.Alpha-1.5) > 1e-3 {
		t.Errorf("α %v ok %v", f.Alpha, ok)
	}
	if _, ok := FitRankFrequency([]int64{5}, 1, 0, 0); ok {
		t.Error("fit on one rank")
	}
	// zeta: Euler–Maclaurin against a direct sum.
	var direct float64
	for r := 3; r <= 100000; r++ {
		direct += math.Pow(float64(r), -1.1)
	}
	if z := zeta(1.1, 3, 100000); math.Abs(z/direct-1) > 1e-9 {
		t.Errorf("zeta %v, direct %v", z, direct)
	}
}
