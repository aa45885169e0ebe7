package cpu

import (
	"math"
	"slices"
	"sync/atomic"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// HashLookup maps keys to rows, inserting missing keys when asked.
//
// The lookup is a parallel probe; missing keys are gathered, sorted and
// deduplicated, checked against MaxRows as a whole (a full table inserts
// nothing), inserted in ascending key order, and the missing positions are
// probed again. The CUDA version does the same with a compaction, a radix
// sort and atomicCAS inserts at rows Count + rank, which gives the same rows.
func (be *Backend) HashLookup(h tensor.HashTable, keys, rows tensor.Tensor, insert bool) {
	const op = "hash_lookup"
	if !be.owned(op, h.Keys, h.Rows, h.Count, h.RowKeys, keys, rows) || !be.check(tensor.CheckHashTable(op, h, keys, rows)) {
		return
	}
	capy := h.Keys.Len()
	tk, tr := data[int64](h.Keys), data[int32](h.Rows)
	k, r := data[int64](keys), data[int32](rows)[:len(data[int64](keys))]
	mask := uint64(capy - 1)
	var bad atomic.Int64
	bad.Store(-1)
	probe := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			key := k[i]
			if key == tensor.EmptyKey || key == tensor.SkipKey {
				if key == tensor.EmptyKey || !h.Sharded {
					bad.CompareAndSwap(-1, int64(i))
				}
				r[i] = -1
				continue
			}
			r[i] = -1
			for s, n := tensor.HashSlot(key, mask), 0; n < capy; s, n = (s+1)&mask, n+1 {
				if tk[s] == key {
					r[i] = tr[s]
					break
				}
				if tk[s] == tensor.EmptyKey {
					break
				}
			}
		}
	}
	be.par(len(k), 4096, probe)
	if i := bad.Load(); i >= 0 {
		what := "empty key"
		if k[i] == tensor.SkipKey {
			what = "skip key (another rank's key) of an unsharded table"
		}
		be.fail(op, tensor.ErrRange, "key %d at %d is the reserved %s", k[i], i, what)
		return
	}
	if !insert {
		return
	}
	miss := be.keys[:0]
	for i, row := range r {
		if row < 0 && k[i] != tensor.SkipKey {
			miss = append(miss, k[i])
		}
	}
	be.keys = miss
	if len(miss) == 0 {
		return
	}
	slices.Sort(miss)
	miss = slices.Compact(miss)
	cnt := &data[int32](h.Count)[0]
	if int(*cnt)+len(miss) > h.MaxRows {
		be.fail(op, tensor.ErrTableFull, "%d rows used, %d new keys, capacity %d rows", *cnt, len(miss), h.MaxRows)
		return
	}
	var rk []int64
	if !h.RowKeys.IsZero() {
		rk = data[int64](h.RowKeys)
	}
	for _, key := range miss {
		s := tensor.HashSlot(key, mask)
		for tk[s] != tensor.EmptyKey {
			s = (s + 1) & mask
		}
		tk[s], tr[s] = key, *cnt
		if rk != nil {
			rk[*cnt] = key
		}
		*cnt++
	}
	be.par(len(k), 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if r[i] < 0 && k[i] != tensor.SkipKey {
				probe(i, i+1)
			}
		}
	})
}

// SlotRows computes one-hot rows: key + slot offset (−1 for a slot of
// another rank, negative offset).
func (be *Backend) SlotRows(rows, keys, offsets, slotOffsets, slotSizes tensor.Tensor) {
	const op = "slot_rows"
	if !be.owned(op, rows, keys, offsets, slotOffsets, slotSizes) ||
		!be.check(tensor.CheckSlotRows(op, rows, keys, offsets, slotOffsets, slotSizes)) {
		return
	}
	ns := slotOffsets.Len()
	off := data[int32](offsets)
	bags := len(off) - 1
	if !be.csr(op, off, keys.Len()) {
		return
	}
	k, r := data[int64](keys), data[int32](rows)
	so, ss := data[int64](slotOffsets), data[int64](slotSizes)
	var bad atomic.Int64
	bad.Store(-1)
	be.par(bags, 1024, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			s := b % ns
			for j := off[b]; j < off[b+1]; j++ {
				v := k[j] + so[s]
				if k[j] < 0 || k[j] >= ss[s] || v > 1<<31-1 {
					bad.CompareAndSwap(-1, int64(j))
					continue
				}
				if so[s] < 0 { // another rank's slot
					r[j] = -1
					continue
				}
				r[j] = int32(v)
			}
		}
	})
	if j := bad.Load(); j >= 0 {
		be.fail(op, tensor.ErrRange, "key %d at %d outside its slot", k[j], j)
	}
}

