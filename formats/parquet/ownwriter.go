package parquet

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"
)

// ownFile is the state of a file ctrkit encodes itself (see chunks.go).
type ownFile struct {
	codec  int32
	better bool
	dict   bool  // dictionary-encode the chunks it pays for (dictwriter.go)
	off    int64 // bytes written so far
	rgs    []ownRowGroup
	bufs   [][]byte // per column: the encoded chunk of the row group being written
	encs   sync.Pool
}

type ownRowGroup struct {
	rows   int64
	chunks []chunkMeta
}

func newOwnFile(compression string, better, dict bool) *ownFile {
	o := &ownFile{better: better, dict: dict}
	switch compression {
	case "", "snappy":
		o.codec = codecSnappy
	case "zstd":
		o.codec = codecZstd
	default:
		o.codec = codecNone
	}
	o.encs.New = func() any {
		e := &pageEncoder{codec: o.codec, better: o.better}
		if o.codec == codecZstd {
			e.zstd, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		}
		return e
	}
	return o
}

// writeOwnRowGroup encodes g's columns concurrently (one task per column),
// then writes the chunks to the file in column order.
func (w *Writer) writeOwnRowGroup(g *rowGroup, rows int) error {
	defer g.reset()
	o := w.own
	L, D, S := len(g.labels), len(g.dense), len(w.s.Slots)
	ncol := L + D + S
	if o.bufs == nil {
		o.bufs = make([][]byte, ncol)
	}
	unc := make([]int64, ncol)
	vals := make([]int64, ncol)
	pages := make([]int32, ncol)
	dataAt := make([]int64, ncol) // dictionary-encoded chunks: the first data page's offset in the chunk
	isDict := make([]bool, ncol)
	var tasks errgroup.Group
	tasks.SetLimit(runtime.GOMAXPROCS(0))
	for c := 0; c < ncol; c++ {
		tasks.Go(func() error {
			e := o.encs.Get().(*pageEncoder)
			defer o.encs.Put(e)
			e.pages = 0
			defer func() { pages[c] = e.pages }()
			buf := o.bufs[c][:0]
			// flat writes a required scalar column: dictionary-encoded
			// when the file is and the chunk pays for it, else PLAIN.
			flat := func(v []byte, size int) {
				if o.dict {
					if buf, unc[c], dataAt[c], isDict[c] = e.encodeDictFlat(buf, v, size); isDict[c] {
						return
					}
				}
				buf, unc[c] = e.encodeFlat(buf, v, size)
			}
			switch {
			case c < L:
				flat(valueBytes(g.labels[c]), 4)
				vals[c] = int64(rows)
			case c < L+D:
				flat(valueBytes(g.dense[c-L]), 4)
				vals[c] = int64(rows)
			default:
				si := c - L - D
				var v []byte
				size := 8
				if w.bits == 64 {
					v = valueBytes(g.k64[si])
				} else {
					v, size = valueBytes(g.k32[si]), 4
				}
				if !w.list[si] {
					flat(v, size)
					vals[c] = int64(rows)
					break
				}
				vals[c] = int64(len(g.reps[si]))
				if o.dict {
					if buf, unc[c], dataAt[c], isDict[c] = e.encodeDictList(buf, v, size, g.reps[si], g.defs[si]); isDict[c] {
						break
					}
				}
				buf, unc[c] = e.encodeList(buf, v, size, g.reps[si], g.defs[si])
			}
			o.bufs[c] = buf
			return nil
		})
	}
	tasks.Wait()
	rg := ownRowGroup{rows: int64(rows), chunks: make([]chunkMeta, ncol)}
	for c := 0; c < ncol; c++ {
		if _, err := w.bw.Write(o.bufs[c]); err != nil {
			return fmt.Errorf("writing %s: %w", w.path, err)
		}
		rg.chunks[c] = chunkMeta{offset: o.off, uncompressed: unc[c], compressed: int64(len(o.bufs[c])), values: vals[c], pages: pages[c],
			dict: isDict[c], dataAt: dataAt[c]}
		o.off += int64(len(o.bufs[c]))
	}
	o.rgs = append(o.rgs, rg)
	return nil
}

