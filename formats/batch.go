package formats

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/ctrkit/ctrkit/internal/hostmem"
)

// Allocator provides a Batch's buffers. The trainer supplies one backed by
// pinned host memory; the default is the Go heap.
type Allocator interface {
	// Alloc returns n bytes aligned to at least 64 bytes. The contents are
	// unspecified.
	Alloc(n int) ([]byte, error)
	// Free releases a buffer returned by Alloc.
	Free(b []byte)
}

// HeapAllocator allocates 64-byte aligned buffers on the Go heap.
type HeapAllocator struct{}

// Alloc implements Allocator.
func (HeapAllocator) Alloc(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("negative allocation %d", n)
	}
	return hostmem.AlignedAlloc(n, 64), nil
}

// Free implements Allocator; the garbage collector reclaims the buffer.
func (HeapAllocator) Free([]byte) {}

// Batch is a set of up to Cap samples in the layout the trainer uploads (see
// the package doc). After a successful Read of n samples:
//
//	len(Labels)  == n·LabelDim
//	len(Dense)   == n·DenseDim
//	len(Offsets) == n·S + 1, Offsets[0] == 0
//	len(Keys32 or Keys64) == Offsets[n·S]
//
// The slices alias buffers owned by the Batch; they stay valid until the next
// Read into it, or Free. Reslicing them up to their capacity is allowed.
type Batch struct {
	Schema *Schema
	N      int

	Labels  []float32
	Dense   []float32
	Offsets []int32
	Keys32  []uint32
	Keys64  []int64

	cap   int
	alloc Allocator
	bufs  [4][]byte // labels, dense, offsets, keys
}

// NewBatch allocates a batch for capacity samples of schema s. When the
// schema bounds the keys per sample (MaxKeysPerSample) the key buffer is
// sized for the worst case and never grows; otherwise it starts at one key
// per slot and sample and grows on demand. a may be nil (Go heap).
func NewBatch(s *Schema, capacity int, a Allocator) (*Batch, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("batch capacity %d must be > 0", capacity)
	}
	if a == nil {
		a = HeapAllocator{}
	}
	b := &Batch{Schema: s, cap: capacity, alloc: a}
	S := len(s.Slots)
	keys := s.MaxKeysPerSample()
	if keys < 0 {
		keys = S
	}
	if err := CheckBatchMemory(s, capacity); err != nil {
		return nil, err
	}
	sizes := [4]int{4 * capacity * s.LabelDim, 4 * capacity * s.DenseDim, 4 * (capacity*S + 1), s.KeyType.Size() * capacity * keys}
	for i, n := range sizes {
		buf, err := a.Alloc(n)
		if err != nil {
			b.Free()
			return nil, fmt.Errorf("allocating batch buffer of %d bytes: %w", n, err)
		}
		b.bufs[i] = buf
	}
	b.Labels = f32s(b.bufs[0])
	b.Dense = f32s(b.bufs[1])
	b.Offsets = i32s(b.bufs[2])
	b.setKeyViews()
	b.SetLen(0)
	return b, nil
}

// BatchBytes returns the bytes NewBatch allocates for capacity samples of
// s (the key buffer at its initial size), or -1 when that overflows.
func BatchBytes(s *Schema, capacity int) int64 {
	keys := s.MaxKeysPerSample()
	if keys < 0 {
		keys = len(s.Slots)
	}
	c := int64(capacity)
	var total int64
	for _, n := range []int64{
		hostmem.MulSize(4, c, int64(s.LabelDim)), hostmem.MulSize(4, c, int64(s.DenseDim)),
		hostmem.MulSize(4, hostmem.MulSize(c, int64(len(s.Slots)))+1), hostmem.MulSize(int64(s.KeyType.Size()), c, int64(keys)),
	} {
		if n < 0 || total > math.MaxInt64-n {
			return -1
		}
		total += n
	}
	return total
}

// CheckBatchMemory returns an ErrMemory error when a batch of capacity
// samples of s needs more than half of hostmem.Available, naming its size and
// the batch size that would fit. Readers call it when they open, so a
// schema read from a file (a Norm header's dense_dim) that makes batches
// too large fails before anything is allocated.
func CheckBatchMemory(s *Schema, capacity int) error {
	n := BatchBytes(s, capacity)
	if n >= 0 && n <= hostmem.Available()/2 {
		return nil
	}
	what := fmt.Sprintf("a batch of %d samples (label_dim %d, dense_dim %d, %d slots)", capacity, s.LabelDim, s.DenseDim, len(s.Slots))
	hint := "the batch size (--batchsize)"
	if one := BatchBytes(s, 1); one > 0 && hostmem.Available() < math.MaxInt64 {
		if fit := hostmem.Available() / 2 / one; fit >= 1 {
			hint = fmt.Sprintf("the batch size (--batchsize %d fits)", fit)
		} else {
			hint = fmt.Sprintf("the sample size: one sample takes %s", hostmem.FormatBytes(one))
		}
	}
	return hostmem.CheckAlloc(what, n, hint)
}

