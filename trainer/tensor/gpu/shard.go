package gpu

import (
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Sharded embedding tables (kernels/shard.cu): MaskKeys and InitHashRows.

var _ tensor.ShardOps = (*Backend)(nil)

// MaskKeys keeps the keys rank owns and writes SkipKey for the others: one
// thread per position (by key) or per bag (by slot); a reserved key is
// ErrRange at the next Sync.
func (be *Backend) MaskKeys(dst, keys, offsets tensor.Tensor, numSlots, rank, world int, bySlot bool) {
	const op = "mask_keys"
	if !be.owned(op, dst, keys, offsets) || !be.check(tensor.CheckMaskKeys(op, dst, keys, offsets, numSlots, rank, world, bySlot)) {
		return
	}
	n := keys.Len()
	if !bySlot {
		if n == 0 {
			return
		}
		be.do(op, func(c *cuda.Ctx) error {
			return be.launch1(c, "shard_mask_keys", n, p(dst), p(keys), int64(n), rank, world, be.flag, opMaskKeys)
		})
		return
	}
	bags := offsets.Len() - 1
	if bags == 0 && n > 0 { // the CPU's CSR check, without reading offsets
		be.fail(op, tensor.ErrShape, "%d bags for %d keys", bags, n)
		return
	}
	if bags == 0 || n == 0 {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "shard_mask_slots", bags, p(dst), p(keys), p(offsets), int64(bags), numSlots, int64(n),
			rank, world, be.flag, opMaskKeys)
	})
}

// InitHashRows writes the key-derived initial values of the rows in
// [first[0], Count[0]), both read on the device: a fixed grid strides over
// (row, 4 columns) items, so nothing waits for the host. A row without a
// slot (per-slot bounds) is ErrRange at the next Sync.
func (be *Backend) InitHashRows(table tensor.Tensor, h tensor.HashTable, first tensor.Tensor, seed uint64, bound float64,
	rowSlots, slotBound tensor.Tensor) {
	const op = "init_hash_rows"
	if !be.floats(op, table, slotBound) || !be.owned(op, h.Count, h.RowKeys, first, rowSlots) ||
		!be.check(tensor.CheckInitHashRows(op, table, h, first, rowSlots, slotBound)) {
		return
	}
	v := table.Cols()
	if v == 0 || h.MaxRows == 0 {
		return
	}
	rs := cuda.Ptr(0)
	if !slotBound.IsZero() {
		rs = p(rowSlots)
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch(c, "shard_init_rows", cuda.D1(be.sms*8), cuda.D1(256), 0, p(table), p(h.RowKeys), p(first),
			p(h.Count), h.MaxRows, v, seed, tensor.InitTagHash, float32(bound), rs, p(slotBound), slotBound.Len(),
			be.flag, opInitHashRows)
	})
}
