package parquet

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/hostmem"
)

// Options are the Parquet reader options.
type Options struct {
	formats.Options
	// KeyType is the key type of the schema built from the metadata when
	// OpenList or OpenFiles is given a nil schema (default KeyU32, HugeCTR's
	// "i32"). It is ignored when a schema is given.
	KeyType formats.KeyType
	// Prefetch is the number of decoded pieces of row groups (about a
	// batch each, see the package doc) kept beyond one per worker (default
	// 2; one of them is the piece being handed out). Memory is bounded by
	// 2·Workers+Prefetch decoded pieces (at most row groups), plus the
	// page buffers of the row groups being decoded (one page per selected
	// column and worker).
	Prefetch int
	// MaxRowGroupRows bounds the rows of one row group (default 1<<24), so a
	// hostile footer cannot make the reader allocate without bound.
	MaxRowGroupRows int64
	// KeyRanges, when set (one per slot) and SlotSizeArray is not, has the
	// decoding workers check that every key of slot s lies in
	// KeyRanges[s], passing keys through unchanged: a key outside is an
	// ErrKeyRange error naming the file, the record and KeyRangeHint (what
	// set the ranges, e.g. "--slot-size-array, keys slot-local"). A check
	// of every lent batch after the reader costs a pass over its keys on
	// the consumer's core; here it is one compare in the decode loop, on
	// every worker, while the row is in cache.
	KeyRanges    []KeyRange
	KeyRangeHint string
}

// KeyRange is the keys [Lo, Lo+Size) of a slot (Options.KeyRanges).
type KeyRange struct{ Lo, Size int64 }

// DefaultMaxRowGroupRows is the default of Options.MaxRowGroupRows.
const DefaultMaxRowGroupRows = 1 << 24

// WithDefaults returns o with zero fields replaced by their defaults.
func (o Options) WithDefaults() Options {
	o.Options = o.Options.WithDefaults()
	if o.Prefetch <= 0 {
		o.Prefetch = 2
	}
	if o.MaxRowGroupRows <= 0 {
		o.MaxRowGroupRows = DefaultMaxRowGroupRows
	}
	return o
}

// Validate checks the options against a schema.
func (o *Options) Validate(s *formats.Schema) error {
	if o.KeyType > formats.KeyI64 {
		return fmt.Errorf("invalid key type %d", o.KeyType)
	}
	if o.Prefetch < 0 || o.MaxRowGroupRows < 0 {
		return fmt.Errorf("negative Prefetch %d or MaxRowGroupRows %d", o.Prefetch, o.MaxRowGroupRows)
	}
	if len(o.KeyRanges) > 0 && len(o.KeyRanges) != len(s.Slots) {
		return fmt.Errorf("%d key ranges for %d slots", len(o.KeyRanges), len(s.Slots))
	}
	for i, kr := range o.KeyRanges {
		if kr.Lo < 0 || kr.Size <= 0 || kr.Lo > math.MaxInt64-kr.Size {
			return fmt.Errorf("slot %d key range [%d, %d+%d) is empty, negative or past 2^63", i, kr.Lo, kr.Lo, kr.Size)
		}
	}
	return o.Options.Validate(s)
}

type group uint8

const (
	gLabel group = iota
	gDense
	gCat
)

func (g group) String() string {
	return [...]string{"label", "cont", "cat"}[g]
}

// colPlan says how one selected column of one file is decoded.
type colPlan struct {
	group    group
	meta     Column
	leaf     int // leaf column index in the file schema
	phys     parquet.Type
	unsigned bool
	list     bool
	width    int // label/dense values per row (1 for a scalar column)
	dst      int // label/dense: position within the row; cat: slot
	maxDef   int16
	listDef  int16 // list columns: def ≥ listDef means the list is not null
	repDef   int16 // list columns: def ≥ repDef means an element is present
}

