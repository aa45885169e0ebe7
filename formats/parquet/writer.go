package parquet

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/ctrkit/ctrkit/formats"
)

// DefaultRowGroupSize is the default of WriterOptions.RowGroupSize: 128Ki
// rows, about 21 MB decoded for the Criteo shape.
const DefaultRowGroupSize = 1 << 17

// WriterOptions are the Parquet writer options; the zero value writes snappy
// row groups of DefaultRowGroupSize rows with int64 cats.
type WriterOptions struct {
	// Compression is "snappy" (default), "zstd" or "none".
	Compression string
	// RowGroupSize is the number of rows per row group (default
	// DefaultRowGroupSize); the last row group of a file may be shorter.
	RowGroupSize int
	// CatType is the physical type of cat columns: "int64" (default),
	// "int32", "uint32" or "uint64" (the unsigned ones as INT32/INT64 with
	// the unsigned integer logical type).
	CatType string
	// Dictionary enables dictionary encoding (pyarrow's default). Off by
	// default: plain pages decode fastest.
	Dictionary bool
}

// Validate checks the options.
func (o *WriterOptions) Validate() error {
	if _, err := o.codec(); err != nil {
		return err
	}
	if _, _, err := o.catType(); err != nil {
		return err
	}
	if o.RowGroupSize < 0 {
		return fmt.Errorf("ctrkit/parquet: row group size %d must be > 0", o.RowGroupSize)
	}
	return nil
}

func (o *WriterOptions) codec() (compress.Compression, error) {
	switch o.Compression {
	case "", "snappy":
		return compress.Codecs.Snappy, nil
	case "zstd":
		return compress.Codecs.Zstd, nil
	case "none", "uncompressed":
		return compress.Codecs.Uncompressed, nil
	}
	return 0, fmt.Errorf("ctrkit/parquet: unknown compression %q (want snappy, zstd or none)", o.Compression)
}

// catType returns the bit width and signedness of cat columns.
func (o *WriterOptions) catType() (bits int, signed bool, err error) {
	switch o.CatType {
	case "", "int64":
		return 64, true, nil
	case "uint64":
		return 64, false, nil
	case "int32":
		return 32, true, nil
	case "uint32":
		return 32, false, nil
	}
	return 0, false, fmt.Errorf("ctrkit/parquet: unknown cat type %q (want int64, int32, uint32 or uint64)", o.CatType)
}

// Writer writes one Parquet file in NVTabular's layout (see the package
// doc). It implements formats.Writer.
type Writer struct {
	path  string
	s     formats.Schema
	o     WriterOptions
	f     *formats.File
	bw    *bufio.Writer
	pw    *file.Writer
	bits  int
	sign  bool
	list  []bool // per slot: list column
	rgLen int

	// Row-group buffers, column-major.
	labels [][]float32
	dense  [][]float32
	k64    [][]int64 // per slot, when bits == 64
	k32    [][]int32 // per slot, when bits == 32
	defs   [][]int16 // per list slot
	reps   [][]int16
	nbuf   int
	rows   int64
	err    error
	done   bool
}

var _ formats.Writer = (*Writer)(nil)

// Create creates the Parquet file path (under a temporary name until Close)
// for samples of schema s.
func Create(path string, s *formats.Schema, o WriterOptions) (*Writer, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	codec, _ := o.codec()
	bits, sign, _ := o.catType()
	if o.RowGroupSize == 0 {
		o.RowGroupSize = DefaultRowGroupSize
	}
	w := &Writer{path: path, s: s.Clone(), o: o, bits: bits, sign: sign, rgLen: o.RowGroupSize}
	root, err := w.fileSchema()
	if err != nil {
		return nil, err
	}
	f, err := formats.CreateFile(path)
	if err != nil {
		return nil, err
	}
	w.f = f
	w.bw = bufio.NewWriterSize(f, 1<<20)
	props := parquet.NewWriterProperties(
		parquet.WithCompression(codec),
		parquet.WithDictionaryDefault(o.Dictionary),
		parquet.WithDataPageVersion(parquet.DataPageV1),
		parquet.WithMaxRowGroupLength(int64(o.RowGroupSize)),
		parquet.WithCreatedBy("ctrkit"),
	)
	pw, err := file.NewParquetWriterWithError(w.bw, root, file.WithWriterProps(props))
	if err != nil {
		f.Abort()
		return nil, fmt.Errorf("ctrkit/parquet: creating %s: %w", path, err)
	}
	w.pw = pw
	w.labels = make([][]float32, s.LabelDim)
	w.dense = make([][]float32, s.DenseDim)
	S := len(s.Slots)
	w.k64, w.k32 = make([][]int64, S), make([][]int32, S)
	w.defs, w.reps = make([][]int16, S), make([][]int16, S)
	return w, nil
}

