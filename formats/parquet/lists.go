package parquet

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/ctrkit/ctrkit/formats"
)

// Streamed list columns.
//
// A list column chunk of PLAIN pages without a dictionary (what the Writer
// writes for a multi-hot slot), uncompressed or snappy, in a regular file,
// is read here page by page through its chunkStream rather than through
// arrow-go's column reader. Each page is read whole (levels and values),
// its repetition and definition levels (RLE/bit-packed hybrid, data page
// v1 or v2) decoded listChunk levels at a time into bytes, and each chunk
// of levels emitted at once: when every level of the chunk holds a value
// (no empty, null or short list), a cat column's keys are converted and
// range-checked in one pass over the page's values, appended to the slot,
// and the row ends found from the repetition levels alone. A chunk that
// holds anything else, or whose keys or row lengths fail a check, is
// walked level by level by walkLevels, the code arrow-go's path uses, so
// that every error (null, key range, nnz, row count) is the one that path
// reports, at the same row. The decoder keeps its place (listState)
// between the pieces of a row group, so a row group of streamed list
// columns is decoded in pieces of about a batch, as one-hot ones are.

// streamLists is whether list column chunks that can be streamed are (a
// variable so that tests compare both paths).
var streamLists = true

// streamedListPages counts the pages the streamed list path has read (so
// that tests know it was taken).
var streamedListPages atomic.Int64

// listChunk is how many levels of a list page are decoded and emitted at
// a time: 4 KiB of each level kind, in the first-level cache.
const listChunk = 4096

// hybrid decodes levels of the RLE/bit-packed hybrid encoding (parquet
// format's Encodings.md) of bit width bw ≤ 8 from b.
type hybrid struct {
	b      []byte
	bw     uint
	max    uint8 // the largest valid level
	rle    int   // levels left in the current RLE run, of value val
	val    uint8
	bp     int // levels left in the current bit-packed run, groups of 8
	pend   [8]uint8
	pi, np int // pend[pi:np] are decoded levels of a bit-packed group not yet taken
}

// errLevels is a level stream that ends early or holds a level above its
// column's maximum.
var errLevels = errors.New("malformed levels")

// unpack1 and unpack2 spread a byte of bit-packed levels of width 1 (2)
// into 8 (4) bytes, least significant bits first.
var unpack1, unpack2 = func() (t1 [256]uint64, t2 [256]uint32) {
	for b := range 256 {
		for i := range 8 {
			t1[b] |= uint64(b>>i&1) << (8 * i)
		}
		for i := range 4 {
			t2[b] |= uint32(b>>(2*i)&3) << (8 * i)
		}
	}
	return
}()

// read fills dst with the next len(dst) levels; errLevels when the stream
// ends first or a level is above max.
func (h *hybrid) read(dst []uint8) error {
	for len(dst) > 0 {
		switch {
		case h.pi < h.np:
			k := copy(dst, h.pend[h.pi:h.np])
			h.pi += k
			dst = dst[k:]
		case h.rle > 0:
			k := min(h.rle, len(dst))
			v := h.val
			for i := range dst[:k] {
				dst[i] = v
			}
			h.rle -= k
			dst = dst[k:]
		case h.bp > 0:
			bw := int(h.bw)
			if g := min(len(dst)/8, h.bp/8, len(h.b)/bw); g > 0 {
				if !h.unpack(dst[:8*g], g) {
					return errLevels
				}
				h.bp -= 8 * g
				dst = dst[8*g:]
				continue
			}
			// One group (the last may be cut short by the end of the
			// levels' bytes) through pend.
			n := min(8, h.bp, len(h.b)*8/bw)
			if n == 0 {
				return errLevels
			}
			var w [8]byte
			nb := (n*bw + 7) / 8
			copy(w[:], h.b[:nb])
			x := binary.LittleEndian.Uint64(w[:])
			mask := uint64(1)<<h.bw - 1
			for i := range n {
				h.pend[i] = uint8(x >> (uint(i) * h.bw) & mask)
				if h.pend[i] > h.max {
					return errLevels
				}
			}
			h.b = h.b[min(len(h.b), bw):]
			h.bp -= 8
			h.pi, h.np = 0, n
			if n < 8 {
				h.bp = 0
			}
		default:
			hd, k := binary.Uvarint(h.b)
			if k <= 0 || hd>>1 > math.MaxInt32 {
				return errLevels
			}
			h.b = h.b[k:]
			if hd&1 == 1 {
				h.bp = int(hd>>1) * 8
				continue
			}
			h.rle = int(hd >> 1)
			if h.rle == 0 {
				continue
			}
			if len(h.b) == 0 || h.b[0] > h.max { // bw ≤ 8: one byte
				return errLevels
			}
			h.val = h.b[0]
			h.b = h.b[1:]
		}
	}
	return nil
}

