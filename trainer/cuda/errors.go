package cuda

import (
	"errors"
	"fmt"
)

// ErrNoDriver is returned by Open when no CUDA driver library loads or it
// reports no device.
var ErrNoDriver = errors.New("no CUDA driver found")

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("device closed")

// Error is a failed library call: which call, and the status it returned.
type Error struct {
	Call string // e.g. "cuMemAlloc_v2"
	Code int    // the CUresult, nvrtcResult or cublasStatus_t
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Log  string // NVRTC's compile log, when the call was a compile
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// IsOutOfMemory reports whether err is CUDA_ERROR_OUT_OF_MEMORY.
func IsOutOfMemory(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == 2 && e.Name == "CUDA_ERROR_OUT_OF_MEMORY"
}
