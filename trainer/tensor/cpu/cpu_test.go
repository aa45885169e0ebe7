package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

func newBE(t testing.TB) *Backend {
	be, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

func randT(be *Backend, r *rand.Rand, dt tensor.DType, shape ...int) tensor.Tensor {
	t := be.Alloc(dt, shape...)
	if dt == tensor.Float32 {
		d := data[float32](t)
		for i := range d {
			d[i] = float32(r.NormFloat64())
		}
	} else {
		d := data[float64](t)
		for i := range d {
			d[i] = r.NormFloat64()
		}
	}
	return t
}

func TestGemm(t *testing.T) {
	be := newBE(t)
	r := rand.New(rand.NewPCG(1, 1))
	for trial := 0; trial < 40; trial++ {
		m, n, k := 1+r.IntN(70), 1+r.IntN(70), 1+r.IntN(70)
		if trial%3 == 0 {
			n = 1 + r.IntN(4) // the narrow path
		}
		ta, tb := r.IntN(2) == 1, r.IntN(2) == 1
		alpha, beta := r.NormFloat64(), []float64{0, 1, 0.5}[r.IntN(3)]
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			as, bs := []int{m, k}, []int{k, n}
			if ta {
				as = []int{k, m}
			}
			if tb {
				bs = []int{n, k}
			}
			rr := rand.New(rand.NewPCG(uint64(trial), 7))
			a, b, c := randT(be, rr, dt, as...), randT(be, rr, dt, bs...), randT(be, rr, dt, m, n)
			want := make([]float64, m*n)
			get := func(t tensor.Tensor, i int) float64 {
				if dt == tensor.Float32 {
					return float64(data[float32](t)[i])
				}
				return data[float64](t)[i]
			}
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var s float64
					for kk := 0; kk < k; kk++ {
						ai, bi := i*k+kk, kk*n+j
						if ta {
							ai = kk*m + i
						}
						if tb {
							bi = j*k + kk
						}
						s += get(a, ai) * get(b, bi)
					}
					want[i*n+j] = alpha*s + beta*get(c, i*n+j)
				}
			}
			be.Gemm(ta, tb, alpha, a, b, beta, c)
			if err := be.Err(); err != nil {
				t.Fatal(err)
			}
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			if e := relErr(c, want, get); e > tol {
				t.Fatalf("%v m%d n%d k%d ta%v tb%v: rel err %g", dt, m, n, k, ta, tb, e)
			}
		}
	}
	be.Gemm(false, false, 1, be.Alloc(tensor.Float32, 2, 3), be.Alloc(tensor.Float32, 4, 2), 0, be.Alloc(tensor.Float32, 2, 2))
	if !errors.Is(be.Err(), tensor.ErrShape) {
		t.Fatalf("bad shapes: %v", be.Err())
	}
}

func relErr(c tensor.Tensor, want []float64, get func(tensor.Tensor, int) float64) float64 {
	var num, den float64
	for i, w := range want {
		d := get(c, i) - w
		num += d * d
		den += w * w
	}
	return math.Sqrt(num / max(den, 1e-300))
}

