package parquet

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/s2"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/hostmem"
)

// chunkLevels is how many levels one ReadBatch call decodes.
const chunkLevels = 8192

type number interface {
	int32 | int64 | float32 | float64
}

// batchReader is the typed ReadBatch of arrow-go's column chunk readers.
type batchReader[T number] interface {
	ReadBatch(batchSize int64, values []T, defLvls, repLvls []int16) (int64, int, error)
}

// decoder is the state of one (row group × column) task; it decodes the
// row group piece by piece, b being the piece being decoded.
type decoder struct {
	r        *Reader
	b        *rgBuf
	cp       *colPlan
	sc       *scratch
	chunkOff int64
	rows     int // the row group's rows

	// A column chunk is read either through arrow-go's typed column reader
	// (cr) or, when it is a required scalar of plain pages without a
	// dictionary, page by page (pr): the values are then scattered straight
	// from the decompressed page, left of them remaining in page.
	cr   file.ColumnChunkReader
	pr   file.PageReader
	page []byte
	left int

	// A plain column chunk of an uncompressed or snappy file is read
	// through st instead (streamed set): pages are parsed here, snappy pages
	// decompressed into dec (from the reader's pool), uncompressed values
	// taken from st's window a window at a time (stream set while the
	// current page's values come from st; tail is what follows them in the
	// page).
	streamed bool
	st       chunkStream
	codec    compress.Compression
	dec      []byte
	// litPages predicts that the chunk's next snappy page is one literal
	// (its pages are incompressible): a page larger than the window is
	// then read into dec and the literal viewed there, rather than read
	// into scratch and copied into dec (one that fits is viewed in the
	// window anyway).
	litPages bool
	stream   bool
	tail     int64
	reserve  int // a streamed cat list column: keys to make room for (reserveKeys)
	ls       listState
	dict     dictState // a streamed chunk's dictionary (dict.go)
}

// reserveKeys is how many keys a streamed cat list column chunk of n bytes
// holding nv values of size bytes, in a row group of rows rows, makes room
// for before decoding (sparing the copies of growing the slot's keys page
// by page): its values as the footer counts them, but at most what its
// bytes can plausibly hold (eight times as many as uncompressed) and, with
// a max nnz, rows·maxNNZ, so that a footer that lies does not make the
// reader allocate far beyond the file.
func reserveKeys(nv, n, size, rows int64, maxNNZ int) int {
	r := min(nv, 8*n/max(size, 1))
	if maxNNZ > 0 {
		r = min(r, rows*int64(maxNNZ))
	}
	return int(max(r, 0))
}

