package raw

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
)

// maxSampleSize bounds the sample size a schema may ask for (a hostile or
// mistaken hotness must not overflow the size arithmetic).
const maxSampleSize = 1 << 30

// chunk is the number of samples decoded per pass, so the label, dense and
// key passes over a chunk find its bytes in cache.
const chunk = 128

// Decoder turns whole Raw samples into a formats.Batch. It does no I/O and
// never allocates, so every reader (this package's Reader, the async
// O_DIRECT reader) decodes the same bytes to the same values.
//
// A Decoder is not safe for concurrent use (it counts clamped values); give
// each goroutine its own Clone.
type Decoder struct {
	schema  *formats.Schema
	layout  Layout
	size    int // bytes per sample
	ldim    int
	ddim    int
	dstride int // dense floats per sample in memory: ddim, or more with SetDenseStride
	nslot   int
	nkeys   int // keys per sample
	keyOff  int // byte offset of the first key in a sample
	fileKey int // bytes per key on disk

	labelInt bool
	denseInt bool
	keyI64   bool // in memory

	hot   []int32 // hotness per slot
	cum   []int32 // cum[s] = Σ_{j<s} hot[j]; len nslot+1
	sizes []int64 // slot sizes (nil: no offsets, no range check)
	offs  []int64 // what is added to slot s's keys (nil with sizes)
	lo    []int64 // slot s's first valid key (nil with sizes): key k is valid when k − lo[s] < sizes[s]
	check string  // CheckKeys: the convention checked, for messages ("" with slot offsets)

	// rows are the CSR offsets of a batch of fixed-hotness samples from
	// its first row (rows[r·S+s] = end of row r's slot s), computed once
	// (PrepareOffsets) and shared by clones: a batch decoded from sample 0
	// copies them instead of computing them per sample.
	rows []int32

	clamped int64 // negative int32 dense values clamped to 0
}

// NewDecoder returns a decoder for samples of schema s in layout l. A
// non-empty slotSizeArray (one entry per slot) enables slot offsets and key
// range checks (SPEC §3.3). The decoder keeps s; it must not change.
func NewDecoder(s *formats.Schema, l Layout, slotSizeArray []int64) (*Decoder, error) {
	size, err := SampleSize(s, l)
	if err != nil {
		return nil, err
	}
	o := formats.Options{SlotSizeArray: slotSizeArray}
	if err := o.Validate(s); err != nil {
		return nil, err
	}
	d := &Decoder{
		schema:   s,
		layout:   l,
		size:     size,
		ldim:     s.LabelDim,
		ddim:     s.DenseDim,
		dstride:  s.DenseDim,
		nslot:    len(s.Slots),
		nkeys:    keysPerSample(s, l),
		keyOff:   4 * (s.LabelDim + s.DenseDim),
		fileKey:  4,
		labelInt: s.LabelType == formats.Int32,
		denseInt: s.DenseType == formats.Int32,
		keyI64:   s.KeyType == formats.KeyI64,
		hot:      make([]int32, len(s.Slots)),
		cum:      make([]int32, len(s.Slots)+1),
	}
	if l == MultiHot {
		d.fileKey = s.KeyType.Size()
	}
	for i, sl := range s.Slots {
		h := int32(1)
		if l == MultiHot {
			h = int32(sl.Hotness)
		}
		d.hot[i] = h
		d.cum[i+1] = d.cum[i] + h
	}
	if len(slotSizeArray) > 0 {
		d.sizes = append([]int64(nil), slotSizeArray...)
		d.offs = formats.SlotOffsets(d.sizes)
		d.lo = make([]int64, len(d.sizes))
	}
	return d, nil
}

// CheckKeys makes d check every key against its slot's size without
// adding slot offsets (the keys stay as stored): slot s's keys must lie in
// [0, sizes[s]), or with global in [P_s, P_s + sizes[s]), P_s the sum of
// the sizes before s. A key outside is an ErrKeyRange error naming the
// record and its byte offset. It is for a decoder made without a
// slotSizeArray (one that adds offsets checks already); sizes has one
// entry per slot.
func (d *Decoder) CheckKeys(sizes []int64, global bool) error {
	if d.sizes != nil && d.check == "" {
		return fmt.Errorf("the decoder adds slot offsets (and checks keys) already")
	}
	if len(sizes) > 0 && len(sizes) != d.nslot {
		return fmt.Errorf("slot_size_array has %d entries, schema has %d slots", len(sizes), d.nslot)
	}
	var total uint64
	for i, n := range sizes {
		if n <= 0 {
			return fmt.Errorf("slot_size_array[%d] = %d must be > 0", i, n)
		}
		if total += uint64(n); total > 1<<63 {
			return fmt.Errorf("slot_size_array sums to more than 2^63")
		}
	}
	if len(sizes) == 0 {
		d.sizes, d.offs, d.lo, d.check = nil, nil, nil, ""
		return nil
	}
	d.sizes = append([]int64(nil), sizes...)
	d.offs = make([]int64, len(sizes))
	d.lo = make([]int64, len(sizes))
	d.check = "slot-local"
	if global {
		d.lo = formats.SlotOffsets(d.sizes)
		d.check = "global"
	}
	return nil
}

