package parquet

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
	"github.com/ctrkit/ctrkit/internal/hostmem"
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
	// Dictionary dictionary-encodes each column chunk whose dictionary
	// pays for itself (dictwriter.go), as pyarrow, cudf and NVTabular do by
	// default and `ctrkit gen` and `convert` do unless --dictionary=false;
	// off, every chunk is PLAIN. Dictionary files are smaller and read
	// faster here (docs/PERFORMANCE.md, the twentieth session).
	Dictionary bool
	// SmallerSnappy compresses snappy pages with s2's "better"
	// snappy-compatible encoder (arrow-go's default) instead of the fast
	// one: smaller files on low-entropy columns (27% smaller on
	// BenchmarkWrite's Criteo-like data with full 1 MB pages, little with
	// small pages) for about twice the compression CPU and somewhat slower
	// decoding. Ignored for other compressions.
	SmallerSnappy bool
	// Files creates the output files (nil: atomicfile.Direct, each renamed by
	// its Close; a *atomicfile.Stage commits a dataset as a unit).
	Files atomicfile.Creator
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
		return fmt.Errorf("row group size %d must be > 0", o.RowGroupSize)
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
	return 0, fmt.Errorf("unknown compression %q (want snappy, zstd or none)", o.Compression)
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
	return 0, false, fmt.Errorf("unknown cat type %q (want int64, int32, uint32 or uint64)", o.CatType)
}

// Writer writes one Parquet file in NVTabular's layout (see the package
// doc). It implements formats.Writer.
type Writer struct {
	path  string
	s     formats.Schema
	o     WriterOptions
	f     *atomicfile.File
	bw    *bufio.Writer
	own   *ownFile // ctrkit encodes the file itself (chunks.go, dictwriter.go)
	bits  int
	sign  bool
	list  []bool // per slot: list column
	rgLen int

	rg    *rowGroup // the row group being buffered
	spare *rowGroup // the buffers of the row group being written, for reuse
	// pending delivers the result of the row group being written in the
	// background; nil when none is.
	pending chan error
	nbuf    int   // rows in rg
	rows    int64 // rows handed to the background writer
	err     error
	done    bool
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
	bits, sign, _ := o.catType()
	if o.RowGroupSize == 0 {
		o.RowGroupSize = DefaultRowGroupSize
	}
	w := &Writer{path: path, s: s.Clone(), o: o, bits: bits, sign: sign, rgLen: o.RowGroupSize}
	if _, err := w.fileSchema(); err != nil {
		return nil, err
	}
	f, err := atomicfile.CreatorOr(o.Files).CreateFile(path)
	if err != nil {
		return nil, err
	}
	w.f = f
	w.bw = bufio.NewWriterSize(f, 1<<20)
	w.rg = newRowGroup(s)
	w.own = newOwnFile(o.Compression, o.SmallerSnappy, o.Dictionary)
	w.own.off = 4
	w.bw.WriteString("PAR1")
	return w, nil
}

// rowGroup holds the buffered rows of one row group, column-major.
type rowGroup struct {
	labels [][]float32
	dense  [][]float32
	k64    [][]int64 // per slot, when bits == 64
	k32    [][]int32 // per slot, when bits == 32
	defs   [][]int16 // per list slot
	reps   [][]int16
	// slab backs the scalar columns when reserve cut them from one buffer.
	slab []byte
}

