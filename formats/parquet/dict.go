package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/ctrkit/ctrkit/formats"
)

// Streamed dictionary-encoded column chunks.
//
// pyarrow, cudf and so NVTabular write every column dictionary-encoded by
// default: a column chunk starts with a dictionary page (the chunk's
// distinct values, PLAIN), and its data pages hold RLE_DICTIONARY (or the
// older PLAIN_DICTIONARY) values: one byte of bit width, then indices into
// the dictionary in the RLE/bit-packed hybrid encoding. A writer whose
// dictionary outgrows its limit writes the rest of the chunk as PLAIN pages.
// Such a chunk, uncompressed or snappy, in a regular file, is streamed like
// a PLAIN one: the dictionary page is read into the decoder's own buffer,
// and a data page's indices are decoded dictChunk at a time, checked
// against the dictionary's size and replaced by their values, so that the
// rest of the decoder (scalar and list columns alike) sees PLAIN values.

// streamDicts is whether dictionary-encoded column chunks that can be
// streamed are (a variable so that tests compare with arrow-go's path).
var streamDicts = true

// streamedDictPages counts the dictionary-encoded data pages the streamed
// path has read (so that tests know it was taken).
var streamedDictPages atomic.Int64

// dictChunk is how many values of a dictionary-encoded page a scalar
// column materializes at a time (16 KiB of int64 values).
const dictChunk = 2048

// unalignedLoads is whether this machine loads 8 little-endian bytes at
// any address as one instruction (unpackIndices).
const unalignedLoads = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"

// maxIndexWidth is the largest bit width of dictionary indices: a
// dictionary holds at most 2^31 values.
const maxIndexWidth = 32

// indices decodes dictionary indices: the RLE/bit-packed hybrid encoding
// (parquet format's Encodings.md) of bit width bw ≤ maxIndexWidth from b.
type indices struct {
	b   []byte
	bw  uint
	rle int // indices left in the current RLE run, of value val
	val uint32
	run []byte // the current bit-packed run's bytes
	pos int    // indices of run already taken
	bp  int    // indices of run still to take
}

// errIndices is an index stream that ends before its page's values.
var errIndices = errors.New("dictionary indices end early")

// read fills dst with the next len(dst) indices; errIndices when the stream
// ends first.
func (x *indices) read(dst []uint32) error {
	for len(dst) > 0 {
		switch {
		case x.rle > 0:
			k := min(x.rle, len(dst))
			v := x.val
			for i := range dst[:k] {
				dst[i] = v
			}
			x.rle -= k
			dst = dst[k:]
		case x.bp > 0:
			k := min(x.bp, len(dst))
			unpackIndices(dst[:k], x.run, x.pos, x.bw)
			x.pos += k
			x.bp -= k
			dst = dst[k:]
		default:
			hd, k := binary.Uvarint(x.b)
			if k <= 0 || hd>>1 > math.MaxInt32 {
				return errIndices
			}
			x.b = x.b[k:]
			n := int(hd >> 1)
			if hd&1 == 1 { // n groups of 8 bit-packed indices
				nb := min(n*int(x.bw), len(x.b))
				x.run, x.b, x.pos = x.b[:nb], x.b[nb:], 0
				x.bp = 8 * n
				if x.bw > 0 {
					// The last run may be cut short by the page's end.
					x.bp = min(x.bp, nb*8/int(x.bw))
				}
				continue
			}
			vb := int(x.bw+7) / 8
			if n > 0 && len(x.b) < vb {
				return errIndices
			}
			var w [4]byte
			copy(w[:], x.b[:min(vb, len(x.b))])
			x.b = x.b[min(vb, len(x.b)):]
			x.rle, x.val = n, binary.LittleEndian.Uint32(w[:])
			if x.bw < 32 {
				x.val &= 1<<x.bw - 1
			}
		}
	}
	return nil
}

