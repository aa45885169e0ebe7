package gpu

import (
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

var (
	_ tensor.InputSplitter = (*Backend)(nil)
	_ tensor.Stager        = (*Backend)(nil)
)

// inputThreads is INPUT_THREADS of kernels/input.cu.
const inputThreads = 1024

// opSplitInputs is SplitInputs' code in the device error record.
const opSplitInputs = 64

func init() { opNames[opSplitInputs] = "SplitInputs" }

// SplitInputs implements tensor.InputSplitter with the kernels of
// kernels/input.cu: per input, a block-wise scan of the samples' key
// counts (block sums, their prefixes, then each block's own scan) builds
// the input's CSR, then one thread per bag copies its keys (widened,
// offset added, range-checked). The batch's CSR is trusted to be
// non-decreasing (the readers build it; the CPU backend checks it).
func (be *Backend) SplitInputs(dstKeys, dstOffsets []tensor.Tensor, keys, offsets, add, size tensor.Tensor, inputs []tensor.SparseSlots, n int) {
	const op = "split_inputs"
	if !be.owned(op, append(append([]tensor.Tensor{keys, offsets, add, size}, dstKeys...), dstOffsets...)...) ||
		!be.check(tensor.CheckSplitInputs(op, dstKeys, dstOffsets, keys, offsets, add, size, inputs, n)) {
		return
	}
	S := add.Len()
	wide := 0
	if keys.DType == tensor.Int64 {
		wide = 1
	}
	be.do(op, func(c *cuda.Ctx) error {
		for k, in := range inputs {
			B := (dstOffsets[k].Len() - 1) / in.Slots
			nb := max((n+inputThreads-1)/inputThreads, 1)
			sums, err := be.workspace(c, 4*(nb+1))
			if err != nil {
				return err
			}
			if err := be.launch(c, "input_block_sums", cuda.D1(nb), cuda.D1(inputThreads), 0,
				sums, p(offsets), int64(n), S, in.First, in.Slots); err != nil {
				return err
			}
			if err := be.launch(c, "input_scan_sums", cuda.D1(1), cuda.D1(32), 0, sums, nb); err != nil {
				return err
			}
			if err := be.launch(c, "input_offsets_scan", cuda.D1(nb), cuda.D1(inputThreads), 0,
				p(dstOffsets[k]), p(offsets), sums, nb, int64(n), int64(B), S, in.First, in.Slots); err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			if err := be.launch1(c, "input_keys", n*in.Slots, p(dstKeys[k]), p(dstOffsets[k]), p(keys), wide, p(offsets),
				p(add), p(size), int64(n), S, in.First, in.Slots, be.flag, opSplitInputs); err != nil {
				return err
			}
		}
		return nil
	})
}
