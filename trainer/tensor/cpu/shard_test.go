package cpu

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

func i64T(be *Backend, v ...int64) tensor.Tensor {
	t := be.Alloc(tensor.Int64, len(v))
	be.Upload(t, v)
	return t
}

func i32T(be *Backend, v ...int32) tensor.Tensor {
	t := be.Alloc(tensor.Int32, len(v))
	be.Upload(t, v)
	return t
}

func TestMaskKeysByKey(t *testing.T) {
	be := newBE(t)
	keys := []int64{0, 1, 2, 3, -1, -2, -3, -4, 1 << 40, math.MaxInt64, math.MinInt64 + 2}
	const world = 3
	seen := make([]int, len(keys))
	for rank := range world {
		kt := i64T(be, keys...)
		dst := be.Alloc(tensor.Int64, len(keys))
		be.MaskKeys(dst, kt, tensor.Tensor{}, 0, rank, world, false)
		got := data[int64](dst)
		for j, k := range keys {
			own := ((k%world)+world)%world == int64(rank)
			switch {
			case own && got[j] != k, !own && got[j] != tensor.SkipKey:
				t.Fatalf("rank %d position %d key %d: got %d", rank, j, k, got[j])
			}
			if own {
				seen[j]++
			}
		}
		// In place (dst aliases keys) gives the same.
		be.MaskKeys(kt, kt, tensor.Tensor{}, 0, rank, world, false)
		if !slices.Equal(data[int64](kt), got) {
			t.Fatalf("rank %d in place: %v, want %v", rank, data[int64](kt), got)
		}
	}
	for j, n := range seen {
		if n != 1 {
			t.Fatalf("key %d owned by %d ranks", keys[j], n)
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestMaskKeysBySlot(t *testing.T) {
	be := newBE(t)
	// 2 samples × 3 slots; bag b has slot b mod 3.
	off := i32T(be, 0, 2, 2, 3, 4, 6, 7)
	keys := []int64{10, 11, 12, 13, 14, 15, 16}
	slotOf := []int{0, 0, 2, 0, 1, 1, 2}
	for _, world := range []int{1, 2, 4} {
		for rank := range world {
			dst := be.Alloc(tensor.Int64, len(keys))
			be.MaskKeys(dst, i64T(be, keys...), off, 3, rank, world, true)
			for j, k := range keys {
				want := tensor.SkipKey
				if slotOf[j]%world == rank {
					want = k
				}
				if got := data[int64](dst)[j]; got != want {
					t.Fatalf("world %d rank %d position %d: %d, want %d", world, rank, j, got, want)
				}
			}
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestMaskKeysRefusesReservedKeys(t *testing.T) {
	for _, bad := range []int64{tensor.EmptyKey, tensor.SkipKey} {
		for _, bySlot := range []bool{false, true} {
			be := newBE(t)
			keys := i64T(be, 4, 5, bad, 6)
			be.MaskKeys(be.Alloc(tensor.Int64, 4), keys, i32T(be, 0, 1, 4), 2, 0, 2, bySlot)
			err := be.Err()
			if !errors.Is(err, tensor.ErrRange) || !strings.Contains(err.Error(), "at 2") {
				t.Fatalf("key %d bySlot %v: %v, want ErrRange naming position 2", bad, bySlot, err)
			}
		}
	}
	be := newBE(t)
	be.MaskKeys(be.Alloc(tensor.Int64, 1), i64T(be, 1), tensor.Tensor{}, 0, 2, 2, false)
	if !errors.Is(be.Err(), tensor.ErrShape) {
		t.Fatalf("rank 2 of 2: %v", be.Err())
	}
}

func TestHashLookupSkipKeyAndRowKeys(t *testing.T) {
	be := newBE(t)
	h := tensor.NewHashTable(be, 10)
	h.Sharded = true
	s := tensor.SkipKey
	keys := i64T(be, 50, s, -3, 50, s, 7)
	rows := be.Alloc(tensor.Int32, 6)
	be.HashLookup(h, keys, rows, true)
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := data[int32](rows), []int32{2, -1, 0, 2, -1, 1}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if c := data[int32](h.Count)[0]; c != 3 {
		t.Fatalf("count %d, want 3 (SkipKey is never inserted)", c)
	}
	rk := data[int64](h.RowKeys)
	if want := []int64{-3, 7, 50}; !slices.Equal(rk[:3], want) || rk[3] != tensor.EmptyKey {
		t.Fatalf("row keys %v, want %v then EmptyKey", rk, want)
	}
	be.Upload(keys, []int64{9, s, 8, s, 7, 9})
	be.HashLookup(h, keys, rows, true)
	if got, want := data[int32](rows), []int32{4, -1, 3, -1, 1, 4}; !slices.Equal(got, want) {
		t.Fatalf("second call rows %v, want %v", got, want)
	}
	if want := []int64{-3, 7, 50, 8, 9}; !slices.Equal(rk[:5], want) {
		t.Fatalf("row keys %v, want %v", rk[:5], want)
	}
	// An unsharded table refuses SkipKey, with or without insert.
	for _, insert := range []bool{false, true} {
		be := newBE(t)
		h := tensor.NewHashTable(be, 10)
		be.HashLookup(h, i64T(be, 1, s), be.Alloc(tensor.Int32, 2), insert)
		if err := be.Err(); !errors.Is(err, tensor.ErrRange) || !strings.Contains(err.Error(), "at 1") {
			t.Fatalf("unsharded SkipKey (insert %v): %v", insert, err)
		}
	}
}

// initRows inserts keys into a fresh table of maxRows rows behind pre
// (inserted first, rows not initialised) and returns the table's rows of
// keys after InitHashRows.
func initRows(t *testing.T, dt tensor.DType, maxRows, v int, pre, keys []int64, seed uint64) (map[int64][]float64, *Backend, tensor.Tensor, tensor.HashTable) {
	t.Helper()
	be := newBE(t)
	h := tensor.NewHashTable(be, maxRows)
	table := be.Alloc(dt, maxRows, v)
	be.Fill(table, 7) // untouched rows keep 7
	if len(pre) > 0 {
		be.HashLookup(h, i64T(be, pre...), be.Alloc(tensor.Int32, len(pre)), true)
	}
	first := be.Alloc(tensor.Int32, 1)
	be.Copy(first, h.Count)
	rows := be.Alloc(tensor.Int32, len(keys))
	be.HashLookup(h, i64T(be, keys...), rows, true)
	be.InitHashRows(table, h, first, seed, 0.05, tensor.Tensor{}, tensor.Tensor{})
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	out := map[int64][]float64{}
	for i, k := range keys {
		r := int(data[int32](rows)[i])
		row := make([]float64, v)
		for j := range v {
			if dt == tensor.Float32 {
				row[j] = float64(data[float32](table)[r*v+j])
			} else {
				row[j] = data[float64](table)[r*v+j]
			}
		}
		out[k] = row
	}
	return out, be, table, h
}

func TestInitHashRowsKeyDerived(t *testing.T) {
	keys := []int64{5, -9, 1 << 50, 77, 3}
	const v = 7 // not a multiple of 4: the last Philox block is partial
	ref, _, _, _ := initRows(t, tensor.Float32, 8, v, nil, keys, 42)
	// The same keys behind other keys, in a bigger table, in another
	// order: the same values.
	rev := slices.Clone(keys)
	slices.Reverse(rev)
	got, be, table, h := initRows(t, tensor.Float32, 100, v, []int64{1000, 2000, -5}, rev, 42)
	for _, k := range keys {
		if !slices.Equal(ref[k], got[k]) {
			t.Fatalf("key %d: %v in one table, %v in another", k, ref[k], got[k])
		}
		for j, x := range ref[k] {
			if !(x >= -0.05 && x < 0.05) {
				t.Fatalf("key %d element %d: %v outside [-0.05, 0.05)", k, j, x)
			}
			if want := tensor.InitValue32(42, tensor.InitTagHash, k, j, 0.05); float32(x) != want {
				t.Fatalf("key %d element %d: %v, InitValue32 %v", k, j, x, want)
			}
		}
	}
	// The rows inserted before first (loaded rows) and the free rows are
	// untouched.
	tab := data[float32](table)
	for r := 0; r < 100; r++ {
		if r >= 3 && r < 3+len(keys) {
			continue
		}
		for j := range v {
			if tab[r*v+j] != 7 {
				t.Fatalf("row %d element %d changed to %v", r, j, tab[r*v+j])
			}
		}
	}
	// A second call with first = Count touches nothing.
	first := be.Alloc(tensor.Int32, 1)
	be.Copy(first, h.Count)
	snap := slices.Clone(tab)
	be.InitHashRows(table, h, first, 1, 0.05, tensor.Tensor{}, tensor.Tensor{})
	if !slices.Equal(snap, tab) {
		t.Fatal("InitHashRows with first = Count changed the table")
	}
	// Another seed: other values.
	other, _, _, _ := initRows(t, tensor.Float32, 8, v, nil, keys, 43)
	if slices.Equal(other[5], ref[5]) {
		t.Fatal("seed does not change the values")
	}
	// Float64 tables: the same formula in float64, within float32 rounding.
	f64, _, _, _ := initRows(t, tensor.Float64, 8, v, nil, keys, 42)
	for _, k := range keys {
		for j := range v {
			if d := math.Abs(f64[k][j] - ref[k][j]); d > 1e-8 {
				t.Fatalf("key %d element %d: float64 %v, float32 %v", k, j, f64[k][j], ref[k][j])
			}
		}
	}
	// Distinct keys get distinct rows; elements spread over [-a, a).
	var lo, hi float64
	for _, k := range keys {
		for _, x := range ref[k] {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	if lo > -0.02 || hi < 0.02 {
		t.Fatalf("values span [%v, %v]", lo, hi)
	}
}

func TestInitHashRowsSlotBounds(t *testing.T) {
	be := newBE(t)
	h := tensor.NewHashTable(be, 6)
	const v = 4
	table := be.Alloc(tensor.Float32, 6, v)
	// 1 sample × 2 slots: keys 10, 11 in slot 0; 12 in slot 1.
	off := i32T(be, 0, 2, 3)
	keys := i64T(be, 11, 10, 12)
	rows := be.Alloc(tensor.Int32, 3)
	rowSlots := be.Alloc(tensor.Int32, 6)
	be.Fill(rowSlots, -1)
	first := be.Alloc(tensor.Int32, 1)
	be.Copy(first, h.Count)
	be.HashLookup(h, keys, rows, true)
	be.RecordSlots(rowSlots, rows, off, 2)
	bounds := be.Alloc(tensor.Float32, 2)
	be.Upload(bounds, []float32{0.5, 0.001})
	be.InitHashRows(table, h, first, 9, 0.05, rowSlots, bounds)
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	tab := data[float32](table)
	for i, k := range []int64{11, 10, 12} {
		r := int(data[int32](rows)[i])
		a := []float64{0.5, 0.5, 0.001}[i]
		for j := range v {
			if want := tensor.InitValue32(9, tensor.InitTagHash, k, j, a); tab[r*v+j] != want {
				t.Fatalf("key %d element %d: %v, want %v (bound %v)", k, j, tab[r*v+j], want, a)
			}
		}
	}
	// A new row without a recorded slot is ErrRange.
	be.Copy(first, h.Count)
	be.HashLookup(h, i64T(be, 99), be.Alloc(tensor.Int32, 1), true)
	be.InitHashRows(table, h, first, 9, 0.05, rowSlots, bounds)
	if !errors.Is(be.Err(), tensor.ErrRange) {
		t.Fatalf("row without a slot: %v", be.Err())
	}
}

func TestSlotRowsForeignSlot(t *testing.T) {
	be := newBE(t)
	// 2 samples × 2 slots of sizes 3 and 4; slot 1 is another rank's.
	off := i32T(be, 0, 1, 2, 3, 4)
	so, ss := i64T(be, 0, -1), i64T(be, 3, 4)
	rows := be.Alloc(tensor.Int32, 4)
	be.SlotRows(rows, i64T(be, 2, 3, 0, 1), off, so, ss)
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := data[int32](rows), []int32{2, -1, 0, -1}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	// A foreign slot's keys are still range-checked.
	be.SlotRows(rows, i64T(be, 2, 4, 0, 1), off, so, ss)
	if !errors.Is(be.Err(), tensor.ErrRange) {
		t.Fatalf("key 4 in a slot of 4: %v", be.Err())
	}
}

func TestInitRowMatchesInitValue(t *testing.T) {
	for _, v := range []int{1, 3, 4, 9} {
		r32 := make([]float32, v)
		r64 := make([]float64, v)
		tensor.InitRow32(r32, 5, tensor.InitTagOneHot, -77, 0.3)
		tensor.InitRow64(r64, 5, tensor.InitTagOneHot, -77, 0.3)
		for j := range v {
			if r32[j] != tensor.InitValue32(5, tensor.InitTagOneHot, -77, j, 0.3) ||
				r64[j] != tensor.InitValue64(5, tensor.InitTagOneHot, -77, j, 0.3) {
				t.Fatalf("v %d element %d: row %v %v", v, j, r32[j], r64[j])
			}
		}
	}
}
