package cpu

import (
	"sync/atomic"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

var _ tensor.InputSplitter = (*Backend)(nil)

// SplitInputs implements tensor.InputSplitter: the reference the GPU's
// input kernels are tested against.
func (be *Backend) SplitInputs(dstKeys, dstOffsets []tensor.Tensor, keys, offsets, add, size tensor.Tensor, inputs []tensor.SparseSlots, n int) {
	const op = "split_inputs"
	if !be.owned(op, append(append([]tensor.Tensor{keys, offsets, add, size}, dstKeys...), dstOffsets...)...) ||
		!be.check(tensor.CheckSplitInputs(op, dstKeys, dstOffsets, keys, offsets, add, size, inputs, n)) {
		return
	}
	S := add.Len()
	off := data[int32](offsets)[:n*S+1]
	nk := keys.Len()
	if !be.csr(op, off, int(off[n*S])) || int(off[n*S]) > nk {
		if be.err == nil {
			be.fail(op, tensor.ErrShape, "%d keys for offsets ending at %d", nk, off[n*S])
		}
		return
	}
	k32, k64 := keyViews(keys)
	ad, sz := data[int64](add), data[int64](size)
	var bad atomic.Int64 // the first bad key's position, or -1
	for k, in := range inputs {
		dk, do := data[int64](dstKeys[k]), data[int32](dstOffsets[k])
		sk := in.Slots
		// The input's CSR first (serial, one read per bag), then its keys
		// in parallel over samples.
		o := int32(0)
		do[0] = 0
		for i := 0; i < n; i++ {
			row := off[i*S+in.First : i*S+in.First+sk+1]
			for s := 0; s < sk; s++ {
				o += row[s+1] - row[s]
				do[i*sk+s+1] = o
			}
		}
		if int(o) > len(dk) {
			be.fail(op, tensor.ErrShape, "input %d: %d keys for room for %d", k, o, len(dk))
			return
		}
		for j := n * sk; j < len(do)-1; j++ {
			do[j+1] = o
		}
		bad.Store(-1)
		be.par(n, 256, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				for s := 0; s < sk; s++ {
					gs := in.First + s
					a, z := ad[gs], sz[gs]
					src0, src1 := int(off[i*S+gs]), int(off[i*S+gs+1])
					dst := dk[do[i*sk+s]:]
					for j := src0; j < src1; j++ {
						key := keyAt(k32, k64, j)
						if z > 0 && (key < 0 || key >= z) {
							bad.CompareAndSwap(-1, int64(j))
						}
						dst[j-src0] = key + a
					}
				}
			}
		})
		if j := bad.Load(); j >= 0 {
			be.fail(op, tensor.ErrRange, "key %d at %d outside its slot's size", keyAt(k32, k64, int(j)), j)
			return
		}
	}
}

var _ tensor.OneHotSplitter = (*Backend)(nil)

// SplitOneHot implements tensor.OneHotSplitter: the copies, then
// SplitInputs for a batch whose bag j holds key j (the CSR not read).
func (be *Backend) SplitOneHot(dstKeys, dstOffsets []tensor.Tensor, keys, add, size tensor.Tensor, inputs []tensor.SparseSlots, n int, copies []tensor.Copy) {
	const op = "split_one_hot"
	if !be.owned(op, tensor.SplitOneHotOperands(dstKeys, dstOffsets, keys, add, size, copies)...) ||
		!be.check(tensor.CheckSplitOneHot(op, dstKeys, dstOffsets, keys, add, size, inputs, n, copies)) {
		return
	}
	for _, c := range copies {
		be.Copy(c.Dst, c.Src)
	}
	S := add.Len()
	k32, k64 := keyViews(keys)
	ad, sz := data[int64](add), data[int64](size)
	for k, in := range inputs {
		dk, do := data[int64](dstKeys[k]), data[int32](dstOffsets[k])
		sk := in.Slots
		for j := range do {
			do[j] = int32(min(j, n*sk))
		}
		var bad atomic.Int64 // the first bad key's position in keys, or -1
		bad.Store(-1)
		be.par(n, 256, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				for s := 0; s < sk; s++ {
					gs := in.First + s
					j := i*S + gs
					key := keyAt(k32, k64, j)
					if z := sz[gs]; z > 0 && (key < 0 || key >= z) {
						bad.CompareAndSwap(-1, int64(j))
					}
					dk[i*sk+s] = key + ad[gs]
				}
			}
		})
		if j := bad.Load(); j >= 0 {
			be.fail(op, tensor.ErrRange, "key %d at %d outside its slot's size", keyAt(k32, k64, int(j)), j)
			return
		}
	}
}

// keyAt is key j of a batch's keys: k32 when not nil, else k64.
func keyAt(k32 []uint32, k64 []int64, j int) int64 {
	if k32 != nil {
		return int64(k32[j])
	}
	return k64[j]
}

// keyViews is a batch's keys as Uint32 (k32) or Int64 (k64) values, the
// other nil.
func keyViews(keys tensor.Tensor) ([]uint32, []int64) {
	if keys.DType == tensor.Uint32 {
		return data[uint32](keys), nil
	}
	return nil, data[int64](keys)
}