// skip consumes the next n levels when they all lie in the current RLE
// run of value v, and reports whether they did.
func (h *hybrid) skip(n int, v uint8) bool {
	if h.pi == h.np && h.rle >= n && h.val == v {
		h.rle -= n
		return true
	}
	return false
}

// unpack decodes g whole groups of 8 levels from h.b into dst and
// reports whether every level is at most h.max.
func (h *hybrid) unpack(dst []uint8, g int) bool {
	src := h.b[:g*int(h.bw)]
	h.b = h.b[g*int(h.bw):]
	switch h.bw {
	case 1:
		for i, c := range src {
			binary.LittleEndian.PutUint64(dst[8*i:], unpack1[c])
		}
	case 2:
		for i, c := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], unpack2[c])
		}
	default:
		mask := uint64(1)<<h.bw - 1
		var w [8]byte
		for j := range g {
			copy(w[:], src[j*int(h.bw):(j+1)*int(h.bw)])
			x := binary.LittleEndian.Uint64(w[:])
			for i := range 8 {
				dst[8*j+i] = uint8(x >> (uint(i) * h.bw) & mask)
			}
		}
	}
	if uint(h.max) == 1<<h.bw-1 {
		return true
	}
	bad := false
	for _, v := range dst {
		bad = bad || v > h.max
	}
	return !bad
}

// listPage is the current page of a streamed list column: its levels
// still to decode and its PLAIN values.
type listPage struct {
	nv       int // levels in the page
	rep, def hybrid
	vals     []byte
}

// nextListPage reads the next data page of d's streamed list column into
// pg; end reports the end of the column chunk. row is the row being
// decoded, for errors.
func (d *decoder) nextListPage(row int, pg *listPage) (end bool, e *formats.Error) {
	d.dict.paged = false
	h, codec, end, e := d.rawDataPage(row)
	if end || e != nil {
		return end, e
	}
	lv := 0 // a v2 page's level bytes, before its (compressed) values
	if h.typ == pageDataV2 {
		lv = int(h.repLen) + int(h.defLen)
	} else {
		for _, enc := range []int32{h.repEnc, h.defEnc} {
			if parquet.Encoding(enc) != parquet.Encodings.RLE {
				return false, d.fail(row, formats.ErrCorrupt, "page level encoding %s, the column chunk lists only RLE levels", parquet.Encoding(enc))
			}
		}
	}
	if err := compressedFits(int64(h.csize-int32(lv)), int64(h.usize-int32(lv)), codec); err != nil {
		return false, d.corrupt(row, err)
	}
	streamedListPages.Add(1)
	src, inWindow, err := d.pageBody(int(h.csize), codec == compress.Codecs.Uncompressed)
	if err != nil {
		return false, d.corrupt(row, err)
	}
	defBW := uint(bits.Len(uint(d.cp.maxDef)))
	*pg = listPage{nv: int(h.nv),
		rep: hybrid{bw: 1, max: 1},
		def: hybrid{bw: defBW, max: uint8(d.cp.maxDef)}}
	if h.typ == pageDataV2 {
		levels := src[:lv]
		if !inWindow && codec != compress.Codecs.Uncompressed {
			// The body came through the task's scratch, which the task's
			// next column reuses; the levels are read on until the page
			// is consumed (the values go to d's own buffer).
			d.ls.levels = append(d.ls.levels[:0], levels...)
			levels = d.ls.levels
		}
		pg.rep.b, pg.def.b = levels[:h.repLen], levels[h.repLen:lv]
		if pg.vals, err = d.values(src[lv:], int(h.usize)-lv, codec, inWindow); err != nil {
			return false, d.corrupt(row, err)
		}
		return false, d.listDict(row, h, pg)
	}
	data, err := d.values(src, int(h.usize), codec, inWindow)
	if err != nil {
		return false, d.corrupt(row, err)
	}
	for _, lv := range []*hybrid{&pg.rep, &pg.def} {
		var ok bool
		if lv.b, data, ok = splitLevels(data); !ok {
			return false, d.fail(row, formats.ErrCorrupt, "page levels run past the end of a page of %d bytes", h.usize)
		}
	}
	pg.vals = data
	return false, d.listDict(row, h, pg)
}

