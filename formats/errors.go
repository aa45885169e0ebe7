package formats

import (
	"errors"
	"fmt"
	"io"

	"github.com/ctrkit/ctrkit/internal/hostmem"
)

// Sentinel errors. Every corruption sentinel also matches ErrCorrupt under
// errors.Is, so callers can test the class or the kind.
var (
	// ErrCorrupt is the class of every error caused by bad file contents.
	ErrCorrupt = errors.New("corrupt data")
	// ErrChecksum: a Norm record's check byte disagrees with its payload.
	ErrChecksum = corrupt("checksum mismatch")
	// ErrHeader: a header field is invalid or disagrees with the schema.
	ErrHeader = corrupt("bad header")
	// ErrNNZ: a slot's nnz is negative or above its declared maximum.
	ErrNNZ = corrupt("nnz out of range")
	// ErrKeyRange: a key is ≥ its slot size, or does not fit the key type.
	ErrKeyRange = corrupt("key out of range")
	// ErrSize: a file's size disagrees with its sample size or record count.
	ErrSize = corrupt("bad file size")
	// ErrNull: a Parquet value is null.
	ErrNull = corrupt("null value")
	// ErrMetadata: _metadata.json or a file list disagrees with the data.
	ErrMetadata = corrupt("metadata disagrees with data")
	// ErrSchema: the file's layout does not match the requested schema.
	ErrSchema = corrupt("schema mismatch")
	// ErrValue: a label or dense value is NaN, Inf or outside its range.
	ErrValue = corrupt("bad value")
)

// ErrMemory is the error of a batch (or another size read from a file or a
// flag) that the machine cannot hold; it is not a corruption. It is
// hostmem.ErrMemory, which the readers' allocation checks return.
var ErrMemory = hostmem.ErrMemory

type corruptError struct{ msg string }

func corrupt(msg string) error           { return &corruptError{msg} }
func (e *corruptError) Error() string    { return e.msg }
func (e *corruptError) Is(t error) bool  { return t == ErrCorrupt }
func (e *corruptError) Unwrap() error    { return nil }
func (e *corruptError) String() string   { return e.msg }
func (e *corruptError) Corruption() bool { return true }

// Error is a failure at a place in a file. Offset is the byte offset of the
// record (or field) at fault, -1 when unknown; Record is the 0-based index of
// the sample in its file, -1 when the fault is not in a sample (a header, a
// file list line). For a file list Record is the 1-based line number and
// Offset is -1.
type Error struct {
	Format string // "norm", "raw", "parquet", "filelist", "metadata"
	Path   string
	Offset int64
	Record int64
	Op     string // what was being read: "header", "slot 3 nnz", "check byte"
	Err    error  // a sentinel above, io.ErrUnexpectedEOF, or an OS error
}

func (e *Error) Error() string {
	s := e.Format + ": " + e.Path
	if e.Offset >= 0 {
		s += fmt.Sprintf(": offset %d", e.Offset)
	}
	if e.Record >= 0 {
		if e.Format == "filelist" {
			s += fmt.Sprintf(": line %d", e.Record)
		} else {
			s += fmt.Sprintf(": record %d", e.Record)
		}
	}
	if e.Op != "" {
		s += ": " + e.Op
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error whose Err wraps sentinel with a detail message.
func Errorf(format, path string, offset, record int64, sentinel error, detailFmt string, args ...any) *Error {
	var err error = sentinel
	if detailFmt != "" {
		err = fmt.Errorf("%w: "+detailFmt, append([]any{sentinel}, args...)...)
	}
	return &Error{Format: format, Path: path, Offset: offset, Record: record, Err: err}
}

// Truncated builds the *Error for a file that ends inside a record.
func Truncated(format, path string, offset, record int64, op string) *Error {
	return &Error{Format: format, Path: path, Offset: offset, Record: record, Op: op, Err: io.ErrUnexpectedEOF}
}

// IsCorrupt reports whether err is caused by bad file contents (including
// truncation).
func IsCorrupt(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, io.ErrUnexpectedEOF)
}
