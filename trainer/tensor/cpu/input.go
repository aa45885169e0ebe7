package cpu

import (
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
	var k32 []uint32
	var k64 []int64
	if keys.DType == tensor.Uint32 {
		k32 = data[uint32](keys)
	} else {
		k64 = data[int64](keys)
	}
	ad, sz := data[int64](add), data[int64](size)
	for k, in := range inputs {
		dk, do := data[int64](dstKeys[k]), data[int32](dstOffsets[k])
		sk := in.Slots
		o := 0
		do[0] = 0
		for i := 0; i < n; i++ {
			for s := 0; s < sk; s++ {
				gs := in.First + s
				lo, hi := int(off[i*S+gs]), int(off[i*S+gs+1])
				if o+hi-lo > len(dk) {
					be.fail(op, tensor.ErrShape, "input %d: more than %d keys", k, len(dk))
					return
				}
				for j := lo; j < hi; j++ {
					var key int64
					if k32 != nil {
						key = int64(k32[j])
					} else {
						key = k64[j]
					}
					if sz[gs] > 0 && (key < 0 || key >= sz[gs]) {
						be.fail(op, tensor.ErrRange, "slot %d key %d outside [0, %d)", gs, key, sz[gs])
						return
					}
					dk[o] = key + ad[gs]
					o++
				}
				do[i*sk+s+1] = int32(o)
			}
		}
		for j := n * sk; j < len(do)-1; j++ {
			do[j+1] = int32(o)
		}
	}
}
