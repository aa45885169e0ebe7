package tensor

import (
	"errors"
	"fmt"
)

// Sentinel errors reported (wrapped in an *OpError) by backends.
var (
	// ErrShape: operand shapes or dtypes do not fit the operation.
	ErrShape = errors.New("shape mismatch")
	// ErrTableFull: an embedding hash table has no free row for a new key.
	ErrTableFull = errors.New("embedding hash table full")
	// ErrRange: an index (row, key, class label) is outside its table.
	ErrRange = errors.New("index out of range")
	// ErrDType: the backend does not support the element type.
	ErrDType = errors.New("unsupported dtype")
	// ErrNoDevice: the backend's device is unavailable.
	ErrNoDevice = errors.New("no device")
)

// OpError is the failure of one backend operation: which operation, a detail
// (operand shapes, the offending index), and a sentinel above.
type OpError struct {
	Op     string
	Detail string
	Err    error
}

func (e *OpError) Error() string {
	if e.Detail == "" {
		return "tensor: " + e.Op + ": " + e.Err.Error()
	}
	return "tensor: " + e.Op + ": " + e.Detail + ": " + e.Err.Error()
}

// Unwrap returns the sentinel.
func (e *OpError) Unwrap() error { return e.Err }

// Errorf builds an *OpError.
func Errorf(op string, err error, format string, args ...any) *OpError {
	return &OpError{Op: op, Detail: fmt.Sprintf(format, args...), Err: err}
}