// filePlan is one data file with its footer and column plans.
type filePlan struct {
	path     string
	md       *metadata.FileMetaData
	cols     []colPlan
	fixed    bool    // every cat column is scalar: keys stored sample-major
	lists    bool    // some selected column is a list (decoded whole)
	rgStart  []int64 // first row of each row group within the file
	numRows  int64
	openSize int64
	regular  bool // a regular file: its column chunks can be streamed
}

// OpenList opens the dataset of a file list (SPEC §1). _metadata.json is
// read from the directory of the first data file; each data file is matched
// to its file_stats entry by base name. s may be nil: the schema is then
// derived from the metadata and the first file (see the package doc).
func OpenList(fileListPath string, s *formats.Schema, o Options) (*Reader, error) {
	paths, err := formats.ReadFileList(fileListPath)
	if err != nil {
		return nil, err
	}
	meta, err := ReadMetadata(filepath.Join(filepath.Dir(paths[0]), MetadataName))
	if err != nil {
		return nil, err
	}
	return OpenFiles(paths, meta, s, o)
}

// OpenFiles opens the given data files described by meta (see OpenList).
// The footer of the first file is read here (the schema is derived from or
// checked against it); every other footer is read when the reader reaches
// its file, checked against meta and the schema then (an error naming the
// file), and dropped when its row groups are decoded: memory does not grow
// with the number of files. Every file must have a file_stats entry.
func OpenFiles(paths []string, meta *Metadata, s *formats.Schema, o Options) (*Reader, error) {
	if len(paths) == 0 {
		return nil, errors.New("no data files")
	}
	if meta == nil {
		return nil, errors.New("nil metadata")
	}
	rows := make(map[string]int64, len(meta.FileStats))
	for _, fs := range meta.FileStats {
		rows[filepath.Base(fs.FileName)] = fs.NumRows
	}
	entries := make([]fileEntry, len(paths))
	var total int64
	for i, p := range paths {
		n, ok := rows[filepath.Base(p)]
		if !ok {
			// HugeCTR's generator writes gen_<k>.parquet and lists it as <k>.parquet.
			n, ok = rows[strings.TrimLeftFunc(filepath.Base(p), func(r rune) bool { return r < '0' || r > '9' })]
		}
		if !ok {
			return nil, formats.Errorf("parquet", p, -1, -1, formats.ErrMetadata, "no file_stats entry for %q in %s", filepath.Base(p), MetadataName)
		}
		if n > math.MaxInt64-total {
			return nil, formats.Errorf("parquet", p, -1, -1, formats.ErrMetadata, "%s: num_rows of the listed files add up past 2^63", MetadataName)
		}
		entries[i] = fileEntry{path: p, rows: n}
		total += n
	}
	first, err := openPlan(entries[0])
	if err != nil {
		return nil, err
	}
	var schemaOwned formats.Schema
	var labelW, denseW []int
	if s == nil {
		schemaOwned, labelW, denseW, err = inferSchema(first, meta, o.KeyType)
		if err != nil {
			return nil, err
		}
	} else {
		schemaOwned = s.Clone()
		if labelW, err = widths(first, meta.Labels, s.LabelDim, gLabel); err != nil {
			return nil, err
		}
		if denseW, err = widths(first, meta.Conts, s.DenseDim, gDense); err != nil {
			return nil, err
		}
		if len(meta.Cats) != len(s.Slots) {
			return nil, formats.Errorf("parquet", first.path, -1, -1, formats.ErrSchema, "%s selects %d cat columns, schema has %d slots", MetadataName, len(meta.Cats), len(s.Slots))
		}
	}
	if err := schemaOwned.Validate(); err != nil {
		return nil, err
	}
	o = o.WithDefaults()
	if err := o.Validate(&schemaOwned); err != nil {
		return nil, err
	}
	pl := &planner{meta: meta, labelW: labelW, denseW: denseW, o: &o, schema: &schemaOwned}
	if err := pl.plan(first); err != nil {
		return nil, err
	}
	o.Workers, o.Prefetch = fitMemory([]*filePlan{first}, &schemaOwned, o)
	if o.Repeat && total == 0 {
		return nil, formats.Errorf("parquet", paths[0], -1, -1, formats.ErrMetadata, "repeat mode over a dataset of 0 rows")
	}
	return newReader(entries, first, pl, &schemaOwned, o), nil
}