// littleEndian reports whether this machine stores numbers as Parquet's
// PLAIN encoding does, so a page's bytes can be viewed as values.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// directPages reports whether a column chunk's pages can be read directly:
// a required scalar column or a list column, and only PLAIN values (RLE and
// BIT_PACKED being level encodings; a list's levels must be RLE) or, when
// streamed (the streamed path), a dictionary page and dictionary-encoded
// values too (dict.go), and an optional scalar column (optional.go).
func directPages(cp *colPlan, cc *metadata.ColumnChunkMetaData, streamed bool) bool {
	dict := streamed && streamDicts
	if !littleEndian || (cc.HasDictionaryPage() && !dict) || cc.CryptoMetadata() != nil {
		return false
	}
	levels := cp.list || cp.maxDef != 0 // levels RLE only
	switch {
	case cp.list:
		// Streamed (lists.go): levels of at most 8 bits.
		if !streamLists || cp.maxDef > math.MaxUint8 {
			return false
		}
	case cp.maxDef != 0:
		if !streamed || !streamOptional || cp.maxDef > math.MaxUint8 {
			return false
		}
	}
	for _, e := range cc.Encodings() {
		switch e {
		case parquet.Encodings.Plain, parquet.Encodings.RLE:
		case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
			if !dict {
				return false
			}
		case parquet.Encodings.BitPacked:
			if levels {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// close releases d's column or page reader.
func (d *decoder) close() {
	if d.cr != nil {
		d.cr.Close()
	}
	if d.pr != nil {
		d.pr.Close()
	}
	if d.dec != nil {
		d.r.pool.Free(d.dec)
	}
	d.st.release(d.r.pool)
	d.dict.release(d.r.pool)
	d.cr, d.pr, d.page, d.left = nil, nil, nil, 0
	d.streamed, d.dec, d.stream, d.tail = false, nil, false, 0
}

func (d *decoder) fail(row int, sentinel error, format string, args ...any) *formats.Error {
	return formats.Errorf("parquet", d.b.fp.path, d.chunkOff, d.b.start+int64(row), sentinel,
		"%s column %q (index %d): "+format, append([]any{d.cp.group, d.cp.meta.ColName, d.cp.meta.Index}, args...)...)
}

func (d *decoder) corrupt(row int, err error) *formats.Error {
	return &formats.Error{Format: "parquet", Path: d.b.fp.path, Offset: d.chunkOff, Record: d.b.start + int64(row),
		Op:  fmt.Sprintf("%s column %q (index %d)", d.cp.group, d.cp.meta.ColName, d.cp.meta.Index),
		Err: fmt.Errorf("%w: %w", formats.ErrCorrupt, err)}
}

// rowChunk is how many rows of every scalar column are decoded before going
// on to the next rows: the sample-major destination of that many rows
// (264 bytes a row in the Criteo shape) stays in the core's cache while the
// columns are scattered into it.
const rowChunk = 1024

// decodeRowGroup decodes columns [lo, hi) of row group t.g of t.fp, piece
// by piece: it takes the n pieces from pt in order, each under a worker
// slot, and the last of the row group's tasks to end a piece closes its
// done (finish). Scalar columns are decoded rowChunk rows at a time, all
// columns of one chunk before the next; list columns whole, one after the
// other (a row group with list columns is one piece). Each column keeps its
// first error; after a chunk in which a column failed no further chunk is
// decoded (later errors lie on later rows), and finish picks the lowest
// row, then the first column, as decoding every column to its first error
// would; the later pieces carry the same error.
func (r *Reader) decodeRowGroup(ctx context.Context, t *rgTask, lo, hi int, pt *part, n int) {
	ch := pt.ch
	sc, _ := scratchPool.Get().(*scratch)
	if sc == nil {
		sc = new(scratch)
	}
	defer scratchPool.Put(sc)
	held := false // a worker slot, kept while the next piece has its buffer
	defer func() {
		if held {
			r.freeSlot()
		}
	}()
	var f *os.File
	var rd *file.Reader
	decs := t.decs[lo:hi]
	// Run before the slot is freed: the columns' windows and pages go back
	// to the pool before the task that takes the slot opens its own.
	defer func() {
		for ci := range decs {
			if decs[ci].r != nil { // opened
				decs[ci].close()
			}
		}
		if rd != nil {
			rd.Close()
		} else if f != nil {
			f.Close()
		}
	}()
	var failed *formats.Error // the first error of these columns
	for pi := 0; pi < n; pi++ {
		var b *rgBuf
		if held {
			select {
			case b = <-ch:
			default:
				held = false
				r.freeSlot()
			}
		}
		if b == nil {
			select {
			case b = <-ch:
			case <-ctx.Done():
				return
			}
			select {
			case r.slots <- struct{}{}:
				held = true
			case <-ctx.Done():
				return
			}
		}
		if pi == 0 {
			f, rd = r.openRowGroup(t, lo, hi, b, sc)
			for ci := lo; ci < hi; ci++ {
				failed = cmp.Or(failed, b.errs[ci])
			}
		}
		if failed != nil {
			if pi > 0 {
				b.setErr(failed)
			}
		} else if e := r.decodePiece(ctx, t, lo, hi, b); e != nil {
			failed = e
		}
		if b.parts.Add(-1) == 0 {
			b.finish()
		}
		if pt.out.Add(-1) == 0 {
			r.active.Add(-1)
			select {
			case r.idle <- struct{}{}:
			default:
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// stageRows is how many rows of a piece stagePiece decodes into its
// staging block at a time: 128 rows of the Criteo shape (264 bytes a row)
// are 33 KiB, which stays in the core's first-level cache while the columns
// are scattered into it.
const stageRows = 128

// staging is whether decodePiece stages the pieces it can (stagePiece): where
// StreamCopy has non-temporal stores; a variable so that tests compare
// both ways.
var staging = hostmem.Streaming

// stagePiece decodes piece b of t's row group, every column of it (all
// scalar, one-hot), stageRows rows at a time into the task's staging block
// (sc.stage, viewed as the rgBuf sc.view for the decoders), and streams
// each block into b's sample-major arrays with non-temporal stores
// (hostmem.StreamCopy). Scattering 40 columns straight into a buffer of
// 17 MB per batch reads every cache line of it from memory before writing
// it (write-allocate); the block takes the scattered stores in cache, and
// the buffer is written once, without being read. On the dev VM that cut
// the key scatter of a 65536-row piece from 8.3 to 5.5 ms. Errors are those of decodePiece: rows and
// records are counted from the block's first row (view.at, view.start).
func (r *Reader) stagePiece(ctx context.Context, t *rgTask, b *rgBuf) *formats.Error {
	s := r.schema
	L, D, S := s.LabelDim, s.DenseDim, len(s.Slots)
	sc := t.decs[0].sc
	st := &sc.stage
	st.labels = sized(st.labels, stageRows*L)
	st.dense = sized(st.dense, stageRows*D)
	i64 := s.KeyType == formats.KeyI64
	if i64 {
		st.k64 = sized(st.k64, stageRows*S)
	} else {
		st.k32 = sized(st.k32, stageRows*S)
	}
	v := &sc.view
	defer func() {
		for ci := range t.decs {
			t.decs[ci].b = b
		}
		*v = rgBuf{}
	}()
	var first *formats.Error
	for row := 0; row < b.rows && first == nil; row += stageRows {
		if ctx.Err() != nil {
			b.setErr(errClosed) // the caller returns
			return nil
		}
		n := min(stageRows, b.rows-row)
		*v = rgBuf{fp: b.fp, rg: b.rg, at: b.at + row, start: b.start + int64(row), rows: n, nslots: b.nslots,
			labels: st.labels[:n*L], dense: st.dense[:n*D]}
		if i64 {
			v.k64 = st.k64[:n*S]
		} else {
			v.k32 = st.k32[:n*S]
		}
		for ci := range t.decs {
			d := &t.decs[ci]
			if d.cr == nil && d.pr == nil && !d.streamed {
				continue
			}
			d.b = v
			if e := d.run(0, n); e != nil {
				b.errs[ci] = e
				first = cmp.Or(first, e)
			}
		}
		streamInto(b.labels[row*L:(row+n)*L], v.labels)
		streamInto(b.dense[row*D:(row+n)*D], v.dense)
		if i64 {
			streamInto(b.k64[row*S:(row+n)*S], v.k64)
		} else {
			streamInto(b.k32[row*S:(row+n)*S], v.k32)
		}
	}
	return first
}

// stageBlock is the staging block of stagePiece: stageRows sample-major rows.
type stageBlock struct {
	labels, dense []float32
	k32           []uint32
	k64           []int64
}

// sized returns buf with length n, reallocated when its capacity is less.
func sized[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// streamInto copies src to dst (of equal length) with hostmem.StreamCopy.
func streamInto[T float32 | uint32 | int64](dst, src []T) {
	if len(src) == 0 {
		return
	}
	size := int(unsafe.Sizeof(src[0]))
	hostmem.StreamCopy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)*size),
		unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), len(src)*size))
}

// freeSlot gives back a worker slot.
func (r *Reader) freeSlot() { <-r.slots }

// scratchPool holds the decode buffers of tasks that have ended.
var scratchPool sync.Pool

// openRowGroup opens t's file and the column readers of columns [lo, hi)
// for the first piece b with the decode buffers sc, recording errors in
// b.errs (the file's as column lo's); rd is nil when the file could not be
// opened or read, f nil when it could not be opened.
func (r *Reader) openRowGroup(t *rgTask, lo, hi int, b *rgBuf, sc *scratch) (f *os.File, rd *file.Reader) {
	fp := t.fp
	f, err := os.Open(fp.path)
	if err != nil {
		b.errs[lo] = &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: -1, Op: "open", Err: err}
		return nil, nil
	}
	rd, err = file.NewParquetReader(f, file.WithMetadata(fp.md), file.WithReadProps(r.props))
	if err != nil {
		b.errs[lo] = &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: -1, Op: "open", Err: fmt.Errorf("%w: %w", formats.ErrCorrupt, err)}
		return f, nil
	}
	size := int64(-1) // plain column chunks are streamed from regular files (see decoder.streamed)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	rg := rd.RowGroup(t.g)
	for ci := lo; ci < hi; ci++ {
		t.decs[ci] = decoder{r: r, b: b, cp: &fp.cols[ci], sc: sc, chunkOff: -1, rows: t.rows}
		if e := t.decs[ci].open(rg, f, size); e != nil {
			b.errs[ci] = e
		}
	}
	return f, rd
}

// streamCodec reports whether column chunks of codec c are streamed
// (chunkStream): uncompressed or snappy.
func streamCodec(c compress.Compression) bool {
	return c == compress.Codecs.Uncompressed || c == compress.Codecs.Snappy
}

// listPieces reports whether row group g of fp can be decoded in pieces:
// every selected list column chunk of it will be streamed (see open), so
// its decoder stops at any row; arrow-go's column reader decodes a list
// column chunk whole.
func (r *Reader) listPieces(fp *filePlan, g int) bool {
	if !fp.regular {
		return false
	}
	rg := fp.md.RowGroup(g)
	for i := range fp.cols {
		cp := &fp.cols[i]
		if !cp.list {
			continue
		}
		cc, err := rg.ColumnChunk(cp.leaf)
		if err != nil || !directPages(cp, cc, true) || rg.Schema.Column(cp.leaf).PhysicalType() != cp.phys || !streamCodec(cc.Compression()) {
			return false
		}
	}
	return true
}

// decodePiece decodes columns [lo, hi) of piece b of t's row group and
// returns the first error of those columns (recorded in b.errs).
func (r *Reader) decodePiece(ctx context.Context, t *rgTask, lo, hi int, b *rgBuf) *formats.Error {
	for ci := lo; ci < hi; ci++ {
		t.decs[ci].b = b
	}
	if staging && lo == 0 && hi == len(t.fp.cols) && t.fp.fixed && !t.fp.lists {
		return r.stagePiece(ctx, t, b)
	}
	var first *formats.Error
	for ci := lo; ci < hi; ci++ {
		if d := &t.decs[ci]; (d.cr != nil || d.streamed) && d.cp.list {
			if !d.streamed && b.rows != d.rows {
				// listPieces and open disagree (the file changed).
				e := d.fail(0, formats.ErrCorrupt, "list column chunk not streamed in a row group read in pieces")
				b.errs[ci] = e
				first = cmp.Or(first, e)
				continue
			}
			if e := d.run(0, 0); e != nil {
				b.errs[ci] = e
				first = cmp.Or(first, e)
			}
		}
	}
	for row := 0; row < b.rows && first == nil; row += rowChunk {
		if ctx.Err() != nil {
			b.setErr(errClosed) // the caller returns
			return nil
		}
		n := min(rowChunk, b.rows-row)
		for ci := lo; ci < hi; ci++ {
			d := &t.decs[ci]
			if (d.cr == nil && d.pr == nil && !d.streamed) || d.cp.list {
				continue
			}
			if e := d.run(row, n); e != nil {
				b.errs[ci] = e
				first = cmp.Or(first, e)
			}
		}
	}
	return first
}

// open opens the column chunk reader of d's column, or a stream of its pages
// from f, size bytes long (-1: not a regular file).
func (d *decoder) open(rg *file.RowGroupReader, f *os.File, size int64) (ferr *formats.Error) {
	defer func() {
		if p := recover(); p != nil {
			ferr = d.corrupt(0, fmt.Errorf("decoder panic: %v", p))
		}
	}()
	cp := d.cp
	cc, err := rg.MetaData().ColumnChunk(cp.leaf)
	if err == nil {
		d.chunkOff = cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < d.chunkOff {
			d.chunkOff = cc.DictionaryPageOffset()
		}
		c := cc.Compression()
		streamable := size >= 0 && streamCodec(c)
		if directPages(cp, cc, streamable) && rg.MetaData().Schema.Column(cp.leaf).PhysicalType() == cp.phys {
			// The chunk's pages start at its dictionary page, if any;
			// TotalCompressedSize counts from there.
			start, n := d.chunkOff, cc.TotalCompressedSize()
			if streamable {
				if start < 0 || n < 0 || start > size || n > size-start {
					return d.corrupt(0, fmt.Errorf("%w: %d bytes at offset %d, the file has %d", errShortFile, n, start, size))
				}
				d.streamed, d.codec = true, c
				d.litPages = c == compress.Codecs.Snappy && n >= cc.TotalUncompressedSize()
				d.st = chunkStream{f: f, path: d.b.fp.path, off: start, end: start + n, short: c != compress.Codecs.Uncompressed && n > int64(streamWindow)}
				if cp.list && cp.group == gCat {
					d.reserve = reserveKeys(cc.NumValues(), n, int64(cp.phys.ByteSize()), int64(d.rows), d.r.schema.Slots[cp.dst].MaxNNZ)
				}
				return nil
			}
			if !cp.list {
				pr, err := rg.GetColumnPageReader(cp.leaf)
				if err != nil {
					return d.corrupt(0, err)
				}
				d.pr = pr
				return nil
			}
		}
	}
	cr, err := rg.Column(cp.leaf)
	if err != nil {
		return d.corrupt(0, err)
	}
	if cr.Descriptor().PhysicalType() != cp.phys {
		cr.Close()
		return d.fail(0, formats.ErrSchema, "physical type %s, footer schema says %s", cr.Descriptor().PhysicalType(), cp.phys)
	}
	switch cr.(type) {
	case *file.Int32ColumnChunkReader, *file.Int64ColumnChunkReader, *file.Float32ColumnChunkReader, *file.Float64ColumnChunkReader:
	default:
		cr.Close()
		return d.fail(0, formats.ErrSchema, "unsupported physical type %s", cp.phys)
	}
	d.cr = cr
	return nil
}

// run decodes rows [row, row+n) of a scalar column, or the whole of a list
// column. A panic in arrow-go on a malformed page becomes an ErrCorrupt
// error.
func (d *decoder) run(row, n int) (ferr *formats.Error) {
	defer func() {
		if p := recover(); p != nil {
			ferr = d.corrupt(row, fmt.Errorf("decoder panic: %v", p))
		}
	}()
	if d.streamed && d.cp.list {
		switch d.cp.phys {
		case parquet.Types.Int32:
			return listT(d, &d.sc.i32)
		case parquet.Types.Int64:
			return listT(d, &d.sc.i64)
		case parquet.Types.Float:
			return listT(d, &d.sc.f32)
		case parquet.Types.Double:
			return listT(d, &d.sc.f64)
		}
		return d.fail(row, formats.ErrSchema, "unsupported physical type %s", d.cp.phys)
	}
	if d.pr != nil || d.streamed {
		switch d.cp.phys {
		case parquet.Types.Int32:
			return plainT(d, &d.sc.i32, row, n)
		case parquet.Types.Int64:
			return plainT(d, &d.sc.i64, row, n)
		case parquet.Types.Float:
			return plainT(d, &d.sc.f32, row, n)
		case parquet.Types.Double:
			return plainT(d, &d.sc.f64, row, n)
		}
		return d.fail(row, formats.ErrSchema, "unsupported physical type %s", d.cp.phys)
	}
	switch c := d.cr.(type) {
	case *file.Int32ColumnChunkReader:
		return decodeT(d, c, &d.sc.i32, row, n)
	case *file.Int64ColumnChunkReader:
		return decodeT(d, c, &d.sc.i64, row, n)
	case *file.Float32ColumnChunkReader:
		return decodeT(d, c, &d.sc.f32, row, n)
	case *file.Float64ColumnChunkReader:
		return decodeT(d, c, &d.sc.f64, row, n)
	}
	return d.fail(row, formats.ErrSchema, "unsupported physical type %s", d.cp.phys)
}

// viewUnaligned is whether misaligned values are viewed in place
// (hostmem.UnalignedLoads): by plainT and gather. A variable so that tests
// cover the copying paths on every architecture.
var viewUnaligned = hostmem.UnalignedLoads

// plainT decodes rows [row, row+n) of a column read page by page: each
// page's values are viewed in place (copied to scratch only if the page
// buffer is misaligned where viewUnaligned is false) and scattered into
// the row group. On the dev VM the copy of misaligned pages (an optional
// column's values follow its levels at an odd offset) was 4.8% of a fresh
// 2-worker read of snappy PLAIN files.
func plainT[T number](d *decoder, vp *[]T, row, n int) *formats.Error {
	var z T
	size := int(unsafe.Sizeof(z))
	for end := row + n; row < end; {
		if len(d.page) == 0 {
			var e *formats.Error
			switch {
			case d.stream && d.left > 0:
				e = d.moreValues(row, size)
			case d.dict.paged && d.left > 0 && d.fusedDict():
				k := min(end-row, d.left)
				if e := d.dictKeys(row, k); e != nil {
					return e
				}
				d.left -= k
				row += k
				continue
			case d.dict.paged && d.left > 0:
				e = d.moreDict(row)
			default:
				e = d.nextPage(row, size)
			}
			if e != nil {
				return e
			}
			continue
		}
		k := min(end-row, len(d.page)/size)
		var vals []T
		if p := unsafe.Pointer(unsafe.SliceData(d.page)); viewUnaligned || uintptr(p)%uintptr(size) == 0 {
			vals = unsafe.Slice((*T)(p), k)
		} else {
			if cap(*vp) < k {
				*vp = make([]T, max(k, chunkLevels))
			}
			vals = (*vp)[:k]
			copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), k*size), d.page)
		}
		if e := emitScalar(d, row, vals); e != nil {
			return e
		}
		d.page = d.page[k*size:]
		d.left -= k
		row += k
	}
	return nil
}

