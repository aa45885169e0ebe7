package gpu

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// embBatch is a CSR batch: offsets of bags and their rows (table rows, −1
// for missing keys).
type embBatch struct {
	off, rows []int64
}

// embGen draws bags of 0..maxPer rows in [0, nrows): a fraction hot of the
// rows is row hotRow, a fraction neg is −1, the rest skewed towards low rows
// (so duplicates within and across bags are common).
func embGen(h *harness, bags, maxPer, nrows int, hot, neg float64) embBatch {
	b := embBatch{off: make([]int64, bags+1)}
	hotRow := int64(nrows / 3)
	for i := range bags {
		k := h.rng.IntN(maxPer + 1)
		for range k {
			u := h.rng.Float64()
			switch {
			case u < hot:
				b.rows = append(b.rows, hotRow)
			case u < hot+neg:
				b.rows = append(b.rows, -1)
			default:
				x := h.rng.Float64()
				b.rows = append(b.rows, int64(x*x*x*float64(nrows)))
			}
		}
		b.off[i+1] = int64(len(b.rows))
	}
	return b
}

var embCombiners = []tensor.Combiner{tensor.Sum, tensor.Mean}

type embCase struct {
	bags, maxPer, nrows, v int
	hot, neg               float64
}

var embCases = []embCase{
	{1, 1, 1, 1, 0, 0},
	{1, 0, 5, 4, 0, 0}, // nnz 0
	{3, 1, 2, 7, 0, 0},
	{5, 3, 7, 3, 0.2, 0.2},
	{64, 0, 10, 16, 0, 0}, // all bags empty
	{1000, 4, 500, 16, 0.1, 0.05},
	{777, 6, 3000, 130, 0.05, 0.1}, // V % 4 ≠ 0: scalar lanes, several column passes
	{500, 3, 300, 12, 0, 0.1},      // W = 4, 3 of 4 team lanes busy
	{300, 5, 100, 256, 0.3, 0},     // two column passes of a warp
	{4096, 1, 100000, 128, 0.01, 0.01},
	{20000, 10, 5000, 64, 0.05, 0.01}, // nnz ≈ 100k
	{200000, 1, 50000, 16, 0.5, 0},    // nnz ≈ 200k, one row in half the bags
	{20000, 2, 1000, 13, 0.9, 0},      // hot row in most bags, scalar lanes
}

func TestEmbeddingBag(t *testing.T) {
	h := newHarness(t)
	for _, tc := range embCases {
		b := embGen(h, tc.bags, tc.maxPer, tc.nrows, tc.hot, tc.neg)
		table := h.Rand(-1, 1, tc.nrows, tc.v)
		rows := h.Ints(tensor.Int32, b.rows, len(b.rows))
		off := h.Ints(tensor.Int32, b.off, len(b.off))
		for _, c := range embCombiners {
			out := h.Out(tensor.Float32, tc.bags, tc.v)
			h.g.EmbeddingBag(out.G, table.G, rows.G, off.G, c)
			h.c.EmbeddingBag(out.C, table.C, rows.C, off.C, c)
			h.Check(fmt.Sprintf("embedding bag %+v comb %d", tc, c), out, tolFP32)
			h.Free(out)
		}
		h.Free(table, rows, off)
	}

	// A row past the table is ErrRange on both.
	table := h.Rand(-1, 1, 10, 8)
	rows := h.Ints(tensor.Int32, []int64{3, 10, 2}, 3)
	off := h.Ints(tensor.Int32, []int64{0, 1, 3}, 3)
	out := h.Out(tensor.Float32, 2, 8)
	h.g.EmbeddingBag(out.G, table.G, rows.G, off.G, tensor.Sum)
	h.c.EmbeddingBag(out.C, table.C, rows.C, off.C, tensor.Sum)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("gpu row out of range: %v", err)
	}
	if err := h.c.Err(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("cpu row out of range: %v", err)
	}
	h.g.Reset()
	h.c.Reset()
	h.Free(table, rows, off, out)
}