// maxPrepared bounds the offsets PrepareOffsets keeps (64 MiB of int32):
// larger batches compute theirs.
const maxPrepared = 1 << 24

// PrepareOffsets computes once the CSR offsets of batches of up to n
// samples, which Decode then copies for a batch decoded from its first
// sample instead of computing them sample by sample (the layout fixes the
// keys of every slot). Clones made afterwards share them. n ≤ 0 drops them.
func (d *Decoder) PrepareOffsets(n int) {
	if n <= 0 || d.nslot == 0 || int64(n)*int64(d.nkeys) > math.MaxInt32 || int64(n)*int64(d.nslot) > maxPrepared {
		d.rows = nil
		return
	}
	d.rows = make([]int32, n*d.nslot)
	d.rowOffsets(d.rows, n, 0)
}

// Clone returns a decoder with the same configuration and its own clamp
// counter (starting at 0).
func (d *Decoder) Clone() *Decoder {
	c := *d
	c.clamped = 0
	return &c
}

// SampleSize returns the bytes per sample.
func (d *Decoder) SampleSize() int { return d.size }

// Schema returns the decoder's schema.
func (d *Decoder) Schema() *formats.Schema { return d.schema }

// Layout returns the decoder's layout.
func (d *Decoder) Layout() Layout { return d.layout }

// Clamped returns how many negative int32 dense values this decoder has
// clamped to 0 so far.
func (d *Decoder) Clamped() int64 { return d.clamped }

// compatible reports whether b was made for a schema of d's shape.
func (d *Decoder) compatible(b *formats.Batch) error {
	s := b.Schema
	if s == nil || s.LabelDim != d.ldim || s.DenseDim != d.dstride || len(s.Slots) != d.nslot || s.KeyType != d.schema.KeyType {
		return fmt.Errorf("batch schema does not match the decoder's (%d label, %d dense, %d slots, %s keys)",
			d.ldim, d.dstride, d.nslot, d.schema.KeyType)
	}
	return nil
}

// fits checks that b can receive a batch of bsize samples from d: a
// compatible schema and enough capacity (what both readers' Read require).
func (d *Decoder) fits(b *formats.Batch, bsize int) error {
	if err := d.compatible(b); err != nil {
		return err
	}
	if b.Cap() < bsize {
		return fmt.Errorf("batch capacity %d below batch size %d", b.Cap(), bsize)
	}
	return nil
}

// Decode appends the len(src)/SampleSize samples of src to b, starting at
// sample b.N, and sets b.N accordingly. src must hold whole samples; its
// first sample is record firstRecord of the file path and starts at byte
// fileOffset there (both only name the place in errors). b must have room for
// the samples (Cap − N); its key buffer is grown only if it was made too small
// for the schema, so decoding into a batch from formats.NewBatch never
// allocates.
//
// On error (a key out of range, a trailing partial sample) b.N is left
// unchanged; the buffers beyond it may have been written.
func (d *Decoder) Decode(src []byte, b *formats.Batch, path string, firstRecord, fileOffset int64) error {
	n := len(src) / d.size
	if n*d.size != len(src) {
		return formats.Truncated("raw", path, fileOffset+int64(n*d.size), firstRecord+int64(n), "sample")
	}
	if err := d.compatible(b); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if b.N+n > b.Cap() {
		return fmt.Errorf("%d samples do not fit a batch holding %d of %d", n, b.N, b.Cap())
	}
	S := d.nslot
	start := b.N
	base := int64(b.Offsets[:cap(b.Offsets)][start*S])
	total := base + int64(n)*int64(d.nkeys)
	if total > math.MaxInt32 {
		return fmt.Errorf("%d keys overflow a batch's int32 offsets", total)
	}
	if err := b.ReserveKeys(int(total)); err != nil {
		return err
	}
	labels, dense, offsets, k32, k64 := b.Full()
	// The batch is at least as large as its schema and capacity say; these
	// checks let the loops below index without bounds checks.
	if len(labels) < (start+n)*d.ldim || len(dense) < (start+n)*d.dstride || len(offsets) < (start+n)*S+1 ||
		len(k32)+len(k64) < int(total) {
		return fmt.Errorf("batch buffers smaller than their capacity")
	}
	for lo := 0; lo < n; lo += chunk {
		m := min(chunk, n-lo)
		rec := src[lo*d.size : (lo+m)*d.size]
		i0 := start + lo
		if d.ldim > 0 {
			d.values(rec, m, 0, d.ldim, d.ldim, labels[i0*d.ldim:(i0+m)*d.ldim], d.labelInt, false)
		}
		if d.ddim > 0 {
			d.values(rec, m, 4*d.ldim, d.ddim, d.dstride, dense[i0*d.dstride:(i0+m)*d.dstride], d.denseInt, true)
		}
		if S > 0 {
			kb := base + int64(lo)*int64(d.nkeys)
			var err error
			if d.keyI64 {
				err = d.keys64(rec, m, k64[kb:kb+int64(m*d.nkeys)], path, firstRecord+int64(lo), fileOffset+int64(lo*d.size))
			} else {
				err = d.keys32(rec, m, k32[kb:kb+int64(m*d.nkeys)], path, firstRecord+int64(lo), fileOffset+int64(lo*d.size))
			}
			if err != nil {
				return err
			}
		}
	}
	if S > 0 {
		out := offsets[start*S+1 : (start+n)*S+1]
		if base == int64(start)*int64(d.nkeys) && (start+n)*S <= len(d.rows) {
			// Every sample before start came from this layout: the
			// offsets are those of rows start … start+n−1 of a batch.
			copy(out, d.rows[start*S:(start+n)*S])
		} else {
			d.rowOffsets(out, n, base)
		}
	}
	b.SetLen(start + n)
	return nil
}