// fileEntry is a data file as OpenFiles knows it before its footer is read.
type fileEntry struct {
	path string
	rows int64 // num_rows in _metadata.json
}

// openPlan reads the footer of e's file and checks its row count against
// the metadata's.
func openPlan(e fileEntry) (*filePlan, error) {
	md, size, err := readFooter(e.path)
	if err != nil {
		return nil, err
	}
	if md.NumRows != e.rows {
		return nil, formats.Errorf("parquet", e.path, -1, -1, formats.ErrMetadata, "footer holds %d rows, %s says num_rows %d", md.NumRows, MetadataName, e.rows)
	}
	st, err := os.Stat(e.path)
	regular := err == nil && st.Mode().IsRegular()
	return &filePlan{path: e.path, md: md, numRows: e.rows, openSize: size, regular: regular}, nil
}

// planner plans the files of one reader: the metadata, the widths of the
// label and dense columns and the options they are checked against.
type planner struct {
	meta           *Metadata
	labelW, denseW []int
	o              *Options
	schema         *formats.Schema
}

// load reads and plans the file of e (a file after the first, when the
// reader reaches it).
func (pl *planner) load(e fileEntry) (*filePlan, error) {
	fp, err := openPlan(e)
	if err != nil {
		return nil, err
	}
	if err := pl.plan(fp); err != nil {
		return nil, err
	}
	return fp, nil
}

// plan resolves the columns of fp and checks that its largest row group,
// decoded, fits in memory.
func (pl *planner) plan(fp *filePlan) error {
	if err := planFile(fp, pl.meta, pl.labelW, pl.denseW, pl.o); err != nil {
		return err
	}
	s := pl.schema
	perRow := int64(4*(s.LabelDim+s.DenseDim) + s.KeyType.Size()*max(s.MaxKeysPerSample(), len(s.Slots)))
	for g := 0; g+1 < len(fp.rgStart); g++ {
		rows := fp.rgStart[g+1] - fp.rgStart[g]
		what := fmt.Sprintf("row group %d of %s (%d rows, decoded)", g, fp.path, rows)
		if err := hostmem.CheckAlloc(what, hostmem.MulSize(rows, perRow), "the row group size of the file (rewrite it with smaller row groups)"); err != nil {
			return &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: fp.rgStart[g], Op: fmt.Sprintf("row group %d", g), Err: err}
		}
	}
	return nil
}

// topLevel returns, for each top-level field of sc, its first leaf column and
// its number of leaves.
func topLevel(sc *schema.Schema) (first, count []int) {
	root := sc.Root()
	first = make([]int, root.NumFields())
	count = make([]int, root.NumFields())
	for i := range first {
		first[i] = -1
	}
	for j := 0; j < sc.NumColumns(); j++ {
		k := root.FieldIndexByField(sc.ColumnRoot(j))
		if k < 0 {
			continue
		}
		if first[k] < 0 {
			first[k] = j
		}
		count[k]++
	}
	return first, count
}

