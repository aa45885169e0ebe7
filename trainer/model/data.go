package model

import (
	"fmt"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// feeder converts reader batches into the network's input tensors. Host
// buffers are allocated once; load does no allocation.
type feeder struct {
	m            *Model
	labelDim     int
	denseDim     int
	label, dense *layers.Blob // dense nil when dense_dim is 0
	inputs       []*layers.SparseInput
	first        []int // first file slot of each input
	slots        []int
	capKeys      []int
	// oneHot[k] holds the offsets to take off input k's keys (per slot of
	// the input) when its embedding is OneHot and the reader adds offsets.
	oneHot    [][]int64
	host      *hostInputs // for synchronous loads (evaluation, TrainStep)
	totalSlot int
}

func newFeeder(m *Model, g *graph.Graph, slotOffsets []int64) (*feeder, error) {
	B := m.batch
	f := &feeder{m: m, labelDim: labelWidth(&g.Input), denseDim: g.Input.DenseDim}
	f.label = &layers.Blob{Value: m.be.Alloc(tensor.Float32, B, f.labelDim)}
	if f.denseDim > 0 {
		f.dense = &layers.Blob{Value: m.be.Alloc(tensor.Float32, B, f.denseDim)}
	}
	for _, s := range g.Input.Sparse {
		c := B * s.MaxFeatures()
		in := &layers.SparseInput{Keys: m.be.Alloc(tensor.Int64, max(c, 1)), Offsets: m.be.Alloc(tensor.Int32, B*s.SlotNum+1)}
		f.inputs = append(f.inputs, in)
		f.first = append(f.first, f.totalSlot)
		f.slots = append(f.slots, s.SlotNum)
		f.capKeys = append(f.capKeys, c)
		f.totalSlot += s.SlotNum
	}
	f.oneHot = make([][]int64, len(f.inputs))
	if len(slotOffsets) > 0 && len(slotOffsets) != f.totalSlot {
		return nil, fmt.Errorf("%d slot offsets for %d slots", len(slotOffsets), f.totalSlot)
	}
	for _, e := range g.Embeddings {
		if !e.OneHot() {
			continue
		}
		for k, s := range g.Input.Sparse {
			if s.Top != e.Bottom {
				continue
			}
			if len(slotOffsets) > 0 {
				// The reader added the file's slot offsets.
				f.oneHot[k] = slotOffsets[f.first[k] : f.first[k]+s.SlotNum]
				continue
			}
			// Keys as stored (Norm, or Raw/Parquet without a reader
			// slot_size_array) are HugeCTR's one-hot rows: global over
			// the embedding's slot_size_array, whose prefix sums take
			// them back to slot-local rows.
			if len(e.SlotSizeArray) == s.SlotNum {
				sub := make([]int64, s.SlotNum)
				for i := 1; i < s.SlotNum; i++ {
					sub[i] = sub[i-1] + e.SlotSizeArray[i-1]
				}
				f.oneHot[k] = sub
			}
		}
	}
	var err error
	if f.host, err = newHostInputs(f, nil); err != nil {
		return nil, err
	}
	return f, nil
}

// Schema returns the dataset schema the model reads: its label and dense
// widths and one slot per sparse-input slot (MaxNNZ from nnz_per_slot;
// Hotness 1 for fixed-length one-hot slots), keys of type kt.
func (m *Model) Schema(kt formats.KeyType) formats.Schema {
	var nnz []int
	for _, s := range m.Graph.Input.Sparse {
		nnz = append(nnz, s.NNZPerSlot...)
	}
	s := formats.NewSchema(m.feed.labelDim, m.feed.denseDim, nnz, nil, kt)
	return s
}

// load uploads batch b (n ≤ B samples; the rest padded with empty samples)
// synchronously through the feeder's own host buffers.
func (f *feeder) load(b *formats.Batch) error {
	nnz, err := f.host.pack(f, b)
	if err != nil {
		return err
	}
	for k, in := range f.inputs {
		in.NNZ = nnz[k]
		f.m.be.Upload(in.Keys, f.host.keys[k])
		f.m.be.Upload(in.Offsets, f.host.off[k])
	}
	f.m.be.Upload(f.label.Value, f.host.label)
	if f.dense != nil {
		f.m.be.Upload(f.dense.Value, f.host.dense)
	}
	return nil
}

// hostInputs are host copies of the network's inputs in their device layout
// (keys per input with one-hot offsets removed, padded offsets).
type hostInputs struct {
	label, dense []float32
	keys         [][]int64
	off          [][]int32
}

func newHostInputs(f *feeder, alloc formats.Allocator) (*hostInputs, error) {
	h := &hostInputs{}
	var err error
	if h.label, err = allocSlice[float32](alloc, f.m.batch*f.labelDim); err != nil {
		return nil, err
	}
	if f.dense != nil {
		if h.dense, err = allocSlice[float32](alloc, f.m.batch*f.denseDim); err != nil {
			return nil, err
		}
	}
	for k := range f.inputs {
		keys, err := allocSlice[int64](alloc, max(f.capKeys[k], 1))
		if err != nil {
			return nil, err
		}
		off, err := allocSlice[int32](alloc, f.m.batch*f.slots[k]+1)
		if err != nil {
			return nil, err
		}
		h.keys = append(h.keys, keys)
		h.off = append(h.off, off)
	}
	return h, nil
}

// allocSlice returns n elements of T from alloc (Go heap when nil).
func allocSlice[T any](alloc formats.Allocator, n int) ([]T, error) {
	if alloc == nil {
		return make([]T, n), nil
	}
	var z T
	sz := int(unsafe.Sizeof(z))
	b, err := alloc.Alloc(max(n*sz, sz))
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// pack converts batch b into h and returns each input's key count.
func (h *hostInputs) pack(f *feeder, b *formats.Batch) ([]int, error) {
	n, B := b.N, f.m.batch
	if n > B {
		return nil, fmt.Errorf("batch of %d samples for a model of batch size %d", n, B)
	}
	if b.Schema.LabelDim != f.labelDim || b.Schema.DenseDim != f.denseDim || b.Schema.NumSlots() != f.totalSlot {
		return nil, fmt.Errorf("data has %d labels, %d dense, %d slots; the model wants %d, %d, %d",
			b.Schema.LabelDim, b.Schema.DenseDim, b.Schema.NumSlots(), f.labelDim, f.denseDim, f.totalSlot)
	}
	copy(h.label, b.Labels[:n*f.labelDim])
	clear(h.label[n*f.labelDim:])
	if f.dense != nil {
		copy(h.dense, b.Dense[:n*f.denseDim])
		clear(h.dense[n*f.denseDim:])
	}
	S := f.totalSlot
	nnz := make([]int, len(f.inputs))
	for k := range f.inputs {
		keys, off, sk, first := h.keys[k], h.off[k], f.slots[k], f.first[k]
		sub := f.oneHot[k]
		nk := 0
		off[0] = 0
		for i := 0; i < n; i++ {
			for s := 0; s < sk; s++ {
				lo, hi := b.Offsets[i*S+first+s], b.Offsets[i*S+first+s+1]
				if nk+int(hi-lo) > f.capKeys[k] {
					return nil, fmt.Errorf("sample %d of the batch has more keys than input %q allows (%d a sample)",
						i, f.m.Graph.Input.Sparse[k].Top, f.capKeys[k]/B)
				}
				for j := lo; j < hi; j++ {
					key := b.Key(int(j))
					if sub != nil {
						key -= sub[s]
					}
					keys[nk] = key
					nk++
				}
				off[i*sk+s+1] = int32(nk)
			}
		}
		for j := n * sk; j < B*sk; j++ {
			off[j+1] = int32(nk)
		}
		nnz[k] = nk
	}
	return nnz, nil
}
