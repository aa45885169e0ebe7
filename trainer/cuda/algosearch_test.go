package cuda

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// fakeTimer plays back preset run times: ms[i][r] is candidate i's run in
// round r; failWarm makes a candidate fail its warm-up, failRound[i] = r
// its run in round r (counted from 1), fatal the timer itself in that
// round.
type fakeTimer struct {
	ms        [][]float32
	failWarm  map[int]bool
	failRound map[int]int
	fatal     int
	warmed    []int
	rounds    [][]int // the candidates each round ran
}

func (f *fakeTimer) warm(i int) error {
	f.warmed = append(f.warmed, i)
	if f.failWarm[i] {
		return errors.New("CUBLAS_STATUS_NOT_SUPPORTED")
	}
	return nil
}

func (f *fakeTimer) round(live []int) ([]float64, error) {
	r := len(f.rounds)
	f.rounds = append(f.rounds, append([]int(nil), live...))
	if f.fatal == r+1 {
		return nil, errors.New("CUDA_ERROR_ILLEGAL_ADDRESS")
	}
	ms := make([]float64, len(live))
	for j, i := range live {
		ms[j] = float64(f.ms[i][r%len(f.ms[i])])
		if f.failRound[i] == r+1 {
			ms[j] = math.NaN()
		}
	}
	return ms, nil
}

// TestPickFastest: the candidate with the smallest median wins (an outlier
// run does not decide), failed candidates are skipped and NaN, ties keep
// the heuristic's order, nothing running gives -1, and every round runs
// all the candidates still in.
func TestPickFastest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ms        [][]float32
		failWarm  map[int]bool
		failRound map[int]int
		best      int
		nan       []int
	}{
		{name: "first is fastest", ms: [][]float32{{1, 1, 1, 1, 1}, {2, 2, 2, 2, 2}}, best: 0},
		{name: "later is fastest", ms: [][]float32{{0.73, 0.74, 0.72, 0.73, 0.75}, {0.5, 0.2, 0.21, 0.22, 0.2}, {0.3, 0.3, 0.3, 0.3, 0.3}}, best: 1},
		// Candidate 0's one fast run is an outlier: its median is 5.
		{name: "median not min", ms: [][]float32{{0.1, 5, 5, 5, 5}, {1, 1, 1, 1, 9}}, best: 1},
		{name: "tie keeps order", ms: [][]float32{{2, 2, 2}, {1, 1, 1}, {1, 1, 1}}, best: 1},
		{name: "failed warm-up skipped", ms: [][]float32{{3, 3, 3}, {0.1, 0.1, 0.1}, {2, 2, 2}}, failWarm: map[int]bool{1: true}, best: 2, nan: []int{1}},
		{name: "failed run skipped", ms: [][]float32{{0.1, 0.1, 0.1}, {2, 2, 2}}, failRound: map[int]int{0: 3}, best: 1, nan: []int{0}},
		{name: "none runs", ms: [][]float32{{1}, {1}}, failWarm: map[int]bool{0: true}, failRound: map[int]int{1: 1}, best: -1, nan: []int{0, 1}},
		{name: "negative time skipped", ms: [][]float32{{-1, -1, -1}, {4, 4, 4}}, best: 1, nan: []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeTimer{ms: tc.ms, failWarm: tc.failWarm, failRound: tc.failRound}
			best, med, err := pickFastest(len(tc.ms), 5, f)
			if err != nil {
				t.Fatal(err)
			}
			if best != tc.best {
				t.Errorf("best %d, want %d (medians %v)", best, tc.best, med)
			}
			if len(med) != len(tc.ms) {
				t.Fatalf("%d medians for %d candidates", len(med), len(tc.ms))
			}
			for i, m := range med {
				want := !contains(tc.nan, i)
				if !math.IsNaN(m) != want {
					t.Errorf("candidate %d: median %v (skipped: %v)", i, m, !want)
				}
			}
			// Every candidate gets a warm-up; the rounds run those that
			// warmed and have not failed, each once, in order.
			if len(f.warmed) != len(tc.ms) {
				t.Errorf("warmed %v", f.warmed)
			}
			for r, live := range f.rounds {
				for j, i := range live {
					if tc.failWarm[i] || (tc.failRound[i] != 0 && tc.failRound[i] <= r) || (j > 0 && live[j-1] >= i) {
						t.Errorf("round %d ran %v", r+1, live)
					}
				}
			}
			if tc.best >= 0 && len(f.rounds) != 5 {
				t.Errorf("%d rounds, want 5", len(f.rounds))
			}
		})
	}
	// A timer failure (a CUDA error, not a candidate's) ends the search.
	f := &fakeTimer{ms: [][]float32{{1}, {2}}, fatal: 2}
	if _, _, err := pickFastest(2, 5, f); err == nil || len(f.rounds) != 2 {
		t.Errorf("fatal timer error: %v after %d rounds", err, len(f.rounds))
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		ts   []float32
		want float64
	}{{[]float32{3, 1, 2}, 2}, {[]float32{4, 1, 3, 2}, 2.5}, {[]float32{7}, 7}} {
		if got := median(tc.ts); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.ts, got, tc.want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	ts := []float32{3, 1, 2}
	median(ts)
	if ts[0] != 3 {
		t.Error("median sorted its argument")
	}
}