// resolve finds the leaf of the selected column c in fp and checks its name.
func resolveColumn(fp *filePlan, c Column, g group) (colPlan, error) {
	sc := fp.md.Schema
	first, count := topLevel(sc)
	if c.Index >= len(first) {
		return colPlan{}, formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "%s column %q has index %d, the file has %d columns", g, c.ColName, c.Index, len(first))
	}
	name := sc.Root().Field(c.Index).Name()
	// cudf names unnamed columns _col<i> (HugeCTR's generator writes such
	// files with metadata names label<i>/C<i>): nothing to disagree with.
	if name != c.ColName && name != "_col"+strconv.Itoa(c.Index) {
		return colPlan{}, formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "%s column index %d is named %q in the file, %q in %s", g, c.Index, name, c.ColName, MetadataName)
	}
	if count[c.Index] != 1 {
		return colPlan{}, formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "column %d (%q) is nested with %d leaves; want a scalar or a list", c.Index, name, count[c.Index])
	}
	leaf := first[c.Index]
	d := sc.Column(leaf)
	cp := colPlan{group: g, meta: c, leaf: leaf, phys: d.PhysicalType(), maxDef: d.MaxDefinitionLevel(), width: 1}
	switch d.MaxRepetitionLevel() {
	case 0:
	case 1:
		cp.list = true
		var path []schema.Node
		for n := d.SchemaNode(); n != nil && n.Parent() != nil; n = n.Parent() {
			path = append(path, n)
		}
		var def int16
		for i := len(path) - 1; i >= 0; i-- {
			n := path[i]
			switch n.RepetitionType() {
			case parquet.Repetitions.Repeated:
				cp.listDef = def
				def++
				cp.repDef = def
			case parquet.Repetitions.Optional:
				def++
			}
		}
	default:
		return colPlan{}, formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "column %d (%q) is a nested list (repetition level %d)", c.Index, name, d.MaxRepetitionLevel())
	}
	if lt, ok := d.LogicalType().(interface{ IsSigned() bool }); ok && d.LogicalType().IsValid() {
		cp.unsigned = !lt.IsSigned()
	}
	switch d.ConvertedType() {
	case schema.ConvertedTypes.Uint8, schema.ConvertedTypes.Uint16, schema.ConvertedTypes.Uint32, schema.ConvertedTypes.Uint64:
		cp.unsigned = true
	}
	switch cp.phys {
	case parquet.Types.Int32, parquet.Types.Int64:
	case parquet.Types.Float, parquet.Types.Double:
		if g == gCat {
			return colPlan{}, formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "cat column %d (%q) has type %s; want int32/uint32/int64/uint64", c.Index, name, cp.phys)
		}
	default:
		return colPlan{}, formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "%s column %d (%q) has unsupported type %s", g, c.Index, name, cp.phys)
	}
	return cp, nil
}

// probeWidth returns the number of values in the first row of list column
// cp of fp.
func probeWidth(fp *filePlan, cp colPlan) (w int, ferr error) {
	defer func() {
		if p := recover(); p != nil {
			ferr = &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: 0, Op: "column " + cp.meta.ColName, Err: fmt.Errorf("%w: decoder panic: %v", formats.ErrCorrupt, p)}
		}
	}()
	f, err := os.Open(fp.path)
	if err != nil {
		return 0, &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: -1, Op: "open", Err: err}
	}
	defer f.Close()
	rd, err := file.NewParquetReader(f, file.WithMetadata(fp.md))
	if err != nil {
		return 0, &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: -1, Op: "open", Err: fmt.Errorf("%w: %w", formats.ErrCorrupt, err)}
	}
	for g := 0; g < rd.NumRowGroups(); g++ {
		if rd.MetaData().RowGroup(g).NumRows() == 0 {
			continue
		}
		cr, err := rd.RowGroup(g).Column(cp.leaf)
		if err != nil {
			return 0, &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: 0, Op: "column " + cp.meta.ColName, Err: fmt.Errorf("%w: %w", formats.ErrCorrupt, err)}
		}
		const n = 4096
		def, rep := make([]int16, n), make([]int16, n)
		var lv int64
		switch c := cr.(type) {
		case *file.Float32ColumnChunkReader:
			lv, _, err = c.ReadBatch(n, make([]float32, n), def, rep)
		case *file.Float64ColumnChunkReader:
			lv, _, err = c.ReadBatch(n, make([]float64, n), def, rep)
		case *file.Int32ColumnChunkReader:
			lv, _, err = c.ReadBatch(n, make([]int32, n), def, rep)
		case *file.Int64ColumnChunkReader:
			lv, _, err = c.ReadBatch(n, make([]int64, n), def, rep)
		}
		if err != nil {
			return 0, &formats.Error{Format: "parquet", Path: fp.path, Offset: -1, Record: 0, Op: "column " + cp.meta.ColName, Err: fmt.Errorf("%w: %w", formats.ErrCorrupt, err)}
		}
		w := 0
		for i := int64(0); i < lv; i++ {
			if i > 0 && rep[i] == 0 {
				return w, nil
			}
			if def[i] == cp.maxDef {
				w++
			}
		}
		if lv < n {
			return w, nil
		}
		return 0, formats.Errorf("parquet", fp.path, -1, 0, formats.ErrSchema, "list column %q: first row has more than %d values", cp.meta.ColName, n)
	}
	return 0, formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "list column %q: no rows to take its width from; give a schema", cp.meta.ColName)
}