// reserve gives every column of a row group of scalar columns room for
// rows values, cut from one buffer that huge pages back (formats.
// AlignedAlloc): a row group's columns are tens of MB, and first touching
// them page by page cost more than moving the rows into them. Values
// already buffered are moved along.
func (g *rowGroup) reserve(rows, bits int) {
	if g.slab != nil {
		return
	}
	per := 4*(len(g.labels)+len(g.dense)) + bits/8*len(g.k64)
	g.slab = hostmem.AlignedAlloc(rows*per, 8)
	rest := g.slab
	cut := func(size int) unsafe.Pointer {
		p := unsafe.Pointer(unsafe.SliceData(rest))
		rest = rest[rows*size:]
		return p
	}
	for j := range g.labels {
		g.labels[j] = append(unsafe.Slice((*float32)(cut(4)), rows)[:0], g.labels[j]...)
	}
	for j := range g.dense {
		g.dense[j] = append(unsafe.Slice((*float32)(cut(4)), rows)[:0], g.dense[j]...)
	}
	for si := range g.k64 {
		if bits == 64 {
			g.k64[si] = append(unsafe.Slice((*int64)(cut(8)), rows)[:0], g.k64[si]...)
		} else {
			g.k32[si] = append(unsafe.Slice((*int32)(cut(4)), rows)[:0], g.k32[si]...)
		}
	}
}

func newRowGroup(s *formats.Schema) *rowGroup {
	S := len(s.Slots)
	return &rowGroup{
		labels: make([][]float32, s.LabelDim), dense: make([][]float32, s.DenseDim),
		k64: make([][]int64, S), k32: make([][]int32, S),
		defs: make([][]int16, S), reps: make([][]int16, S),
	}
}

