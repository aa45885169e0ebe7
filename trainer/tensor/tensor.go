package tensor

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor.
type DType uint8

// Element types. Float64 exists for reference computations (gradient checks);
// a GPU backend may support only Float32 for floating point.
const (
	Invalid DType = iota
	Float32
	Float64
	Int32
	Int64
	Uint32
	// Float16 is IEEE binary16 and BFloat16 bfloat16 (the upper half of
	// a float32): the GPU's half-precision activations and their
	// gradients (SPEC §8, docs/PRECISION.md). Host values travel as
	// float32 or float64 and are rounded to nearest even on upload.
	Float16
	BFloat16
)

// Size is the element size in bytes.
func (d DType) Size() int {
	switch d {
	case Float32, Int32, Uint32:
		return 4
	case Float64, Int64:
		return 8
	case Float16, BFloat16:
		return 2
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == Float32 || d == Float64 || d == Float16 || d == BFloat16 }

// IsHalf reports whether d is Float16 or BFloat16.
func (d DType) IsHalf() bool { return d == Float16 || d == BFloat16 }

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Uint32:
		return "uint32"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Storage is a backend-owned buffer. Only the backend that allocated it may
// interpret it; a CPU storage wraps a Go slice, a CUDA storage a device
// pointer.
type Storage interface {
	// Len is the number of elements the buffer holds.
	Len() int
}

// Tensor is a handle: element type, shape and storage. Copying a Tensor
// copies the handle, not the data. The zero Tensor is "absent" (IsZero).
type Tensor struct {
	DType DType
	Shape []int
	Buf   Storage
}

// IsZero reports whether t is the zero (absent) tensor.
func (t Tensor) IsZero() bool { return t.Buf == nil }

// Len is the number of elements, the product of Shape.
func (t Tensor) Len() int {
	if t.Buf == nil {
		return 0
	}
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Rows is the first dimension (1 for a scalar).
func (t Tensor) Rows() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[0]
}

// Cols is the product of all dimensions after the first: the width of t seen
// as a [Rows, Cols] matrix.
func (t Tensor) Cols() int {
	n := 1
	for _, d := range t.Shape[min(1, len(t.Shape)):] {
		n *= d
	}
	return n
}

// Reshape returns a handle on the same storage with another shape of the same
// element count. It panics if the counts differ (a programming error).
func (t Tensor) Reshape(shape ...int) Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n != t.Len() {
		panic(fmt.Sprintf("tensor: reshape %v to %v changes the element count", t.Shape, shape))
	}
	return Tensor{DType: t.DType, Shape: append([]int(nil), shape...), Buf: t.Buf}
}

func (t Tensor) String() string {
	var b strings.Builder
	b.WriteString(t.DType.String())
	b.WriteByte('[')
	for i, d := range t.Shape {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// NumElems is the product of dims.
func NumElems(dims ...int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// Prefix returns a 1-D handle on the first n elements of t's storage (the
// used part of a capacity-sized buffer, e.g. this batch's keys).
func (t Tensor) Prefix(n int) Tensor {
	if n < 0 || n > t.Buf.Len() {
		panic(fmt.Sprintf("tensor: prefix %d of %v", n, t))
	}
	return Tensor{DType: t.DType, Shape: []int{n}, Buf: t.Buf}
}