func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func i32s(b []byte) []int32 {
	if len(b) == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func (b *Batch) setKeyViews() {
	kb := b.bufs[3]
	b.Keys32, b.Keys64 = nil, nil
	if b.Schema.KeyType == KeyI64 {
		b.Keys64 = []int64{}
		if len(kb) > 0 {
			b.Keys64 = unsafe.Slice((*int64)(unsafe.Pointer(&kb[0])), len(kb)/8)
		}
	} else {
		b.Keys32 = []uint32{}
		if len(kb) > 0 {
			b.Keys32 = unsafe.Slice((*uint32)(unsafe.Pointer(&kb[0])), len(kb)/4)
		}
	}
}

// Cap returns the batch capacity in samples.
func (b *Batch) Cap() int { return b.cap }

// KeyCap returns how many keys fit without growing.
func (b *Batch) KeyCap() int { return len(b.bufs[3]) / b.Schema.KeyType.Size() }

// ReserveKeys makes room for at least n keys, keeping the first
// Offsets[N·S] keys. Growing allocates a new buffer from the allocator, so
// slices taken before the call are stale afterwards.
func (b *Batch) ReserveKeys(n int) error {
	if n <= b.KeyCap() {
		return nil
	}
	c := 2 * b.KeyCap()
	if c < n {
		c = n
	}
	ks := b.Schema.KeyType.Size()
	buf, err := b.alloc.Alloc(c * ks)
	if err != nil {
		return fmt.Errorf("growing key buffer to %d keys: %w", c, err)
	}
	copy(buf, b.bufs[3][:b.NumKeys()*ks])
	b.alloc.Free(b.bufs[3])
	b.bufs[3] = buf
	nk := b.NumKeys()
	b.setKeyViews()
	b.setKeyLen(nk)
	return nil
}

// NumKeys returns the number of keys held by the N samples.
func (b *Batch) NumKeys() int { return int(b.Offsets[:cap(b.Offsets)][b.N*len(b.Schema.Slots)]) }

// SetLen sets N = n and reslices Labels, Dense, Offsets and the keys to the
// lengths documented on Batch, taking the key count from Offsets[n·S]. Readers
// call it after filling the buffers (through their full capacity).
func (b *Batch) SetLen(n int) {
	if n < 0 || n > b.cap {
		panic(fmt.Sprintf("ctrkit/formats: SetLen(%d) outside [0, %d]", n, b.cap))
	}
	S := len(b.Schema.Slots)
	b.N = n
	b.Labels = b.Labels[:n*b.Schema.LabelDim]
	b.Dense = b.Dense[:n*b.Schema.DenseDim]
	b.Offsets = b.Offsets[:n*S+1]
	if n == 0 {
		b.Offsets[0] = 0
	}
	b.setKeyLen(int(b.Offsets[n*S]))
}

func (b *Batch) setKeyLen(k int) {
	if b.Keys64 != nil {
		b.Keys64 = b.Keys64[:k]
	} else {
		b.Keys32 = b.Keys32[:k]
	}
}

// Full returns the buffers resliced to capacity, for decoders that fill a
// batch in place before calling SetLen.
func (b *Batch) Full() (labels, dense []float32, offsets []int32, keys32 []uint32, keys64 []int64) {
	labels = b.Labels[:cap(b.Labels)]
	dense = b.Dense[:cap(b.Dense)]
	offsets = b.Offsets[:cap(b.Offsets)]
	if b.Keys64 != nil {
		keys64 = b.Keys64[:cap(b.Keys64)]
	} else {
		keys32 = b.Keys32[:cap(b.Keys32)]
	}
	return
}

// Key returns key j of the batch as int64, whatever the key type.
func (b *Batch) Key(j int) int64 {
	if b.Keys64 != nil {
		return b.Keys64[j]
	}
	return int64(b.Keys32[j])
}

// Row returns the key index range [lo, hi) of slot s of sample i.
func (b *Batch) Row(i, s int) (lo, hi int) {
	r := i*len(b.Schema.Slots) + s
	return int(b.Offsets[r]), int(b.Offsets[r+1])
}

// Free returns the buffers to the allocator. The batch must not be used
// afterwards.
func (b *Batch) Free() {
	for i, buf := range b.bufs {
		if buf != nil {
			b.alloc.Free(buf)
			b.bufs[i] = nil
		}
	}
	b.Labels, b.Dense, b.Offsets, b.Keys32, b.Keys64 = nil, nil, nil, nil, nil
}

// AppendSample adds one sample at index N, growing the key buffer when
// needed. keys[s] holds the keys of slot s. It is meant for tests, generators
// and converters, not for decoders on the hot path.
func (b *Batch) AppendSample(label, dense []float32, keys [][]int64) error {
	s := b.Schema
	if b.N >= b.cap {
		return fmt.Errorf("batch full (%d samples)", b.cap)
	}
	if len(label) != s.LabelDim || len(dense) != s.DenseDim || len(keys) != len(s.Slots) {
		return fmt.Errorf("sample shape %d/%d/%d, schema %d/%d/%d",
			len(label), len(dense), len(keys), s.LabelDim, s.DenseDim, len(s.Slots))
	}
	total := 0
	for _, k := range keys {
		total += len(k)
	}
	if err := b.ReserveKeys(b.NumKeys() + total); err != nil {
		return err
	}
	labels, densev, offsets, k32, k64 := b.Full()
	n := b.N
	copy(labels[n*s.LabelDim:], label)
	copy(densev[n*s.DenseDim:], dense)
	S := len(s.Slots)
	pos := int(offsets[n*S])
	for si, ks := range keys {
		for _, k := range ks {
			if k64 != nil {
				k64[pos] = k
			} else {
				k32[pos] = uint32(k)
			}
			pos++
		}
		offsets[n*S+si+1] = int32(pos)
	}
	b.SetLen(n + 1)
	return nil
}

// CopySample appends sample i of src (same schema shape) to b.
func (b *Batch) CopySample(src *Batch, i int) error {
	s := src.Schema
	label := src.Labels[i*s.LabelDim : (i+1)*s.LabelDim]
	dense := src.Dense[i*s.DenseDim : (i+1)*s.DenseDim]
	keys := make([][]int64, len(s.Slots))
	for si := range keys {
		lo, hi := src.Row(i, si)
		ks := make([]int64, hi-lo)
		for j := lo; j < hi; j++ {
			ks[j-lo] = src.Key(j)
		}
		keys[si] = ks
	}
	return b.AppendSample(label, dense, keys)
}
