package parquet

import (
	"encoding/binary"
	"math/bits"
)

// Dictionary encoding (WriterOptions.Dictionary), as ctrkit writes it. A
// column chunk whose distinct values fit maxDictBytes of PLAIN values, and
// whose dictionary and indices together are no larger than its PLAIN
// values, is written as a dictionary page and RLE_DICTIONARY data pages:
//
//	chunk: PageHeader(DICTIONARY_PAGE) | values | [PageHeader(DATA_PAGE) | body] …
//	dictionary page: the distinct values, PLAIN, in first-seen order (encoding PLAIN)
//	data page body:  [rep levels | def levels (lists)] | bit width (1 byte) | indices
//
// The indices (into the dictionary, bit width max(1, ⌈log2 n⌉) for n
// values) are one bit-packed run of the RLE/bit-packed hybrid encoding (a
// ULEB128 header of groups<<1 | 1, then groups of 8 indices, each group
// bit-width bytes, least significant bit first; the last group padded with
// zeros), and every page body is compressed on its own as PLAIN pages are.
// Any other chunk is written PLAIN (encodeFlat, encodeList). pyarrow, cudf
// (so HugeCTR's own data generator) and NVTabular write dictionary pages by
// default, falling back to PLAIN within a chunk once the dictionary passes
// their limit (pyarrow's is maxDictBytes); ctrkit falls back for the whole
// chunk, so a chunk holds one encoding.

// maxDictBytes bounds a dictionary page's values (pyarrow's
// dictionary_pagesize_limit).
const maxDictBytes = 1 << 20

// encRLEDict is RLE_DICTIONARY (parquet.thrift); the page types are the
// reader's (pageData, pageDictionary).
const encRLEDict = 8

// dictBuilder finds a chunk's distinct values and each value's index: an
// open-addressing hash table of value bits (linear probing, at most half
// full), reused from chunk to chunk by one pageEncoder.
type dictBuilder struct {
	slots []uint32 // 1 + the value's index in vals; 0 is empty
	vals  []uint64 // the distinct values' bits, in first-seen order
	idx   []uint32 // per value of the chunk: its index in vals
}

// build indexes values (size bytes each, 4 or 8) and reports whether they
// hold at most maxN distinct values.
func (d *dictBuilder) build(values []byte, size, maxN int) bool {
	n := len(values) / size
	shift := 64 - bits.Len(uint(2*min(n, maxN)))
	table := 1 << (64 - shift)
	if cap(d.slots) < table {
		d.slots = make([]uint32, table)
	}
	d.slots = d.slots[:table]
	clear(d.slots)
	mask := uint64(table - 1)
	d.vals = d.vals[:0]
	if cap(d.idx) < n {
		d.idx = make([]uint32, n)
	}
	d.idx = d.idx[:n]
	le := binary.LittleEndian
	for i := range n {
		var v uint64
		if size == 8 {
			v = le.Uint64(values[8*i:])
		} else {
			v = uint64(le.Uint32(values[4*i:]))
		}
		h := (v * 0x9e3779b97f4a7c15) >> shift
		for {
			s := d.slots[h]
			if s == 0 {
				if len(d.vals) == maxN {
					return false
				}
				d.vals = append(d.vals, v)
				d.slots[h] = uint32(len(d.vals))
				d.idx[i] = uint32(len(d.vals) - 1)
				break
			}
			if d.vals[s-1] == v {
				d.idx[i] = s - 1
				break
			}
			h = (h + 1) & mask
		}
	}
	return true
}

// indexWidth is the bit width of indices into a dictionary of n values.
func indexWidth(n int) uint { return max(1, uint(bits.Len(uint(n-1)))) }

// worthDict reports whether n values of size bytes with k distinct ones
// take no more bytes dictionary-encoded (the dictionary and the packed
// indices) than PLAIN.
func worthDict(n, k, size int) bool {
	return int64(k)*int64(size)+(int64(n)*int64(indexWidth(k))+7)/8 <= int64(n)*int64(size)
}

// appendDictValues appends d's values, PLAIN, size bytes each.
func (d *dictBuilder) appendDictValues(dst []byte, size int) []byte {
	le := binary.LittleEndian
	for _, v := range d.vals {
		if size == 8 {
			dst = le.AppendUint64(dst, v)
		} else {
			dst = le.AppendUint32(dst, uint32(v))
		}
	}
	return dst
}