func TestEmbeddingBagGrad(t *testing.T) {
	h := newHarness(t)
	cases := append(embCases,
		embCase{50000, 4, 100, 128, 0.4, 0.05}, // chunked hot rows, W = 4
		embCase{3000, 1, 40, 8, 0, 0},          // every row in ~75 bags: just past one chunk
	)
	for _, tc := range cases {
		b := embGen(h, tc.bags, tc.maxPer, tc.nrows, tc.hot, tc.neg)
		nnz := len(b.rows)
		rows := h.Ints(tensor.Int32, b.rows, nnz)
		off := h.Ints(tensor.Int32, b.off, len(b.off))
		dOut := h.Rand(-1, 1, tc.bags, tc.v)
		for _, c := range embCombiners {
			// Outputs start equal on both sides: entries past numUniq are
			// left alone by both backends.
			fill := make([]int64, nnz)
			for i := range fill {
				fill[i] = -7
			}
			ur := h.Ints(tensor.Int32, fill, nnz)
			ug := h.Rand(-1, 1, nnz, tc.v)
			nu := h.Ints(tensor.Int32, []int64{-3}, 1)
			h.g.EmbeddingBagGrad(ur.G, ug.G, nu.G, dOut.G, rows.G, off.G, c)
			h.c.EmbeddingBagGrad(ur.C, ug.C, nu.C, dOut.C, rows.C, off.C, c)
			name := fmt.Sprintf("embedding bag grad %+v comb %d", tc, c)
			h.Check(name+" numUniq", nu, 0)
			h.Check(name+" uniqRows", ur, 0)
			h.Check(name+" uniqGrad", ug, tolFP32)
			h.Free(ur, ug, nu)
		}
		h.Free(rows, off, dOut)
	}
}

func TestSlotRows(t *testing.T) {
	h := newHarness(t)
	sizes := []int64{10, 1, 1000, 50000, 3}
	so := []int64{0, 10, 11, 1011, 51011}
	ns := len(sizes)
	for _, samples := range []int{0, 1, 3, 1000, 70000} {
		bags := samples * ns
		off := make([]int64, bags+1)
		var keys []int64
		for b := range bags {
			for range h.rng.IntN(4) {
				keys = append(keys, int64(h.rng.IntN(int(sizes[b%ns]))))
			}
			off[b+1] = int64(len(keys))
		}
		k := h.Ints(tensor.Int64, keys, len(keys))
		o := h.Ints(tensor.Int32, off, len(off))
		sot := h.Ints(tensor.Int64, so, ns)
		sst := h.Ints(tensor.Int64, sizes, ns)
		r := h.Out(tensor.Int32, len(keys))
		h.g.SlotRows(r.G, k.G, o.G, sot.G, sst.G)
		h.c.SlotRows(r.C, k.C, o.C, sot.C, sst.C)
		h.Check(fmt.Sprintf("slot rows, %d samples", samples), r, 0)
		h.Free(k, o, sot, sst, r)
	}

	// A key outside its slot (slot 1 has one key) is ErrRange.
	k := h.Ints(tensor.Int64, []int64{3, 1}, 2)
	o := h.Ints(tensor.Int32, []int64{0, 1, 2}, 3)
	sot := h.Ints(tensor.Int64, []int64{0, 10}, 2)
	sst := h.Ints(tensor.Int64, []int64{10, 1}, 2)
	r := h.Out(tensor.Int32, 2)
	h.g.SlotRows(r.G, k.G, o.G, sot.G, sst.G)
	h.c.SlotRows(r.C, k.C, o.C, sot.C, sst.C)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("gpu key outside slot: %v", err)
	}
	if err := h.c.Err(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("cpu key outside slot: %v", err)
	}
	h.g.Reset()
	h.c.Reset()
	h.Free(k, o, sot, sst, r)
}

// embKeys draws n keys: from pool (skewed: a few keys are hot) with
// probability old, else fresh random int64 keys appended to pool.
func embKeys(h *harness, n int, pool *[]int64, old float64) []int64 {
	keys := make([]int64, n)
	for i := range keys {
		if len(*pool) > 0 && h.rng.Float64() < old {
			x := h.rng.Float64()
			keys[i] = (*pool)[int(x*x*x*float64(len(*pool)))]
			continue
		}
		var k int64
		switch h.rng.IntN(4) {
		case 0:
			k = int64(h.rng.IntN(2000)) - 1000 // small, both signs
		case 1:
			k = math.MaxInt64 - int64(h.rng.IntN(3))
		default:
			k = int64(h.rng.Uint64())
		}
		if k == tensor.EmptyKey {
			k++
		}
		keys[i] = k
		*pool = append(*pool, k)
	}
	return keys
}