// unpackIndices stores the bit-packed indices pos … pos+len(dst)-1 of run
// (bw bits each, least significant bit first) in dst; they lie in run.
// Each index is cut from the 8 bytes at its first bit's byte; near the end
// of run, from a zero-padded copy.
func unpackIndices(dst []uint32, run []byte, pos int, bw uint) {
	if bw == 0 {
		clear(dst)
		return
	}
	mask := uint64(1)<<bw - 1
	bit := uint(pos) * bw
	// Indices before fast start at least 8 bytes before run's end.
	fast := 0
	if lim := (len(run) - 8) * 8; lim >= int(bit) {
		fast = min(len(dst), (lim-int(bit))/int(bw)+1)
	}
	i := 0
	if unalignedLoads && fast > 0 {
		// Four at a time through unaligned loads, without bounds checks:
		// each index's 8 bytes lie in run, by fast.
		p := unsafe.Pointer(unsafe.SliceData(run))
		load := func(bit uint) uint64 { return *(*uint64)(unsafe.Add(p, bit>>3)) >> (bit & 7) & mask }
		for ; i+4 <= fast; i += 4 {
			d := dst[i : i+4 : i+4]
			d[0], d[1], d[2], d[3] = uint32(load(bit)), uint32(load(bit+bw)), uint32(load(bit+2*bw)), uint32(load(bit+3*bw))
			bit += 4 * bw
		}
	}
	for ; i < fast; i++ {
		w := binary.LittleEndian.Uint64(run[bit>>3:])
		dst[i] = uint32(w >> (bit & 7) & mask)
		bit += bw
	}
	for i := fast; i < len(dst); i++ {
		var t [8]byte
		copy(t[:], run[bit>>3:])
		dst[i] = uint32(binary.LittleEndian.Uint64(t[:]) >> (bit & 7) & mask)
		bit += bw
	}
}

// gather stores the dictionary values of idx in out, PLAIN (size bytes
// each, 4 or 8): value i is dict's value idx[i]. It returns the position
// of the first index outside the dictionary's n values, or len(idx). out
// is 8-byte aligned; dict, when not (and not viewUnaligned), is read
// byte-wise.
func gather(out, dict []byte, n int, idx []uint32, size int) int {
	if len(idx) == 0 {
		return 0
	}
	if viewUnaligned || uintptr(unsafe.Pointer(unsafe.SliceData(dict)))%uintptr(size) == 0 {
		if size == 8 {
			return gatherT(out, dict, n, idx, uint64(0))
		}
		return gatherT(out, dict, n, idx, uint32(0))
	}
	le := binary.LittleEndian
	for i, x := range idx {
		if int(x) >= n {
			return i
		}
		if size == 8 {
			le.PutUint64(out[8*i:], le.Uint64(dict[8*x:]))
		} else {
			le.PutUint32(out[4*i:], le.Uint32(dict[4*x:]))
		}
	}
	return len(idx)
}

// gatherT is gather on aligned values of type T.
func gatherT[T uint32 | uint64](out, dict []byte, n int, idx []uint32, _ T) int {
	o := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(out))), len(idx))
	dv := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(dict))), n)
	for i, x := range idx {
		if int(x) >= len(dv) {
			return i
		}
		o[i] = dv[x]
	}
	return len(idx)
}

// dictState is a streamed column chunk's dictionary and the index stream
// of its current dictionary-encoded page.
type dictState struct {
	vals     []byte // the dictionary: n PLAIN values, in buf
	buf      []byte // from the reader's pool
	n        int
	loaded   bool
	paged    bool     // the current data page is dictionary-encoded
	ix       indices  // its indices still to decode
	idx      []uint32 // decoded indices
	out      []byte   // values materialized from the dictionary (the pool)
	dataSeen bool     // a data page came before
	fused    int8     // fusedDict's answer for this dictionary: 0 not asked yet, 1 yes, -1 no
}

// release returns the state's buffers to pool.
func (s *dictState) release(pool *poolAllocator) {
	if s.buf != nil {
		pool.Free(s.buf)
	}
	if s.out != nil {
		pool.Free(s.out)
	}
	*s = dictState{}
}

// dictEncoded reports whether a data page's encoding is a dictionary one.
func dictEncoded(enc int32) bool {
	e := parquet.Encoding(enc)
	return e == parquet.Encodings.RLEDict || e == parquet.Encodings.PlainDict
}