// fileSchema builds the Parquet schema: label columns, I1..In, C1..Cm.
func (w *Writer) fileSchema() (*schema.GroupNode, error) {
	var fields schema.FieldList
	req := parquet.Repetitions.Required
	add := func(n schema.Node, err error) error {
		if err != nil {
			return err
		}
		fields = append(fields, n)
		return nil
	}
	for i := 0; i < w.s.LabelDim; i++ {
		if err := add(schema.NewPrimitiveNode(labelName(i), req, parquet.Types.Float, -1, -1)); err != nil {
			return nil, err
		}
	}
	for i := 0; i < w.s.DenseDim; i++ {
		if err := add(schema.NewPrimitiveNode(fmt.Sprintf("I%d", i+1), req, parquet.Types.Float, -1, -1)); err != nil {
			return nil, err
		}
	}
	phys := parquet.Types.Int64
	if w.bits == 32 {
		phys = parquet.Types.Int32
	}
	w.list = make([]bool, len(w.s.Slots))
	for i, sl := range w.s.Slots {
		name := fmt.Sprintf("C%d", i+1)
		w.list[i] = !(sl.Hotness == 1 || (sl.Hotness == 0 && sl.MaxNNZ == 1))
		if !w.list[i] {
			if err := add(schema.NewPrimitiveNodeLogical(name, req, schema.NewIntLogicalType(int8(w.bits), w.sign), phys, -1, -1)); err != nil {
				return nil, err
			}
			continue
		}
		el, err := schema.NewPrimitiveNodeLogical("element", req, schema.NewIntLogicalType(int8(w.bits), w.sign), phys, -1, -1)
		if err != nil {
			return nil, err
		}
		if err := add(schema.ListOfWithName(name, el, req, -1)); err != nil {
			return nil, err
		}
	}
	return schema.NewGroupNode("schema", req, fields, -1)
}

// NumRows returns the number of rows written so far.
func (w *Writer) NumRows() int64 { return w.rows }

// Path returns the final path of the file.
func (w *Writer) Path() string { return w.path }

// Metadata returns the _metadata.json content describing this file alone
// (file_name is the base name).
func (w *Writer) Metadata() *Metadata {
	return MetadataFor(&w.s, []FileStat{{FileName: filepath.Base(w.path), NumRows: w.rows}})
}

// Write implements formats.Writer.
func (w *Writer) Write(b *formats.Batch) error {
	return w.writeRange(b, 0, b.N)
}

func (w *Writer) writeRange(b *formats.Batch, lo, hi int) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("ctrkit/parquet: write after Close or Abort")
	}
	s := b.Schema
	if s.LabelDim != w.s.LabelDim || s.DenseDim != w.s.DenseDim || len(s.Slots) != len(w.s.Slots) {
		return fmt.Errorf("ctrkit/parquet: batch shape %d/%d/%d, writer schema %d/%d/%d",
			s.LabelDim, s.DenseDim, len(s.Slots), w.s.LabelDim, w.s.DenseDim, len(w.s.Slots))
	}
	for lo < hi {
		k := min(hi-lo, w.rgLen-w.nbuf)
		if err := w.buffer(b, lo, lo+k); err != nil {
			w.err = err
			return err
		}
		lo += k
		if w.nbuf == w.rgLen {
			if err := w.flush(); err != nil {
				w.err = err
				return err
			}
		}
	}
	return nil
}