func TestHashLookup(t *testing.T) {
	h := newHarness(t)
	const maxRows = 60000
	gt, ct := tensor.NewHashTable(h.g, maxRows), tensor.NewHashTable(h.c, maxRows)
	count := pair{gt.Count, ct.Count}
	var pool []int64
	steps := []struct {
		n      int
		old    float64
		insert bool
	}{
		{0, 0, true},
		{5, 0, false}, // empty table: all −1
		{1, 0, true},
		{1, 1, true},       // found again
		{1000, 0.5, true},  // duplicates within the call
		{1000, 0.9, false}, // lookup only: unseen keys → −1, Count unchanged
		{65536, 0.8, true},
		{200000, 0.95, true},
		{3, 1, false},
	}
	for i, s := range steps {
		keys := embKeys(h, s.n, &pool, s.old)
		k := h.Ints(tensor.Int64, keys, s.n)
		r := h.Out(tensor.Int32, s.n)
		h.g.HashLookup(gt, k.G, r.G, s.insert)
		h.c.HashLookup(ct, k.C, r.C, s.insert)
		h.Check(fmt.Sprintf("step %d rows (n %d insert %v)", i, s.n, s.insert), r, 0)
		h.Check(fmt.Sprintf("step %d count", i), count, 0)
		h.Free(k, r)
	}

	// The reserved empty key is ErrRange on both.
	k := h.Ints(tensor.Int64, []int64{5, tensor.EmptyKey}, 2)
	r := h.Out(tensor.Int32, 2)
	h.g.HashLookup(gt, k.G, r.G, true)
	h.c.HashLookup(ct, k.C, r.C, true)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("gpu empty key: %v", err)
	}
	if err := h.c.Err(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("cpu empty key: %v", err)
	}
	h.g.Reset()
	h.c.Reset()
	h.Free(k, r)
	h.Check("count after empty key", count, 0)
}

func TestHashLookupFull(t *testing.T) {
	h := newHarness(t)
	gt, ct := tensor.NewHashTable(h.g, 100), tensor.NewHashTable(h.c, 100)
	count := pair{gt.Count, ct.Count}
	first := make([]int64, 120) // 60 distinct keys, each twice
	for i := range first {
		first[i] = int64(1000 - 17*(i%60))
	}
	k := h.Ints(tensor.Int64, first, len(first))
	r := h.Out(tensor.Int32, len(first))
	h.g.HashLookup(gt, k.G, r.G, true)
	h.c.HashLookup(ct, k.C, r.C, true)
	h.Check("rows", r, 0)
	h.Check("count", count, 0)

	// 41 new distinct keys: 60 + 41 > 100, nothing is inserted.
	more := make([]int64, 50)
	for i := range more {
		more[i] = int64(5000 + i%41)
	}
	k2 := h.Ints(tensor.Int64, more, len(more))
	r2 := h.Out(tensor.Int32, len(more))
	h.g.HashLookup(gt, k2.G, r2.G, true)
	h.c.HashLookup(ct, k2.C, r2.C, true)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrTableFull) {
		t.Errorf("gpu full table: %v", err)
	}
	if err := h.c.Err(); !errors.Is(err, tensor.ErrTableFull) {
		t.Errorf("cpu full table: %v", err)
	}
	h.g.Reset()
	h.c.Reset()
	h.Check("count after full", count, 0)

	// Exactly filling the table works; the old keys keep their rows.
	fit := append(append([]int64(nil), first[:10]...), more[:40]...)
	k3 := h.Ints(tensor.Int64, fit, len(fit))
	r3 := h.Out(tensor.Int32, len(fit))
	h.g.HashLookup(gt, k3.G, r3.G, true)
	h.c.HashLookup(ct, k3.C, r3.C, true)
	h.Check("rows filling the table", r3, 0)
	h.Check("count full", count, 0)
	h.Free(k, r, k2, r2, k3, r3)
}

