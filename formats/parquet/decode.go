package parquet

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/ctrkit/ctrkit/formats"
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

// decoder is the state of one (row group × column) task.
type decoder struct {
	r        *Reader
	b        *rgBuf
	cp       *colPlan
	sc       *scratch
	chunkOff int64

	// A column chunk is read either through arrow-go's typed column reader
	// (cr) or, when it is a required scalar of plain pages without a
	// dictionary, page by page (pr): the values are then scattered straight
	// from the decompressed page, left of them remaining in page.
	cr   file.ColumnChunkReader
	pr   file.PageReader
	page []byte
	left int
}

// littleEndian reports whether this machine stores numbers as Parquet's
// PLAIN encoding does, so a page's bytes can be viewed as values.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// plainOnly reports whether a column chunk's pages can be read directly: a
// required scalar column, no dictionary page, and only PLAIN values (RLE and
// BIT_PACKED being level encodings).
func plainOnly(cp *colPlan, cc *metadata.ColumnChunkMetaData) bool {
	if !littleEndian || cp.list || cp.maxDef != 0 || cc.HasDictionaryPage() || cc.CryptoMetadata() != nil {
		return false
	}
	for _, e := range cc.Encodings() {
		switch e {
		case parquet.Encodings.Plain, parquet.Encodings.RLE, parquet.Encodings.BitPacked:
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
	d.cr, d.pr, d.page, d.left = nil, nil, nil, 0
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

// decodeRowGroup decodes row group b.rg of b.fp into b and closes b.done.
// Scalar columns are decoded rowChunk rows at a time, all columns of one
// chunk before the next; list columns whole, one after the other. Each
// column keeps its first error; after a chunk in which a column failed no
// further chunk is decoded (later errors lie on later rows), and finish
// picks the lowest row, then the first column, as decoding every column to
// its first error would.
func (r *Reader) decodeRowGroup(ctx context.Context, b *rgBuf) {
	defer b.finish()
	fp := b.fp
	f, err := os.Open(fp.path)
	if err != nil {
		b.err = &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: -1, Op: "open", Err: err}
		return
	}
	rd, err := file.NewParquetReader(f, file.WithMetadata(fp.md), file.WithReadProps(r.props))
	if err != nil {
		f.Close()
		b.err = &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: -1, Op: "open", Err: fmt.Errorf("%w: %w", formats.ErrCorrupt, err)}
		return
	}
	defer rd.Close()
	defer func() {
		for ci := range b.decs {
			b.decs[ci].close()
		}
	}()
	rg := rd.RowGroup(b.rg)
	failed := false
	for ci := range fp.cols {
		b.decs[ci] = decoder{r: r, b: b, cp: &fp.cols[ci], sc: &b.sc, chunkOff: -1}
		if e := b.decs[ci].open(rg); e != nil {
			b.errs[ci], failed = e, true
		}
	}
	for ci := range fp.cols {
		if d := &b.decs[ci]; d.cr != nil && d.cp.list {
			b.errs[ci] = d.run(0, 0)
		}
	}
	for row := 0; row < b.rows && !failed; row += rowChunk {
		if ctx.Err() != nil {
			b.err = errClosed
			return
		}
		n := min(rowChunk, b.rows-row)
		for ci := range fp.cols {
			d := &b.decs[ci]
			if (d.cr == nil && d.pr == nil) || d.cp.list || b.errs[ci] != nil {
				continue
			}
			if e := d.run(row, n); e != nil {
				b.errs[ci], failed = e, true
			}
		}
	}
}

// open opens the column chunk reader of d's column into d.b.crs.
func (d *decoder) open(rg *file.RowGroupReader) (ferr *formats.Error) {
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
		if plainOnly(cp, cc) && rg.MetaData().Schema.Column(cp.leaf).PhysicalType() == cp.phys {
			pr, err := rg.GetColumnPageReader(cp.leaf)
			if err != nil {
				return d.corrupt(0, err)
			}
			d.pr = pr
			return nil
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
	if d.pr != nil {
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

// plainT decodes rows [row, row+n) of a column read page by page: each
// page's values are viewed in place (copied to scratch only if the page
// buffer is misaligned) and scattered into the row group.
func plainT[T number](d *decoder, vp *[]T, row, n int) *formats.Error {
	var z T
	size := int(unsafe.Sizeof(z))
	for end := row + n; row < end; {
		if d.left == 0 {
			if e := d.nextPage(row, size); e != nil {
				return e
			}
			continue
		}
		k := min(end-row, d.left)
		var vals []T
		if p := unsafe.Pointer(unsafe.SliceData(d.page)); uintptr(p)%uintptr(size) == 0 {
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
	if !d.pr.Next() {
		if err := d.pr.Err(); err != nil {
			return d.corrupt(row, err)
		}
		return d.fail(row, formats.ErrCorrupt, "column chunk ends after %d of %d rows", row, d.b.rows)
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
	sc, cp, rows := d.sc, d.cp, d.b.rows
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
				return d.fail(row, formats.ErrCorrupt, "column chunk ends after %d of %d rows", row, rows)
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
		nl, _, err := rd.ReadBatch(chunkLevels, vals, defs, reps)
		if err != nil {
			return d.corrupt(max(cur, 0), err)
		}
		if nl == 0 {
			break
		}
		vi := 0
		for i := 0; i < int(nl); i++ {
			if reps[i] == 0 {
				if cur >= 0 {
					if e := endRow(d, cur, cnt); e != nil {
						return e
					}
				}
				cur++
				cnt = 0
				if cur >= rows {
					return d.fail(cur, formats.ErrCorrupt, "column chunk holds more than the row group's %d rows", rows)
				}
			} else if cur < 0 {
				return d.fail(0, formats.ErrCorrupt, "first repetition level is %d, want 0", reps[i])
			}
			switch dl := defs[i]; {
			case dl == cp.maxDef:
				if e := emitOne(d, cur, cnt, vals[vi]); e != nil {
					return e
				}
				vi++
				cnt++
			case dl >= cp.repDef:
				return d.fail(cur, formats.ErrNull, "null list element")
			case dl >= cp.listDef:
				// empty list
			default:
				return d.fail(cur, formats.ErrNull, "null list")
			}
		}
	}
	if cur >= 0 {
		if e := endRow(d, cur, cnt); e != nil {
			return e
		}
	}
	if cur+1 != rows {
		return d.fail(cur+1, formats.ErrCorrupt, "column chunk ends after %d of %d rows", cur+1, rows)
	}
	return nil
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
	return raw, nil
}

// emitScalar stores the values of rows [row, row+len(vals)) of a scalar
// column.
func emitScalar[T number](d *decoder, row int, vals []T) *formats.Error {
	cp, b, s := d.cp, d.b, d.r.schema
	switch cp.group {
	case gLabel, gDense:
		f, W := b.labels, s.LabelDim
		if cp.group == gDense {
			f, W = b.dense, s.DenseDim
		}
		if W == 1 {
			dst := f[row : row+len(vals)]
			for i, x := range vals {
				dst[i] = float32(x)
			}
		} else {
			base := row*W + cp.dst
			for i, x := range vals {
				f[base+i*W] = float32(x)
			}
		}
		return nil
	}
	si, S := cp.dst, len(s.Slots)
	plain := d.r.sizes == nil && !cp.unsigned
	if b.fp.fixed {
		base := row*S + si
		if s.KeyType == formats.KeyI64 {
			if plain {
				for i, x := range vals {
					b.k64[base+i*S] = int64(x)
				}
				return nil
			}
			for i, x := range vals {
				rk, bad := rawKey(x, cp.unsigned)
				k, e := d.key(rk, bad, si, row+i)
				if e != nil {
					return e
				}
				b.k64[base+i*S] = k
			}
			return nil
		}
		for i, x := range vals {
			k, bad := rawKey(x, cp.unsigned)
			if bad || d.r.sizes != nil || uint64(k) > math.MaxUint32 {
				var e *formats.Error
				if k, e = d.key(k, bad, si, row+i); e != nil {
					return e
				}
			}
			b.k32[base+i*S] = uint32(k)
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
		return d.fail(cur, formats.ErrNNZ, "more than %d keys (slot %d max nnz)", m, si)
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
