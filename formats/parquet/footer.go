package parquet

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/ctrkit/ctrkit/formats"
)

// A Parquet file ends with its footer, a Thrift compact-protocol
// FileMetaData, then the footer's length and the magic:
//
//	+------+- … -+------------------+-------------+--------+
//	| PAR1 | data | FileMetaData     | len (int32) | PAR1   |
//	+------+- … -+------------------+-------------+--------+
//	                                  little endian
//
// arrow-go trusts the counts in FileMetaData: a schema element declaring
// 2^31-1 children makes it allocate 32 GiB before it finds the elements
// missing. checkFooter walks the Thrift bytes first and refuses every count
// that the footer or the file cannot hold: list and string lengths beyond
// the bytes left, a schema tree whose num_children do not add up to its
// elements, negative row counts, column chunks outside the file.

// footerTail is the length field and the magic after the footer.
const footerTail = 8

// maxThriftDepth bounds the nesting of Thrift structs and containers.
const maxThriftDepth = 32

// readFooter opens path, checks its footer (checkFooter) and parses it with
// arrow-go. The row counts of the row groups must add up to the footer's.
func readFooter(path string) (*metadata.FileMetaData, int64, error) {
	footersRead.Add(1)
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, &formats.Error{Format: "parquet", Path: path, Offset: -1, Record: -1, Op: "open", Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, &formats.Error{Format: "parquet", Path: path, Offset: -1, Record: -1, Op: "stat", Err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, 0, formats.Errorf("parquet", path, -1, -1, formats.ErrCorrupt, "not a regular file (%s)", st.Mode().Type())
	}
	size := st.Size()
	bad := func(off int64, format string, args ...any) error {
		e := formats.Errorf("parquet", path, off, -1, formats.ErrCorrupt, format, args...)
		e.Op = "footer"
		return e
	}
	if size < 4+footerTail {
		return nil, 0, bad(-1, "file of %d bytes is too short for a Parquet file (magic, footer, length, magic)", size)
	}
	var tail [footerTail]byte
	if _, err := f.ReadAt(tail[:], size-footerTail); err != nil {
		return nil, 0, &formats.Error{Format: "parquet", Path: path, Offset: size - footerTail, Record: -1, Op: "reading footer", Err: err}
	}
	switch string(tail[4:]) {
	case "PAR1":
	case "PARE":
		return nil, 0, bad(size-4, "encrypted Parquet footer (magic PARE) is not supported")
	default:
		return nil, 0, bad(size-4, "file does not end with the Parquet magic PAR1 (ends with % x)", tail[4:])
	}
	flen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if flen == 0 || flen > size-4-footerTail {
		return nil, 0, bad(size-footerTail, "footer length %d, but the file of %d bytes holds at most %d", flen, size, max(size-4-footerTail, 0))
	}
	buf := make([]byte, flen)
	start := size - footerTail - flen
	if _, err := f.ReadAt(buf, start); err != nil {
		return nil, 0, &formats.Error{Format: "parquet", Path: path, Offset: start, Record: -1, Op: "reading footer", Err: err}
	}
	if err := checkFooter(buf, start); err != nil {
		off := int64(-1)
		if te, ok := err.(*thriftError); ok {
			off, err = start+int64(te.pos), te.err
		}
		return nil, 0, bad(off, "%v", err)
	}
	md, err := parseFooter(buf)
	if err != nil {
		return nil, 0, bad(start, "%v", err)
	}
	md.SetSourceFileSize(size)
	var sum int64
	for i := 0; i < md.NumRowGroups(); i++ {
		sum += md.RowGroup(i).NumRows()
	}
	if sum != md.NumRows {
		return nil, 0, formats.Errorf("parquet", path, -1, -1, formats.ErrMetadata, "footer says %d rows, its row groups hold %d", md.NumRows, sum)
	}
	return md, size, nil
}

// footersRead counts readFooter calls (tests check that footers are read
// lazily).
var footersRead atomic.Int64

// parseFooter hands a checked footer to arrow-go, turning a panic of its
// decoder into an error.
func parseFooter(buf []byte) (md *metadata.FileMetaData, err error) {
	defer func() {
		if p := recover(); p != nil {
			md, err = nil, fmt.Errorf("footer decoder panic: %v", p)
		}
	}()
	return metadata.NewFileMetaData(buf, nil)
}

// thriftError is a fault at byte pos of the footer.
type thriftError struct {
	pos int
	err error
}

func (e *thriftError) Error() string { return fmt.Sprintf("footer byte %d: %v", e.pos, e.err) }

// tdec walks Thrift compact-protocol bytes, checking every length against
// the bytes left. The first error is sticky.
type tdec struct {
	b   []byte
	pos int
	err error
}

func (d *tdec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = &thriftError{d.pos, fmt.Errorf(format, args...)}
	}
}

func (d *tdec) left() int { return len(d.b) - d.pos }