// loadDict reads the dictionary page whose header h the stream has just
// passed: its body, decompressed, is nv PLAIN values of the column's
// physical type, copied into d's own buffer. row is the row being decoded,
// for errors.
func (d *decoder) loadDict(row int, h pageHeader) *formats.Error {
	ds := &d.dict
	switch {
	case !h.dictHdr:
		return d.corrupt(row, errors.New("dictionary page without its dictionary page header"))
	case ds.loaded:
		return d.fail(row, formats.ErrCorrupt, "a second dictionary page in the column chunk")
	case ds.dataSeen:
		return d.fail(row, formats.ErrCorrupt, "dictionary page after the column chunk's data pages")
	case parquet.Encoding(h.enc) != parquet.Encodings.Plain && parquet.Encoding(h.enc) != parquet.Encodings.PlainDict:
		return d.fail(row, formats.ErrCorrupt, "dictionary page encoding %s (want PLAIN)", parquet.Encoding(h.enc))
	case h.nv < 0:
		return d.corrupt(row, errors.New("invalid dictionary page header (negative number of values)"))
	}
	if err := compressedFits(int64(h.csize), int64(h.usize), d.codec); err != nil {
		return d.corrupt(row, err)
	}
	// The body is read into a buffer of its own (the dictionary stays
	// while the chunk's data pages pass through the window): a literal or
	// uncompressed dictionary is used where it lies, a compressed one is
	// decompressed into another.
	// A literal's values start after the block's length and the
	// literal's tag: the body is read pad bytes into the buffer so that
	// they lie 8-byte aligned (gather's fast path).
	pad := 0
	if d.codec == compress.Codecs.Snappy {
		st := &d.st
		pad = (8 - literalHeader(st.buf[st.lo:st.hi])%8) % 8
	}
	ds.buf = d.r.pool.Allocate(int(h.csize) + 8)
	body := ds.buf[pad : pad+int(h.csize)]
	if err := d.st.read(body); err != nil {
		return d.corrupt(row, err)
	}
	data := body
	if d.codec == compress.Codecs.Snappy {
		lit, ok := snappyLiteral(body, int(h.usize), d.codec)
		if !ok {
			var err error
			if lit, err = d.inflate(body, int(h.usize), d.codec); err != nil {
				return d.corrupt(row, err)
			}
			// The decompression buffer becomes the dictionary's; the
			// next page inflates into a new one.
			d.r.pool.Free(ds.buf)
			ds.buf, d.dec = d.dec, nil
		}
		data = lit
	} else if len(data) != int(h.usize) {
		return d.corrupt(row, fmt.Errorf("metadata said %d bytes uncompressed dictionary page, got %d bytes", h.usize, len(data)))
	}
	size := d.cp.phys.ByteSize()
	if int64(h.nv)*int64(size) > int64(len(data)) {
		return d.fail(row, formats.ErrCorrupt, "dictionary page of %d bytes cannot hold %d values of %d bytes", len(data), h.nv, size)
	}
	ds.vals, ds.n, ds.loaded, ds.fused = data[:int(h.nv)*size], int(h.nv), true, 0
	return nil
}

// startDictPage sets d up to read the indices of a dictionary-encoded data
// page whose values section is data (its bit width, then the indices).
func (d *decoder) startDictPage(row int, data []byte) *formats.Error {
	ds := &d.dict
	if !ds.loaded {
		return d.fail(row, formats.ErrCorrupt, "dictionary-encoded page without a dictionary page before it")
	}
	if len(data) == 0 {
		return d.fail(row, formats.ErrCorrupt, "dictionary-encoded page without its index bit width")
	}
	if data[0] > maxIndexWidth {
		return d.fail(row, formats.ErrCorrupt, "dictionary index bit width %d (at most %d)", data[0], maxIndexWidth)
	}
	ds.ix = indices{b: data[1:], bw: uint(data[0])}
	ds.paged = true
	streamedDictPages.Add(1)
	return nil
}

// dictValues decodes the next n indices of the current dictionary-encoded
// page and returns their values, PLAIN (valid until the next call). Value
// i's row, for errors, is rowOf(i).
func (d *decoder) dictValues(n int, rowOf func(i int) int) ([]byte, *formats.Error) {
	ds := &d.dict
	size := d.cp.phys.ByteSize()
	if cap(ds.idx) < n {
		ds.idx = make([]uint32, max(n, dictChunk))
	}
	if len(ds.out) < n*size {
		if ds.out != nil {
			d.r.pool.Free(ds.out)
		}
		ds.out = d.r.pool.Allocate(max(n, dictChunk) * size)
	}
	idx, out := ds.idx[:n], ds.out[:n*size]
	if err := ds.ix.read(idx); err != nil {
		return nil, d.fail(rowOf(0), formats.ErrCorrupt, "%v (the page holds more values)", err)
	}
	if j := gather(out, ds.vals, ds.n, idx, size); j < n {
		return nil, d.fail(rowOf(j), formats.ErrCorrupt, "dictionary index %d outside the dictionary of %d values", idx[j], ds.n)
	}
	return out, nil
}

// moreDict materializes the next values of the current dictionary-encoded
// page of a scalar column into d.page; row is the first one's row.
func (d *decoder) moreDict(row int) *formats.Error {
	n := min(d.left, dictChunk)
	out, e := d.dictValues(n, func(i int) int { return row + i })
	if e != nil {
		return e
	}
	d.page = out
	return nil
}

// dictList materializes the values of a chunk of levels of a streamed list
// column's dictionary-encoded page: one for each level that holds a value
// (every level when full). cur is the piece's row being filled before the
// chunk, for errors.
func dictList(d *decoder, reps, defs []uint8, full bool, cur int) ([]byte, *formats.Error) {
	md := uint8(d.cp.maxDef)
	n := len(reps)
	if !full {
		n = 0
		for _, x := range defs {
			if x == md {
				n++
			}
		}
	}
	// The row of value i: that of the level holding it.
	rowOf := func(i int) int {
		row := cur
		for p := range reps {
			if reps[p] == 0 {
				row++
			}
			if full || defs[p] == md {
				if i == 0 {
					return max(row, 0)
				}
				i--
			}
		}
		return max(row, 0)
	}
	return d.dictValues(n, rowOf)
}