// buffer appends samples [lo, hi) of b to the row-group buffers.
func (w *Writer) buffer(b *formats.Batch, lo, hi int) error {
	L, D, S := w.s.LabelDim, w.s.DenseDim, len(w.s.Slots)
	for j := 0; j < L; j++ {
		for i := lo; i < hi; i++ {
			w.labels[j] = append(w.labels[j], b.Labels[i*L+j])
		}
	}
	for j := 0; j < D; j++ {
		for i := lo; i < hi; i++ {
			w.dense[j] = append(w.dense[j], b.Dense[i*D+j])
		}
	}
	var lim uint64 = math.MaxInt64
	if w.bits == 32 && w.sign {
		lim = math.MaxInt32
	} else if w.bits == 32 {
		lim = math.MaxUint32
	}
	for si := 0; si < S; si++ {
		for i := lo; i < hi; i++ {
			klo, khi := b.Row(i, si)
			n := khi - klo
			rec := w.rows + int64(w.nbuf+i-lo)
			if !w.list[si] && n != 1 {
				return formats.Errorf("parquet", w.path, -1, rec, formats.ErrNNZ, "slot %d holds %d keys; column C%d is scalar (max nnz 1)", si, n, si+1)
			}
			if w.list[si] {
				if n == 0 {
					w.defs[si] = append(w.defs[si], 0)
					w.reps[si] = append(w.reps[si], 0)
				}
				for j := 0; j < n; j++ {
					w.defs[si] = append(w.defs[si], 1)
					w.reps[si] = append(w.reps[si], int16(min(j, 1)))
				}
			}
			for j := klo; j < khi; j++ {
				k := b.Key(j)
				if (k < 0 && !(w.sign && (w.bits == 64 || k >= math.MinInt32))) || (k >= 0 && uint64(k) > lim) {
					return formats.Errorf("parquet", w.path, -1, rec, formats.ErrKeyRange, "slot %d key %d does not fit cat type %s", si, k, w.catName())
				}
				if w.bits == 64 {
					w.k64[si] = append(w.k64[si], k)
				} else {
					w.k32[si] = append(w.k32[si], int32(uint32(k)))
				}
			}
		}
	}
	w.nbuf += hi - lo
	return nil
}

func (w *Writer) catName() string {
	if w.o.CatType == "" {
		return "int64"
	}
	return w.o.CatType
}

// flush writes the buffered rows as one row group.
func (w *Writer) flush() error {
	if w.nbuf == 0 {
		return nil
	}
	rgw, err := w.pw.AppendRowGroupChecked()
	if err != nil {
		return fmt.Errorf("ctrkit/parquet: writing %s: %w", w.path, err)
	}
	next := func() (file.ColumnChunkWriter, error) {
		cw, err := rgw.NextColumn()
		if err != nil {
			return nil, fmt.Errorf("ctrkit/parquet: writing %s: %w", w.path, err)
		}
		return cw, nil
	}
	for _, cols := range [][][]float32{w.labels, w.dense} {
		for j, v := range cols {
			cw, err := next()
			if err != nil {
				return err
			}
			if _, err := cw.(*file.Float32ColumnChunkWriter).WriteBatch(v, nil, nil); err != nil {
				return fmt.Errorf("ctrkit/parquet: writing %s: %w", w.path, err)
			}
			if err := cw.Close(); err != nil {
				return fmt.Errorf("ctrkit/parquet: writing %s: %w", w.path, err)
			}
			cols[j] = v[:0]
		}
	}
	for si := range w.s.Slots {
		cw, err := next()
		if err != nil {
			return err
		}
		var defs, reps []int16
		if w.list[si] {
			defs, reps = w.defs[si], w.reps[si]
		}
		if w.bits == 64 {
			_, err = cw.(*file.Int64ColumnChunkWriter).WriteBatch(w.k64[si], defs, reps)
		} else {
			_, err = cw.(*file.Int32ColumnChunkWriter).WriteBatch(w.k32[si], defs, reps)
		}
		if err == nil {
			err = cw.Close()
		}
		if err != nil {
			return fmt.Errorf("ctrkit/parquet: writing %s: %w", w.path, err)
		}
		w.k64[si], w.k32[si] = w.k64[si][:0], w.k32[si][:0]
		w.defs[si], w.reps[si] = w.defs[si][:0], w.reps[si][:0]
	}
	if err := rgw.Close(); err != nil {
		return fmt.Errorf("ctrkit/parquet: writing %s: %w", w.path, err)
	}
	w.rows += int64(w.nbuf)
	w.nbuf = 0
	return nil
}

// Close writes the last row group and the footer and moves the file to its
// final name.
func (w *Writer) Close() error {
	if w.done {
		return w.err
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	w.done = true
	err := w.flush()
	if err == nil {
		err = w.pw.Close()
	}
	if err == nil {
		err = w.bw.Flush()
	}
	if err != nil {
		w.f.Abort()
		w.err = fmt.Errorf("ctrkit/parquet: closing %s: %w", w.path, err)
		return w.err
	}
	if err := w.f.Commit(); err != nil {
		w.err = err
		return err
	}
	return nil
}

// Abort removes the temporary file.
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	if w.err == nil {
		w.err = errors.New("ctrkit/parquet: writer aborted")
	}
	return w.f.Abort()
}