// widths returns the width of every label (or dense) column of meta given
// the schema's total dim: scalars take 1, list columns share the rest equally.
func widths(fp *filePlan, cols []Column, dim int, g group) ([]int, error) {
	w := make([]int, len(cols))
	var lists []int
	rest := dim
	for i, c := range cols {
		cp, err := resolveColumn(fp, c, g)
		if err != nil {
			return nil, err
		}
		if cp.list {
			lists = append(lists, i)
		} else {
			w[i] = 1
			rest--
		}
	}
	if rest < 0 || (len(lists) == 0 && rest != 0) || (len(lists) > 0 && (rest == 0 || rest%len(lists) != 0)) {
		return nil, formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "%s selects %d %s columns (%d lists); schema %s dim is %d", MetadataName, len(cols), g, len(lists), g, dim)
	}
	for _, i := range lists {
		w[i] = rest / len(lists)
	}
	return w, nil
}

// inferSchema builds the schema from meta and the first file.
func inferSchema(fp *filePlan, meta *Metadata, kt formats.KeyType) (formats.Schema, []int, []int, error) {
	s := formats.Schema{KeyType: kt}
	var ws [2][]int
	for gi, cols := range [][]Column{meta.Labels, meta.Conts} {
		ws[gi] = make([]int, len(cols))
		for i, c := range cols {
			cp, err := resolveColumn(fp, c, group(gi))
			if err != nil {
				return s, nil, nil, err
			}
			w := 1
			if cp.list {
				if w, err = probeWidth(fp, cp); err != nil {
					return s, nil, nil, err
				}
				if w == 0 {
					return s, nil, nil, formats.Errorf("parquet", fp.path, -1, 0, formats.ErrSchema, "list column %q has an empty first row", c.ColName)
				}
			}
			ws[gi][i] = w
		}
	}
	for _, w := range ws[0] {
		s.LabelDim += w
	}
	for _, w := range ws[1] {
		s.DenseDim += w
	}
	for _, c := range meta.Cats {
		cp, err := resolveColumn(fp, c, gCat)
		if err != nil {
			return s, nil, nil, err
		}
		sl := formats.Slot{Name: c.ColName, MaxNNZ: 1, Hotness: 1}
		if cp.list {
			sl.MaxNNZ, sl.Hotness = 0, 0
		}
		s.Slots = append(s.Slots, sl)
	}
	return s, ws[0], ws[1], nil
}

