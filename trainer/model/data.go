package model

import (
	"fmt"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// feeder turns reader batches into the network's input tensors. A batch's
// keys go to the backend as the reader decoded them (32- or 64-bit, one CSR
// over all slots, slot-local); the backend's SplitInputs widens them, adds
// the slot offsets once and splits them into the sparse inputs:
//
//	batch keys, offsets ──upload──▶ raw keys, offsets ──SplitInputs──▶ input k keys, offsets
//
// so the host never repacks keys. load does no allocation.
type feeder struct {
	m            *Model
	labelDim     int
	denseDim     int
	label, dense *layers.Blob // dense nil when dense_dim is 0
	inputs       []*layers.SparseInput
	parts        []tensor.SparseSlots // the batch slots of each input
	capKeys      []int
	totalSlot    int
	// add and size (Int64 [totalSlot]) are SplitInputs' per-slot offset
	// and key range (size 0: unchecked).
	add, size tensor.Tensor
	// Raw batch keys (by key type) and offsets on the backend, for
	// synchronous loads and as the shape of staged uploads.
	raw32, raw64, rawOff tensor.Tensor
	capRaw               int
	nnz                  []int // scratch of load
	split                tensor.InputSplitter
	dstKeys, dstOff      []tensor.Tensor
}

// slotAdds returns SplitInputs' per-slot add and size for a graph g whose
// data has slot_size_array sizes (empty: none): the keys of one-hot
// embeddings' inputs stay slot-local (the embedding adds its own offsets;
// keys stored global over the embedding's slot_size_array lose its prefix
// sums), the keys of hash embeddings' inputs get the prefix sums of sizes;
// every key is checked against sizes.
func slotAdds(g *graph.Graph, sizes []int64) (add, size []int64, err error) {
	var first []int
	total := 0
	for _, s := range g.Input.Sparse {
		first = append(first, total)
		total += s.SlotNum
	}
	if len(sizes) > 0 && len(sizes) != total {
		return nil, nil, fmt.Errorf("slot_size_array has %d entries for %d slots", len(sizes), total)
	}
	add, size = make([]int64, total), make([]int64, total)
	off := formats.SlotOffsets(sizes)
	copy(add, off)
	copy(size, sizes)
	for _, e := range g.Embeddings {
		if !e.OneHot() {
			continue
		}
		for k, s := range g.Input.Sparse {
			if s.Top != e.Bottom {
				continue
			}
			sub := make([]int64, s.SlotNum)
			if len(sizes) == 0 && len(e.SlotSizeArray) == s.SlotNum {
				// Keys as stored (Norm, or Raw/Parquet without a reader
				// slot_size_array) are HugeCTR's one-hot rows: global
				// over the embedding's slot_size_array.
				for i := 1; i < s.SlotNum; i++ {
					sub[i] = sub[i-1] - e.SlotSizeArray[i-1]
				}
			}
			copy(add[first[k]:], sub)
		}
	}
	return add, size, nil
}

func newFeeder(m *Model, g *graph.Graph, slotSizes []int64) (*feeder, error) {
	B := m.batch
	f := &feeder{m: m, labelDim: labelWidth(&g.Input), denseDim: g.Input.DenseDim}
	split, ok := m.be.(tensor.InputSplitter)
	if !ok {
		return nil, fmt.Errorf("backend %s cannot build sparse inputs (no SplitInputs)", m.be.Name())
	}
	f.split = split
	f.label = &layers.Blob{Value: m.be.Alloc(tensor.Float32, B, f.labelDim)}
	if f.denseDim > 0 {
		f.dense = &layers.Blob{Value: m.be.Alloc(tensor.Float32, B, f.denseDim)}
	}
	for _, s := range g.Input.Sparse {
		c := B * s.MaxFeatures()
		in := &layers.SparseInput{Keys: m.be.Alloc(tensor.Int64, max(c, 1)), Offsets: m.be.Alloc(tensor.Int32, B*s.SlotNum+1)}
		f.inputs = append(f.inputs, in)
		f.parts = append(f.parts, tensor.SparseSlots{First: f.totalSlot, Slots: s.SlotNum})
		f.capKeys = append(f.capKeys, c)
		f.dstKeys, f.dstOff = append(f.dstKeys, in.Keys), append(f.dstOff, in.Offsets)
		f.totalSlot += s.SlotNum
		f.capRaw += c
	}
	add, size, err := slotAdds(g, slotSizes)
	if err != nil {
		return nil, err
	}
	f.add, f.size = m.be.Alloc(tensor.Int64, max(f.totalSlot, 1)), m.be.Alloc(tensor.Int64, max(f.totalSlot, 1))
	if f.totalSlot > 0 {
		m.be.Upload(f.add, add)
		m.be.Upload(f.size, size)
		f.add, f.size = f.add.Prefix(f.totalSlot), f.size.Prefix(f.totalSlot)
	}
	f.rawOff = m.be.Alloc(tensor.Int32, B*f.totalSlot+1)
	f.nnz = make([]int, 0, len(f.inputs))
	return f, m.be.Err()
}

// rawKeys returns the backend buffer for a batch's keys of type kt
// (allocated on first use).
func (f *feeder) rawKeys(kt formats.KeyType) tensor.Tensor {
	if kt == formats.KeyI64 {
		if f.raw64.IsZero() {
			f.raw64 = f.m.be.Alloc(tensor.Int64, max(f.capRaw, 1))
		}
		return f.raw64
	}
	if f.raw32.IsZero() {
		f.raw32 = f.m.be.Alloc(tensor.Uint32, max(f.capRaw, 1))
	}
	return f.raw32
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

// check checks batch b against the model and returns each input's key
// count (in f.nnz).
func (f *feeder) check(b *formats.Batch) ([]int, error) {
	n, B := b.N, f.m.batch
	if n > B {
		return nil, fmt.Errorf("batch of %d samples for a model of batch size %d", n, B)
	}
	if b.Schema.LabelDim != f.labelDim || b.Schema.DenseDim != f.denseDim || b.Schema.NumSlots() != f.totalSlot {
		return nil, fmt.Errorf("data has %d labels, %d dense, %d slots; the model wants %d, %d, %d",
			b.Schema.LabelDim, b.Schema.DenseDim, b.Schema.NumSlots(), f.labelDim, f.denseDim, f.totalSlot)
	}
	S := f.totalSlot
	if k := int(b.Offsets[n*S]); k > f.capRaw {
		return nil, fmt.Errorf("batch of %d keys, the model allows %d", k, f.capRaw)
	}
	f.nnz = tensor.InputKeyCounts(f.nnz, b.Offsets, n, S, f.parts)
	for k, c := range f.nnz {
		if c > f.capKeys[k] {
			return nil, fmt.Errorf("a batch of %d keys for input %q, which allows %d (%d a sample)",
				c, f.m.Graph.Input.Sparse[k].Top, f.capKeys[k], f.capKeys[k]/B)
		}
	}
	return f.nnz, nil
}

// load uploads batch b (n ≤ B samples; the rest padded with empty samples)
// synchronously and builds the sparse inputs from it.
func (f *feeder) load(b *formats.Batch) error {
	nnz, err := f.check(b)
	if err != nil {
		return err
	}
	be, n, S := f.m.be, b.N, f.totalSlot
	uploadPadded(be, f.label.Value, b.Labels[:n*f.labelDim])
	if f.dense != nil {
		uploadPadded(be, f.dense.Value, b.Dense[:n*f.denseDim])
	}
	k := int(b.Offsets[n*S])
	raw := f.rawKeys(b.Schema.KeyType)
	switch {
	case k == 0:
	case b.Keys64 != nil:
		be.Upload(raw.Prefix(k), b.Keys64[:k])
	default:
		be.Upload(raw.Prefix(k), b.Keys32[:k])
	}
	be.Upload(f.rawOff.Prefix(n*S+1), b.Offsets[:n*S+1])
	f.splitInputs(raw.Prefix(max(k, 1)), f.rawOff.Prefix(n*S+1), n, nnz)
	return be.Err()
}

// splitInputs builds the sparse inputs from a batch's keys and offsets on
// the backend.
func (f *feeder) splitInputs(keys, offsets tensor.Tensor, n int, nnz []int) {
	f.split.SplitInputs(f.dstKeys, f.dstOff, keys, offsets, f.add, f.size, f.parts, n)
	for k, in := range f.inputs {
		in.NNZ = nnz[k]
	}
}

// uploadPadded uploads src into the first len(src) elements of dst and
// zeroes the rest.
func uploadPadded(be tensor.Backend, dst tensor.Tensor, src []float32) {
	if len(src) < dst.Len() {
		be.Fill(dst, 0)
	}
	if len(src) > 0 {
		be.Upload(dst.Prefix(len(src)), src)
	}
}

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