// ownFooter returns the FileMetaData, its length and the closing magic.
func (w *Writer) ownFooter() []byte {
	o := w.own
	L, D, S := w.s.LabelDim, w.s.DenseDim, len(w.s.Slots)
	ptype, conv := int32(ptInt64), int32(18) // INT_64
	switch {
	case w.bits == 32 && w.sign:
		ptype, conv = ptInt32, 17 // INT_32
	case w.bits == 32:
		ptype, conv = ptInt32, 13 // UINT_32
	case !w.sign:
		conv = 14 // UINT_64
	}
	intLogical := func(tw *thriftWriter) {
		tw.i32(6, conv)
		tw.begin(10) // logicalType
		tw.begin(10) // INTEGER
		tw.i8(1, int8(w.bits))
		tw.boolean(2, w.sign)
		tw.end()
		tw.end()
	}
	nlist := 0
	for _, l := range w.list {
		if l {
			nlist++
		}
	}
	var tw thriftWriter
	tw.i32(1, 1) // version
	tw.list(2, ctStruct, 1+L+D+S+2*nlist)
	tw.beginElem()
	tw.binary(4, "schema")
	tw.i32(5, int32(L+D+S))
	tw.end()
	names := make([][]string, 0, L+D+S)
	for i := 0; i < L+D; i++ {
		name := labelName(i)
		if i >= L {
			name = fmt.Sprintf("I%d", i-L+1)
		}
		tw.beginElem()
		tw.i32(1, ptFloat)
		tw.i32(3, repRequired)
		tw.binary(4, name)
		tw.end()
		names = append(names, []string{name})
	}
	for si := 0; si < S; si++ {
		name := fmt.Sprintf("C%d", si+1)
		if !w.list[si] {
			tw.beginElem()
			tw.i32(1, ptype)
			tw.i32(3, repRequired)
			tw.binary(4, name)
			intLogical(&tw)
			tw.end()
			names = append(names, []string{name})
			continue
		}
		tw.beginElem()
		tw.i32(3, repRequired)
		tw.binary(4, name)
		tw.i32(5, 1)
		tw.i32(6, convList)
		tw.begin(10) // logicalType
		tw.begin(3)  // LIST
		tw.end()
		tw.end()
		tw.end()
		tw.beginElem()
		tw.i32(3, repRepeated)
		tw.binary(4, "list")
		tw.i32(5, 1)
		tw.end()
		tw.beginElem()
		tw.i32(1, ptype)
		tw.i32(3, repRequired)
		tw.binary(4, "element")
		intLogical(&tw)
		tw.end()
		names = append(names, []string{name, "list", "element"})
	}
	var rows int64
	for _, rg := range o.rgs {
		rows += rg.rows
	}
	tw.i64(3, rows)
	tw.list(4, ctStruct, len(o.rgs))
	for _, rg := range o.rgs {
		tw.beginElem()
		tw.list(1, ctStruct, len(rg.chunks))
		var total int64
		for c, ch := range rg.chunks {
			pt := int32(ptFloat)
			if c >= L+D {
				pt = ptype
			}
			tw.beginElem()
			tw.i64(2, ch.offset)
			tw.begin(3) // meta_data
			tw.i32(1, pt)
			if ch.dict {
				tw.list(2, ctI32, 3)
				tw.listI32(encPlain)
				tw.listI32(encRLE)
				tw.listI32(encRLEDict)
			} else {
				tw.list(2, ctI32, 2)
				tw.listI32(encPlain)
				tw.listI32(encRLE)
			}
			tw.list(3, ctBinary, len(names[c]))
			for _, p := range names[c] {
				tw.listString(p)
			}
			tw.i32(4, o.codec)
			tw.i64(5, ch.values)
			tw.i64(6, ch.uncompressed)
			tw.i64(7, ch.compressed)
			if ch.dict {
				tw.i64(9, ch.offset+ch.dataAt) // data_page_offset
				tw.i64(11, ch.offset)          // dictionary_page_offset
				tw.list(13, ctStruct, 2)       // encoding_stats: the dictionary page, the data pages
				tw.beginElem()
				tw.i32(1, pageDictionary)
				tw.i32(2, encPlain)
				tw.i32(3, 1)
				tw.end()
				tw.beginElem()
				tw.i32(1, pageData)
				tw.i32(2, encRLEDict)
				tw.i32(3, ch.pages)
				tw.end()
			} else {
				tw.i64(9, ch.offset)
				tw.list(13, ctStruct, 1) // encoding_stats: the data pages, all PLAIN
				tw.beginElem()
				tw.i32(1, pageData)
				tw.i32(2, encPlain)
				tw.i32(3, ch.pages)
				tw.end()
			}
			tw.end()
			tw.end()
			total += ch.uncompressed
		}
		tw.i64(2, total)
		tw.i64(3, rg.rows)
		tw.end()
	}
	tw.binary(6, "ctrkit")
	tw.b = append(tw.b, 0)
	n := len(tw.b)
	tw.b = append(tw.b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	return append(tw.b, "PAR1"...)
}