// reset empties the buffers, keeping their memory.
func (g *rowGroup) reset() {
	for j := range g.labels {
		g.labels[j] = g.labels[j][:0]
	}
	for j := range g.dense {
		g.dense[j] = g.dense[j][:0]
	}
	for si := range g.k64 {
		g.k64[si], g.k32[si] = g.k64[si][:0], g.k32[si][:0]
		g.defs[si], g.reps[si] = g.defs[si][:0], g.reps[si][:0]
	}
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
		return errors.New("write after Close or Abort")
	}
	s := b.Schema
	if s.LabelDim != w.s.LabelDim || s.DenseDim != w.s.DenseDim || len(s.Slots) != len(w.s.Slots) {
		return fmt.Errorf("batch shape %d/%d/%d, writer schema %d/%d/%d",
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

// bufferMin is the fewest rows one goroutine of bufferParallel moves.
const bufferMin = 8192

// buffer appends samples [lo, hi) of b to the row-group buffers.
func (w *Writer) buffer(b *formats.Batch, lo, hi int) error {
	L, D, S := w.s.LabelDim, w.s.DenseDim, len(w.s.Slots)
	n := hi - lo
	if n >= 2*bufferMin && runtime.GOMAXPROCS(0) > 1 && !slices.Contains(w.list, true) {
		return w.bufferParallel(b, lo, hi)
	}
	g := w.rg
	for j := 0; j < L; j++ {
		col := grow(g.labels[j], n, w.rgLen)
		for i := lo; i < hi; i++ {
			col = append(col, b.Labels[i*L+j])
		}
		g.labels[j] = col
	}
	for j := 0; j < D; j++ {
		col := grow(g.dense[j], n, w.rgLen)
		for i := lo; i < hi; i++ {
			col = append(col, b.Dense[i*D+j])
		}
		g.dense[j] = col
	}
	minK, maxK := w.keyRange()
	off := b.Offsets
	for si := 0; si < S; si++ {
		list := w.list[si]
		var defs, reps []int16
		if list {
			defs, reps = grow(g.defs[si], n, w.rgLen), grow(g.reps[si], n, w.rgLen)
		}
		k64, k32 := g.k64[si], g.k32[si]
		if w.bits == 64 {
			k64 = grow(k64, n, w.rgLen)
		} else {
			k32 = grow(k32, n, w.rgLen)
		}
		for i := lo; i < hi; i++ {
			klo, khi := int(off[i*S+si]), int(off[i*S+si+1])
			rec := w.rows + int64(w.nbuf+i-lo)
			if list {
				// Levels: (0, 0) for an empty list, (1, 0) for the first
				// element, (1, 1) for the others.
				if khi == klo {
					defs, reps = append(defs, 0), append(reps, 0)
				}
				for j := klo; j < khi; j++ {
					defs, reps = append(defs, 1), append(reps, int16(min(j-klo, 1)))
				}
			} else if khi-klo != 1 {
				return w.nnzError(rec, si, khi-klo)
			}
			for j := klo; j < khi; j++ {
				k := b.Key(j)
				if k < minK || k > maxK {
					return w.keyError(rec, si, k)
				}
				if w.bits == 64 {
					k64 = append(k64, k)
				} else {
					k32 = append(k32, int32(uint32(k)))
				}
			}
		}
		g.k64[si], g.k32[si] = k64, k32
		if list {
			g.defs[si], g.reps[si] = defs, reps
		}
	}
	w.nbuf += n
	return nil
}

// bufferParallel is buffer for scalar columns only and many rows: every
// column is extended by hi-lo values, then up to GOMAXPROCS goroutines each
// move a part of the rows (reading them in order, writing every column).
// The error reported is that of the first bad row (its first bad slot).
func (w *Writer) bufferParallel(b *formats.Batch, lo, hi int) error {
	L, D, S := w.s.LabelDim, w.s.DenseDim, len(w.s.Slots)
	n := hi - lo
	g := w.rg
	g.reserve(w.rgLen, w.bits)
	extend := func(col []float32) ([]float32, []float32) {
		col = grow(col, n, w.rgLen)
		return col[:len(col)+n], col[len(col) : len(col)+n]
	}
	labels, dense := make([][]float32, L), make([][]float32, D)
	for j := range L {
		g.labels[j], labels[j] = extend(g.labels[j])
	}
	for j := range D {
		g.dense[j], dense[j] = extend(g.dense[j])
	}
	k64, k32 := make([][]int64, S), make([][]int32, S)
	for si := range S {
		if w.bits == 64 {
			c := grow(g.k64[si], n, w.rgLen)
			g.k64[si], k64[si] = c[:len(c)+n], c[len(c):len(c)+n]
		} else {
			c := grow(g.k32[si], n, w.rgLen)
			g.k32[si], k32[si] = c[:len(c)+n], c[len(c):len(c)+n]
		}
	}
	parts := min(runtime.GOMAXPROCS(0), n/bufferMin)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		plo, phi := n*p/parts, n*(p+1)/parts
		wg.Go(func() {
			errs[p] = w.moveRows(b, lo, plo, phi, labels, dense, k64, k32)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	w.nbuf += n
	return nil
}

// moveBlock is the number of rows moveRows moves column by column: the
// block's offsets and keys (strided by the slot count) stay in cache while
// each column is written in turn.
const moveBlock = 256

// moveRows moves rows [plo, phi) of the range starting at batch row lo
// into the extended column slices (indexed from the range's start), one
// block of rows at a time and one column at a time. When a block holds a
// bad row, rowsError scans it row by row for the first bad row and slot.
func (w *Writer) moveRows(b *formats.Batch, lo, plo, phi int, labels, dense [][]float32, k64 [][]int64, k32 [][]int32) error {
	L, D, S := w.s.LabelDim, w.s.DenseDim, len(w.s.Slots)
	minK, maxK := w.keyRange()
	for rb := plo; rb < phi; rb += moveBlock {
		re := min(rb+moveBlock, phi)
		for j := range L {
			strided(labels[j][rb:re], b.Labels[(lo+rb)*L+j:], L)
		}
		for j := range D {
			strided(dense[j][rb:re], b.Dense[(lo+rb)*D+j:], D)
		}
		for si := range S {
			offs := b.Offsets[(lo+rb)*S+si : (lo+re-1)*S+si+2]
			var ok bool
			switch {
			case w.bits == 64 && b.Keys32 != nil:
				ok = moveKeys(k64[si][rb:re], b.Keys32, offs, S, minK, maxK)
			case w.bits == 64:
				ok = moveKeys(k64[si][rb:re], b.Keys64, offs, S, minK, maxK)
			case b.Keys32 != nil:
				ok = moveKeys(k32[si][rb:re], b.Keys32, offs, S, minK, maxK)
			default:
				ok = moveKeys(k32[si][rb:re], b.Keys64, offs, S, minK, maxK)
			}
			if !ok {
				return w.rowsError(b, lo+rb, lo+re, w.rows+int64(w.nbuf+rb))
			}
		}
	}
	return nil
}

// strided sets dst[r] = src[r*stride].
func strided(dst, src []float32, stride int) {
	if len(dst) == 0 {
		return
	}
	src = src[:(len(dst)-1)*stride+1]
	for r := range dst {
		dst[r] = src[r*stride]
	}
}

// moveKeys sets dst[r] to the one key of the slot whose offsets are
// offs[r*stride] and offs[r*stride+1]; false when a row has another key
// count or a key outside [minK, maxK] (dst is then partly written).
func moveKeys[T int32 | int64, K uint32 | int64](dst []T, keys []K, offs []int32, stride int, minK, maxK int64) bool {
	if len(dst) == 0 {
		return true
	}
	offs = offs[:(len(dst)-1)*stride+2]
	for r := range dst {
		o := offs[r*stride]
		if offs[r*stride+1]-o != 1 || uint(o) >= uint(len(keys)) {
			return false
		}
		k := int64(keys[o])
		if k < minK || k > maxK {
			return false
		}
		dst[r] = T(k)
	}
	return true
}

// rowsError is the error of the first bad row in batch rows [lo, hi), the
// first of which is record rec: a slot with other than one key, or a key
// the cat type cannot hold.
func (w *Writer) rowsError(b *formats.Batch, lo, hi int, rec int64) error {
	S := len(w.s.Slots)
	minK, maxK := w.keyRange()
	for i := lo; i < hi; i++ {
		for si := range S {
			klo, khi := b.Row(i, si)
			if khi-klo != 1 {
				return w.nnzError(rec+int64(i-lo), si, khi-klo)
			}
			if klo < 0 || klo >= max(len(b.Keys32), len(b.Keys64)) {
				return fmt.Errorf("writing %s: record %d slot %d: key index %d outside the batch", w.path, rec+int64(i-lo), si, klo)
			}
			if k := b.Key(klo); k < minK || k > maxK {
				return w.keyError(rec+int64(i-lo), si, k)
			}
		}
	}
	return fmt.Errorf("writing %s: records %d–%d rejected but none is bad", w.path, rec, rec+int64(hi-lo)-1)
}

// nnzError is the error of record rec, whose slot si holds n keys where
// its scalar column holds one.
func (w *Writer) nnzError(rec int64, si, n int) error {
	return formats.Errorf("parquet", w.path, -1, rec, formats.ErrNNZ, "slot %d holds %d keys; column C%d is scalar (max nnz 1)", si, n, si+1)
}

// keyError is the error of record rec, whose slot si holds key k that the
// cat type cannot.
func (w *Writer) keyError(rec int64, si int, k int64) error {
	return formats.Errorf("parquet", w.path, -1, rec, formats.ErrKeyRange, "slot %d key %d does not fit cat type %s", si, k, w.catName())
}

// keyRange returns the key values the cat type holds (int64 values; the
// unsigned 64-bit type holds the non-negative ones).
func (w *Writer) keyRange() (lo, hi int64) {
	switch {
	case w.bits == 64 && w.sign:
		return math.MinInt64, math.MaxInt64
	case w.bits == 64:
		return 0, math.MaxInt64
	case w.sign:
		return math.MinInt32, math.MaxInt32
	}
	return 0, math.MaxUint32
}

// grow makes room for n more elements in s, allocating a whole row group's
// worth (rg) up front so that buffering does not reallocate per batch.
func grow[T any](s []T, n, rg int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	return slices.Grow(s, max(n, rg-len(s)))
}

func (w *Writer) catName() string {
	if w.o.CatType == "" {
		return "int64"
	}
	return w.o.CatType
}

// flush hands the buffered rows to a background goroutine that writes
// them as one row group, after waiting for the previous one: buffering the
// next row group overlaps with encoding this one.
func (w *Writer) flush() error {
	if err := w.wait(); err != nil {
		return err
	}
	if w.nbuf == 0 {
		return nil
	}
	g := w.rg
	if w.spare == nil {
		w.spare = newRowGroup(&w.s)
	}
	w.rg, w.spare = w.spare, g
	n := w.nbuf
	w.rows += int64(n)
	w.nbuf = 0
	ch := make(chan error, 1)
	w.pending = ch
	go func() { ch <- w.writeOwnRowGroup(g, n) }()
	return nil
}

// wait waits for the row group being written in the background.
func (w *Writer) wait() error {
	if w.pending == nil {
		return nil
	}
	err := <-w.pending
	w.pending = nil
	return err
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
		err = w.wait()
	}
	if err == nil {
		_, err = w.bw.Write(w.ownFooter())
	}
	if err == nil {
		err = w.bw.Flush()
	}
	if err != nil {
		w.f.Abort()
		w.err = fmt.Errorf("closing %s: %w", w.path, err)
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
	if w == nil || w.done {
		return nil
	}
	w.done = true
	if w.err == nil {
		w.err = errors.New("writer aborted")
	}
	w.wait()
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
	// ListName is the file list's name in the directory (default
	// FileListName, NVTabular's _file_list.txt).
	ListName string
}

// DatasetWriter writes a dataset directory in NVTabular's layout: data files
// plus the file list (_file_list.txt unless ListName says otherwise) and
// _metadata.json, written on Close. It implements
// formats.Writer.
type DatasetWriter struct {
	dir   string
	s     formats.Schema
	o     DatasetOptions
	cur   *Writer
	stats []FileStat
	paths []string
	meta  bool // _metadata.json written
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
		return nil, fmt.Errorf("rows per file %d must be ≥ 0", o.RowsPerFile)
	}
	if o.Prefix == "" {
		o.Prefix = "part_"
	}
	if o.ListName == "" {
		o.ListName = FileListName
	} else if o.ListName != filepath.Base(o.ListName) || o.ListName == MetadataName {
		return nil, fmt.Errorf("file list name %q: want a file name other than %s", o.ListName, MetadataName)
	}
	if o.Files == nil { // a Stage makes its directories itself
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
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

// fail records err, removes everything written (see Abort) and returns err.
func (d *DatasetWriter) fail(err error) error {
	d.done = false
	d.Abort()
	d.err = err
	return err
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
		return errors.New("write after Close or Abort")
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
	if d.cur == nil && len(d.paths) == 0 {
		if err := d.open(); err != nil {
			return d.fail(err)
		}
	}
	if d.cur != nil {
		if err := d.closeCur(); err != nil {
			return d.fail(err)
		}
	}
	// The metadata first, the list (what readers are given) last.
	if err := WriteMetadataTo(d.o.Files, filepath.Join(d.dir, MetadataName), MetadataFor(&d.s, d.stats)); err != nil {
		return d.fail(err)
	}
	d.meta = true
	if err := formats.WriteFileListTo(d.o.Files, filepath.Join(d.dir, d.o.ListName), d.paths); err != nil {
		return d.fail(err)
	}
	d.done = true
	return nil
}

// Abort removes the current temporary file and, when the files are written
// directly (no Stage, whose own Abort removes them), the data files already
// committed and the metadata.
func (d *DatasetWriter) Abort() error {
	if d == nil || d.done {
		return nil
	}
	d.done = true
	if d.err == nil {
		d.err = errors.New("dataset writer aborted")
	}
	if d.cur != nil {
		d.cur.Abort()
		d.cur = nil
	}
	if d.o.Files == nil {
		for _, p := range d.paths {
			os.Remove(p)
		}
		if d.meta {
			os.Remove(filepath.Join(d.dir, MetadataName))
		}
	}
	return nil
}
