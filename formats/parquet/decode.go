package parquet

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet/file"

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

// decodeColumn decodes column ci of row group b.rg into b. A panic in
// arrow-go on a malformed page becomes an ErrCorrupt error.
func (r *Reader) decodeColumn(of *openFile, b *rgBuf, ci int) (ferr *formats.Error) {
	cp := &b.fp.cols[ci]
	d := &decoder{r: r, b: b, cp: cp, sc: &b.scratch[ci], chunkOff: -1}
	defer func() {
		if p := recover(); p != nil {
			ferr = d.corrupt(0, fmt.Errorf("decoder panic: %v", p))
		}
	}()
	rg := of.rd.RowGroup(b.rg)
	if cc, err := rg.MetaData().ColumnChunk(cp.leaf); err == nil {
		d.chunkOff = cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < d.chunkOff {
			d.chunkOff = cc.DictionaryPageOffset()
		}
	}
	cr, err := rg.Column(cp.leaf)
	if err != nil {
		return d.corrupt(0, err)
	}
	defer cr.Close()
	if cr.Descriptor().PhysicalType() != cp.phys {
		return d.fail(0, formats.ErrSchema, "physical type %s, footer schema says %s", cr.Descriptor().PhysicalType(), cp.phys)
	}
	switch c := cr.(type) {
	case *file.Int32ColumnChunkReader:
		return decodeT(d, c, &d.sc.i32)
	case *file.Int64ColumnChunkReader:
		return decodeT(d, c, &d.sc.i64)
	case *file.Float32ColumnChunkReader:
		return decodeT(d, c, &d.sc.f32)
	case *file.Float64ColumnChunkReader:
		return decodeT(d, c, &d.sc.f64)
	}
	return d.fail(0, formats.ErrSchema, "unsupported physical type %s", cp.phys)
}

func decodeT[T number](d *decoder, rd batchReader[T], vp *[]T) *formats.Error {
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
		for row := 0; row < rows; {
			want := min(chunkLevels, rows-row)
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
