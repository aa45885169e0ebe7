package parquet

import (
	"encoding/binary"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// ctrkit writes the file itself: v1 data pages of at most pageBytes of
// values (PLAIN; dictionary-encoded chunks: dictwriter.go), one column
// chunk per column and row group, then the footer:
//
//	"PAR1" | row group 0: chunk C0 | chunk C1 | … | row group 1 … | FileMetaData | len (u32 LE) | "PAR1"
//	chunk: [PageHeader | rep levels | def levels | values] …   (levels: list columns only)
//
// Each page body is compressed on its own. Levels are RLE/bit-packed hybrid
// runs with a u32 length prefix (bit width 1: lists are one level deep),
// and a list column's pages end on record boundaries.

// pageBytes bounds a page's values. Pages of 128 KiB rather than pyarrow's
// 1 MiB compress as well, and a reader holds one decompressed page per
// column it is decoding (ctrkit's: per column and worker).
const pageBytes = 128 << 10

// Parquet enum values (parquet.thrift).
const (
	ptInt32     = 1
	ptInt64     = 2
	ptFloat     = 4
	encPlain    = 0
	encRLE      = 3
	repRequired = 0
	repRepeated = 2
	convList    = 3
	codecNone   = 0
	codecSnappy = 1
	codecZstd   = 6
)

// chunkMeta is what the footer records of one written column chunk.
type chunkMeta struct {
	offset, uncompressed, compressed, values int64
	pages                                    int32 // data pages, for the footer's encoding_stats
	dict                                     bool  // a dictionary page, then RLE_DICTIONARY data pages
	dataAt                                   int64 // with dict: the first data page's offset in the chunk
}

// pageEncoder compresses pages with the file's codec; one per goroutine.
type pageEncoder struct {
	codec  int32
	better bool // snappy: s2's "better" encoder instead of the fast one
	zstd   *zstd.Encoder
	comp   []byte
	body   []byte
	pages  int32 // data pages appended since the caller last cleared it
	dict   dictBuilder
}

func (e *pageEncoder) compress(src []byte) []byte {
	switch e.codec {
	case codecSnappy:
		n := s2.MaxEncodedLen(len(src))
		if cap(e.comp) < n {
			e.comp = make([]byte, n)
		}
		if e.better {
			return s2.EncodeSnappyBetter(e.comp[:n], src)
		}
		return s2.EncodeSnappy(e.comp[:n], src)
	case codecZstd:
		e.comp = e.zstd.EncodeAll(src, e.comp[:0])
		return e.comp
	}
	return src
}

// appendDataPage appends one data page (header, then the compressed body)
// of nvalues values (levels included) in encoding enc (encPlain,
// encRLEDict) to dst; it returns dst and the page's uncompressed size
// (header + body).
func (e *pageEncoder) appendDataPage(dst, body []byte, nvalues int, enc int32) ([]byte, int64) {
	e.pages++
	return e.appendPage(dst, body, pageData, 5, func(tw *thriftWriter) { // data_page_header
		tw.i32(1, int32(nvalues))
		tw.i32(2, enc)
		tw.i32(3, encRLE)
		tw.i32(4, encRLE)
	})
}

// appendPage appends a page of type typ: its PageHeader (the type, the
// body's sizes, then the type's own header, field id of the PageHeader,
// whose fields sub writes) and the compressed body. It returns dst and the
// page's uncompressed size (header + body).
func (e *pageEncoder) appendPage(dst, body []byte, typ int32, id int16, sub func(*thriftWriter)) ([]byte, int64) {
	comp := e.compress(body)
	tw := thriftWriter{b: dst}
	start := len(dst)
	tw.i32(1, typ)
	tw.i32(2, int32(len(body)))
	tw.i32(3, int32(len(comp)))
	tw.begin(id)
	sub(&tw)
	tw.end()
	tw.b = append(tw.b, 0) // stop: end of PageHeader
	hdr := len(tw.b) - start
	return append(tw.b, comp...), int64(hdr + len(body))
}

func valueBytes[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

// encodeFlat appends the pages of a required scalar column of values
// (size bytes each) and returns the chunk's uncompressed size.
func (e *pageEncoder) encodeFlat(dst, values []byte, size int) ([]byte, int64) {
	per := pageBytes / size * size
	var unc int64
	for lo := 0; ; lo += per {
		hi := min(lo+per, len(values))
		var u int64
		dst, u = e.appendDataPage(dst, values[lo:hi], (hi-lo)/size, encPlain)
		unc += u
		if hi == len(values) {
			return dst, unc
		}
	}
}

// encodeList appends the pages of a list column: values (size bytes each)
// with their repetition and definition levels (one per value, or one with
// definition 0 for an empty list). Pages break only where a record starts.
func (e *pageEncoder) encodeList(dst, values []byte, size int, reps, defs []int16) ([]byte, int64) {
	var unc int64
	lo, vlo := 0, 0 // level and value positions
	for {
		hi, vhi := listPageEnd(reps, defs, lo, vlo, pageBytes/size)
		e.body = rleLevels(e.body[:0], reps[lo:hi])
		e.body = rleLevels(e.body, defs[lo:hi])
		e.body = append(e.body, values[vlo*size:vhi*size]...)
		var u int64
		dst, u = e.appendDataPage(dst, e.body, hi-lo, encPlain)
		unc += u
		lo, vlo = hi, vhi
		if lo == len(reps) {
			return dst, unc
		}
	}
}

// listPageEnd returns where a list column's page that starts at level lo
// (value vlo) ends: at the first record start once it holds max values,
// else at the end of the levels.
func listPageEnd(reps, defs []int16, lo, vlo, max int) (hi, vhi int) {
	hi, vhi = lo, vlo
	for hi < len(reps) {
		if vhi-vlo >= max && reps[hi] == 0 {
			break
		}
		if defs[hi] == 1 {
			vhi++
		}
		hi++
	}
	return hi, vhi
}

// rleLevels appends the RLE/bit-packed hybrid encoding, bit width 1, of
// levels (each 0 or 1) with its u32 length prefix: runs of 8 or more equal
// levels as RLE runs, the rest bit-packed in groups of 8 (only the last
// group may be padded).
func rleLevels(dst []byte, levels []int16) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	n := len(levels)
	run := func(i int) int {
		j := i + 1
		for j < n && levels[j] == levels[i] {
			j++
		}
		return j - i
	}
	for i := 0; i < n; {
		if r := run(i); r >= 8 {
			dst = binary.AppendUvarint(dst, uint64(r)<<1)
			dst = append(dst, byte(levels[i]))
			i += r
			continue
		}
		j := i
		for {
			j = min(j+8, n)
			if j == n || run(j) >= 8 || j-i >= 8*63 {
				break
			}
		}
		groups := (j - i + 7) / 8
		dst = binary.AppendUvarint(dst, uint64(groups)<<1|1)
		for g := 0; g < groups; g++ {
			var by byte
			for bit := 0; bit < 8; bit++ {
				if p := i + g*8 + bit; p < j && levels[p] != 0 {
					by |= 1 << bit
				}
			}
			dst = append(dst, by)
		}
		i = j
	}
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}