// literalHeader returns the length of the block length and literal tag at
// the start of snappy block b when b starts so (else 0): where the
// literal's bytes start.
func literalHeader(b []byte) int {
	_, k := binary.Uvarint(b)
	if k <= 0 || k >= len(b) || b[k]&3 != 0 {
		return 0
	}
	if l := int(b[k] >> 2); l >= 60 {
		return k + 1 + l - 59
	}
	return k + 1
}

// fusedDict reports whether the values of d's dictionary-encoded pages can
// go from the dictionary straight to the piece's sample-major keys
// (dictKeys) rather than through gather and emitScalar: a cat column of a
// one-hot piece, read without slot sizes, whose physical type has the key
// type's width (INT64 for 64-bit keys, INT32 for 32-bit ones) and whose
// every dictionary value is a key in the slot's window, checked once per
// dictionary. Otherwise (a bad value among them) the other path names the
// record of the first bad key it stores. On the dev VM the gather into a
// chunk of values and their scatter into the stage block were a fifth of a
// fresh read of ctrkit's dictionary files.
func (d *decoder) fusedDict() bool {
	ds := &d.dict
	if ds.fused != 0 {
		return ds.fused > 0
	}
	ds.fused = -1
	cp, s := d.cp, d.r.schema
	if !fuseDicts || cp.group != gCat || cp.list || !d.b.fp.fixed || d.r.sizes != nil {
		return false
	}
	size, i64 := cp.phys.ByteSize(), s.KeyType == formats.KeyI64
	if i64 && size != 8 || !i64 && size != 4 || !viewUnaligned && uintptr(unsafe.Pointer(unsafe.SliceData(ds.vals)))%uintptr(size) != 0 {
		return false
	}
	lo, n := d.keyWindow(cp.dst)
	if i64 {
		for _, k := range dictView[int64](ds) {
			if cp.unsigned && k < 0 || uint64(k-lo) >= n {
				return false
			}
		}
	} else {
		for _, x := range dictView[uint32](ds) {
			k := int64(x)
			if !cp.unsigned {
				k = int64(int32(x))
			}
			if uint64(k-lo) >= n {
				return false
			}
		}
	}
	ds.fused = 1
	return true
}

// fuseDicts enables fusedDict; a variable so that tests compare both paths.
var fuseDicts = true

// dictView is the dictionary's n values as Ks (ds.vals holds n of the
// column's physical type, of K's width: fusedDict).
func dictView[K int64 | uint32](ds *dictState) []K {
	if ds.n == 0 {
		return nil
	}
	return unsafe.Slice((*K)(unsafe.Pointer(unsafe.SliceData(ds.vals))), ds.n)
}

// dictKeys stores the keys of the next k values of d's dictionary-encoded
// page at rows [row, row+k) of d's piece (fusedDict): the indices decoded
// dictChunk at a time, each checked against the dictionary, its value stored
// at its sample's slot.
func (d *decoder) dictKeys(row, k int) *formats.Error {
	ds := &d.dict
	S := len(d.r.schema.Slots)
	base := row*S + d.cp.dst
	if cap(ds.idx) < dictChunk {
		ds.idx = make([]uint32, dictChunk)
	}
	for k > 0 {
		m := min(k, dictChunk)
		idx := ds.idx[:m]
		if err := ds.ix.read(idx); err != nil {
			return d.fail(row, formats.ErrCorrupt, "%v (the page holds more values)", err)
		}
		var j int
		if d.r.schema.KeyType == formats.KeyI64 {
			j = scatterDict(d.b.k64[base:], dictView[int64](ds), idx, S)
		} else {
			j = scatterDict(d.b.k32[base:], dictView[uint32](ds), idx, S)
		}
		if j < m {
			return d.fail(row+j, formats.ErrCorrupt, "dictionary index %d outside the dictionary of %d values", idx[j], ds.n)
		}
		row, base, k = row+m, base+m*S, k-m
	}
	return nil
}

// scatterDict stores dict[idx[i]] at dst[i·stride] and returns len(idx),
// or the position of the first index outside dict (the values before it
// stored).
func scatterDict[K int64 | uint32](dst, dict []K, idx []uint32, stride int) int {
	if len(idx) == 0 {
		return 0
	}
	dst = dst[:(len(idx)-1)*stride+1]
	j := 0
	for i, x := range idx {
		if int(x) >= len(dict) {
			return i
		}
		dst[j] = dict[x]
		j += stride
	}
	return len(idx)
}