// nextPage moves d to the next data page of its column chunk, whose values
// are size bytes each; row is the row it will start at.
func (d *decoder) nextPage(row, size int) *formats.Error {
	if d.streamed {
		return d.nextRawPage(row, size)
	}
	if !d.pr.Next() {
		if err := d.pr.Err(); err != nil {
			return d.corrupt(row, err)
		}
		return d.fail(row, formats.ErrCorrupt, "column chunk ends after %d of %d rows", d.b.at+row, d.rows)
	}
	var data []byte
	var nv int
	switch p := d.pr.Page().(type) {
	case *file.DataPageV1:
		if parquet.Encoding(p.Encoding()) != parquet.Encodings.Plain {
			return d.fail(row, formats.ErrCorrupt, "page encoding %s, the column chunk lists only PLAIN values", parquet.Encoding(p.Encoding()))
		}
		data, nv = p.Data(), int(p.NumValues())
	case *file.DataPageV2:
		if parquet.Encoding(p.Encoding()) != parquet.Encodings.Plain {
			return d.fail(row, formats.ErrCorrupt, "page encoding %s, the column chunk lists only PLAIN values", parquet.Encoding(p.Encoding()))
		}
		if p.NumNulls() != 0 {
			return d.fail(row, formats.ErrNull, "page of a required column holds %d nulls", p.NumNulls())
		}
		data, nv = p.Data(), int(p.NumValues())
		lv := int64(p.DefinitionLevelByteLen()) + int64(p.RepetitionLevelByteLen())
		if lv < 0 || lv > int64(len(data)) {
			return d.fail(row, formats.ErrCorrupt, "page levels of %d bytes in a page of %d", lv, len(data))
		}
		data = data[lv:]
	case *file.DictionaryPage:
		return d.fail(row, formats.ErrCorrupt, "dictionary page in a column chunk without one")
	default:
		return d.fail(row, formats.ErrCorrupt, "unexpected page type %T", p)
	}
	if nv < 0 || int64(nv)*int64(size) > int64(len(data)) {
		return d.fail(row, formats.ErrCorrupt, "page of %d bytes cannot hold %d values of %d bytes", len(data), nv, size)
	}
	d.page, d.left = data[:nv*size], nv
	return nil
}