func TestAUC(t *testing.T) {
	h := newHarness(t)
	sizes := []int{1, 2, 3, 1000, 2049, 100000, 1000000}
	if !testing.Short() {
		sizes = append(sizes, 10000000)
	}
	for _, n := range sizes {
		for _, mode := range []string{"distinct", "ties", "weights", "zeros", "one class", "nan", "-nan", "inf"} {
			s, l := make([]float64, n), make([]float64, n)
			for i := range s {
				s[i] = h.rng.NormFloat64()
				l[i] = float64(h.rng.IntN(2))
				switch mode {
				case "ties":
					s[i] = math.Round(s[i]*4) / 4
				case "weights":
					s[i] = math.Round(s[i]*50) / 50
					l[i] = h.rng.Float64()
				case "zeros": // +0 and −0 tie
					if h.rng.IntN(2) == 0 {
						s[i] = math.Copysign(0, s[i])
					}
				case "one class":
					l[i] = 1
				case "inf":
					if h.rng.IntN(10) == 0 {
						s[i] = math.Inf(int(l[i])*2 - 1)
					}
				}
			}
			switch mode { // one NaN score: AUC NaN (metrics.AUC)
			case "nan":
				s[h.rng.IntN(n)] = math.NaN()
			case "-nan":
				s[h.rng.IntN(n)] = math.Copysign(math.NaN(), -1)
			}
			sc, lb := h.Floats(s, n), h.Floats(l, n)
			g, err := h.g.AUC(sc.G, lb.G)
			if err != nil {
				t.Fatal(err)
			}
			c, err := h.c.AUC(sc.C, lb.C)
			if err != nil {
				t.Fatal(err)
			}
			// 0/1 labels make every term exact: equal results. Weights leave
			// rounding differences of the summation order.
			tol := 0.0
			if mode == "weights" {
				tol = 1e-12
			}
			if strings.HasSuffix(mode, "nan") && !math.IsNaN(g) {
				t.Errorf("AUC n=%d with a NaN score: gpu %v, want NaN", n, g)
			}
			if !(math.IsNaN(g) && math.IsNaN(c)) && !(math.Abs(g-c) <= tol) {
				t.Errorf("AUC n=%d %s: gpu %v, cpu %v", n, mode, g, c)
			}
			h.Free(sc, lb)
		}
	}
}

// TestAUCKeyNaN: aucKeyNaN recognises exactly the keys emb_auc_prep gives
// NaNs (the kernel's mapping, on the host).
func TestAUCKeyNaN(t *testing.T) {
	key := func(f float32) uint32 {
		u := math.Float32bits(f)
		if u<<1 == 0 {
			u = 0
		}
		if u&0x80000000 != 0 {
			return ^u
		}
		return u | 0x80000000
	}
	inf := float32(math.Inf(1))
	for _, f := range []float32{0, -0.0, 1, -1, inf, -inf, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32} {
		if aucKeyNaN(key(f)) {
			t.Errorf("%v taken for NaN", f)
		}
	}
	for _, u := range []uint32{0x7fc00000, 0x7f800001, 0x7fffffff, 0xffc00000, 0xff800001, 0xffffffff} {
		if !aucKeyNaN(key(math.Float32frombits(u))) {
			t.Errorf("NaN %#x not recognised", u)
		}
	}
}

// TestRecordSlots: rows first seen take the smallest slot of their
// occurrences, rows already recorded keep theirs; the GPU's two kernels
// give the CPU's slots.
func TestRecordSlots(t *testing.T) {
	h := newHarness(t)
	const ns, nrows = 7, 5000
	for _, samples := range []int{0, 1, 3, 1000, 30000} {
		bags := samples * ns
		off := make([]int64, bags+1)
		var rows []int64
		for b := range bags {
			for range h.rng.IntN(4) {
				rows = append(rows, int64(h.rng.IntN(nrows+1))-1) // some −1 (missing keys)
			}
			off[b+1] = int64(len(rows))
		}
		init := make([]int64, nrows)
		for i := range init {
			init[i] = -1
			if h.rng.IntN(3) == 0 {
				init[i] = int64(h.rng.IntN(ns))
			}
		}
		rs := h.Ints(tensor.Int32, init, nrows)
		r := h.Ints(tensor.Int32, rows, len(rows))
		o := h.Ints(tensor.Int32, off, len(off))
		h.g.RecordSlots(rs.G, r.G, o.G, ns)
		h.c.RecordSlots(rs.C, r.C, o.C, ns)
		h.Check(fmt.Sprintf("record slots, %d samples", samples), rs, 0)
		h.Free(rs, r, o)
	}
}