// listDict starts reading the indices of a dictionary-encoded list page,
// whose values section nextListPage has put in pg.vals: listT
// materializes the values of each chunk of levels from them (dictList).
func (d *decoder) listDict(row int, h pageHeader, pg *listPage) *formats.Error {
	if !dictEncoded(h.enc) {
		return nil
	}
	e := d.startDictPage(row, pg.vals)
	pg.vals = nil
	return e
}

// listState is a streamed list column's place in its column chunk between
// the pieces of a row group: the current page, the chunk of its levels
// being emitted (reps[at:end], defs likewise; full: every level holds a
// value and defs is unset) and the values that follow those emitted.
type listState struct {
	pg         listPage
	done       int // levels of pg decoded into chunks
	reps, defs []uint8
	at, end    int
	full       bool
	vals       []byte
	levels     []byte // a v2 page's levels, when its body came through the task's scratch
}

// listT decodes the rows of piece d.b of a streamed list column chunk of
// values of type T: a piece but the row group's last stops before the
// level that starts the row after it, which the next piece begins with.
func listT[T number](d *decoder, vp *[]T) *formats.Error {
	ls, b := &d.ls, d.b
	if ls.reps == nil {
		ls.reps, ls.defs = make([]uint8, listChunk), make([]uint8, listChunk)
	}
	if d.cp.group == gCat && d.reserve > 0 {
		// The piece's share of the chunk's keys, and an eighth more.
		want := int(min(int64(d.reserve), (int64(d.reserve)*int64(b.rows)/int64(max(d.rows, 1)))*9/8+1024))
		si := d.cp.dst
		if n := want - len(b.s64[si]) - len(b.s32[si]); n > 0 && d.r.schema.KeyType == formats.KeyI64 {
			b.s64[si] = slices.Grow(b.s64[si], n)
		} else if n > 0 {
			b.s32[si] = slices.Grow(b.s32[si], n)
		}
	}
	last := b.at+b.rows >= d.rows
	cur, cnt := -1, 0 // the piece's row being filled, its values
	for {
		if ls.at == ls.end {
			if ls.done == ls.pg.nv {
				end, e := d.nextListPage(max(cur, 0), &ls.pg)
				if e != nil {
					return e
				}
				if end {
					break
				}
				ls.done, ls.vals = 0, ls.pg.vals
				continue
			}
			pg := &ls.pg
			n := min(listChunk, pg.nv-ls.done)
			if pg.rep.read(ls.reps[:n]) != nil {
				return d.fail(max(cur, 0), formats.ErrCorrupt, "malformed repetition levels at level %d of a page of %d", ls.done, pg.nv)
			}
			// Every level holding a value is one RLE run of definition
			// levels (a page of lists with no empty or null ones).
			ls.full = pg.def.skip(n, uint8(d.cp.maxDef))
			if !ls.full && pg.def.read(ls.defs[:n]) != nil {
				return d.fail(max(cur, 0), formats.ErrCorrupt, "malformed definition levels at level %d of a page of %d", ls.done, pg.nv)
			}
			ls.at, ls.end = 0, n
			ls.done += n
		}
		reps, defs := ls.reps[ls.at:ls.end], ls.defs[ls.at:ls.end]
		stop := false
		if !last {
			// The level that starts the row after the piece.
			if p := nthZero(reps, b.rows-cur); p >= 0 {
				reps, defs, stop = reps[:p], defs[:p], true
			}
		}
		vals := ls.vals
		if d.dict.paged {
			var e *formats.Error
			if vals, e = dictList(d, reps, defs, ls.full, cur); e != nil {
				return e
			}
		}
		vals, e := listLevels(d, vp, reps, defs, ls.full, vals, &cur, &cnt)
		if e != nil {
			return e
		}
		if !d.dict.paged {
			ls.vals = vals
		}
		ls.at += len(reps)
		if stop {
			return endRow(d, cur, cnt) // cur is the piece's last row
		}
	}
	return endList(d, cur, cnt)
}

// nthZero returns the index of the k-th (from 1) zero of levels that are
// each 0 or 1, or -1 when there are fewer.
func nthZero(reps []uint8, k int) int {
	i := 0
	for ; i+8 <= len(reps); i += 8 {
		z := 8 - bits.OnesCount64(binary.LittleEndian.Uint64(reps[i:]))
		if z >= k {
			break
		}
		k -= z
	}
	for ; i < len(reps); i++ {
		if reps[i] == 0 {
			if k--; k == 0 {
				return i
			}
		}
	}
	return -1
}