// decodeT decodes rows [row, row+n) of a scalar column, or the whole of a
// list column (row and n unused).
func decodeT[T number](d *decoder, rd batchReader[T], vp *[]T, row, n int) *formats.Error {
	if cap(*vp) < chunkLevels {
		*vp = make([]T, chunkLevels)
	}
	vals := (*vp)[:chunkLevels]
	sc, cp, rows := d.sc, d.cp, d.rows
	if cap(sc.def) < chunkLevels {
		sc.def = make([]int16, chunkLevels)
		sc.rep = make([]int16, chunkLevels)
	}
	var defs, reps []int16
	if cp.maxDef > 0 {
		defs = sc.def[:chunkLevels]
	}
	if !cp.list {
		for end := row + n; row < end; {
			want := min(chunkLevels, end-row)
			nl, nv, err := rd.ReadBatch(int64(want), vals, defs, nil)
			if err != nil {
				return d.corrupt(row, err)
			}
			if nl == 0 {
				return d.fail(row, formats.ErrCorrupt, "column chunk ends after %d of %d rows", d.b.at+row, rows)
			}
			if int64(nv) != nl {
				for i := 0; i < int(nl); i++ {
					if defs[i] != cp.maxDef {
						return d.fail(row+i, formats.ErrNull, "the value is null")
					}
				}
			}
			if e := emitScalar(d, row, vals[:nv]); e != nil {
				return e
			}
			row += int(nl)
		}
		return nil
	}
	reps = sc.rep[:chunkLevels]
	cur, cnt := -1, 0
	for {
		nl, nv, err := rd.ReadBatch(chunkLevels, vals, defs, reps)
		if err != nil {
			return d.corrupt(max(cur, 0), err)
		}
		if nl == 0 {
			break
		}
		if e := walkLevels(d, reps[:nl], defs[:nl], vals[:nv], &cur, &cnt); e != nil {
			return e
		}
	}
	return endList(d, cur, cnt)
}

// rawKey returns x as a signed 64-bit key; bad reports a uint64 above
// MaxInt64.
func rawKey[T number](x T, unsigned bool) (k int64, bad bool) {
	var z T
	if unsafe.Sizeof(z) == 4 {
		if unsigned {
			return int64(uint32(x)), false
		}
		return int64(x), false
	}
	k = int64(x)
	return k, unsigned && k < 0
}

// key checks and converts one key of slot si.
func (d *decoder) key(raw int64, bad bool, si, row int) (int64, *formats.Error) {
	if bad {
		return 0, d.fail(row, formats.ErrKeyRange, "key %d (uint64) does not fit key type %s", uint64(raw), d.r.schema.KeyType)
	}
	if d.r.sizes != nil {
		if raw < 0 || raw >= d.r.sizes[si] {
			return 0, d.fail(row, formats.ErrKeyRange, "key %d outside slot %d size %d", raw, si, d.r.sizes[si])
		}
		return raw + d.r.offs[si], nil
	}
	if d.r.schema.KeyType == formats.KeyU32 && (raw < 0 || raw > math.MaxUint32) {
		return 0, d.fail(row, formats.ErrKeyRange, "key %d does not fit key type %s", raw, d.r.schema.KeyType)
	}
	if d.r.ranges != nil {
		if kr := d.r.ranges[si]; raw < kr.Lo || raw-kr.Lo >= kr.Size {
			hint := ""
			if d.r.o.KeyRangeHint != "" {
				hint = " (" + d.r.o.KeyRangeHint + ")"
			}
			return 0, d.fail(row, formats.ErrKeyRange, "slot %d key %d outside [%d, %d)%s", si, raw, kr.Lo, kr.Lo+kr.Size, hint)
		}
	}
	return raw, nil
}