func (d *tdec) byte1() byte {
	if d.err != nil {
		return 0
	}
	if d.pos >= len(d.b) {
		d.fail("%w", io.ErrUnexpectedEOF)
		return 0
	}
	c := d.b[d.pos]
	d.pos++
	return c
}

func (d *tdec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.pos:])
	if n <= 0 {
		if n == 0 {
			d.fail("%w in a varint", io.ErrUnexpectedEOF)
		} else {
			d.fail("varint overflows 64 bits")
		}
		return 0
	}
	d.pos += n
	return v
}

func (d *tdec) zigzag() int64 {
	v := d.uvarint()
	return int64(v>>1) ^ -int64(v&1)
}

func (d *tdec) skipBytes(n int) {
	if d.err != nil {
		return
	}
	if n < 0 || n > d.left() {
		d.fail("length %d, %d bytes left in the footer", n, d.left())
		return
	}
	d.pos += n
}

// binaryLen reads a string or binary length and skips its bytes.
func (d *tdec) binary() {
	n := d.uvarint()
	if n > uint64(d.left()) {
		d.fail("string of %d bytes, %d left in the footer", n, d.left())
		return
	}
	d.skipBytes(int(n))
}

// Compact-protocol types not written by thriftWriter.
const (
	ctI16    = 4
	ctDouble = 7
	ctSet    = 10
	ctMap    = 11
	ctUUID   = 13
)

// listHeader reads a list or set header: its length, checked against the
// bytes left (every element takes at least one), and its element type.
func (d *tdec) listHeader() (int, byte) {
	h := d.byte1()
	n := uint64(h >> 4)
	if n == 15 {
		n = d.uvarint()
	}
	if d.err == nil && n > uint64(d.left()) {
		d.fail("list of %d elements, %d bytes left in the footer", n, d.left())
	}
	if d.err != nil {
		return 0, 0
	}
	return int(n), h & 0x0f
}

// skip skips a value of type t.
func (d *tdec) skip(t byte, depth int) {
	if depth > maxThriftDepth {
		d.fail("nested deeper than %d", maxThriftDepth)
		return
	}
	switch t {
	case ctTrue, ctFalse:
	case ctByte:
		d.skipBytes(1)
	case ctI16, ctI32, ctI64:
		d.uvarint()
	case ctDouble:
		d.skipBytes(8)
	case ctUUID:
		d.skipBytes(16)
	case ctBinary:
		d.binary()
	case ctList, ctSet:
		n, et := d.listHeader()
		for i := 0; i < n && d.err == nil; i++ {
			if et == ctTrue || et == ctFalse {
				d.skipBytes(1)
				continue
			}
			d.skip(et, depth+1)
		}
	case ctMap:
		n := d.uvarint()
		if n == 0 {
			return
		}
		if n > uint64(d.left()) {
			d.fail("map of %d entries, %d bytes left in the footer", n, d.left())
			return
		}
		kv := d.byte1()
		for i := uint64(0); i < n && d.err == nil; i++ {
			d.skip(kv>>4, depth+1)
			d.skip(kv&0x0f, depth+1)
		}
	case ctStruct:
		d.structFields(depth+1, nil)
	default:
		d.fail("unknown Thrift type %d", t)
	}
}

// structFields reads the fields of a struct up to its stop byte, calling
// f for each (f returns false to have the field skipped).
func (d *tdec) structFields(depth int, f func(id int16, t byte) bool) {
	if depth > maxThriftDepth {
		d.fail("nested deeper than %d", maxThriftDepth)
		return
	}
	var last int16
	for d.err == nil {
		h := d.byte1()
		if d.err != nil || h == 0 {
			return
		}
		t := h & 0x0f
		id := last + int16(h>>4)
		if h>>4 == 0 {
			v := d.zigzag()
			if v < math.MinInt16 || v > math.MaxInt16 {
				d.fail("field id %d", v)
				return
			}
			id = int16(v)
		}
		last = id
		if f == nil || !f(id, t) {
			d.skip(t, depth)
		}
	}
}

// int reads an integer field of type t (i16/i32/i64), or fails.
func (d *tdec) int(t byte, name string) int64 {
	if t != ctI16 && t != ctI32 && t != ctI64 {
		d.fail("%s has Thrift type %d, want an integer", name, t)
		return 0
	}
	return d.zigzag()
}

// list reads a list field of structs, calling elem for each element.
func (d *tdec) list(t byte, name string, depth int, elem func(i int)) int {
	if t != ctList {
		d.fail("%s has Thrift type %d, want a list", name, t)
		return 0
	}
	n, et := d.listHeader()
	if d.err == nil && et != ctStruct {
		d.fail("%s holds Thrift type %d, want structs", name, et)
	}
	for i := 0; i < n && d.err == nil; i++ {
		elem(i)
	}
	return n
}

