package input

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Feeder turns reader batches into the network's input tensors. A batch's
// keys go to the backend as the reader decoded them (32- or 64-bit, one CSR
// over all slots, slot-local); the backend's SplitInputs widens them, adds
// the slot offsets once and splits them into the sparse inputs:
//
//	batch keys, offsets ──upload──▶ raw keys, offsets ──SplitInputs──▶ input k keys, offsets
//
// so the host never repacks keys. Load does no allocation.
type Feeder struct {
	be       tensor.Backend
	batch    int
	tops     []string // the sparse inputs' names (messages)
	LabelDim int
	DenseDim int
	// Label and Dense are the network's label [B, LabelDim] and dense
	// [B, DenseDim] inputs (Dense nil when dense_dim is 0); Inputs its
	// sparse inputs, Parts their slots of a batch, CapKeys their key
	// capacities (B × max_feature_num_per_sample).
	Label, Dense *layers.Blob
	Inputs       []*layers.SparseInput
	Parts        []tensor.SparseSlots
	CapKeys      []int
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
	oneHot               tensor.OneHotSplitter // nil: one-hot batches go through split too
	dstKeys, dstOff      []tensor.Tensor
	recOnce              sync.Once
	rec                  *formats.Recycler // HostAlloc's
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

// NewFeeder allocates on be the inputs of graph g for batches of batch
// samples; slotSizes is the data's slot_size_array (slotAdds).
func NewFeeder(be tensor.Backend, batch int, g *graph.Graph, slotSizes []int64) (*Feeder, error) {
	B := batch
	f := &Feeder{be: be, batch: batch, DenseDim: g.Input.DenseDim}
	for _, d := range g.Input.LabelDims {
		f.LabelDim += d
	}
	split, ok := be.(tensor.InputSplitter)
	if !ok {
		return nil, fmt.Errorf("backend %s cannot build sparse inputs (no SplitInputs)", be.Name())
	}
	f.split = split
	f.oneHot, _ = be.(tensor.OneHotSplitter)
	f.Label = &layers.Blob{Value: be.Alloc(tensor.Float32, B, f.LabelDim)}
	if f.DenseDim > 0 {
		f.Dense = &layers.Blob{Value: be.Alloc(tensor.Float32, B, f.DenseDim)}
	}
	for _, s := range g.Input.Sparse {
		c := B * s.MaxFeatures()
		in := &layers.SparseInput{Keys: be.Alloc(tensor.Int64, max(c, 1)), Offsets: be.Alloc(tensor.Int32, B*s.SlotNum+1)}
		f.Inputs = append(f.Inputs, in)
		f.tops = append(f.tops, s.Top)
		f.Parts = append(f.Parts, tensor.SparseSlots{First: f.totalSlot, Slots: s.SlotNum})
		f.CapKeys = append(f.CapKeys, c)
		f.dstKeys, f.dstOff = append(f.dstKeys, in.Keys), append(f.dstOff, in.Offsets)
		f.totalSlot += s.SlotNum
		f.capRaw += c
	}
	add, size, err := slotAdds(g, slotSizes)
	if err != nil {
		return nil, err
	}
	f.add, f.size = be.Alloc(tensor.Int64, max(f.totalSlot, 1)), be.Alloc(tensor.Int64, max(f.totalSlot, 1))
	if f.totalSlot > 0 {
		be.Upload(f.add, add)
		be.Upload(f.size, size)
		f.add, f.size = f.add.Prefix(f.totalSlot), f.size.Prefix(f.totalSlot)
	}
	f.rawOff = be.Alloc(tensor.Int32, B*f.totalSlot+1)
	f.nnz = make([]int, 0, len(f.Inputs))
	return f, be.Err()
}

// rawKeys returns the backend buffer for a batch's keys of type kt
// (allocated on first use).
func (f *Feeder) rawKeys(kt formats.KeyType) tensor.Tensor {
	if kt == formats.KeyI64 {
		if f.raw64.IsZero() {
			f.raw64 = f.be.Alloc(tensor.Int64, max(f.capRaw, 1))
		}
		return f.raw64
	}
	if f.raw32.IsZero() {
		f.raw32 = f.be.Alloc(tensor.Uint32, max(f.capRaw, 1))
	}
	return f.raw32
}

// Check checks batch b against the model and returns each input's key
// count (valid until the next Check or Load).
func (f *Feeder) Check(b *formats.Batch) ([]int, error) {
	nnz, err := f.CheckInto(f.nnz, b)
	if nnz != nil {
		f.nnz = nnz
	}
	return nnz, err
}

// CheckInto is Check counting into dst (reused when large enough): the
// prefetchers of one feeder (training's and evaluation's, which run at
// the same time) each pass their own.
func (f *Feeder) CheckInto(dst []int, b *formats.Batch) ([]int, error) {
	n, B := b.N, f.batch
	if n > B {
		return nil, fmt.Errorf("batch of %d samples for a model of batch size %d", n, B)
	}
	if b.Schema.LabelDim != f.LabelDim || b.Schema.DenseDim != f.DenseDim || b.Schema.NumSlots() != f.totalSlot {
		return nil, fmt.Errorf("data has %d labels, %d dense, %d slots; the model wants %d, %d, %d",
			b.Schema.LabelDim, b.Schema.DenseDim, b.Schema.NumSlots(), f.LabelDim, f.DenseDim, f.totalSlot)
	}
	S := f.totalSlot
	if k := int(b.Offsets[n*S]); k > f.capRaw {
		return nil, fmt.Errorf("batch of %d keys, the model allows %d", k, f.capRaw)
	}
	dst = tensor.InputKeyCounts(dst, b.Offsets, n, S, f.Parts)
	for k, c := range dst {
		if c > f.CapKeys[k] {
			return nil, fmt.Errorf("a batch of %d keys for input %q, which allows %d (%d a sample)",
				c, f.tops[k], f.CapKeys[k], f.CapKeys[k]/B)
		}
	}
	return dst, nil
}

// Load uploads batch b (n ≤ B samples; the rest padded with empty samples)
// synchronously and builds the sparse inputs from it.
func (f *Feeder) Load(b *formats.Batch) error {
	nnz, err := f.Check(b)
	if err != nil {
		return err
	}
	be, n, S := f.be, b.N, f.totalSlot
	uploadPadded(be, f.Label.Value, b.Labels[:n*f.LabelDim])
	if f.Dense != nil {
		uploadPadded(be, f.Dense.Value, b.Dense[:n*f.DenseDim])
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
	oneHot := f.OneHot(b)
	if !oneHot {
		be.Upload(f.rawOff.Prefix(n*S+1), b.Offsets[:n*S+1])
	}
	f.splitInputs(raw.Prefix(max(k, 1)), f.rawOff.Prefix(n*S+1), n, nnz, oneHot, nil)
	return be.Err()
}

// OneHot reports whether batch b is one-hot (its bag j holds key j) and
// the backend splits such batches on their own path (SplitOneHot, which
// reads neither the batch's offsets nor, staged, needs them uploaded).
func (f *Feeder) OneHot(b *formats.Batch) bool {
	return f.oneHot != nil && b.N > 0 && tensor.OneHot(b.Offsets[:b.N*f.totalSlot+1])
}

// splitInputs builds the sparse inputs from a batch's keys and offsets
// (not read when oneHot: Feeder.OneHot) on the backend; a one-hot batch's
// split makes copies too (SplitOneHot; there must be none otherwise).
func (f *Feeder) splitInputs(keys, offsets tensor.Tensor, n int, nnz []int, oneHot bool, copies []tensor.Copy) {
	if oneHot {
		f.oneHot.SplitOneHot(f.dstKeys, f.dstOff, keys, f.add, f.size, f.Parts, n, copies)
	} else {
		f.split.SplitInputs(f.dstKeys, f.dstOff, keys, offsets, f.add, f.size, f.Parts, n)
	}
	for k, in := range f.Inputs {
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

// BatchSize is the batch size the inputs hold.
func (f *Feeder) BatchSize() int { return f.batch }

// Backend is the backend the inputs live on.
func (f *Feeder) Backend() tensor.Backend { return f.be }

// HostAlloc is the allocator of batches that the backend stages without a
// copy (pinned memory on the GPU, else the Go heap), one formats.Recycler
// over it per Feeder: the readers and prefetchers of later epochs and
// evaluations take the batches (and Parquet's row-group buffers) that
// earlier ones left.
func (f *Feeder) HostAlloc() formats.Allocator {
	f.recOnce.Do(func() {
		var a formats.Allocator
		if st, ok := f.be.(tensor.Stager); ok {
			a = st.PinnedAllocator()
		}
		f.rec = formats.NewRecycler(a)
	})
	return f.rec
}