func TestPhiloxKnownAnswers(t *testing.T) {
	// Random123 kat_vectors for philox4x32_10.
	cases := []struct{ ctr, key, want []uint32 }{
		{[]uint32{0, 0, 0, 0}, []uint32{0, 0}, []uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, []uint32{0xffffffff, 0xffffffff}, []uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, []uint32{0xa4093822, 0x299f31d0}, []uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		got := tensor.Philox4x32([4]uint32(c.ctr), [2]uint32(c.key))
		if got != [4]uint32(c.want) {
			t.Errorf("philox(%x, %x) = %x, want %x", c.ctr, c.key, got, c.want)
		}
	}
}

func TestDropoutMaskMatchesPhilox(t *testing.T) {
	be := newBE(t)
	x := be.Alloc(tensor.Float32, 1000, 7)
	be.Fill(x, 1)
	y := be.Alloc(tensor.Float32, 1000, 7)
	be.Dropout(y, x, 0.3, 42, 99)
	kept := 0
	for i, v := range data[float32](y) {
		keep := tensor.PhiloxUniform(42, 99, i) >= 0.3
		if keep != (v != 0) || (keep && v != float32(1/(1-float32(0.3)))) {
			t.Fatalf("element %d: %v, keep %v", i, v, keep)
		}
		if keep {
			kept++
		}
	}
	if f := float64(kept) / 7000; math.Abs(f-0.7) > 0.03 {
		t.Fatalf("kept fraction %v", f)
	}
}

func TestHashLookup(t *testing.T) {
	be := newBE(t)
	h := tensor.NewHashTable(be, 10)
	keys := be.Alloc(tensor.Int64, 8)
	rows := be.Alloc(tensor.Int32, 8)
	be.Upload(keys, []int64{50, -3, 50, 7, 1 << 40, 7, -3, 9})
	be.HashLookup(h, keys, rows, true)
	got := make([]int32, 8)
	if err := be.Download(got, rows); err != nil {
		t.Fatal(err)
	}
	// Distinct new keys in ascending order: -3→0, 7→1, 9→2, 50→3, 2^40→4.
	want := []int32{3, 0, 3, 1, 4, 1, 0, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rows %v, want %v", got, want)
		}
	}
	be.Upload(keys, []int64{9, 11, 50, 12, 13, 14, 15, 16})
	be.HashLookup(h, keys, rows, false)
	be.Download(got, rows)
	if got[0] != 2 || got[1] != -1 || got[2] != 3 {
		t.Fatalf("lookup without insert: %v", got)
	}
	be.HashLookup(h, keys, rows, true) // 7 new keys, 5 rows used, 10 max
	if !errors.Is(be.Err(), tensor.ErrTableFull) {
		t.Fatalf("want ErrTableFull, got %v", be.Err())
	}
	be.Reset()
	cnt := make([]int32, 1)
	be.Download(cnt, h.Count)
	if cnt[0] != 5 {
		t.Fatalf("a full table must insert nothing: count %d", cnt[0])
	}
}

func TestEmbeddingBagAndGrad(t *testing.T) {
	be := newBE(t)
	r := rand.New(rand.NewPCG(3, 3))
	const rowsN, v, bags = 13, 5, 40
	for _, comb := range []tensor.Combiner{tensor.Sum, tensor.Mean} {
		table := randT(be, r, tensor.Float64, rowsN, v)
		off := []int32{0}
		var rows []int32
		for b := 0; b < bags; b++ {
			for k := r.IntN(4); k > 0; k-- {
				rows = append(rows, int32(r.IntN(rowsN)))
			}
			off = append(off, int32(len(rows)))
		}
		rt, ot := be.Alloc(tensor.Int32, len(rows)), be.Alloc(tensor.Int32, len(off))
		be.Upload(rt, rows)
		be.Upload(ot, off)
		out := be.Alloc(tensor.Float64, bags, v)
		be.EmbeddingBag(out, table, rt, ot, comb)
		tab, o := data[float64](table), data[float64](out)
		dOut := randT(be, r, tensor.Float64, bags, v)
		dense := make([]float64, rowsN*v)
		for b := 0; b < bags; b++ {
			n := off[b+1] - off[b]
			sc := 1.0
			if comb == tensor.Mean && n > 1 {
				sc = 1 / float64(n)
			}
			for i := 0; i < v; i++ {
				var s float64
				for _, row := range rows[off[b]:off[b+1]] {
					s += tab[int(row)*v+i]
					dense[int(row)*v+i] += sc * data[float64](dOut)[b*v+i]
				}
				if math.Abs(s*sc-o[b*v+i]) > 1e-12 {
					t.Fatalf("combiner %d bag %d: %v want %v", comb, b, o[b*v+i], s*sc)
				}
			}
		}
		ur, ug, nu := be.Alloc(tensor.Int32, len(rows)), be.Alloc(tensor.Float64, len(rows), v), be.Alloc(tensor.Int32, 1)
		be.EmbeddingBagGrad(ur, ug, nu, dOut, rt, ot, comb)
		if err := be.Err(); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for u := 0; u < int(data[int32](nu)[0]); u++ {
			row := data[int32](ur)[u]
			if u > 0 && row <= data[int32](ur)[u-1] {
				t.Fatal("unique rows not ascending")
			}
			for i := 0; i < v; i++ {
				if math.Abs(data[float64](ug)[u*v+i]-dense[int(row)*v+i]) > 1e-12 {
					t.Fatalf("grad row %d", row)
				}
				dense[int(row)*v+i] = 0
			}
			seen++
		}
		for _, d := range dense {
			if d != 0 {
				t.Fatal("a touched row is missing from the unique rows")
			}
		}
	}
}