// keyWindow returns the keys of slot si that emitScalar stores without
// calling key: k with uint64(k-lo) < n (those of the slot's range that the
// key type holds, or every key it holds).
func (d *decoder) keyWindow(si int) (lo int64, n uint64) {
	top := d.r.schema.KeyType.Max() // < 2^63
	if d.r.ranges == nil {
		return 0, top + 1
	}
	kr := d.r.ranges[si]
	if uint64(kr.Lo) > top {
		return kr.Lo, 0
	}
	return kr.Lo, min(uint64(kr.Size), top+1-uint64(kr.Lo))
}

// emitScalar stores the values of rows [row, row+len(vals)) of a scalar
// column.
func emitScalar[T number](d *decoder, row int, vals []T) *formats.Error {
	if len(vals) == 0 {
		return nil
	}
	cp, b, s := d.cp, d.b, d.r.schema
	switch cp.group {
	case gLabel, gDense:
		f, W := b.labels, s.LabelDim
		if cp.group == gDense {
			f, W = b.dense, s.DenseDim
		}
		scatter(f[row*W+cp.dst:], vals, W)
		return nil
	}
	si, S := cp.dst, len(s.Slots)
	if b.fp.fixed {
		base := row*S + si
		i64 := s.KeyType == formats.KeyI64
		if d.r.sizes == nil {
			// Every key in its window (a signed int64 key needs no check
			// without ranges) is stored as is; otherwise the loop below
			// reports the first that is not.
			lo, n := d.keyWindow(si)
			switch {
			case i64 && !cp.unsigned && d.r.ranges == nil:
				scatterKeys(b.k64[base:], vals, S, cp.unsigned)
				return nil
			case i64 && scatterKeysIn(b.k64[base:], vals, S, cp.unsigned, lo, n),
				!i64 && scatterKeysIn(b.k32[base:], vals, S, cp.unsigned, lo, n):
				return nil
			}
		}
		for i, x := range vals {
			rk, bad := rawKey(x, cp.unsigned)
			k, e := d.key(rk, bad, si, row+i)
			if e != nil {
				return e
			}
			if i64 {
				b.k64[base+i*S] = k
			} else {
				b.k32[base+i*S] = uint32(k)
			}
		}
		return nil
	}
	off := b.off[si]
	for i, x := range vals {
		rk, bad := rawKey(x, cp.unsigned)
		k, e := d.key(rk, bad, si, row+i)
		if e != nil {
			return e
		}
		if s.KeyType == formats.KeyI64 {
			b.s64[si] = append(b.s64[si], k)
			off[row+i+1] = int32(len(b.s64[si]))
		} else {
			b.s32[si] = append(b.s32[si], uint32(k))
			off[row+i+1] = int32(len(b.s32[si]))
		}
	}
	return nil
}

// scatter stores vals[i] at dst[i·stride]: one column into a sample-major
// row group (dst is a local slice, so the loop keeps it in registers).
func scatter[T number](dst []float32, vals []T, stride int) {
	if len(vals) == 0 {
		return
	}
	dst = dst[:(len(vals)-1)*stride+1]
	if stride == 1 {
		for i, x := range vals {
			dst[i] = float32(x)
		}
		return
	}
	j := 0
	for _, x := range vals {
		dst[j] = float32(x)
		j += stride
	}
}

// scatterKeys stores the keys of vals (rawKey's, known to be in range) at
// dst[i·stride].
func scatterKeys[T number, K int64 | uint32](dst []K, vals []T, stride int, unsigned bool) {
	if len(vals) == 0 {
		return
	}
	dst = dst[:(len(vals)-1)*stride+1]
	var z T
	j := 0
	if unsigned && unsafe.Sizeof(z) == 4 {
		for _, x := range vals {
			dst[j] = K(uint32(x))
			j += stride
		}
		return
	}
	for _, x := range vals {
		dst[j] = K(int64(x))
		j += stride
	}
}

// scatterKeysIn is scatterKeys checking each key in the same pass (one
// pass over vals instead of firstOutside's and scatterKeys'): it reports
// whether every key k has uint64(k-lo) < n. When one does not, the keys
// are stored all the same and the caller reports the first bad one.
func scatterKeysIn[T number, K int64 | uint32](dst []K, vals []T, stride int, unsigned bool, lo int64, n uint64) bool {
	if len(vals) == 0 {
		return true
	}
	dst = dst[:(len(vals)-1)*stride+1]
	var z T
	out := false
	j := 0
	if unsigned && unsafe.Sizeof(z) == 4 {
		for _, x := range vals {
			k := int64(uint32(x))
			out = out || uint64(k-lo) >= n
			dst[j] = K(k)
			j += stride
		}
		return !out
	}
	for _, x := range vals {
		k := int64(x)
		out = out || uint64(k-lo) >= n
		dst[j] = K(k)
		j += stride
	}
	return !out
}

// emitOne stores value cnt of row cur of a list column.
func emitOne[T number](d *decoder, cur, cnt int, x T) *formats.Error {
	cp, b, s := d.cp, d.b, d.r.schema
	switch cp.group {
	case gLabel, gDense:
		if cnt >= cp.width {
			return d.fail(cur, formats.ErrSchema, "list row holds more than %d values", cp.width)
		}
		f, W := b.labels, s.LabelDim
		if cp.group == gDense {
			f, W = b.dense, s.DenseDim
		}
		f[cur*W+cp.dst+cnt] = float32(x)
		return nil
	}
	si := cp.dst
	if m := s.Slots[si].MaxNNZ; m > 0 && cnt >= m {
		return d.fail(cur, formats.ErrNNZ, "more than %d keys in a row, slot %d's max nnz (--nnz-array sets it; without it a slot whose column is a scalar in the list's first file is one-hot)", m, si)
	}
	rk, bad := rawKey(x, cp.unsigned)
	k, e := d.key(rk, bad, si, cur)
	if e != nil {
		return e
	}
	if s.KeyType == formats.KeyI64 {
		b.s64[si] = append(b.s64[si], k)
	} else {
		b.s32[si] = append(b.s32[si], uint32(k))
	}
	return nil
}

