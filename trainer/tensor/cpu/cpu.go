// Package cpu is the CPU implementation of tensor.Backend: the trainer's CPU
// training path and the reference every GPU kernel is checked against.
//
// Storage is a Go slice of the tensor's dtype. Float32 tensors compute in
// float32 like a GPU kernel would; Float64 tensors run the same code in
// float64, which is the reference the trainer's gradient checks use (one
// implementation, two precisions, so the float64 check validates the exact
// code path that trains in float32).
//
// Accumulation order, which the CUDA backend will not match bit for bit
// (compare with a relative tolerance):
//   - Gemm sums over k sequentially in the tensor's dtype, per output element
//     (k = 0…K−1), then applies alpha and beta: C = alpha·acc + beta·C.
//   - Reductions over a batch or a row (ColSum, RowDot, Reduce, BatchNorm
//     statistics, loss sums, SumSquares) accumulate in float64 and round once,
//     closer to a GPU tree reduction than sequential float32.
//   - EmbeddingBag sums a bag's rows in key order; EmbeddingBagGrad sums a
//     row's occurrences in occurrence order (the sort is stable).
//   - Elementwise math (exp, sqrt, pow) is done in float64 and rounded.
//
// Parallelism: large operations split their rows (or elements) into
// contiguous ranges run on Options.Workers goroutines that the call waits
// for; nothing outlives a call. A Backend is a stream: use it from one
// goroutine at a time.
package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Options configure a CPU backend. The zero value uses every core.
type Options struct {
	// Workers is the number of goroutines a large operation uses; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
}

// Validate reports an invalid option.
func (o Options) Validate() error {
	if o.Workers < 0 {
		return fmt.Errorf("cpu: Workers %d < 0", o.Workers)
	}
	return nil
}

// Backend is the CPU tensor.Backend.
type Backend struct {
	workers int
	err     error // first failure; sticky

	// Scratch reused across calls (a Backend is single-stream).
	pack32 []float32
	pack64 []float64
	pairs  []uint64
	tmp    []uint64
	bagOf  []int32
	segs   []int32
	keys   []int64
	idx    []int32
}

var _ tensor.Backend = (*Backend)(nil)

// New returns a CPU backend.
func New(o Options) (*Backend, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	w := o.Workers
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	return &Backend{workers: w}, nil
}

// Name returns "cpu".
func (be *Backend) Name() string { return "cpu" }

// Err returns the first error.
func (be *Backend) Err() error { return be.err }

// Sync returns Err (CPU operations complete before they return).
func (be *Backend) Sync() error { return be.err }

// Reset clears the sticky error (for tests that provoke one on purpose).
func (be *Backend) Reset() { be.err = nil }

func (be *Backend) fail(op string, err error, format string, args ...any) {
	if be.err == nil {
		be.err = tensor.Errorf(op, err, format, args...)
	}
}

type store struct {
	data any // []float32, []float64, []int32, []int64, []uint32
	n    int
}

func (s *store) Len() int { return s.n }

type float interface{ ~float32 | ~float64 }

func data[T any](t tensor.Tensor) []T {
	return t.Buf.(*store).data.([]T)[:t.Len()]
}

// Data returns the slice behind a tensor of this backend, for tests and for
// host code that shares memory with the CPU backend (no copy). It panics if
// T is not t's element type.
func Data[T any](t tensor.Tensor) []T { return data[T](t) }

// Alloc returns a zeroed tensor.
func (be *Backend) Alloc(dt tensor.DType, shape ...int) tensor.Tensor {
	n := tensor.NumElems(shape...)
	if n < 0 {
		be.fail("alloc", tensor.ErrShape, "negative shape %v", shape)
		n = 0
	}
	var d any
	switch dt {
	case tensor.Float32:
		d = make([]float32, n)
	case tensor.Float64:
		d = make([]float64, n)
	case tensor.Int32:
		d = make([]int32, n)
	case tensor.Int64:
		d = make([]int64, n)
	case tensor.Uint32:
		d = make([]uint32, n)
	default:
		be.fail("alloc", tensor.ErrDType, "%v", dt)
		d = []float32{}
		n = 0
		dt = tensor.Float32
		shape = []int{0}
	}
	return tensor.Tensor{DType: dt, Shape: append([]int(nil), shape...), Buf: &store{data: d, n: n}}
}

// Free drops the storage (the garbage collector reclaims it).
func (be *Backend) Free(t tensor.Tensor) {
	if s, ok := t.Buf.(*store); ok {
		s.data, s.n = nil, 0
	}
}

func (be *Backend) owned(op string, ts ...tensor.Tensor) bool {
	if be.err != nil {
		return false
	}
	for _, t := range ts {
		if t.Buf == nil {
			continue
		}
		s, ok := t.Buf.(*store)
		if !ok || s.data == nil || t.Len() > s.n {
			be.fail(op, tensor.ErrShape, "tensor %v not owned by this backend or freed", t)
			return false
		}
	}
	return true
}

// Upload copies src into dst.
func (be *Backend) Upload(dst tensor.Tensor, src any) {
	if !be.owned("upload", dst) {
		return
	}
	if dst.IsZero() {
		be.fail("upload", tensor.ErrShape, "absent tensor")
		return
	}
	n := 0
	switch s := src.(type) {
	case []float32:
		n = copyIf(dst, s)
	case []float64:
		n = copyIf(dst, s)
	case []int32:
		n = copyIf(dst, s)
	case []int64:
		n = copyIf(dst, s)
	case []uint32:
		n = copyIf(dst, s)
	default:
		be.fail("upload", tensor.ErrDType, "host type %T", src)
		return
	}
	if n < 0 {
		be.fail("upload", tensor.ErrShape, "host %T into %v", src, dst)
	}
}