func BenchmarkGemm(b *testing.B) {
	for _, s := range []struct{ m, n, k int }{{256, 256, 256}, {2048, 512, 256}, {1024, 1024, 1024}, {4096, 1, 512}} {
		b.Run(fmtShape(s.m, s.n, s.k), func(b *testing.B) {
			be := newBE(b)
			r := rand.New(rand.NewPCG(1, 1))
			x, w, y := randT(be, r, tensor.Float32, s.m, s.k), randT(be, r, tensor.Float32, s.k, s.n), be.Alloc(tensor.Float32, s.m, s.n)
			b.SetBytes(int64(4 * (s.m*s.k + s.k*s.n + s.m*s.n)))
			b.ReportAllocs()
			be.Gemm(false, false, 1, x, w, 0, y)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				be.Gemm(false, false, 1, x, w, 0, y)
			}
			b.ReportMetric(float64(2*s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkEmbeddingBag(b *testing.B) {
	be := newBE(b)
	r := rand.New(rand.NewPCG(1, 1))
	const bsz, slots, v, rowsN = 4096, 26, 16, 1 << 18
	table := randT(be, r, tensor.Float32, rowsN, v)
	rows := make([]int32, bsz*slots)
	off := make([]int32, bsz*slots+1)
	for i := range rows {
		rows[i] = int32(r.IntN(rowsN))
		off[i+1] = int32(i + 1)
	}
	rt, ot := be.Alloc(tensor.Int32, len(rows)), be.Alloc(tensor.Int32, len(off))
	be.Upload(rt, rows)
	be.Upload(ot, off)
	out := be.Alloc(tensor.Float32, bsz, slots*v)
	b.SetBytes(int64(len(rows) * v * 4))
	b.ResetTimer()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		be.EmbeddingBag(out, table, rt, ot, tensor.Sum)
	}
}

func fmtShape(m, n, k int) string {
	return "m" + itoa(m) + "n" + itoa(n) + "k" + itoa(k)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestRadixSortRows(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, maxRow := range []int32{0, 5, 3000, 1 << 24, 1<<31 - 1} {
		n := 5000
		p := make([]uint64, n)
		for j := range p {
			p[j] = uint64(r.Int64N(int64(maxRow)+1))<<32 | uint64(j)
		}
		want := append([]uint64(nil), p...)
		slices.Sort(want) // (row, j) order = stable by row
		got, _ := radixSortRows(p, make([]uint64, n), maxRow)
		if !slices.Equal(got, want) {
			t.Fatalf("maxRow %d: radix sort differs", maxRow)
		}
	}
}

func BenchmarkEmbeddingBagGrad(b *testing.B) {
	be := newBE(b)
	r := rand.New(rand.NewPCG(1, 1))
	const bsz, slots, v, rowsN = 4096, 26, 16, 1 << 20
	rows := make([]int32, bsz*slots)
	off := make([]int32, bsz*slots+1)
	for i := range rows {
		rows[i] = int32(r.IntN(rowsN))
		off[i+1] = int32(i + 1)
	}
	rt, ot := be.Alloc(tensor.Int32, len(rows)), be.Alloc(tensor.Int32, len(off))
	be.Upload(rt, rows)
	be.Upload(ot, off)
	dOut := randT(be, r, tensor.Float32, bsz, slots*v)
	ur, ug, nu := be.Alloc(tensor.Int32, len(rows)), be.Alloc(tensor.Float32, len(rows), v), be.Alloc(tensor.Int32, 1)
	be.EmbeddingBagGrad(ur, ug, nu, dOut, rt, ot, tensor.Sum)
	b.SetBytes(int64(len(rows) * v * 4))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		be.EmbeddingBagGrad(ur, ug, nu, dOut, rt, ot, tensor.Sum)
	}
}

func TestSlotRowsAndErrors(t *testing.T) {
	be := newBE(t)
	keys, rows := be.Alloc(tensor.Int64, 4), be.Alloc(tensor.Int32, 4)
	off := be.Alloc(tensor.Int32, 5) // 2 samples × 2 slots
	so, ss := be.Alloc(tensor.Int64, 2), be.Alloc(tensor.Int64, 2)
	be.Upload(so, []int64{0, 10})
	be.Upload(ss, []int64{10, 5})
	be.Upload(off, []int32{0, 1, 2, 3, 4})
	be.Upload(keys, []int64{3, 4, 9, 0})
	be.SlotRows(rows, keys, off, so, ss)
	got := make([]int32, 4)
	if err := be.Download(got, rows); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int32{3, 14, 9, 10}) {
		t.Fatalf("one-hot rows %v", got)
	}
	be.Upload(keys, []int64{3, 5, 9, 0}) // 5 ≥ slot 1's size
	be.SlotRows(rows, keys, off, so, ss)
	if !errors.Is(be.Err(), tensor.ErrRange) {
		t.Fatalf("want ErrRange, got %v", be.Err())
	}
	// Sticky: later operations do nothing and report the first error.
	x := be.Alloc(tensor.Float32, 2)
	be.Fill(x, 7)
	if v := data[float32](x); v[0] != 0 || !errors.Is(be.Sync(), tensor.ErrRange) {
		t.Fatal("operations after an error must be no-ops")
	}
	be.Reset()
	table, out := be.Alloc(tensor.Float32, 3, 2), be.Alloc(tensor.Float32, 4, 2)
	be.Upload(rows, []int32{0, 1, 3, 2}) // row 3 of 3
	be.EmbeddingBag(out, table, rows, off, tensor.Sum)
	if !errors.Is(be.Err(), tensor.ErrRange) {
		t.Fatalf("row out of table: %v", be.Err())
	}
	be.Reset()
	be.Upload(off, []int32{0, 2, 1, 3, 4}) // decreasing
	be.EmbeddingBag(out, table, be.Alloc(tensor.Int32, 4), off, tensor.Sum)
	if !errors.Is(be.Err(), tensor.ErrShape) {
		t.Fatalf("bad CSR: %v", be.Err())
	}
	be.Reset()
	be.Axpby(be.Alloc(tensor.Float32, 3), 1, be.Alloc(tensor.Float64, 3), 1, tensor.Tensor{})
	if !errors.Is(be.Err(), tensor.ErrDType) {
		t.Fatalf("mixed dtypes: %v", be.Err())
	}
}

func TestConvert(t *testing.T) {
	be := newBE(t)
	u := be.Alloc(tensor.Uint32, 3)
	be.Upload(u, []uint32{0, 7, 1<<32 - 1})
	k := be.Alloc(tensor.Int64, 3)
	be.Convert(k, u)
	got := make([]int64, 3)
	if err := be.Download(got, k); err != nil || !slices.Equal(got, []int64{0, 7, 1<<32 - 1}) {
		t.Fatalf("uint32→int64 %v %v", got, err)
	}
	f := be.Alloc(tensor.Float32, 3)
	be.Convert(f, k)
	if v := data[float32](f); v[1] != 7 {
		t.Fatalf("int64→float32 %v", v)
	}
}

// TestRecordSlots: a row first seen takes the smallest slot it occurs in
// within the call; recorded rows keep theirs; rows < 0 are skipped; a row
// beyond the record is ErrRange.
func TestRecordSlots(t *testing.T) {
	be := newBE(t)
	rs := be.Alloc(tensor.Int32, 6)
	be.Upload(rs, []int32{-1, -1, 2, -1, -1, -1})
	// Two samples of three slots: bags 0..5, slot = bag mod 3.
	rows := be.Alloc(tensor.Int32, 7)
	off := be.Alloc(tensor.Int32, 7)
	be.Upload(rows, []int32{4, 1, 2, -1, 0, 1, 4})
	be.Upload(off, []int32{0, 1, 2, 3, 5, 6, 7}) // bag 3 holds -1 and 0
	be.RecordSlots(rs, rows, off, 3)
	got := make([]int32, 6)
	if err := be.Download(got, rs); err != nil {
		t.Fatal(err)
	}
	// Row 4 in slots 0 and 2 → 0; row 1 twice in slot 1 → 1; row 2 keeps
	// 2; row 0 in slot 0 (bag 3); rows 3, 5 unseen.
	if want := []int32{0, 1, 2, -1, 0, -1}; !slices.Equal(got, want) {
		t.Errorf("slots %v, want %v", got, want)
	}
	be.Upload(rows, []int32{6, 0, 0, 0, 0, 0, 0})
	be.RecordSlots(rs, rows, off, 3)
	if !errors.Is(be.Err(), tensor.ErrRange) {
		t.Errorf("row beyond the record: %v", be.Err())
	}
}