// values decodes w columns at byte offset off of each of the m samples in
// rec into out (m rows of stride ≥ w floats; the stride − w padding columns
// of a row are set to 0).
func (d *Decoder) values(rec []byte, m, off, w, stride int, out []float32, isInt, isDense bool) {
	size := d.size
	p := unsafe.Pointer(unsafe.SliceData(rec))
	o := unsafe.Pointer(unsafe.SliceData(out))
	_ = out[m*stride-1]
	if stride > w {
		for i := 0; i < m; i++ {
			clear(out[i*stride+w : (i+1)*stride])
		}
	}
	_ = rec[(m-1)*size+off+4*w-1]
	switch {
	case !isInt:
		for i := 0; i < m; i++ {
			q := unsafe.Add(p, i*size+off)
			dst := unsafe.Add(o, 4*i*stride)
			if nativeLE {
				copy(unsafe.Slice((*byte)(dst), 4*w), unsafe.Slice((*byte)(q), 4*w))
				continue
			}
			for j := 0; j < w; j++ {
				*(*uint32)(unsafe.Add(dst, 4*j)) = ld32(unsafe.Add(q, 4*j))
			}
		}
	case !isDense:
		for i := 0; i < m; i++ {
			q := unsafe.Add(p, i*size+off)
			dst := unsafe.Add(o, 4*i*stride)
			for j := 0; j < w; j++ {
				*(*float32)(unsafe.Add(dst, 4*j)) = float32(int32(ld32(unsafe.Add(q, 4*j))))
			}
		}
	default:
		tab := formats.DenseTable()
		var clamped int64
		for i := 0; i < m; i++ {
			q := unsafe.Add(p, i*size+off)
			dst := unsafe.Slice((*float32)(unsafe.Add(o, 4*i*stride)), w)
			for j := 0; j < w; j++ {
				x := int32(ld32(unsafe.Add(q, 4*j)))
				var v float32
				if uint32(x) < uint32(len(tab)) {
					v = tab[uint32(x)&(uint32(len(tab))-1)]
				} else if x < 0 {
					clamped++
				} else {
					v = formats.DenseFromInt32(x)
				}
				dst[j] = v
			}
		}
		d.clamped += clamped
	}
}