// RecordSlots records the slot of rows seen for the first time: the
// smallest slot of their occurrences in this call.
func (be *Backend) RecordSlots(rowSlots, rows, offsets tensor.Tensor, numSlots int) {
	const op = "record_slots"
	if !be.owned(op, rowSlots, rows, offsets) || !be.check(tensor.CheckRecordSlots(op, rowSlots, rows, offsets, numSlots)) {
		return
	}
	off := data[int32](offsets)
	if !be.csr(op, off, rows.Len()) {
		return
	}
	rs, r := data[int32](rowSlots), data[int32](rows)
	// Rows at −1 collect min(pending(s)) with pending(s) = MinInt32 + s < −1;
	// the second pass turns pending values into slots (the GPU's two kernels).
	const pending = math.MinInt32
	for b := 0; b+1 < len(off); b++ {
		s := int32(b % numSlots)
		for j := off[b]; j < off[b+1]; j++ {
			row := r[j]
			if row < 0 {
				continue
			}
			if int(row) >= len(rs) {
				be.fail(op, tensor.ErrRange, "row %d at %d beyond %d rows", row, j, len(rs))
				return
			}
			if v := rs[row]; v < 0 {
				rs[row] = min(v, pending+s)
			}
		}
	}
	for _, row := range r {
		if row >= 0 && rs[row] < -1 {
			rs[row] -= pending
		}
	}
}

// csr checks offsets: starts at 0, non-decreasing, ends at nnz.
func (be *Backend) csr(op string, off []int32, nnz int) bool {
	if len(off) == 0 || off[0] != 0 || int(off[len(off)-1]) != nnz {
		be.fail(op, tensor.ErrShape, "CSR offsets do not span %d keys", nnz)
		return false
	}
	for i := 1; i < len(off); i++ {
		if off[i] < off[i-1] {
			be.fail(op, tensor.ErrShape, "CSR offsets decrease at %d", i)
			return false
		}
	}
	return true
}

// EmbeddingBag pools table rows per bag.
func (be *Backend) EmbeddingBag(out, table, rows, offsets tensor.Tensor, c tensor.Combiner) {
	const op = "embedding_bag"
	dt, ok := be.floats(op, out, table)
	if !ok || !be.owned(op, rows, offsets) || !be.check(tensor.CheckEmbeddingBag(op, out, table, rows, offsets)) {
		return
	}
	off := data[int32](offsets)
	v := table.Cols()
	if !be.csr(op, off, rows.Len()) {
		return
	}
	r := data[int32](rows)
	nr := int32(table.Rows())
	for j, row := range r {
		if row >= nr {
			be.fail(op, tensor.ErrRange, "row %d at %d ≥ %d table rows", row, j, nr)
			return
		}
	}
	if dt == tensor.Float32 {
		embBag(be, data[float32](out), data[float32](table), r, off, v, c)
	} else {
		embBag(be, data[float64](out), data[float64](table), r, off, v, c)
	}
}

func embBag[T float](be *Backend, out, tab []T, rows, off []int32, v int, c tensor.Combiner) {
	be.par(len(off)-1, max(1, 2048/max(v, 1)), func(lo, hi int) {
		for b := lo; b < hi; b++ {
			o := out[b*v : b*v+v]
			clear(o)
			for _, row := range rows[off[b]:off[b+1]] {
				if row < 0 {
					continue
				}
				t := tab[int(row)*v : int(row)*v+v]
				for i, x := range t {
					o[i] += x
				}
			}
			if n := off[b+1] - off[b]; c == tensor.Mean && n > 1 {
				inv := 1 / T(n)
				for i := range o {
					o[i] *= inv
				}
			}
		}
	})
}