// checkFooter walks a FileMetaData (parquet-format's parquet.thrift) whose
// bytes start at dataEnd in the file: before dataEnd lie the row groups'
// column chunks. It checks every length against the bytes left, the schema
// tree against its elements, row counts for sign and column chunks against
// the data bytes.
func checkFooter(b []byte, dataEnd int64) error {
	d := &tdec{b: b}
	var children []int64 // num_children of each schema element
	var numRows int64 = -1
	var colsPer []int
	d.structFields(1, func(id int16, t byte) bool {
		switch id {
		case 2: // schema: list<SchemaElement>
			d.list(t, "schema", 2, func(i int) {
				nc := int64(0) // unset: a leaf
				d.structFields(3, func(id int16, t byte) bool {
					if id == 5 { // num_children
						if nc = d.int(t, "num_children"); d.err == nil && nc < 0 {
							d.fail("schema element %d: num_children %d is negative", i, nc)
						}
						return true
					}
					return false
				})
				children = append(children, nc)
			})
		case 3: // num_rows
			numRows = d.int(t, "num_rows")
			if d.err == nil && numRows < 0 {
				d.fail("num_rows %d is negative", numRows)
			}
		case 4: // row_groups: list<RowGroup>
			d.list(t, "row_groups", 2, func(g int) {
				cols := 0
				d.structFields(3, func(id int16, t byte) bool {
					switch id {
					case 1: // columns: list<ColumnChunk>
						cols = d.list(t, "columns", 4, func(c int) { d.columnChunk(g, c, dataEnd) })
					case 2, 3, 6: // total_byte_size, num_rows, total_compressed_size
						name := [...]string{2: "total_byte_size", 3: "num_rows", 6: "total_compressed_size"}[id]
						if v := d.int(t, name); d.err == nil && v < 0 {
							d.fail("row group %d: %s %d is negative", g, name, v)
						}
					default:
						return false
					}
					return true
				})
				colsPer = append(colsPer, cols)
			})
		case 8: // encryption_algorithm
			d.fail("encrypted columns are not supported")
		default:
			return false
		}
		return true
	})
	if d.err != nil {
		return d.err
	}
	if numRows < 0 {
		return fmt.Errorf("no num_rows")
	}
	if len(children) == 0 {
		return fmt.Errorf("no schema")
	}
	// The schema is the depth-first list of its tree: element 0 is the
	// root; each group's num_children elements follow it, each with its
	// own subtree.
	leaves, next := 0, 1
	var walk func(i, depth int) error
	walk = func(i, depth int) error {
		nc := children[i]
		if depth > maxThriftDepth {
			return fmt.Errorf("schema nested deeper than %d", maxThriftDepth)
		}
		if i > 0 && nc == 0 {
			leaves++
			return nil
		}
		if nc > int64(len(children)-next) {
			return fmt.Errorf("schema element %d declares %d children, %d elements follow it", i, nc, len(children)-next)
		}
		for k := int64(0); k < nc; k++ {
			// The subtrees of the earlier children took elements too.
			if next >= len(children) {
				return fmt.Errorf("schema element %d declares %d children, the schema ends after %d", i, nc, k)
			}
			c := next
			next++
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(0, 0); err != nil {
		return err
	}
	if next != len(children) {
		return fmt.Errorf("schema has %d elements, its tree %d", len(children), next)
	}
	for g, n := range colsPer {
		if n != leaves {
			return fmt.Errorf("row group %d has %d column chunks, the schema %d leaf columns", g, n, leaves)
		}
	}
	return nil
}

// columnChunk checks ColumnChunk c of row group g: its data lie in the
// file, before the footer.
func (d *tdec) columnChunk(g, c int, dataEnd int64) {
	d.structFields(5, func(id int16, t byte) bool {
		switch id {
		case 1: // file_path
			d.fail("row group %d column %d: file_path set (column data in another file) is not supported", g, c)
		case 3: // meta_data: ColumnMetaData
			var comp, dataOff, dictOff int64 = -1, -1, 0
			d.structFields(6, func(id int16, t byte) bool {
				var name string
				switch id {
				case 5:
					name = "num_values"
				case 6:
					name = "total_uncompressed_size"
				case 7:
					name = "total_compressed_size"
				case 9:
					name = "data_page_offset"
				case 10:
					name = "index_page_offset"
				case 11:
					name = "dictionary_page_offset"
				default:
					return false
				}
				v := d.int(t, name)
				if d.err != nil {
					return true
				}
				if v < 0 {
					d.fail("row group %d column %d: %s %d is negative", g, c, name, v)
				}
				switch id {
				case 7:
					comp = v
				case 9:
					dataOff = v
				case 11:
					dictOff = v
				}
				if (id == 7 || id >= 9) && v > dataEnd {
					d.fail("row group %d column %d: %s %d is past the data, which end at byte %d", g, c, name, v, dataEnd)
				}
				return true
			})
			if d.err != nil {
				return true
			}
			start := dataOff
			if dictOff > 0 && dictOff < start {
				start = dictOff
			}
			if comp >= 0 && start >= 0 && start+comp > dataEnd {
				d.fail("row group %d column %d: %d bytes from offset %d run past the data, which end at byte %d", g, c, comp, start, dataEnd)
			}
		default:
			return false
		}
		return true
	})
}