// endRow closes row cur of a list column holding cnt values.
func endRow(d *decoder, cur, cnt int) *formats.Error {
	cp, b := d.cp, d.b
	if cp.group != gCat {
		if cnt != cp.width {
			return d.fail(cur, formats.ErrSchema, "list row holds %d values, want %d", cnt, cp.width)
		}
		return nil
	}
	n := len(b.s32[cp.dst]) + len(b.s64[cp.dst])
	if n > math.MaxInt32 {
		return d.fail(cur, formats.ErrSize, "more than %d keys in one row group slot", math.MaxInt32)
	}
	b.off[cp.dst][cur+1] = int32(n)
	return nil
}

// Page types and the Thrift compact-protocol field types of a PageHeader
// (parquet-format's parquet.thrift), for reading the pages of a streamed
// column chunk without arrow-go's page reader.
const (
	pageData       = 0
	pageDictionary = 2
	pageDataV2     = 3

	maxRawPageSize = 1 << 30
)

// pageHeader holds the PageHeader fields the raw page path uses.
type pageHeader struct {
	typ, usize, csize int32
	hasType, hasSizes int  // fields seen: 1 each
	data, dataV2      bool // a DataPageHeader (V2) was seen
	nv, enc           int32
	nulls, defLen     int32
	repLen            int32
	defEnc, repEnc    int32 // V1: the level encodings (−1: absent)
	compressed        bool  // V2: the values are compressed (default true)
	dictHdr           bool  // a DictionaryPageHeader was seen (nv, enc are its)
}

// thriftReader decodes Thrift compact-protocol values from b; bad is set on
// truncated or malformed input (values are then 0).
type thriftReader struct {
	b   []byte
	i   int
	bad bool
}

func (t *thriftReader) byte1() byte {
	if t.i >= len(t.b) {
		t.bad = true
		return 0
	}
	t.i++
	return t.b[t.i-1]
}

func (t *thriftReader) uvarint() uint64 {
	v, n := binary.Uvarint(t.b[min(t.i, len(t.b)):])
	if n <= 0 {
		t.bad = true
		return 0
	}
	t.i += n
	return v
}

func (t *thriftReader) i32() int32 {
	v := t.uvarint()
	if v > math.MaxUint32 {
		t.bad = true
	}
	return int32(uint32(v>>1) ^ -uint32(v&1))
}

// field reads a field header after field id last: its id and type, type 0
// at the end of the struct.
// fields reads the fields of the struct at t's position up to its stop
// byte: f reads a field's value, or returns false to have it skipped (at
// nesting depth).
func (t *thriftReader) fields(depth int, f func(id int16, ft byte) bool) {
	var last int16
	for !t.bad {
		id, ft := t.field(last)
		if ft == 0 {
			return
		}
		last = id
		if !f(id, ft) {
			t.skip(ft, depth)
		}
	}
}

func (t *thriftReader) field(last int16) (int16, byte) {
	h := t.byte1()
	typ := h & 0x0f
	if typ == 0 || t.bad {
		return 0, 0
	}
	if d := int16(h >> 4); d != 0 {
		return last + d, typ
	}
	v := t.uvarint()
	return int16(uint16(v>>1) ^ -uint16(v&1)), typ
}

// skip skips a value of type typ.
func (t *thriftReader) skip(typ byte, depth int) {
	if depth > 16 {
		t.bad = true
		return
	}
	switch typ {
	case ctTrue, ctFalse:
	case ctByte:
		t.byte1()
	case 4, ctI32, ctI64:
		t.uvarint()
	case 7:
		t.i += 8
	case ctBinary:
		n := t.uvarint()
		if n > uint64(len(t.b)-min(t.i, len(t.b))) {
			t.bad = true
			return
		}
		t.i += int(n)
	case ctList, 10:
		h := t.byte1()
		n, et := uint64(h>>4), h&0x0f
		if n == 15 {
			n = t.uvarint()
		}
		// Every element takes at least a byte (bools in containers are
		// bytes), so a count beyond the bytes left is malformed.
		if n > uint64(len(t.b)-min(t.i, len(t.b))) {
			t.bad = true
			return
		}
		for k := uint64(0); k < n && !t.bad; k++ {
			t.elem(et, depth+1)
		}
	case 11:
		n := t.uvarint()
		if n == 0 {
			return
		}
		kv := t.byte1()
		if n > uint64(len(t.b)-min(t.i, len(t.b))) {
			t.bad = true
			return
		}
		for k := uint64(0); k < n && !t.bad; k++ {
			t.elem(kv>>4, depth+1)
			t.elem(kv&0x0f, depth+1)
		}
	case ctStruct:
		var last int16
		for !t.bad {
			id, ft := t.field(last)
			if ft == 0 {
				return
			}
			t.skip(ft, depth+1)
			last = id
		}
	default:
		t.bad = true
	}
	if t.i > len(t.b) {
		t.bad = true
	}
}

// elem skips one list, set or map element: bools there are a byte each.
func (t *thriftReader) elem(typ byte, depth int) {
	if typ == ctTrue || typ == ctFalse {
		t.byte1()
		return
	}
	t.skip(typ, depth)
}

// parsePageHeader decodes the PageHeader at the start of b and returns it
// with its length in bytes.
func parsePageHeader(b []byte) (pageHeader, int, error) {
	t := thriftReader{b: b}
	h := pageHeader{compressed: true, defEnc: -1, repEnc: -1}
	t.fields(0, func(id int16, ft byte) bool {
		switch {
		case id == 1 && ft == ctI32:
			h.typ, h.hasType = t.i32(), 1
		case id == 2 && ft == ctI32:
			h.usize, h.hasSizes = t.i32(), h.hasSizes+1
		case id == 3 && ft == ctI32:
			h.csize, h.hasSizes = t.i32(), h.hasSizes+1
		case (id == 5 || id == 8) && ft == ctStruct:
			v2 := id == 8
			h.data, h.dataV2 = true, v2
			t.fields(1, func(fid int16, fft byte) bool {
				switch {
				case fid == 1 && fft == ctI32:
					h.nv = t.i32()
				case !v2 && fid == 2 && fft == ctI32, v2 && fid == 4 && fft == ctI32:
					h.enc = t.i32()
				case v2 && fid == 2 && fft == ctI32:
					h.nulls = t.i32()
				case !v2 && fid == 3 && fft == ctI32:
					h.defEnc = t.i32()
				case !v2 && fid == 4 && fft == ctI32:
					h.repEnc = t.i32()
				case v2 && fid == 5 && fft == ctI32:
					h.defLen = t.i32()
				case v2 && fid == 6 && fft == ctI32:
					h.repLen = t.i32()
				case v2 && fid == 7 && (fft == ctTrue || fft == ctFalse):
					h.compressed = fft == ctTrue
				default:
					return false
				}
				return true
			})
		case id == 7 && ft == ctStruct:
			h.dictHdr = true
			t.fields(1, func(fid int16, fft byte) bool {
				switch {
				case fid == 1 && fft == ctI32:
					h.nv = t.i32()
				case fid == 2 && fft == ctI32:
					h.enc = t.i32()
				default:
					return false
				}
				return true
			})
		default:
			return false
		}
		return true
	})
	if t.bad || t.i > len(b) {
		return h, 0, errors.New("truncated or malformed page header")
	}
	if h.hasType == 0 || h.hasSizes != 2 {
		return h, 0, errors.New("page header lacks its type or sizes")
	}
	return h, t.i, nil
}