// packIndices appends idx (each below 1<<bw) as one bit-packed run of the
// RLE/bit-packed hybrid encoding.
func packIndices(dst []byte, idx []uint32, bw uint) []byte {
	groups := (len(idx) + 7) / 8
	dst = binary.AppendUvarint(dst, uint64(groups)<<1|1)
	var acc uint64
	var nb uint
	for g := 0; g < groups; g++ {
		for k := g * 8; k < g*8+8; k++ {
			var v uint64
			if k < len(idx) {
				v = uint64(idx[k])
			}
			acc |= v << nb
			nb += bw
			for nb >= 8 {
				dst = append(dst, byte(acc))
				acc >>= 8
				nb -= 8
			}
		}
	}
	return dst
}

// appendDictPage appends the dictionary page of nvalues values body (PLAIN)
// and returns dst and the page's uncompressed size.
func (e *pageEncoder) appendDictPage(dst, body []byte, nvalues int) ([]byte, int64) {
	return e.appendPage(dst, body, pageDictionary, 7, func(tw *thriftWriter) { // dictionary_page_header
		tw.i32(1, int32(nvalues))
		tw.i32(2, encPlain)
	})
}

// encodeDictFlat appends the pages of a required scalar column of values
// (size bytes each) dictionary-encoded and returns the chunk's
// uncompressed size and the offset of its first data page in it (the
// dictionary page lies before), or reports false (dst unchanged) when the
// chunk is better PLAIN.
func (e *pageEncoder) encodeDictFlat(dst, values []byte, size int) ([]byte, int64, int64, bool) {
	n := len(values) / size
	dst, unc, dataAt, bw, ok := e.startDict(dst, values, size)
	if !ok {
		return dst, 0, 0, false
	}
	d := &e.dict
	per := max(8, pageBytes*8/int(bw)/8*8)
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		e.body = append(e.body[:0], byte(bw))
		e.body = packIndices(e.body, d.idx[lo:hi], bw)
		var u int64
		dst, u = e.appendDataPage(dst, e.body, hi-lo, encRLEDict)
		unc += u
	}
	return dst, unc, dataAt, true
}

// startDict indexes values (size bytes each) and, when the chunk pays for a
// dictionary (worthDict), appends its dictionary page: it returns dst, the
// page's uncompressed size and length (where the data pages start) and the
// indices' bit width, or reports false (dst unchanged).
func (e *pageEncoder) startDict(dst, values []byte, size int) ([]byte, int64, int64, uint, bool) {
	d := &e.dict
	n := len(values) / size
	if n == 0 || !d.build(values, size, maxDictBytes/size) || !worthDict(n, len(d.vals), size) {
		return dst, 0, 0, 0, false
	}
	start := len(dst)
	e.body = d.appendDictValues(e.body[:0], size)
	dst, unc := e.appendDictPage(dst, e.body, len(d.vals))
	return dst, unc, int64(len(dst) - start), indexWidth(len(d.vals)), true
}

// encodeDictList is encodeList dictionary-encoded (see encodeDictFlat): the
// page bodies hold the levels, then the indices of the page's values.
func (e *pageEncoder) encodeDictList(dst, values []byte, size int, reps, defs []int16) ([]byte, int64, int64, bool) {
	dst, unc, dataAt, bw, ok := e.startDict(dst, values, size)
	if !ok {
		return dst, 0, 0, false
	}
	d := &e.dict
	perPage := max(8, pageBytes*8/int(bw))
	lo, vlo := 0, 0 // level and value positions
	for {
		hi, vhi := listPageEnd(reps, defs, lo, vlo, perPage)
		e.body = rleLevels(e.body[:0], reps[lo:hi])
		e.body = rleLevels(e.body, defs[lo:hi])
		e.body = append(e.body, byte(bw))
		e.body = packIndices(e.body, d.idx[vlo:vhi], bw)
		var u int64
		dst, u = e.appendDataPage(dst, e.body, hi-lo, encRLEDict)
		unc += u
		lo, vlo = hi, vhi
		if lo == len(reps) {
			return dst, unc, dataAt, true
		}
	}
}