// DatasetOptions are the options of NewDatasetWriter.
type DatasetOptions struct {
	WriterOptions
	// RowsPerFile starts a new file after this many rows (0: one file).
	RowsPerFile int64
	// Prefix is the data file name prefix (default "part_"): files are
	// <Prefix><k>.parquet, k from 0.
	Prefix string
}

// DatasetWriter writes a dataset directory in NVTabular's layout: data files
// plus _file_list.txt and _metadata.json, written on Close. It implements
// formats.Writer.
type DatasetWriter struct {
	dir   string
	s     formats.Schema
	o     DatasetOptions
	cur   *Writer
	stats []FileStat
	paths []string
	err   error
	done  bool
}

var _ formats.Writer = (*DatasetWriter)(nil)

// NewDatasetWriter starts a dataset in dir (created if needed).
func NewDatasetWriter(dir string, s *formats.Schema, o DatasetOptions) (*DatasetWriter, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := o.WriterOptions.Validate(); err != nil {
		return nil, err
	}
	if o.RowsPerFile < 0 {
		return nil, fmt.Errorf("ctrkit/parquet: rows per file %d must be ≥ 0", o.RowsPerFile)
	}
	if o.Prefix == "" {
		o.Prefix = "part_"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &DatasetWriter{dir: dir, s: s.Clone(), o: o}, nil
}

func (d *DatasetWriter) open() error {
	p := filepath.Join(d.dir, fmt.Sprintf("%s%d.parquet", d.o.Prefix, len(d.paths)))
	w, err := Create(p, &d.s, d.o.WriterOptions)
	if err != nil {
		return err
	}
	d.cur = w
	return nil
}

func (d *DatasetWriter) closeCur() error {
	if err := d.cur.Close(); err != nil {
		return err
	}
	d.paths = append(d.paths, d.cur.path)
	d.stats = append(d.stats, FileStat{FileName: filepath.Base(d.cur.path), NumRows: d.cur.NumRows()})
	d.cur = nil
	return nil
}

// Write implements formats.Writer.
func (d *DatasetWriter) Write(b *formats.Batch) error {
	if d.err != nil {
		return d.err
	}
	if d.done {
		return errors.New("ctrkit/parquet: write after Close or Abort")
	}
	for lo := 0; lo < b.N; {
		if d.cur == nil {
			if d.err = d.open(); d.err != nil {
				return d.err
			}
		}
		k := b.N - lo
		if d.o.RowsPerFile > 0 {
			k = int(min(int64(k), d.o.RowsPerFile-d.cur.NumRows()-int64(d.cur.nbuf)))
		}
		if d.err = d.cur.writeRange(b, lo, lo+k); d.err != nil {
			return d.err
		}
		lo += k
		if d.o.RowsPerFile > 0 && d.cur.NumRows()+int64(d.cur.nbuf) == d.o.RowsPerFile {
			if d.err = d.closeCur(); d.err != nil {
				return d.err
			}
		}
	}
	return nil
}

// Files returns the data files committed so far.
func (d *DatasetWriter) Files() []string { return append([]string(nil), d.paths...) }

// Close finishes the last file and writes _file_list.txt and
// _metadata.json. A dataset of no rows gets one empty data file.
func (d *DatasetWriter) Close() error {
	if d.done {
		return d.err
	}
	if d.err != nil {
		d.Abort()
		return d.err
	}
	d.done = true
	if d.cur == nil && len(d.paths) == 0 {
		if d.err = d.open(); d.err != nil {
			return d.err
		}
	}
	if d.cur != nil {
		if d.err = d.closeCur(); d.err != nil {
			return d.err
		}
	}
	if d.err = formats.WriteFileList(filepath.Join(d.dir, FileListName), d.paths); d.err != nil {
		return d.err
	}
	d.err = WriteMetadata(filepath.Join(d.dir, MetadataName), MetadataFor(&d.s, d.stats))
	return d.err
}

// Abort removes the current temporary file and the data files already
// committed.
func (d *DatasetWriter) Abort() error {
	if d.done {
		return nil
	}
	d.done = true
	if d.err == nil {
		d.err = errors.New("ctrkit/parquet: dataset writer aborted")
	}
	if d.cur != nil {
		d.cur.Abort()
	}
	for _, p := range d.paths {
		os.Remove(p)
	}
	return nil
}