// TestEmbeddingBagGradHot covers the hot-row paths of EmbeddingBagGrad:
// segments past one chunk finished by a team, segments past embFinTeam
// chunks (more than 2048 occurrences) finished by a block, with one and
// two column passes, float4 and scalar lanes, empty bags in between, and a
// batch whose every occurrence is one row.
func TestEmbeddingBagGradHot(t *testing.T) {
	h := newHarness(t)
	type hotCase struct {
		bags, maxPer, nrows, v int
		hot                    []float64 // the fractions of occurrences of rows 0, 1, …
	}
	cases := []hotCase{
		{30000, 4, 2000, 128, []float64{0.3, 0.1, 0.05, 0.02}}, // several rows > 2048, float4, one pass
		{20000, 5, 500, 256, []float64{0.5, 0.2}},              // two column passes
		{20000, 3, 300, 13, []float64{0.4, 0.02}},              // scalar lanes
		{40000, 2, 100, 1, []float64{0.6}},                     // V = 1: 1024 one-lane teams
		{10000, 6, 10, 64, []float64{1}},                       // one row only
		{70000, 1, 1 << 20, 128, []float64{0.05, 0.03, 0.03}},  // one-hot bags, large rows
	}
	for _, tc := range cases {
		b := embBatch{off: make([]int64, tc.bags+1)}
		for i := range tc.bags {
			for range h.rng.IntN(tc.maxPer + 1) {
				u, r := h.rng.Float64(), int64(-2)
				for k, f := range tc.hot {
					if u < f {
						r = int64(k)
						break
					}
					u -= f
				}
				if r == -2 {
					x := h.rng.Float64()
					r = int64(x * x * float64(tc.nrows))
					if h.rng.IntN(50) == 0 {
						r = -1
					}
				}
				b.rows = append(b.rows, r)
			}
			b.off[i+1] = int64(len(b.rows))
		}
		nnz := len(b.rows)
		rows := h.Ints(tensor.Int32, b.rows, nnz)
		off := h.Ints(tensor.Int32, b.off, len(b.off))
		dOut := h.Rand(-1, 1, tc.bags, tc.v)
		for _, c := range embCombiners {
			ur := h.Ints(tensor.Int32, slices.Repeat([]int64{-7}, nnz), nnz)
			ug := h.Rand(-1, 1, nnz, tc.v)
			nu := h.Ints(tensor.Int32, []int64{-3}, 1)
			h.g.EmbeddingBagGrad(ur.G, ug.G, nu.G, dOut.G, rows.G, off.G, c)
			h.c.EmbeddingBagGrad(ur.C, ug.C, nu.C, dOut.C, rows.C, off.C, c)
			name := fmt.Sprintf("hot grad bags %d v %d hot %v comb %d", tc.bags, tc.v, tc.hot, c)
			h.Check(name+" numUniq", nu, 0)
			h.Check(name+" uniqRows", ur, 0)
			h.Check(name+" uniqGrad", ug, tolFP32)
			// Deterministic: a second run (other list orders) gives the
			// same bits.
			first := make([]float32, ug.G.Len())
			again := make([]float32, ug.G.Len())
			if err := h.g.Download(first, ug.G); err != nil {
				t.Fatal(err)
			}
			h.g.EmbeddingBagGrad(ur.G, ug.G, nu.G, dOut.G, rows.G, off.G, c)
			if err := h.g.Download(again, ug.G); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(first, again) {
				t.Errorf("%s: a second run differs", name)
			}
			h.Free(ur, ug, nu)
		}
		h.Free(rows, off, dOut)
	}
}