// nextRawPage moves d to the next data page of its streamed column chunk,
// whose values are size bytes each; row is the row it will start at. The
// checks are those of arrow-go's page reader (page sizes, uncompressed
// length), plus those of nextPage. An uncompressed page's values are then
// read from the stream as they are consumed (moreValues); a snappy page is
// read whole and decompressed.
func (d *decoder) nextRawPage(row, size int) *formats.Error {
	st := &d.st
	st.skip(d.tail) // the rest of the previous page
	d.stream, d.tail, d.left, d.dict.paged = false, 0, 0, false
	h, codec, end, e := d.rawDataPage(row)
	if e != nil {
		return e
	}
	if end {
		return d.fail(row, formats.ErrCorrupt, "column chunk ends after %d of %d rows", d.b.at+row, d.rows)
	}
	optional := d.cp.maxDef != 0
	var lv int64 // level bytes before a v2 page's values
	if h.typ == pageDataV2 {
		if h.nulls != 0 && !optional {
			return d.fail(row, formats.ErrNull, "page of a required column holds %d nulls", h.nulls)
		}
		lv = int64(h.defLen) + int64(h.repLen)
	}
	body, usize := int64(h.csize)-lv, int64(h.usize)-lv
	nv := int64(h.nv)
	dict := dictEncoded(h.enc)
	if codec == compress.Codecs.Uncompressed && body != usize {
		return d.corrupt(row, fmt.Errorf("metadata said %d bytes uncompressed data page, got %d bytes", usize, body))
	}
	// An optional column's levels: a v2 page's before its body, a v1
	// page's at the start of its data, read here when the data is
	// streamed, else from the data (dataLevels).
	v1 := optional && h.typ != pageDataV2
	switch {
	case optional && h.typ == pageDataV2:
		if e := d.v2Levels(row, h, lv); e != nil {
			return e
		}
	case v1 && codec == compress.Codecs.Uncompressed && !dict:
		var e *formats.Error
		if body, e = d.streamedV1Levels(row, h, body); e != nil {
			return e
		}
		usize, v1 = body, false
	default:
		st.skip(lv)
	}
	if codec == compress.Codecs.Uncompressed && !dict {
		if nv*int64(size) > body {
			return d.fail(row, formats.ErrCorrupt, "page of %d bytes cannot hold %d values of %d bytes", body, nv, size)
		}
		// Values after a header of odd length are misaligned; plainT
		// views them in place where viewUnaligned, else copies them
		// through a small scratch, which costs less than realigning the
		// window (moving up to a window per page).
		d.stream, d.left, d.tail = true, int(nv), body-nv*int64(size)
		st.short = false // values are read through whole windows
		d.take(size)
		return nil
	}
	// A compressed page that fits the window is read through it; a larger
	// one into the task's scratch, so that windows stay small. A literal
	// is viewed in the column's own window (which stays until the page is
	// consumed), not in the task's scratch, which the task's next column
	// reuses; a larger page predicted to be a literal (litPages) is read
	// into the column's own dec and viewed there.
	if err := compressedFits(body, usize, codec); err != nil {
		return d.corrupt(row, err)
	}
	own := codec == compress.Codecs.Snappy && d.litPages
	src, inWindow, err := d.pageBody(int(body), own || dict && codec == compress.Codecs.Uncompressed)
	if err != nil {
		return d.corrupt(row, err)
	}
	data, err := d.values(src, int(usize), codec, inWindow || own)
	if err != nil {
		return d.corrupt(row, err)
	}
	if v1 {
		var e *formats.Error
		if data, e = d.dataLevels(row, h, data); e != nil {
			return e
		}
	}
	if dict {
		// Its indices are decoded dictChunk at a time as the values are
		// consumed (moreDict); nv is bounded by nothing but the page, so
		// no more than a chunk is materialized.
		d.left = int(nv)
		return d.startDictPage(row, data)
	}
	if nv*int64(size) > int64(len(data)) {
		return d.fail(row, formats.ErrCorrupt, "page of %d bytes cannot hold %d values of %d bytes", len(data), nv, size)
	}
	d.page, d.left = data[:nv*int64(size)], int(nv)
	return nil
}

// rawDataPage moves d's stream to the next data page of its column chunk,
// skipping index and unknown pages, and returns its header (checked as
// arrow-go's page reader checks it) and the codec of its values, with the
// stream at the page's body. end reports the end of the chunk.
func (d *decoder) rawDataPage(row int) (h pageHeader, codec compress.Compression, end bool, e *formats.Error) {
	st := &d.st
	for {
		if st.left() == 0 {
			return h, codec, true, nil
		}
		h, n, err := d.pageHeader()
		if err != nil {
			return h, codec, false, d.corrupt(row, err)
		}
		if h.csize < 0 || h.usize < 0 || h.usize > maxRawPageSize {
			return h, codec, false, d.corrupt(row, fmt.Errorf("invalid page header (page sizes %d compressed, %d uncompressed)", h.csize, h.usize))
		}
		if rest := st.left() - int64(n); int64(h.csize) > rest {
			return h, codec, false, d.corrupt(row, fmt.Errorf("page of %d bytes runs past the end of its column chunk (%d bytes left)", h.csize, rest))
		}
		st.skip(int64(n))
		switch h.typ {
		case pageData, pageDataV2:
			if !h.data || h.dataV2 != (h.typ == pageDataV2) {
				return h, codec, false, d.corrupt(row, errors.New("data page without its data page header"))
			}
			if h.nv < 0 {
				return h, codec, false, d.corrupt(row, errors.New("invalid page header (negative number of values)"))
			}
			switch {
			case parquet.Encoding(h.enc) == parquet.Encodings.Plain:
			case dictEncoded(h.enc) && d.dict.loaded:
			case dictEncoded(h.enc):
				return h, codec, false, d.fail(row, formats.ErrCorrupt, "dictionary-encoded page without a dictionary page before it")
			default:
				return h, codec, false, d.fail(row, formats.ErrCorrupt, "page encoding %s, the column chunk lists only PLAIN and dictionary values", parquet.Encoding(h.enc))
			}
			d.dict.dataSeen = true
			codec = d.codec
			if h.typ == pageDataV2 {
				if h.defLen < 0 || h.repLen < 0 {
					return h, codec, false, d.corrupt(row, errors.New("invalid page header (negative levels byte length)"))
				}
				if lv := int64(h.defLen) + int64(h.repLen); lv > int64(h.csize) || lv > int64(h.usize) {
					return h, codec, false, d.fail(row, formats.ErrCorrupt, "page levels of %d bytes in a page of %d", lv, h.csize)
				}
				if !h.compressed {
					codec = compress.Codecs.Uncompressed
				}
			}
			return h, codec, false, nil
		case pageDictionary:
			if !streamDicts {
				return h, codec, false, d.fail(row, formats.ErrCorrupt, "dictionary page in a column chunk without one")
			}
			if e := d.loadDict(row, h); e != nil {
				return h, codec, false, e
			}
		default:
			st.skip(int64(h.csize)) // index pages and unknown types, as arrow-go
		}
	}
}

