package cpu

import (
	"sync/atomic"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

var _ tensor.ShardOps = (*Backend)(nil)

// MaskKeys keeps the keys rank owns and writes SkipKey for the others.
func (be *Backend) MaskKeys(dst, keys, offsets tensor.Tensor, numSlots, rank, world int, bySlot bool) {
	const op = "mask_keys"
	if !be.owned(op, dst, keys, offsets) || !be.check(tensor.CheckMaskKeys(op, dst, keys, offsets, numSlots, rank, world, bySlot)) {
		return
	}
	k, d := data[int64](keys), data[int64](dst)
	var bad atomic.Int64
	bad.Store(-1)
	keep := func(j int, own bool) {
		key := k[j]
		if key == tensor.EmptyKey || key == tensor.SkipKey {
			bad.CompareAndSwap(-1, int64(j))
			return
		}
		if own {
			d[j] = key
		} else {
			d[j] = tensor.SkipKey
		}
	}
	if bySlot {
		off := data[int32](offsets)
		if !be.csr(op, off, len(k)) {
			return
		}
		be.par(len(off)-1, 1024, func(lo, hi int) {
			for b := lo; b < hi; b++ {
				own := (b%numSlots)%world == rank
				for j := off[b]; j < off[b+1]; j++ {
					keep(int(j), own)
				}
			}
		})
	} else {
		w := int64(world)
		be.par(len(k), 4096, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				keep(j, ((k[j]%w)+w)%w == int64(rank))
			}
		})
	}
	if j := bad.Load(); j >= 0 {
		be.fail(op, tensor.ErrRange, "key %d at %d is a reserved key (empty or skip)", k[j], j)
	}
}

// InitHashRows writes the key-derived initial values of the rows in
// [first[0], Count[0]).
func (be *Backend) InitHashRows(table tensor.Tensor, h tensor.HashTable, first tensor.Tensor, seed uint64, bound float64,
	rowSlots, slotBound tensor.Tensor) {
	const op = "init_hash_rows"
	dt, ok := be.floats(op, table, slotBound)
	if !ok || !be.owned(op, h.Count, h.RowKeys, first, rowSlots) ||
		!be.check(tensor.CheckInitHashRows(op, table, h, first, rowSlots, slotBound)) {
		return
	}
	lo := int(data[int32](first)[0])
	hi := int(data[int32](h.Count)[0])
	lo, hi = max(lo, 0), min(hi, h.MaxRows)
	if lo >= hi {
		return
	}
	rk := data[int64](h.RowKeys)
	var rs []int32
	var sb []float64
	if !slotBound.IsZero() {
		rs = data[int32](rowSlots)
		if dt == tensor.Float32 {
			for _, x := range data[float32](slotBound) {
				sb = append(sb, float64(x))
			}
		} else {
			sb = data[float64](slotBound)
		}
		for r := lo; r < hi; r++ {
			if s := rs[r]; s < 0 || int(s) >= len(sb) {
				be.fail(op, tensor.ErrRange, "row %d (key %d) has slot %d of %d", r, rk[r], s, len(sb))
				return
			}
		}
	}
	v := table.Cols()
	boundOf := func(r int) float64 {
		if sb != nil {
			return sb[rs[r]]
		}
		return bound
	}
	if dt == tensor.Float32 {
		t := data[float32](table)
		be.par(hi-lo, max(1, 1024/max(v, 1)), func(a, b int) {
			for r := lo + a; r < lo+b; r++ {
				tensor.InitRow32(t[r*v:r*v+v], seed, tensor.InitTagHash, rk[r], boundOf(r))
			}
		})
		return
	}
	t := data[float64](table)
	be.par(hi-lo, max(1, 1024/max(v, 1)), func(a, b int) {
		for r := lo + a; r < lo+b; r++ {
			tensor.InitRow64(t[r*v:r*v+v], seed, tensor.InitTagHash, rk[r], boundOf(r))
		}
	})
}