// TestLtKey: the descriptor keys the plan cache. The same shape on other
// buffers of the same alignment (and other bias or mask buffers) is the
// same descriptor — the cache is reused; any field of the descriptor, the
// operands' alignment, the search mode and a plain GEMM's cuBLAS candidate
// make another.
func TestLtKey(t *testing.T) {
	const base = Ptr(1 << 30)
	srch := &AlgoSearch{}
	x := LtArgs{Epilogue: EpilogueReLUAuxBias, Bias: base + 4096, Aux: base + 8192, AuxLD: 128, Search: srch}
	key := func(math Math, ta bool, m, n, k, lda int, a, b, c Ptr, x LtArgs, legacy bool) ltKey {
		t.Helper()
		kk, err := ltKeyOf(math, ta, false, m, n, k, a, lda, b, k, c, m, x, legacy)
		if err != nil {
			t.Fatal(err)
		}
		return kk
	}
	k0 := key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, x, false)
	other := x
	other.Bias, other.Aux, other.Search = base+1<<24, base+2<<24, &AlgoSearch{Reps: 3}
	if k1 := key(TF32, false, 96, 300, 64, 96, base+3<<20, base+4<<20, base+5<<20, other, false); k1 != k0 {
		t.Errorf("same descriptor on other buffers: key %+v, want %+v", k1, k0)
	}
	noSearch := x
	noSearch.Search = nil
	bias := x
	bias.Epilogue, bias.Aux, bias.AuxLD = EpilogueBias, 0, 0
	wideMask := x
	wideMask.AuxLD = 256
	withTypes := func(ty Types) LtArgs { y := x; y.Types = ty; return y }
	f16, f16c32, bf16 := withTypes(Types{R16F, R16F}), withTypes(Types{R16F, R32F}), withTypes(Types{R16BF, R16BF})
	for name, k := range map[string]ltKey{
		"fp32":           key(FP32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, x, false),
		"transA":         key(TF32, true, 96, 300, 64, 64, base, base+1<<20, base+2<<20, x, false),
		"m":              key(TF32, false, 112, 300, 64, 112, base, base+1<<20, base+2<<20, x, false),
		"n":              key(TF32, false, 96, 301, 64, 96, base, base+1<<20, base+2<<20, x, false),
		"k":              key(TF32, false, 96, 300, 65, 96, base, base+1<<20, base+2<<20, x, false),
		"lda":            key(TF32, false, 96, 300, 64, 128, base, base+1<<20, base+2<<20, x, false),
		"A alignment 16": key(TF32, false, 96, 300, 64, 96, base+16, base+1<<20, base+2<<20, x, false),
		"B alignment 4":  key(TF32, false, 96, 300, 64, 96, base, base+1<<20+4, base+2<<20, x, false),
		"C alignment 64": key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20+64, x, false),
		"epilogue":       key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, bias, false),
		"mask ld":        key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, wideMask, false),
		"no search":      key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, noSearch, false),
		"cuBLAS too":     key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, x, true),
		"float16":        key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, f16, false),
		"float16 → f32":  key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, f16c32, false),
		"bfloat16":       key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, bf16, false),
	} {
		if k == k0 {
			t.Errorf("%s: same key as the base descriptor", name)
		}
	}
	// Half operands compute in float32 whatever the Math: one descriptor.
	h0, h1 := key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, f16, false), key(FP32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, f16, false)
	if h0 != h1 {
		t.Errorf("float16 in TF32 and FP32: keys %+v and %+v", h0, h1)
	}
	if h0 == key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, f16c32, false) ||
		h0 == key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, bf16, false) {
		t.Error("float16 with a half C, with a float32 C and bfloat16: keys not all different")
	}
	if _, err := ltKeyOf(TF32, false, false, 96, 300, 64, base, 96, base, 64, base, 96, withTypes(Types{R16BF, R16F}), false); !errors.Is(err, ErrTypes) {
		t.Errorf("bfloat16 A/B into a float16 C: %v", err)
	}
	// The bias's type is part of the descriptor: a float32 and a half bias
	// with the same half D are two plans (one may be refused, the other
	// not). A half bias must be D's type, and needs an epilogue using it.
	bf16Bias := bf16
	bf16Bias.BiasType = R16BF
	if kb := key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, bf16Bias, false); kb == key(TF32, false, 96, 300, 64, 96, base, base+1<<20, base+2<<20, bf16, false) || kb.biasTy != R16BF {
		t.Errorf("a bfloat16 bias: key %+v, the same as a float32 bias's", kb)
	}
	for name, y := range map[string]LtArgs{
		"float16 bias, bfloat16 C": func() LtArgs { y := bf16; y.BiasType = R16F; return y }(),
		"bfloat16 bias, float32 C": func() LtArgs { y := x; y.BiasType = R16BF; return y }(),
		"half bias, no epilogue":   func() LtArgs { y := bf16; y.Epilogue, y.Aux, y.AuxLD, y.BiasType = EpilogueNone, 0, 0, R16BF; return y }(),
	} {
		if _, err := ltKeyOf(TF32, false, false, 96, 300, 64, base, 96, base, 64, base, 96, y, false); !errors.Is(err, ErrTypes) {
			t.Errorf("%s: %v, want ErrTypes", name, err)
		}
	}
	bad := x
	bad.AuxLD = 100
	if _, err := ltKeyOf(TF32, false, false, 96, 300, 64, base, 96, base, 64, base, 96, bad, false); err == nil || !strings.Contains(err.Error(), "multiple of 128") {
		t.Errorf("mask ld 100: %v", err)
	}
}

func TestAlignOf(t *testing.T) {
	for p, want := range map[Ptr]uint16{0: 256, 1 << 20: 256, 4: 4, 12: 4, 16: 16, 1<<20 + 128: 128, 1<<20 + 2: 2} {
		if got := alignOf(p); got != want {
			t.Errorf("alignOf(%#x) = %d, want %d", p, got, want)
		}
	}
}

func TestAlgoSearchDefaults(t *testing.T) {
	var a AlgoSearch
	if a.candidates() != 16 || a.reps() != 5 {
		t.Errorf("defaults %d candidates, %d reps", a.candidates(), a.reps())
	}
	a = AlgoSearch{Candidates: 3, Reps: 9}
	if a.candidates() != 3 || a.reps() != 9 {
		t.Errorf("set %d candidates, %d reps", a.candidates(), a.reps())
	}
	s := AlgoSearchStats{Descriptors: 2, Timed: 9, Millis: 12.5}.String()
	if !strings.Contains(s, "2 descriptors, 9 candidates timed") {
		t.Errorf("stats %q", s)
	}
}