// pageBody reads the next n bytes of the stream: through the window when
// they fit it (inWindow), else into the task's scratch, or, when keep (an
// uncompressed page whose bytes are read on after other columns have used
// the scratch: a list page, a dictionary-encoded page; or a snappy page
// predicted to be one literal, viewed there), into d's own decompression
// buffer. A page larger than the window leaves the stream short (the next
// page header is read alone, not with a window of the body after it).
func (d *decoder) pageBody(n int, keep bool) (src []byte, inWindow bool, err error) {
	st := &d.st
	big := n > max(len(st.buf), streamWindow)
	st.short = big
	if !big {
		if err := st.fill(d.r.pool, n); err != nil {
			return nil, true, err
		}
		return st.take(n), true, nil
	}
	if keep {
		if cap(d.dec) < n {
			if d.dec != nil {
				d.r.pool.Free(d.dec)
			}
			d.dec = d.r.pool.Allocate(n)
		}
		src = d.dec[:n]
	} else {
		if cap(d.sc.comp) < n {
			d.sc.comp = make([]byte, n)
		}
		src = d.sc.comp[:n]
	}
	return src, false, st.read(src)
}

// compressedFits checks, before a page body is read (and allocated for),
// that body compressed bytes can hold usize bytes of data: no valid snappy
// block of usize bytes is longer than maxSnappyBlock(usize).
func compressedFits(body, usize int64, codec compress.Compression) error {
	if codec != compress.Codecs.Snappy {
		return nil
	}
	if body > maxSnappyBlock(usize) {
		return fmt.Errorf("snappy page of %d bytes for %d bytes of data", body, usize)
	}
	return nil
}

// maxSnappyBlock bounds the length of a valid snappy block of n bytes of
// data: its length (a varint of at most 5 bytes), then elements each of
// which emits at least one byte for at most five (a copy with a 4-byte
// offset). Encoders stay far below it but not at one bound: the C++
// library (pyarrow, Spark, DuckDB) cuts its input into 64 KiB fragments,
// an incompressible one a literal of its own, 3 bytes of tag each, beyond
// the single literal that s2.MaxEncodedLen allows for.
func maxSnappyBlock(n int64) int64 { return 5 + 5*n }

// values returns the n bytes that the page body src decompresses to; a
// snappy literal is viewed in place when view (src lies in the column's
// window or its dec: see nextRawPage for why not in the task's scratch).
// It records whether the page was a literal (litPages); a body read into
// dec that is not one is decompressed into another buffer from the pool
// (dec is where the values go), dec going back to the pool: no copy.
func (d *decoder) values(src []byte, n int, codec compress.Compression, view bool) ([]byte, error) {
	if codec == compress.Codecs.Snappy {
		lit, ok := snappyLiteral(src, n, codec)
		d.litPages = ok
		if ok && view {
			return lit, nil
		}
		if len(src) > 0 && cap(d.dec) > 0 && unsafe.SliceData(src) == unsafe.SliceData(d.dec) {
			// Decompressed into a buffer of its own, the body's going
			// back to the pool after.
			body := d.dec
			d.dec = nil
			defer d.r.pool.Free(body)
		}
	}
	return d.inflate(src, n, codec)
}

// pageHeader parses the page header at the stream's position, reading as
// much of the chunk as it turns out to need (up to maxPageHeader); it
// returns the header and its length, leaving the stream before it.
func (d *decoder) pageHeader() (pageHeader, int, error) {
	st := &d.st
	for want := 256; ; want *= 16 {
		k := int(min(int64(want), st.left(), maxPageHeader))
		if err := st.fill(d.r.pool, k); err != nil {
			return pageHeader{}, 0, err
		}
		h, n, err := parsePageHeader(st.buf[st.lo:st.hi])
		if err == nil || int64(st.avail()) >= st.left() || st.avail() >= maxPageHeader {
			return h, n, err
		}
	}
}

// take sets d.page to the whole values of the current uncompressed page
// that lie in the window (size bytes each), consuming them from the stream.
func (d *decoder) take(size int) {
	n := min(d.st.avail()/size, d.left)
	d.page = d.st.take(n * size)
}

// moreValues reads on in the current uncompressed page, whose next value
// does not lie wholly in the window.
func (d *decoder) moreValues(row, size int) *formats.Error {
	if err := d.st.load(d.r.pool, size); err != nil {
		return d.corrupt(row, err)
	}
	d.take(size)
	return nil
}

// snappyLiteral returns the n bytes that the snappy block src decompresses
// to when the block is one literal (an incompressible page, as the dense
// float columns of Criteo data are): they lie in src itself, so the page
// is not copied into a decompression buffer. ok is false for any other
// block, which inflate decodes (and checks).
func snappyLiteral(src []byte, n int, codec compress.Compression) (lit []byte, ok bool) {
	if codec != compress.Codecs.Snappy {
		return nil, false
	}
	v, k := binary.Uvarint(src)
	if k <= 0 || v != uint64(n) || n == 0 || k >= len(src) {
		return nil, false
	}
	src = src[k:]
	tag := src[0]
	if tag&3 != 0 { // not a literal
		return nil, false
	}
	hdr, l := 1, int(tag>>2)
	if l >= 60 { // the length-1 in the next 1-4 bytes, little endian
		nb := l - 59
		if len(src) < 1+nb {
			return nil, false
		}
		l = 0
		for i := nb; i >= 1; i-- {
			l = l<<8 | int(src[i])
		}
		hdr += nb
	}
	if l+1 != n || len(src)-hdr != n {
		return nil, false
	}
	return src[hdr:], true
}

// inflate returns the n bytes that src decompresses to: src itself when
// uncompressed, else d's decompression buffer.
func (d *decoder) inflate(src []byte, n int, codec compress.Compression) ([]byte, error) {
	switch codec {
	case compress.Codecs.Uncompressed:
		if len(src) != n {
			return nil, fmt.Errorf("metadata said %d bytes uncompressed data page, got %d bytes", n, len(src))
		}
		return src, nil
	case compress.Codecs.Snappy:
		got, err := s2.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("could not decompress page: %w", err)
		}
		if got != n {
			return nil, fmt.Errorf("metadata said %d bytes uncompressed data page, got %d bytes", n, got)
		}
		if cap(d.dec) < n {
			if d.dec != nil {
				d.r.pool.Free(d.dec)
			}
			d.dec = d.r.pool.Allocate(n)
		}
		out, err := s2.Decode(d.dec[:n], src)
		if err != nil {
			return nil, fmt.Errorf("could not decompress page: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("codec %s on the raw page path", codec)
}