// keys32 decodes the keys of m samples into out (m·nkeys uint32 keys),
// applying slot offsets and range checks.
func (d *Decoder) keys32(rec []byte, m int, out []uint32, path string, rec0, off0 int64) error {
	size, K := d.size, d.nkeys
	p := unsafe.Pointer(unsafe.SliceData(rec))
	_ = out[m*K-1]
	_ = rec[(m-1)*size+d.keyOff+4*K-1]
	if d.sizes == nil {
		for i := 0; i < m; i++ {
			q := unsafe.Add(p, i*size+d.keyOff)
			dst := out[i*K : i*K+K]
			if nativeLE {
				copy(dst, unsafe.Slice((*uint32)(q), K))
				continue
			}
			for j := range dst {
				dst[j] = ld32(unsafe.Add(q, 4*j))
			}
		}
		return nil
	}
	S := d.nslot
	sizes, offs, los, cum := d.sizes[:S], d.offs[:S], d.lo[:S], d.cum[:S+1]
	if d.layout == OneHot {
		offs, los := offs[:len(sizes)], los[:len(sizes)]
		for i := 0; i < m; i++ {
			q := unsafe.Add(p, i*size+d.keyOff)
			dst := out[i*K : i*K+K]
			dst = dst[:len(sizes)]
			for s, lim := range sizes {
				k := ld32(unsafe.Add(q, 4*s))
				if uint64(k)-uint64(los[s]) >= uint64(lim) {
					return d.keyRange(path, rec0+int64(i), off0+int64(i*size+d.keyOff+4*s), s, int64(k))
				}
				dst[s] = k + uint32(offs[s])
			}
		}
		return nil
	}
	for i := 0; i < m; i++ {
		q := unsafe.Add(p, i*size+d.keyOff)
		dst := out[i*K : i*K+K]
		for s := 0; s < S; s++ {
			lim, add, lo := uint64(sizes[s]), uint32(offs[s]), uint64(los[s])
			for j := cum[s]; j < cum[s+1]; j++ {
				k := ld32(unsafe.Add(q, 4*int(j)))
				if uint64(k)-lo >= lim {
					return d.keyRange(path, rec0+int64(i), off0+int64(i*size+d.keyOff+4*int(j)), s, int64(k))
				}
				dst[j] = k + add
			}
		}
	}
	return nil
}

// keys64 is keys32 for the i64 key type: one-hot files hold uint32 keys
// (widened, never sign-extended), multi-hot files int64 keys.
func (d *Decoder) keys64(rec []byte, m int, out []int64, path string, rec0, off0 int64) error {
	size, K, fk := d.size, d.nkeys, d.fileKey
	p := unsafe.Pointer(unsafe.SliceData(rec))
	_ = out[m*K-1]
	_ = rec[(m-1)*size+d.keyOff+fk*K-1]
	S := d.nslot
	if d.sizes == nil {
		for i := 0; i < m; i++ {
			q := unsafe.Add(p, i*size+d.keyOff)
			dst := out[i*K : i*K+K]
			if fk == 8 {
				if nativeLE {
					copy(dst, unsafe.Slice((*int64)(q), K))
					continue
				}
				for j := range dst {
					dst[j] = int64(ld64(unsafe.Add(q, 8*j)))
				}
				continue
			}
			for j := range dst {
				dst[j] = int64(ld32(unsafe.Add(q, 4*j)))
			}
		}
		return nil
	}
	sizes, offs, los, cum := d.sizes[:S], d.offs[:S], d.lo[:S], d.cum[:S+1]
	for i := 0; i < m; i++ {
		q := unsafe.Add(p, i*size+d.keyOff)
		dst := out[i*K : i*K+K]
		for s := 0; s < S; s++ {
			lim, add, lo := uint64(sizes[s]), offs[s], uint64(los[s])
			for j := cum[s]; j < cum[s+1]; j++ {
				var k int64
				if fk == 8 {
					k = int64(ld64(unsafe.Add(q, 8*int(j))))
				} else {
					k = int64(ld32(unsafe.Add(q, 4*int(j))))
				}
				if uint64(k)-lo >= lim {
					return d.keyRange(path, rec0+int64(i), off0+int64(i*size+d.keyOff+fk*int(j)), s, k)
				}
				dst[j] = k + add
			}
		}
	}
	return nil
}

func (d *Decoder) keyRange(path string, record, offset int64, slot int, key int64) error {
	lo := d.lo[slot]
	if d.check != "" {
		return formats.Errorf("raw", path, offset, record, formats.ErrKeyRange,
			"slot %d key %d outside [%d, %d) (--slot-size-array, keys %s)", slot, key, lo, lo+d.sizes[slot], d.check)
	}
	return formats.Errorf("raw", path, offset, record, formats.ErrKeyRange,
		"slot %d key %d not in [0, %d)", slot, key, d.sizes[slot])
}

// rowOffsets writes the CSR offsets of n samples (out[r] is the end of row
// r of the new samples), the keys starting at base.
func (d *Decoder) rowOffsets(out []int32, n int, base int64) {
	S, K := d.nslot, int32(d.nkeys)
	b := int32(base)
	if d.layout == OneHot {
		for r := range out {
			out[r] = b + int32(r) + 1
		}
		return
	}
	cum := d.cum[1 : S+1]
	for i := 0; i < n; i++ {
		row := out[i*S : i*S+S]
		for s := range row {
			row[s] = b + cum[s]
		}
		b += K
	}
}
