package gpu

import (
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

var (
	_ tensor.InputSplitter  = (*Backend)(nil)
	_ tensor.OneHotSplitter = (*Backend)(nil)
	_ tensor.Stager         = (*Backend)(nil)
)

// inputThreads is INPUT_THREADS of kernels/input.cu.
const inputThreads = 1024

// opSplitInputs is SplitInputs' code in the device error record.
const opSplitInputs = 64

// opSplitOneHot is SplitOneHot's code in the device error record.
const opSplitOneHot = 65

func init() {
	opNames[opSplitInputs] = "SplitInputs"
	opNames[opSplitOneHot] = "SplitOneHot"
}

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

// SplitOneHot implements tensor.OneHotSplitter with one kernel per input
// (input_onehot of kernels/input.cu) in place of SplitInputs' four, the
// first also making up to two of the copies (4-byte words; any other copy
// is a device copy of its own): a staged one-hot batch's commit is then
// one launch. At HugeCTR's default batch of 2048 the scans and the label
// and dense copies were most of DLRM's pipeline cost (docs/PERFORMANCE.md,
// the twentieth session).
func (be *Backend) SplitOneHot(dstKeys, dstOffsets []tensor.Tensor, keys, add, size tensor.Tensor, inputs []tensor.SparseSlots, n int, copies []tensor.Copy) {
	const op = "split_one_hot"
	ts := append(append([]tensor.Tensor{keys, add, size}, dstKeys...), dstOffsets...)
	for _, c := range copies {
		ts = append(ts, c.Dst, c.Src)
	}
	if !be.owned(op, ts...) ||
		!be.check(tensor.CheckSplitOneHot(op, dstKeys, dstOffsets, keys, add, size, inputs, n, copies)) {
		return
	}
	S := add.Len()
	wide := 0
	if keys.DType == tensor.Int64 {
		wide = 1
	}
	// The copies the kernel makes: up to two, of whole 4-byte words.
	var cp [2]wordCopy
	var rest []tensor.Copy
	k := 0
	for _, c := range copies {
		bytes := c.Dst.Len() * c.Dst.DType.Size()
		switch {
		case bytes == 0:
		case k < len(cp) && bytes%4 == 0:
			cp[k].dst, cp[k].src, cp[k].words = p(c.Dst), p(c.Src), int64(bytes/4)
			k++
		default:
			rest = append(rest, c)
		}
	}
	for _, c := range rest {
		be.Copy(c.Dst, c.Src)
	}
	be.do(op, func(c *cuda.Ctx) error {
		for k, in := range inputs {
			bags := dstOffsets[k].Len() - 1
			threads := int64(bags + 1)
			if k == 0 {
				threads = max(threads, cp[0].words, cp[1].words)
			}
			if err := be.launch1(c, "input_onehot", int(threads), p(dstKeys[k]), p(dstOffsets[k]), p(keys), wide,
				p(add), p(size), int64(n), int64(bags/in.Slots), S, in.First, in.Slots,
				cp[0].dst, cp[0].src, cp[0].words, cp[1].dst, cp[1].src, cp[1].words, be.flag, opSplitOneHot); err != nil {
				return err
			}
			cp = [2]wordCopy{} // made by the first launch
		}
		return nil
	})
}

// wordCopy is a copy input_onehot makes: words 4-byte words of src to dst.
type wordCopy struct {
	dst, src cuda.Ptr
	words    int64
}