// TestEmbeddingStep trains a slot-local table a few steps on both
// backends: int64 keys → SlotRows → EmbeddingBag → EmbeddingBagGrad →
// SparseUpdate, for every optimizer and update type, one-hot bags (DLRM's
// LocalizedSlotSparseEmbeddingOneHot) and multi-hot bags with repeated keys
// in a bag, empty bags and a key in every bag of its slot (DCNv2's), so
// the update sees the gradients the backward made.
func TestEmbeddingStep(t *testing.T) {
	h := newHarness(t)
	sizes := []int64{3, 200, 5000, 7, 2}
	so := []int64{0, 3, 203, 5203, 5210}
	ns, nrows := len(sizes), 5212
	type layout struct {
		name    string
		maxPer  int // keys per bag: exactly 1 when 0
		v       int
		comb    tensor.Combiner
		samples int
	}
	layouts := []layout{
		{"one-hot", 0, 128, tensor.Sum, 3000},
		{"multi-hot", 6, 20, tensor.Sum, 2000},
		{"multi-hot mean", 4, 7, tensor.Mean, 1500},
	}
	for _, lo := range layouts {
		for _, kind := range optKinds {
			for _, up := range []tensor.UpdateType{tensor.Local, tensor.Global, tensor.LazyGlobal} {
				if up == tensor.LazyGlobal && kind != tensor.Adam {
					continue
				}
				tab := h.Rand(-0.5, 0.5, nrows, lo.v)
				s1, s2 := h.optStates(kind, nrows*lo.v, true)
				last := h.Ints(tensor.Int32, make([]int64, nrows), nrows)
				sot := h.Ints(tensor.Int64, so, ns)
				sst := h.Ints(tensor.Int64, sizes, ns)
				for step := int64(1); step <= 3; step++ {
					bags := lo.samples * ns
					off := make([]int64, bags+1)
					var keys []int64
					for b := range bags {
						k := 1
						if lo.maxPer > 0 {
							k = h.rng.IntN(lo.maxPer + 1)
						}
						sz := int(sizes[b%ns])
						for range k {
							x := h.rng.Float64()
							keys = append(keys, int64(x*x*x*float64(sz)))
						}
						off[b+1] = int64(len(keys))
					}
					nnz := len(keys)
					kt := h.Ints(tensor.Int64, keys, nnz)
					ot := h.Ints(tensor.Int32, off, len(off))
					rows := h.Out(tensor.Int32, nnz)
					h.g.SlotRows(rows.G, kt.G, ot.G, sot.G, sst.G)
					h.c.SlotRows(rows.C, kt.C, ot.C, sot.C, sst.C)
					name := fmt.Sprintf("%s kind %d update %d step %d", lo.name, kind, up, step)
					h.Check(name+" rows", rows, 0)
					out := h.Out(tensor.Float32, bags, lo.v)
					h.g.EmbeddingBag(out.G, tab.G, rows.G, ot.G, lo.comb)
					h.c.EmbeddingBag(out.C, tab.C, rows.C, ot.C, lo.comb)
					h.Check(name+" forward", out, tolFP32)
					dOut := h.Rand(-1, 1, bags, lo.v)
					ur := h.Out(tensor.Int32, max(nnz, 1))
					ug := h.Out(tensor.Float32, max(nnz, 1), lo.v)
					nu := h.Out(tensor.Int32, 1)
					h.g.EmbeddingBagGrad(ur.G, ug.G, nu.G, dOut.G, rows.G, ot.G, lo.comb)
					h.c.EmbeddingBagGrad(ur.C, ug.C, nu.C, dOut.C, rows.C, ot.C, lo.comb)
					h.Check(name+" numUniq", nu, 0)
					p := optParams(kind, up, step, 1)
					h.g.SparseUpdate(p, tab.G, s1.G, s2.G, last.G, ur.G, ug.G, nu.G)
					h.c.SparseUpdate(p, tab.C, s1.C, s2.C, last.C, ur.C, ug.C, nu.C)
					h.Check(name+" table", tab, tolFP32)
					h.checkStates(name, kind, s1, s2)
					h.Free(kt, ot, rows, out, dOut, ur, ug, nu)
				}
				h.Free(tab, s1, s2, last, sot, sst)
			}
		}
	}
}

// TestEmbeddingSlotRowsLong covers SlotRows' 32-bag warp groups with
// multi-hot bags: long bags (up to 150 keys, DCNv2's slot of 100) next to
// runs of empty bags, a last group of fewer than 32 bags, and more groups
// than one grid.
func TestEmbeddingSlotRowsLong(t *testing.T) {
	h := newHarness(t)
	sizes := []int64{2000000, 3, 1, 40000}
	so := []int64{0, 2000000, 2000003, 2000004}
	ns := len(sizes)
	for _, samples := range []int{1, 9, 5000, 300001} {
		bags := samples * ns
		off := make([]int64, bags+1)
		var keys []int64
		for b := range bags {
			var k int
			switch h.rng.IntN(8) {
			case 0:
				k = h.rng.IntN(151)
			case 1, 2, 3:
				k = 0
			default:
				k = 1 + h.rng.IntN(3)
			}
			if samples == 300001 {
				k = min(k, 2)
			}
			for range k {
				keys = append(keys, int64(h.rng.IntN(int(sizes[b%ns]))))
			}
			off[b+1] = int64(len(keys))
		}
		k := h.Ints(tensor.Int64, keys, len(keys))
		o := h.Ints(tensor.Int32, off, len(off))
		sot := h.Ints(tensor.Int64, so, ns)
		sst := h.Ints(tensor.Int64, sizes, ns)
		r := h.Out(tensor.Int32, len(keys))
		h.g.SlotRows(r.G, k.G, o.G, sot.G, sst.G)
		h.c.SlotRows(r.C, k.C, o.C, sot.C, sst.C)
		h.Check(fmt.Sprintf("slot rows long bags, %d samples", samples), r, 0)
		h.Free(k, o, sot, sst, r)
	}
}