func copyIf[T any](t tensor.Tensor, s []T) int {
	d, ok := t.Buf.(*store).data.([]T)
	if !ok || len(s) != t.Len() {
		return -1
	}
	return copy(d, s)
}

// Download copies src into dst and returns Err.
func (be *Backend) Download(dst any, src tensor.Tensor) error {
	if !be.owned("download", src) {
		return be.err
	}
	if src.IsZero() {
		be.fail("download", tensor.ErrShape, "absent tensor")
		return be.err
	}
	n := 0
	switch d := dst.(type) {
	case []float32:
		n = copyOut(d, src)
	case []float64:
		n = copyOut(d, src)
	case []int32:
		n = copyOut(d, src)
	case []int64:
		n = copyOut(d, src)
	case []uint32:
		n = copyOut(d, src)
	default:
		n = -1
	}
	if n < 0 {
		be.fail("download", tensor.ErrShape, "%v into host %T", src, dst)
	}
	return be.err
}

func copyOut[T any](d []T, t tensor.Tensor) int {
	s, ok := t.Buf.(*store).data.([]T)
	if !ok || len(d) != t.Len() {
		return -1
	}
	return copy(d, s[:len(d)])
}

// Fill sets every element to v.
func (be *Backend) Fill(t tensor.Tensor, v float64) {
	if !be.owned("fill", t) {
		return
	}
	switch t.DType {
	case tensor.Float32:
		fill(data[float32](t), float32(v))
	case tensor.Float64:
		fill(data[float64](t), v)
	case tensor.Int32:
		fill(data[int32](t), int32(v))
	case tensor.Int64:
		if v == float64(tensor.EmptyKey) {
			fill(data[int64](t), tensor.EmptyKey)
		} else {
			fill(data[int64](t), int64(v))
		}
	case tensor.Uint32:
		fill(data[uint32](t), uint32(v))
	}
}

func fill[T any](d []T, v T) {
	for i := range d {
		d[i] = v
	}
}

// Copy copies src into dst.
func (be *Backend) Copy(dst, src tensor.Tensor) {
	if !be.owned("copy", dst, src) || !be.check(tensor.CheckCopy("copy", dst, src)) {
		return
	}
	switch dst.DType {
	case tensor.Float32:
		copy(data[float32](dst), data[float32](src))
	case tensor.Float64:
		copy(data[float64](dst), data[float64](src))
	case tensor.Int32:
		copy(data[int32](dst), data[int32](src))
	case tensor.Int64:
		copy(data[int64](dst), data[int64](src))
	case tensor.Uint32:
		copy(data[uint32](dst), data[uint32](src))
	}
}

type number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint32
}

// Convert casts src into dst.
func (be *Backend) Convert(dst, src tensor.Tensor) {
	if !be.owned("convert", dst, src) || !be.check(tensor.CheckConvert("convert", dst, src)) {
		return
	}
	switch dst.DType {
	case tensor.Float32:
		convertTo(be, data[float32](dst), src)
	case tensor.Float64:
		convertTo(be, data[float64](dst), src)
	case tensor.Int32:
		convertTo(be, data[int32](dst), src)
	case tensor.Int64:
		convertTo(be, data[int64](dst), src)
	case tensor.Uint32:
		convertTo(be, data[uint32](dst), src)
	}
}

func convertTo[D number](be *Backend, d []D, src tensor.Tensor) {
	switch src.DType {
	case tensor.Float32:
		conv(be, d, data[float32](src))
	case tensor.Float64:
		conv(be, d, data[float64](src))
	case tensor.Int32:
		conv(be, d, data[int32](src))
	case tensor.Int64:
		conv(be, d, data[int64](src))
	case tensor.Uint32:
		conv(be, d, data[uint32](src))
	}
}

func conv[D, S number](be *Backend, d []D, s []S) {
	be.par(len(d), 1<<16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] = D(s[i])
		}
	})
}

// par runs fn over [0,n) split into at most be.workers contiguous ranges of
// at least grain elements, and waits.
func (be *Backend) par(n, grain int, fn func(lo, hi int)) {
	be.parts(n, grain, func(_, lo, hi int) { fn(lo, hi) })
}

// parts is par that also passes the range's index (< be.workers).
func (be *Backend) parts(n, grain int, fn func(part, lo, hi int)) {
	if grain < 1 {
		grain = 1
	}
	w := min(be.workers, (n+grain-1)/grain)
	if w <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + w - 1) / w
	for p, lo := 0, 0; lo < n; p, lo = p+1, lo+chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(p, lo, hi)
		}()
	}
	wg.Wait()
}

// floats checks that every non-zero tensor is a float of one dtype.
func (be *Backend) floats(op string, ts ...tensor.Tensor) (tensor.DType, bool) {
	if !be.owned(op, ts...) {
		return 0, false
	}
	var dt tensor.DType
	for _, t := range ts {
		if t.Buf == nil {
			continue
		}
		if !t.DType.IsFloat() || (dt != 0 && t.DType != dt) {
			be.fail(op, tensor.ErrDType, "operands %v", ts)
			return 0, false
		}
		dt = t.DType
	}
	return dt, dt != 0
}

// check records err, a tensor.Check* result, as the sticky error and
// reports whether it was nil.
func (be *Backend) check(err error) bool {
	if err != nil && be.err == nil {
		be.err = err
	}
	return err == nil
}
