package asyncio

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by Next and Get once Close has been called, also to
// callers that were waiting when it was.
var ErrClosed = errors.New("reader closed")

// Error is a failed request of the engine: Op ("read") of Len bytes at byte
// Offset of the file Path, and its cause Err (an OS error such as EIO,
// io.ErrUnexpectedEOF for a file that ends before the range, …). Callers
// find it with errors.As; errors.Is sees through it to Err.
type Error struct {
	Op     string
	Path   string
	Offset int64 // the byte offset at which the request failed
	Len    int64 // the bytes still wanted from Offset on
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s at byte offset %d (%d bytes): %v", e.Op, e.Path, e.Offset, e.Len, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
