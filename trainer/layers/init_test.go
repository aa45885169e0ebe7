package layers

import (
	"math"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

func moments(v []float64) (mean, std, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range v {
		mean += x
		lo, hi = min(lo, x), max(hi, x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v))), lo, hi
}

// checkDraw requires v to look drawn from f: constants exactly, uniforms
// inside their bounds and reaching near both ends with the uniform's mean
// and deviation, normals with their mean and deviation (4.5 standard
// errors, so a correct draw fails about once in 10⁵ runs and the seed is
// fixed anyway).
func checkDraw(t *testing.T, name string, v []float64, f Filler) {
	t.Helper()
	m, s, lo, hi := moments(v)
	n := float64(len(v))
	switch f.Kind {
	case FillConstant:
		if lo != f.A || hi != f.A {
			t.Errorf("%s: values in [%v, %v], want all %v", name, lo, hi, f.A)
		}
		return
	case FillUniform:
		w := f.B - f.A
		if lo < f.A || hi > f.B || lo > f.A+w*20/n || hi < f.B-w*20/n {
			t.Errorf("%s: values in [%v, %v], want filling [%v, %v]", name, lo, hi, f.A, f.B)
		}
		sd := w / math.Sqrt(12)
		if math.Abs(m-(f.A+f.B)/2) > 4.5*sd/math.Sqrt(n) || math.Abs(s/sd-1) > 4.5*math.Sqrt(0.8/n) {
			t.Errorf("%s: mean %v std %v, want %v and %v", name, m, s, (f.A+f.B)/2, sd)
		}
	case FillNormal:
		if math.Abs(m-f.A) > 4.5*f.B/math.Sqrt(n) || math.Abs(s/f.B-1) > 4.5*math.Sqrt(0.5/n) {
			t.Errorf("%s: mean %v std %v, want N(%v, %v²)", name, m, s, f.A, f.B)
		}
		// Untruncated, as HugeCTR's GaussianDataSimulator draws.
		if n >= 10000 && (hi < f.A+3.5*f.B || lo > f.A-3.5*f.B) {
			t.Errorf("%s: values in [%v, %v] look truncated for σ %v", name, lo, hi, f.B)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }

// TestFillers checks every layer's initializer against HugeCTR's formulas
// (fully_connected_layer.cu, multi_cross_layer.cu, batch_norm_layer.cu,
// weight_multiply_layer.cu get_*_initializer and data_simulator.hpp's
// VarianceScalingSimulator), written out here independently.
func TestFillers(t *testing.T) {
	const tn = 0.87962566103423978
	in, out := 300, 200
	fin, fout := 300.0, 200.0
	d0, d1 := 13, 10
	wmTop := float64(d0 * d1)
	cases := []struct {
		name string
		got  func() (Filler, error)
		want Filler
	}{
		{"fc default W", func() (Filler, error) { return InnerProductFiller(InitDefault, 0, in, out) }, normal(math.Sqrt(1/((fin+fout)/2)) / tn)},
		{"fc default b", func() (Filler, error) { return InnerProductFiller(InitDefault, 1, in, out) }, normal(math.Sqrt(1 / fout))},
		{"fc uniform W", func() (Filler, error) { return InnerProductFiller(InitUniform, 0, in, out) }, uniform(1 / (fin + fout))},
		{"fc uniform b", func() (Filler, error) { return InnerProductFiller(InitUniform, 1, in, out) }, uniform(1 / fout)},
		{"fc xavier-uniform W", func() (Filler, error) { return InnerProductFiller(InitXavierUniform, 0, in, out) }, uniform(math.Sqrt(3 / ((fin + fout) / 2)))},
		{"fc xavier-uniform b", func() (Filler, error) { return InnerProductFiller(InitXavierUniform, 1, in, out) }, uniform(math.Sqrt(3 / (fout / 2)))},
		{"fc xavier-norm W", func() (Filler, error) { return InnerProductFiller(InitXavierNorm, 0, in, out) }, normal(math.Sqrt(1/((fin+fout)/2)) / tn)},
		{"fc xavier-norm b", func() (Filler, error) { return InnerProductFiller(InitXavierNorm, 1, in, out) }, normal(math.Sqrt(1/(fout/2)) / tn)},
		{"fc xavier-norm b out 1", func() (Filler, error) { return InnerProductFiller(InitXavierNorm, 1, in, 1) }, normal(1 / tn)}, // max(1, fan)
		{"fc zero W", func() (Filler, error) { return InnerProductFiller(InitZero, 0, in, out) }, constant(0)},
		{"fc zero b", func() (Filler, error) { return InnerProductFiller(InitZero, 1, in, out) }, constant(0)},
		{"dcn v1 w", func() (Filler, error) { return MultiCrossFiller(InitDefault, 4, 429, 0) }, normal(math.Sqrt(1.0 / 429))},
		{"dcn v1 b", func() (Filler, error) { return MultiCrossFiller(InitDefault, 5, 429, 0) }, constant(0)},
		{"dcn v1 uniform falls back", func() (Filler, error) { return MultiCrossFiller(InitUniform, 0, 429, 0) }, normal(math.Sqrt(1.0 / 429))},
		{"dcn v1 xavier falls back", func() (Filler, error) { return MultiCrossFiller(InitXavierUniform, 2, 429, 0) }, normal(math.Sqrt(1.0 / 429))},
		{"dcn v1 zero w", func() (Filler, error) { return MultiCrossFiller(InitZero, 0, 429, 0) }, constant(0)},
		{"dcn v2 U", func() (Filler, error) { return MultiCrossFiller(InitDefault, 3, 429, 64) }, normal(math.Sqrt(1 / ((429.0 + 64) / 2)))},
		{"dcn v2 V", func() (Filler, error) { return MultiCrossFiller(InitXavierNorm, 4, 429, 64) }, normal(math.Sqrt(1 / ((64.0 + 429) / 2)))},
		{"dcn v2 b", func() (Filler, error) { return MultiCrossFiller(InitDefault, 5, 429, 64) }, constant(0)},
		{"bn default gamma", func() (Filler, error) { return BatchNormFiller(InitDefault, 0) }, constant(1)},
		{"bn default beta", func() (Filler, error) { return BatchNormFiller(InitDefault, 1) }, constant(0)},
		{"bn uniform gamma falls back", func() (Filler, error) { return BatchNormFiller(InitUniform, 0) }, constant(1)},
		{"bn xavier gamma falls back", func() (Filler, error) { return BatchNormFiller(InitXavierNorm, 0) }, constant(1)},
		{"bn zero gamma", func() (Filler, error) { return BatchNormFiller(InitZero, 0) }, constant(0)},
		{"wm default", func() (Filler, error) { return WeightMultiplyFiller(InitDefault, d0, d1) }, uniform(math.Sqrt(3 / ((float64(d0) + wmTop) / 2)))},
		{"wm xavier-uniform", func() (Filler, error) { return WeightMultiplyFiller(InitXavierUniform, d0, d1) }, uniform(math.Sqrt(3 / ((float64(d0) + wmTop) / 2)))},
		{"wm xavier-norm", func() (Filler, error) { return WeightMultiplyFiller(InitXavierNorm, d0, d1) }, normal(math.Sqrt(1/((float64(d0)+wmTop)/2)) / tn)},
		{"wm uniform", func() (Filler, error) { return WeightMultiplyFiller(InitUniform, d0, d1) }, uniform(1 / (float64(d0) + wmTop))},
		{"wm zero", func() (Filler, error) { return WeightMultiplyFiller(InitZero, d0, d1) }, constant(0)},
	}
	for _, tc := range cases {
		f, err := tc.got()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if f.Kind != tc.want.Kind || !near(f.A, tc.want.A) || !near(f.B, tc.want.B) {
			t.Errorf("%s: %v, want %v", tc.name, f, tc.want)
		}
	}
	if want := math.Sqrt(1/250.0) / tn; !near(InnerProductSigma(300, 200), want) {
		t.Errorf("InnerProductSigma(300, 200) = %v, want %v", InnerProductSigma(300, 200), want)
	}
}

// TestFillStatistics draws each kind of filler and checks the sample.
func TestFillStatistics(t *testing.T) {
	c := newCtx(t, 5)
	x := c.alloc(200000)
	for _, f := range []Filler{constant(0), constant(1), uniform(0.05), uniform(1.0 / 500), normal(0.07), normal(1 / 0.8796)} {
		c.Fill(x, f)
		checkDraw(t, f.String(), f64(x), f)
	}
}

// TestLayerInitializers builds every trainable layer with its default and
// with named initializers and checks what each parameter was drawn from.
func TestLayerInitializers(t *testing.T) {
	c := newCtx(t, 21)
	in := c.Blob(2, 300)
	check := func(name string, ps []Param, want ...Filler) {
		t.Helper()
		if len(ps) != len(want) {
			t.Fatalf("%s: %d params, want %d", name, len(ps), len(want))
		}
		for i, p := range ps {
			checkDraw(t, name+" "+p.Name, f64(p.Value), want[i])
		}
	}

	fc, err := NewInnerProduct(c, in, 200, tensor.Identity)
	if err != nil {
		t.Fatal(err)
	}
	check("InnerProduct default", fc.Params(), normal(InnerProductSigma(300, 200)), normal(math.Sqrt(1/200.0)))
	fc, _ = NewInnerProduct(c, in, 200, tensor.ReLU, InitXavierUniform, InitZero)
	check("InnerProduct XavierUniform/Zero", fc.Params(), uniform(math.Sqrt(3/250.0)), constant(0))
	fc, _ = NewInnerProduct(c, in, 200, tensor.Identity, InitUniform, InitXavierNorm)
	check("InnerProduct Uniform/XavierNorm", fc.Params(), uniform(1/500.0), normal(math.Sqrt(1/100.0)/truncNormalStd))

	mc, err := NewMultiCross(c, in, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := normal(math.Sqrt(1 / 300.0))
	check("MultiCross v1 default", mc.Params(), w, constant(0), w, constant(0))
	mc, _ = NewMultiCross(c, in, 2, 0, InitZero, InitDefault)
	check("MultiCross v1 Zero/Default", mc.Params(), constant(0), constant(0), constant(0), constant(0))
	// v2: three weights per cross layer, and HugeCTR picks
	// initializer_types[index % 2]: U0 weight_init, V0 bias_init, b0
	// weight_init, U1 bias_init, V1 weight_init, b1 bias_init.
	u, v := normal(math.Sqrt(1/((300+16)/2.0))), normal(math.Sqrt(1/((16+300)/2.0)))
	mc, _ = NewMultiCross(c, in, 2, 16)
	check("MultiCross v2 default", mc.Params(), u, v, constant(0), u, v, constant(0))
	mc, _ = NewMultiCross(c, in, 2, 16, InitZero, InitDefault)
	check("MultiCross v2 Zero/Default", mc.Params(), constant(0), v, constant(0), u, constant(0), constant(0))

	bn, err := NewBatchNorm(c, in, tensor.BNParams{Factor: 0.9, Eps: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	check("BatchNorm default", bn.Params(), constant(1), constant(0))
	bn, _ = NewBatchNorm(c, in, tensor.BNParams{Factor: 0.9, Eps: 1e-5}, InitZero, InitUniform)
	check("BatchNorm Zero/Uniform", bn.Params(), constant(0), constant(0))
	if _, _, lo, hi := moments(f64(bn.RunVar)); lo != 1 || hi != 1 {
		t.Errorf("BatchNorm running variance starts in [%v, %v], want 1", lo, hi)
	}

	wide := c.Blob(2, 130)
	wm, err := NewWeightMultiply(c, wide, 100)
	if err != nil {
		t.Fatal(err)
	}
	check("WeightMultiply default", wm.Params(), uniform(math.Sqrt(3/((130+13000)/2.0))))
	wm, _ = NewWeightMultiply(c, wide, 100, InitXavierNorm)
	check("WeightMultiply XavierNorm", wm.Params(), normal(math.Sqrt(1/((130+13000)/2.0))/truncNormalStd))

	for _, bad := range []Init{InitSinusoidal, Init(17)} {
		_, e1 := NewInnerProduct(c, in, 4, tensor.Identity, InitDefault, bad)
		_, e2 := NewMultiCross(c, in, 1, 0, bad)
		_, e3 := NewBatchNorm(c, in, tensor.BNParams{Factor: 0.9, Eps: 1e-5}, bad)
		_, e4 := NewWeightMultiply(c, in, 2, bad)
		for i, err := range []error{e1, e2, e3, e4} {
			if err == nil || !strings.Contains(err.Error(), bad.String()) {
				t.Errorf("layer %d with initializer %v: error %v", i, bad, err)
			}
		}
	}
}

// TestInitReproducible: the same seed gives the same weights, another seed
// others (the draws run on the host, so every backend gets these values).
func TestInitReproducible(t *testing.T) {
	build := func(seed uint64) []float64 {
		c := newCtx(t, seed)
		in := c.Blob(2, 40)
		fc, _ := NewInnerProduct(c, in, 8, tensor.Identity)
		mc, _ := NewMultiCross(c, in, 2, 4)
		wm, _ := NewWeightMultiply(c, in, 3, InitXavierNorm)
		var all []float64
		for _, l := range []Layer{fc, mc, wm} {
			for _, p := range l.Params() {
				all = append(all, f64(p.Value)...)
			}
		}
		return all
	}
	a, b, o := build(7), build(7), build(8)
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 twice: weight %d is %v and %v", i, a[i], b[i])
		}
		same = same && a[i] == o[i]
	}
	if same {
		t.Errorf("seeds 7 and 8 gave the same weights")
	}
}

func TestParseInit(t *testing.T) {
	for s, want := range map[string]Init{"": InitDefault, "Default": InitDefault, "Uniform": InitUniform,
		"XavierNorm": InitXavierNorm, "XavierUniform": InitXavierUniform, "Sinusoidal": InitSinusoidal, "Zero": InitZero} {
		if got, err := ParseInit(s); err != nil || got != want {
			t.Errorf("ParseInit(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseInit("xavier"); err == nil || !strings.Contains(err.Error(), `"xavier"`) {
		t.Errorf("ParseInit(xavier): %v", err)
	}
}

// TestSinusoidal checks HugeCTR's sinusoidal_kernel formula.
func TestSinusoidal(t *testing.T) {
	const ev, rows = 6, 50
	v, err := SinusoidalTable(ev, rows)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rows; r++ {
		for col := 0; col < ev; col++ {
			rate := math.Pow(10000, -float64(2*(col/2))/ev)
			want := math.Sin(float64(r) * rate)
			if col%2 == 1 {
				want = math.Cos(float64(r) * rate)
			}
			if math.Abs(v[r*ev+col]-want) > 1e-12 {
				t.Fatalf("row %d col %d: %v, want %v", r, col, v[r*ev+col], want)
			}
		}
	}
	if v[0] != 0 || v[1] != 1 {
		t.Errorf("row 0 starts %v, want [0 1 …]", v[:2])
	}
	if _, err := SinusoidalTable(0, 4); err == nil {
		t.Errorf("zero width accepted")
	}
	if _, err := SinusoidalTable(1<<20, 1<<20); err == nil {
		t.Errorf("2⁴⁰-element table accepted")
	}
}

// TestEmbeddingInit checks the embedding table initializers: SPEC §8's
// U(±0.05) for hash rows, HugeCTR's per-slot U(±√(1/slot_size)) for a
// LocalizedHash with slot_size_array (init_embedding_functor.cu) and for
// OneHot. Hash rows are drawn when a training Forward inserts their key
// (from the key: tensor.InitHashRows), so free rows stay 0 and a
// LocalizedHash row takes the bound of the slot its key came from.
func TestEmbeddingInit(t *testing.T) {
	c := newCtx(t, 21)
	const n = 1000
	in := func(keys []int64, off []int32) *SparseInput {
		si := &SparseInput{Keys: c.BE.Alloc(tensor.Int64, len(keys)), Offsets: c.BE.Alloc(tensor.Int32, len(off)), NNZ: len(keys)}
		c.BE.Upload(si.Keys, keys)
		c.BE.Upload(si.Offsets, off)
		return si
	}
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = int64(i)*7919 - 3000
	}
	h, err := NewSparseEmbedding(c, EmbeddingConfig{Kind: DistributedHash, VecSize: 8, Slots: 1, WorkspaceMB: 0.1, MaxNNZ: n},
		in(keys, []int32{0, n}), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, lo, hi := moments(f64(h.Table)); lo != 0 || hi != 0 {
		t.Fatalf("hash table not zero before its first Forward: [%v, %v]", lo, hi)
	}
	h.Forward(Pass{Training: true})
	if err := c.BE.Err(); err != nil {
		t.Fatal(err)
	}
	checkDraw(t, "hash rows", f64(h.Table)[:n*8], uniform(0.05))
	checkDraw(t, "free hash rows", f64(h.Table)[n*8:], constant(0))

	// LocalizedHash, 2 slots of sizes 30 and 1000: 1 sample, 300 keys in
	// slot 0 and 700 in slot 1, interleaved in key order.
	lk := make([]int64, n)
	for i := range lk {
		lk[i] = int64(2 * i) // slot 0: even keys
		if i >= 300 {
			lk[i] = int64(2*(i-300) + 1) // slot 1: odd keys
		}
	}
	lh, err := NewSparseEmbedding(c, EmbeddingConfig{Kind: LocalizedHash, VecSize: 8, Slots: 2, SlotSizes: []int64{30, 1000},
		WorkspaceMB: 0.2, MaxNNZ: n}, in(lk, []int32{0, 300, n}), 1)
	if err != nil {
		t.Fatal(err)
	}
	lh.Forward(Pass{Training: true})
	if err := c.BE.Err(); err != nil {
		t.Fatal(err)
	}
	lt, rs := f64(lh.Table), cpu.Data[int32](lh.RowSlots)
	var s0, s1, free []float64
	for r := range rs {
		row := lt[r*8 : r*8+8]
		switch rs[r] {
		case 0:
			s0 = append(s0, row...)
		case 1:
			s1 = append(s1, row...)
		default:
			free = append(free, row...)
		}
	}
	if len(s0) != 300*8 || len(s1) != 700*8 {
		t.Fatalf("rows per slot %d, %d", len(s0)/8, len(s1)/8)
	}
	checkDraw(t, "LocalizedHash slot 0", s0, uniform(math.Sqrt(1/30.0)))
	checkDraw(t, "LocalizedHash slot 1", s1, uniform(math.Sqrt(1/1000.0)))
	checkDraw(t, "LocalizedHash free rows", free, constant(0))

	sizes := []int64{4, 400}
	oh, _ := NewSparseEmbedding(c, EmbeddingConfig{Kind: LocalizedOneHot, VecSize: 8, Slots: 2, SlotSizes: sizes, MaxNNZ: 1},
		&SparseInput{Keys: c.BE.Alloc(tensor.Int64, 1), Offsets: c.BE.Alloc(tensor.Int32, 3)}, 1)
	tab := f64(oh.Table)
	for s, rng := range [][2]int{{0, 4 * 8}, {4 * 8, 404 * 8}} {
		a := math.Sqrt(1 / float64(sizes[s]))
		_, _, lo, hi := moments(tab[rng[0]:rng[1]])
		if lo < -a || hi > a || hi < 0.8*a {
			t.Errorf("slot %d init [%v, %v], want ±%v", s, lo, hi, a)
		}
	}
	checkDraw(t, "OneHot slot 1", tab[4*8:], uniform(math.Sqrt(1/400.0)))
}