// EmbeddingBagGrad aggregates per distinct row (stable sort + segment sum).
func (be *Backend) EmbeddingBagGrad(uniqRows, uniqGrad, numUniq, dOut, rows, offsets tensor.Tensor, c tensor.Combiner) {
	const op = "embedding_bag_grad"
	dt, ok := be.floats(op, uniqGrad, dOut)
	if !ok || !be.owned(op, uniqRows, numUniq, rows, offsets) ||
		!be.check(tensor.CheckEmbeddingBagGrad(op, uniqRows, uniqGrad, numUniq, dOut, rows, offsets)) {
		return
	}
	off := data[int32](offsets)
	bags, nnz := len(off)-1, rows.Len()
	v := uniqGrad.Cols()
	if !be.csr(op, off, nnz) {
		return
	}
	r := data[int32](rows)
	be.bagOf = grow(be.bagOf, nnz)
	bagOf := be.bagOf
	be.par(bags, 1024, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			for j := off[b]; j < off[b+1]; j++ {
				bagOf[j] = int32(b)
			}
		}
	})
	// Sort occurrences by row, stably (positions stay ascending within a
	// row): an LSD radix sort on the row, 11 bits a pass, over pairs
	// row<<32 | j. Negative rows (missing keys) are dropped.
	pairs := be.pairs[:0]
	var maxRow int32
	for j, row := range r {
		if row >= 0 {
			pairs = append(pairs, uint64(row)<<32|uint64(j))
			maxRow = max(maxRow, row)
		}
	}
	var spare []uint64
	pairs, spare = radixSortRows(pairs, grow(be.tmp, len(pairs)), maxRow)
	be.pairs, be.tmp = pairs, spare
	segs := be.segs[:0]
	for i, p := range pairs {
		if i == 0 || p>>32 != pairs[i-1]>>32 {
			segs = append(segs, int32(i))
		}
	}
	nu := len(segs)
	segs = append(segs, int32(len(pairs)))
	be.segs = segs
	ur := data[int32](uniqRows)
	for u := 0; u < nu; u++ {
		ur[u] = int32(pairs[segs[u]] >> 32)
	}
	data[int32](numUniq)[0] = int32(nu)
	if dt == tensor.Float32 {
		embGrad(be, data[float32](uniqGrad), data[float32](dOut), pairs, segs, bagOf, off, v, c)
	} else {
		embGrad(be, data[float64](uniqGrad), data[float64](dOut), pairs, segs, bagOf, off, v, c)
	}
}

func embGrad[T float](be *Backend, ug, dOut []T, pairs []uint64, segs, bagOf, off []int32, v int, c tensor.Combiner) {
	be.par(len(segs)-1, max(1, 1024/max(v, 1)), func(lo, hi int) {
		for u := lo; u < hi; u++ {
			g := ug[u*v : u*v+v]
			clear(g)
			for _, p := range pairs[segs[u]:segs[u+1]] {
				b := bagOf[uint32(p)]
				d := dOut[int(b)*v : int(b)*v+v]
				if n := off[b+1] - off[b]; c == tensor.Mean && n > 1 {
					inv := 1 / T(n)
					for i, x := range d {
						g[i] += x * inv
					}
				} else {
					for i, x := range d {
						g[i] += x
					}
				}
			}
		}
	})
}

// radixSortRows sorts pairs by their high 32 bits (the row), stably, using
// tmp (same length) as the second buffer; it returns the buffer holding the
// result and the other one.
func radixSortRows(pairs, tmp []uint64, maxRow int32) (sorted, spare []uint64) {
	const bits = 11
	var count [1 << bits]int
	for shift := 32; shift < 64 && uint64(maxRow)>>(shift-32) > 0; shift += bits {
		clear(count[:])
		for _, p := range pairs {
			count[(p>>shift)&(1<<bits-1)]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, p := range pairs {
			d := (p >> shift) & (1<<bits - 1)
			tmp[count[d]] = p
			count[d]++
		}
		pairs, tmp = tmp, pairs
	}
	return pairs, tmp
}
