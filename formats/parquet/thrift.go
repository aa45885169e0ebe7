package parquet

import "encoding/binary"

// thriftWriter appends Thrift compact-protocol structs: the encoding of
// Parquet's PageHeader and FileMetaData (parquet-format's parquet.thrift).
// Only what ctrkit writes is here: i32/i64 (zigzag varints), bools,
// binaries, lists and nested structs.
type thriftWriter struct {
	b     []byte
	last  int16   // last field id of the struct being written
	stack []int16 // enclosing structs' last ids
}

// Compact-protocol type codes.
const (
	ctTrue   = 1
	ctFalse  = 2
	ctByte   = 3
	ctI32    = 5
	ctI64    = 6
	ctBinary = 8
	ctList   = 9
	ctStruct = 12
)

func (w *thriftWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *thriftWriter) field(id int16, t byte) {
	if d := id - w.last; d > 0 && d <= 15 {
		w.b = append(w.b, byte(d)<<4|t)
	} else {
		w.b = append(w.b, t)
		w.uvarint(uint64(uint16((id << 1) ^ (id >> 15))))
	}
	w.last = id
}

func (w *thriftWriter) i32(id int16, v int32) {
	w.field(id, ctI32)
	w.uvarint(uint64(uint32((v << 1) ^ (v >> 31))))
}

func (w *thriftWriter) i64(id int16, v int64) {
	w.field(id, ctI64)
	w.uvarint(uint64((v << 1) ^ (v >> 63)))
}

func (w *thriftWriter) i8(id int16, v int8) {
	w.field(id, ctByte)
	w.b = append(w.b, byte(v))
}

func (w *thriftWriter) boolean(id int16, v bool) {
	if v {
		w.field(id, ctTrue)
	} else {
		w.field(id, ctFalse)
	}
}

func (w *thriftWriter) binary(id int16, s string) {
	w.field(id, ctBinary)
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// list starts a list field of n elements of type t; the elements follow
// (structs with beginElem/end, i32s with listI32, strings with listString).
func (w *thriftWriter) list(id int16, t byte, n int) {
	w.field(id, ctList)
	if n < 15 {
		w.b = append(w.b, byte(n)<<4|t)
	} else {
		w.b = append(w.b, 0xf0|t)
		w.uvarint(uint64(n))
	}
}

func (w *thriftWriter) listI32(v int32)     { w.uvarint(uint64(uint32((v << 1) ^ (v >> 31)))) }
func (w *thriftWriter) listString(s string) { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }

// begin starts a struct field; beginElem a struct list element; end closes
// either (the stop byte).
func (w *thriftWriter) begin(id int16) {
	w.field(id, ctStruct)
	w.beginElem()
}

func (w *thriftWriter) beginElem() {
	w.stack = append(w.stack, w.last)
	w.last = 0
}

func (w *thriftWriter) end() {
	w.b = append(w.b, 0)
	w.last = w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
}