// endList closes the last piece of a list column chunk, whose last row
// is cur, holding cnt values, and checks that the chunk held the row
// group's rows.
func endList(d *decoder, cur, cnt int) *formats.Error {
	if cur >= 0 {
		if e := endRow(d, cur, cnt); e != nil {
			return e
		}
	}
	if cur+1 != d.b.rows {
		return d.fail(cur+1, formats.ErrCorrupt, "column chunk ends after %d of %d rows", d.b.at+cur+1, d.rows)
	}
	return nil
}

// listLevels emits one chunk of levels of a streamed list column whose
// values start at vals, and returns the values that follow the chunk's;
// full reports that every level holds a value, defs being left unset.
func listLevels[T number](d *decoder, vp *[]T, reps, defs []uint8, full bool, vals []byte, cur, cnt *int) ([]byte, *formats.Error) {
	var z T
	size := int(unsafe.Sizeof(z))
	cp := d.cp
	md := uint8(cp.maxDef)
	filled := !full // defs hold the levels
	if filled {
		full = true
		for _, x := range defs {
			full = full && x == md
		}
	}
	if full && cp.group == gCat && len(reps)*size <= len(vals) {
		if fastLevels[T](d, reps, vals, cur, cnt) {
			return vals[len(reps)*size:], nil
		}
	}
	if !filled {
		for i := range defs {
			defs[i] = md
		}
	}
	nv := 0
	for _, x := range defs {
		if x == md {
			nv++
		}
	}
	if nv*size > len(vals) {
		return nil, d.fail(max(*cur, 0), formats.ErrCorrupt, "page values of %d bytes, its levels define %d or more of %d bytes", len(vals), nv, size)
	}
	*vp = sized(*vp, nv)
	v := *vp
	for i := range v {
		v[i] = valueAt[T](vals, i)
	}
	if e := walkLevels(d, reps, defs, v, cur, cnt); e != nil {
		return nil, e
	}
	return vals[nv*size:], nil
}

// valueAt is the i-th PLAIN value of type T in b.
func valueAt[T number](b []byte, i int) T {
	var z T
	if unsafe.Sizeof(z) == 4 {
		u := binary.LittleEndian.Uint32(b[4*i:])
		return *(*T)(unsafe.Pointer(&u))
	}
	u := binary.LittleEndian.Uint64(b[8*i:])
	return *(*T)(unsafe.Pointer(&u))
}

// fastLevels emits a chunk of levels of a cat list column every one of
// which holds a value (the len(reps) values at vals): it appends the keys
// to the slot and sets the offsets of the rows the chunk ends. It reports
// false, having changed nothing that the caller keeps, when a key, a row's
// length, the row count or the slot's key count fails its check; the
// caller then walks the chunk level by level to report the error.
func fastLevels[T number](d *decoder, reps []uint8, vals []byte, cur, cnt *int) bool {
	b, si := d.b, d.cp.dst
	m := len(reps) * int(unsafe.Sizeof(T(0)))
	lo, n, add, check := d.listWindow(si)
	ok := false
	if d.r.schema.KeyType == formats.KeyI64 {
		base := len(b.s64[si])
		if b.s64[si], ok = appendKeys[T](b.s64[si], vals[:m], d.cp.unsigned, lo, n, add, check); ok {
			ok = rowEnds(d, reps, base, cur, cnt)
		}
		if !ok {
			b.s64[si] = b.s64[si][:base]
		}
	} else {
		base := len(b.s32[si])
		if b.s32[si], ok = appendKeys[T](b.s32[si], vals[:m], d.cp.unsigned, lo, n, add, check); ok {
			ok = rowEnds(d, reps, base, cur, cnt)
		}
		if !ok {
			b.s32[si] = b.s32[si][:base]
		}
	}
	return ok
}

// rowEnds sets the offsets of the rows that a chunk of repetition levels
// ends, every level holding a value, the chunk's first value being key base
// of the slot; cur and cnt are the row being filled and its values. It
// reports false, cur and cnt unchanged, when a row would go past its slot's
// max nnz or the piece's rows, or the slot past 2³¹−1 keys.
func rowEnds(d *decoder, reps []uint8, base int, cur, cnt *int) bool {
	b, si := d.b, d.cp.dst
	if base+len(reps) > math.MaxInt32 {
		return false
	}
	lim := math.MaxInt
	if m := d.r.schema.Slots[si].MaxNNZ; m > 0 {
		lim = m
	}
	off := b.off[si]
	c, k, rows := *cur, *cnt, b.rows
	for i := 0; i < len(reps); {
		end := min(i+8, len(reps))
		if end-i == 8 && c >= 0 {
			// Eight levels at once (each 0 or 1): the zero bytes start rows.
			w := binary.LittleEndian.Uint64(reps[i:])
			if w == 0 { // eight rows of one key
				if c+8 >= rows {
					return false
				}
				o := off[c+1 : c+9]
				for j := range o {
					o[j] = int32(base + i + j)
				}
				c, k, i = c+8, 1, end
				continue
			}
			prev := 0
			for z := ^w & 0x0101010101010101; z != 0; z &= z - 1 {
				p := bits.TrailingZeros64(z) / 8
				k += p - prev
				c++
				if k > lim || c >= rows {
					return false
				}
				off[c] = int32(base + i + p)
				k, prev = 0, p
			}
			if k += 8 - prev; k > lim {
				return false
			}
			i = end
			continue
		}
		for ; i < end; i++ {
			if reps[i] == 0 {
				if c >= 0 {
					off[c+1] = int32(base + i)
				}
				c++
				k = 0
				if c >= rows {
					return false
				}
			} else if c < 0 {
				return false
			}
			if k++; k > lim {
				return false
			}
		}
	}
	*cur, *cnt = c, k
	return true
}

