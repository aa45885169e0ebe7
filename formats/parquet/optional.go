package parquet

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/parquet"

	"github.com/ctrkit/ctrkit/formats"
)

// Streamed optional scalar columns.
//
// pyarrow (and so pandas, Spark through it, NVTabular's CPU path) writes
// every column OPTIONAL unless its schema says not null: a Criteo-shape
// file it writes has definition levels (maximum 1) in every column, and
// none of them null. Such a chunk is streamed like a REQUIRED one, its
// levels checked and dropped, page by page:
//
//	data page v1:  | uint32 LE n | n bytes: definition levels | values … |   (the whole body compressed)
//	data page v2:  | repetition levels (none: repLen 0) | definition levels (defLen bytes) | values … |
//	               (levels never compressed; the header's num_nulls counts the nulls)
//
// Levels are the RLE/bit-packed hybrid encoding of bit width
// bits.Len(maxDef) (1 for a top-level optional column); v1 pages must
// declare them RLE (the deprecated BIT_PACKED layout has no length and is
// left to arrow-go). Every level must be maxDef: a lower one is a null,
// ErrNull at its row, as on arrow-go's path ("the value is null"); a
// header whose num_nulls disagrees with its levels is corrupt. A run of
// the maximum level is skipped whole, so the check of a typical page (one
// RLE run) costs nothing per value.

// streamOptional is whether optional scalar column chunks that can be
// streamed are (a variable so that tests compare with arrow-go's path).
var streamOptional = true

// streamedOptionalPages counts the data pages of optional scalar columns
// the streamed path has read (so that tests know it was taken).
var streamedOptionalPages atomic.Int64

// splitLevels splits the data of a v1 page into the levels that start it
// (after their 4-byte length) and what follows them.
func splitLevels(data []byte) (lv, rest []byte, ok bool) {
	if len(data) < 4 || uint64(binary.LittleEndian.Uint32(data)) > uint64(len(data)-4) {
		return nil, data, false
	}
	n := 4 + int(binary.LittleEndian.Uint32(data))
	return data[4:n], data[n:], true
}

// defined checks that the first n definition levels in b, those of the page
// that starts at row, all hold a value (are the column's maximum).
func (d *decoder) defined(row int, b []byte, n int) *formats.Error {
	md := uint8(d.cp.maxDef)
	h := hybrid{b: b, bw: uint(bits.Len8(md)), max: md}
	var buf [listChunk]uint8
	for at := 0; at < n; {
		if h.pi == h.np && h.rle > 0 && h.val == md {
			k := min(h.rle, n-at)
			h.rle -= k
			at += k
			continue
		}
		k := min(n-at, len(buf))
		if h.read(buf[:k]) != nil {
			return d.fail(row+at, formats.ErrCorrupt, "definition levels malformed or shorter than the page's %d values", n)
		}
		for i, v := range buf[:k] {
			if v != md {
				return d.fail(row+at+i, formats.ErrNull, "the value is null")
			}
		}
		at += k
	}
	return nil
}

// v2Levels reads from the stream and checks the definition levels (lv
// bytes, before the body) of a streamed v2 page of an optional scalar
// column whose header is h, starting at row.
func (d *decoder) v2Levels(row int, h pageHeader, lv int64) *formats.Error {
	streamedOptionalPages.Add(1)
	if h.repLen != 0 {
		return d.fail(row, formats.ErrCorrupt, "page of a scalar column holds %d bytes of repetition levels", h.repLen)
	}
	b, _, err := d.pageBody(int(lv), false) // checked at once: the task's scratch will do
	if err != nil {
		return d.corrupt(row, err)
	}
	if e := d.defined(row, b, int(h.nv)); e != nil {
		return e
	}
	if h.nulls != 0 {
		return d.fail(row, formats.ErrCorrupt, "page header counts %d nulls, its definition levels none", h.nulls)
	}
	return nil
}

// streamedV1Levels reads from the stream and checks the definition levels
// that start a v1 page of an optional scalar column, of body bytes, whose
// values are then read from the stream as they are consumed; it returns
// the bytes of the body left after them.
func (d *decoder) streamedV1Levels(row int, h pageHeader, body int64) (int64, *formats.Error) {
	streamedOptionalPages.Add(1)
	if e := d.v1Levels(row, h); e != nil {
		return 0, e
	}
	if body < 4 {
		return 0, d.fail(row, formats.ErrCorrupt, "page of %d bytes cannot hold its definition levels' length", body)
	}
	if err := d.st.fill(d.r.pool, 4); err != nil {
		return 0, d.corrupt(row, err)
	}
	n := int64(binary.LittleEndian.Uint32(d.st.take(4)))
	if n > body-4 {
		return 0, d.fail(row, formats.ErrCorrupt, "definition levels of %d bytes in a page of %d", n, body)
	}
	b, _, err := d.pageBody(int(n), false)
	if err != nil {
		return 0, d.corrupt(row, err)
	}
	if e := d.defined(row, b, int(h.nv)); e != nil {
		return 0, e
	}
	return body - 4 - n, nil
}

// v1Levels checks that the v1 page whose header is h declares its
// definition levels RLE.
func (d *decoder) v1Levels(row int, h pageHeader) *formats.Error {
	if parquet.Encoding(h.defEnc) != parquet.Encodings.RLE {
		return d.fail(row, formats.ErrCorrupt, "page definition level encoding %s, the column chunk lists only RLE levels", parquet.Encoding(h.defEnc))
	}
	return nil
}

// dataLevels checks and strips the definition levels that start data, the
// whole (decompressed) data of a v1 page of an optional scalar column whose
// header is h, starting at row.
func (d *decoder) dataLevels(row int, h pageHeader, data []byte) ([]byte, *formats.Error) {
	streamedOptionalPages.Add(1)
	if e := d.v1Levels(row, h); e != nil {
		return nil, e
	}
	lv, rest, ok := splitLevels(data)
	if !ok {
		return nil, d.fail(row, formats.ErrCorrupt, "page levels run past the end of a page of %d bytes", len(data))
	}
	if e := d.defined(row, lv, int(h.nv)); e != nil {
		return nil, e
	}
	return rest, nil
}
