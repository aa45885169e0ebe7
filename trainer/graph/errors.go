package graph

import (
	"errors"
	"fmt"
)

// Sentinels that *Error unwraps to. All of them match ErrInvalid.
var (
	// ErrInvalid is the class of every model-description error.
	ErrInvalid = errors.New("invalid model description")
	// ErrSyntax: the file is not JSON.
	ErrSyntax = &classErr{"JSON syntax error"}
	// ErrMissing: a required key is absent.
	ErrMissing = &classErr{"required key missing"}
	// ErrType: a value has the wrong JSON type.
	ErrType = &classErr{"wrong JSON type"}
	// ErrValue: a value is out of range or not one of the allowed strings.
	ErrValue = &classErr{"invalid value"}
	// ErrTensor: a bottom names no tensor, a top is defined twice, or
	// shapes do not fit.
	ErrTensor = &classErr{"tensor graph error"}
	// ErrUnsupported: valid HugeCTR, but not something ctrkit can do.
	ErrUnsupported = &classErr{"unsupported"}
)

type classErr struct{ msg string }

func (e *classErr) Error() string        { return e.msg }
func (e *classErr) Is(target error) bool { return target == ErrInvalid }

// Error is a model-description error: the file, the JSON path of the
// offending value (layers[3].fc_param.num_output) and what is wrong.
type Error struct {
	File   string
	Path   string
	Detail string
	Err    error // a sentinel above
}

func (e *Error) Error() string {
	s := e.Err.Error()
	if e.Detail != "" {
		s = e.Detail
	}
	loc := e.File
	if e.Path != "" {
		if loc != "" {
			loc += ": "
		}
		loc += e.Path
	}
	if loc == "" {
		return s
	}
	return loc + ": " + s
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

func errorf(file, path string, err error, format string, args ...any) *Error {
	return &Error{File: file, Path: path, Err: err, Detail: fmt.Sprintf(format, args...)}
}