// listWindow returns the check and offset of slot si's keys in a list
// column: a key k is valid when uint64(k-lo) < n (or always, check false),
// and stored as k+add — what d.key accepts and returns.
func (d *decoder) listWindow(si int) (lo int64, n uint64, add int64, check bool) {
	r := d.r
	if r.sizes != nil {
		return 0, uint64(max(r.sizes[si], 0)), r.offs[si], true
	}
	if r.schema.KeyType == formats.KeyI64 && r.ranges == nil && !d.cp.unsigned {
		return 0, 0, 0, false
	}
	lo, n = d.keyWindow(si)
	return lo, n, 0, true
}

// appendKeys appends the PLAIN values of type T in src, as keys, to dst,
// and reports whether every key k has uint64(k-lo) < n (unless !check);
// each is stored as k+add.
func appendKeys[T number, K int64 | uint32](dst []K, src []byte, unsigned bool, lo int64, n uint64, add int64, check bool) ([]K, bool) {
	var z T
	size := int(unsafe.Sizeof(z))
	m := len(src) / size
	at := len(dst)
	dst = slices.Grow(dst, m)[:at+m]
	out := dst[at:]
	var top uint64 // the largest uint64(k-lo): one comparison at the end
	switch {
	case size == 4 && unsigned:
		for i := range out {
			k := int64(binary.LittleEndian.Uint32(src[4*i:]))
			top = max(top, uint64(k-lo))
			out[i] = K(k + add)
		}
	case size == 4:
		for i := range out {
			k := int64(int32(binary.LittleEndian.Uint32(src[4*i:])))
			top = max(top, uint64(k-lo))
			out[i] = K(k + add)
		}
	default:
		for i := range out {
			k := int64(binary.LittleEndian.Uint64(src[8*i:]))
			top = max(top, uint64(k-lo))
			out[i] = K(k + add)
		}
	}
	return dst, !check || (m == 0 || top < n)
}

// walkLevels emits levels of a list column one at a time, with the
// values vals of the levels that hold one; cur is the row being filled
// (−1 before the first) and cnt its values so far. Both the streamed path
// and arrow-go's column reader end here, so that their errors agree.
func walkLevels[T number, L int16 | uint8](d *decoder, reps, defs []L, vals []T, cur, cnt *int) *formats.Error {
	cp, rows := d.cp, d.b.rows
	c, k, vi := *cur, *cnt, 0
	defer func() { *cur, *cnt = c, k }()
	for i := range reps {
		if reps[i] == 0 {
			if c >= 0 {
				if e := endRow(d, c, k); e != nil {
					return e
				}
			}
			c++
			k = 0
			if c >= rows {
				return d.fail(c, formats.ErrCorrupt, "column chunk holds more than the row group's %d rows", d.rows)
			}
		} else if c < 0 {
			return d.fail(0, formats.ErrCorrupt, "first repetition level is %d, want 0", reps[i])
		}
		switch dl := int16(defs[i]); {
		case dl > cp.maxDef:
			return d.fail(c, formats.ErrCorrupt, "definition level %d above the column's %d", dl, cp.maxDef)
		case dl == cp.maxDef:
			if e := emitOne(d, c, k, vals[vi]); e != nil {
				return e
			}
			vi++
			k++
		case dl >= cp.repDef:
			return d.fail(c, formats.ErrNull, "null list element")
		case reps[i] != 0:
			return d.fail(c, formats.ErrCorrupt, "repetition level %d with definition level %d: a list element without its value", reps[i], dl)
		case dl >= cp.listDef:
			// empty list
		default:
			return d.fail(c, formats.ErrNull, "null list")
		}
	}
	return nil
}