// planFile resolves every selected column of fp.
func planFile(fp *filePlan, meta *Metadata, labelW, denseW []int, o *Options) error {
	fp.fixed, fp.lists = true, false
	for gi, cols := range [][]Column{meta.Labels, meta.Conts, meta.Cats} {
		pos := 0
		for i, c := range cols {
			cp, err := resolveColumn(fp, c, group(gi))
			if err != nil {
				return err
			}
			switch group(gi) {
			case gLabel, gDense:
				w := labelW
				if gi == int(gDense) {
					w = denseW
				}
				cp.width = w[i]
				if !cp.list && cp.width != 1 {
					return formats.Errorf("parquet", fp.path, -1, -1, formats.ErrSchema, "%s column %q is a scalar, other files hold %d values in it", cp.group, c.ColName, cp.width)
				}
				cp.dst = pos
				pos += cp.width
			case gCat:
				cp.dst = i
				if cp.list {
					fp.fixed = false
				}
			}
			fp.lists = fp.lists || cp.list
			fp.cols = append(fp.cols, cp)
		}
	}
	n := fp.md.NumRowGroups()
	fp.rgStart = make([]int64, n+1)
	for g := 0; g < n; g++ {
		rows := fp.md.RowGroup(g).NumRows()
		if rows > o.MaxRowGroupRows {
			return formats.Errorf("parquet", fp.path, -1, fp.rgStart[g], formats.ErrSize, "row group %d has %d rows, more than MaxRowGroupRows %d", g, rows, o.MaxRowGroupRows)
		}
		if nc := fp.md.RowGroup(g).NumColumns(); nc != fp.md.Schema.NumColumns() {
			return formats.Errorf("parquet", fp.path, -1, fp.rgStart[g], formats.ErrCorrupt, "row group %d has %d column chunks, schema has %d columns", g, nc, fp.md.Schema.NumColumns())
		}
		fp.rgStart[g+1] = fp.rgStart[g] + rows
	}
	return nil
}

// fitMemory returns the workers and prefetch depth under o.MemoryLimit
// (o's own when there is none). A worker holds two decoded pieces of a row
// group (the sample-major rgBuf it decodes and one decoded ahead), one
// decompressed page and one window per selected column, and a prefetched
// piece its rgBuf. Row groups are sized by the
// largest in the files, pages by the first of each column in the first
// file (pageSizes).
func fitMemory(files []*filePlan, s *formats.Schema, o Options) (workers, prefetch int) {
	if o.MemoryLimit <= 0 {
		return o.Workers, o.Prefetch
	}
	var rows int64
	ncols := 0
	for _, fp := range files {
		for g := 0; g < fp.md.NumRowGroups(); g++ {
			rows = max(rows, fp.md.RowGroup(g).NumRows())
		}
		ncols = max(ncols, len(fp.cols))
	}
	perRow := int64(4*(s.LabelDim+s.DenseDim) + s.KeyType.Size()*max(s.MaxKeysPerSample(), len(s.Slots)))
	// A piece of a row group (pieceCuts; Reader.setup sizes its buffer so)
	// with its room (rgBuf.room).
	piece := rows
	if o.BatchSize > 0 {
		piece = min(rows, int64(o.BatchSize)+2*int64(minPieceRows))
	}
	decoded := (piece + int64(roomFor(int(min(rows, math.MaxInt32)), o.BatchSize))) * perRow
	worker := 2*decoded + pageSizes(files[0]) + int64(ncols)*int64(streamWindow) // a piece decoded, one ahead
	workers, prefetch = o.Workers, o.Prefetch
	for workers > 1 && int64(workers)*worker+int64(prefetch)*decoded > o.MemoryLimit {
		workers--
	}
	for prefetch > 1 && int64(workers)*worker+int64(prefetch)*decoded > o.MemoryLimit {
		prefetch--
	}
	return workers, prefetch
}

// pageSizes estimates the decompression buffers of one worker: the sum
// over fp's selected compressed columns of their first data page's
// uncompressed size (the whole column chunk where the page header cannot be
// read, or a dictionary comes first).
func pageSizes(fp *filePlan) int64 {
	if fp.md.NumRowGroups() == 0 {
		return 0
	}
	rg := fp.md.RowGroup(0)
	f, err := os.Open(fp.path)
	if err == nil {
		defer f.Close()
	}
	var total int64
	hdr := make([]byte, 512)
	for _, cp := range fp.cols {
		cc, err2 := rg.ColumnChunk(cp.leaf)
		if err2 != nil || cc.Compression() == compress.Codecs.Uncompressed {
			continue
		}
		size := cc.TotalUncompressedSize()
		if err == nil && !cc.HasDictionaryPage() {
			if n, _ := f.ReadAt(hdr, cc.DataPageOffset()); n > 0 {
				if h, _, err := parsePageHeader(hdr[:n]); err == nil && h.usize > 0 {
					size = min(size, int64(h.usize))
				}
			}
		}
		total += size
	}
	return total
}
