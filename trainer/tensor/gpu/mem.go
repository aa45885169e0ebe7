package gpu

import (
	"math"
	"unsafe"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// store is a tensor's device buffer.
type store struct {
	be *Backend
	p  cuda.Ptr
	n  int // elements
}

func (s *store) Len() int { return s.n }

// Ptr is the device address of t's first element (0 for the zero tensor).
// t must belong to a GPU backend.
func Ptr(t tensor.Tensor) cuda.Ptr {
	if t.Buf == nil {
		return 0
	}
	return t.Buf.(*store).p
}

// p is Ptr for kernel arguments.
func p(t tensor.Tensor) cuda.Ptr { return Ptr(t) }

// Alloc returns a zeroed tensor in device memory.
func (be *Backend) Alloc(dt tensor.DType, shape ...int) tensor.Tensor {
	be.graphBreak("Alloc")
	n := tensor.NumElems(shape...)
	t := tensor.Tensor{DType: dt, Shape: append([]int(nil), shape...), Buf: &store{be: be}}
	switch {
	case n < 0:
		be.fail("alloc", tensor.ErrShape, "negative shape %v", shape)
		return t
	case dt != tensor.Float32 && dt != tensor.Int32 && dt != tensor.Int64 && dt != tensor.Uint32 && !dt.IsHalf():
		be.fail("alloc", tensor.ErrDType, "%v on %s", dt, be.Name())
		return t
	}
	s := t.Buf.(*store)
	be.do("alloc", func(c *cuda.Ctx) error {
		ptr, err := c.Malloc(n * dt.Size())
		if err != nil {
			return err
		}
		s.p, s.n = ptr, n
		return c.Memset8(ptr, 0, n*dt.Size(), be.s)
	})
	return t
}

// Free returns t's memory to the device cache; t must not be used again.
func (be *Backend) Free(t tensor.Tensor) {
	s, ok := t.Buf.(*store)
	if !ok || s.p == 0 {
		return
	}
	be.graphBreak("Free")
	ptr := s.p
	s.p, s.n = 0, 0
	be.dev.Do(func(c *cuda.Ctx) error { return c.Free(ptr) })
}

// owned checks that every present tensor was allocated here and is live.
func (be *Backend) owned(op string, ts ...tensor.Tensor) bool {
	if be.err != nil {
		return false
	}
	for _, t := range ts {
		if t.Buf == nil {
			continue
		}
		s, ok := t.Buf.(*store)
		if !ok || s.be != be || s.p == 0 || t.Len() > s.n {
			be.fail(op, tensor.ErrShape, "tensor %v not owned by %s or freed", t, be.Name())
			return false
		}
	}
	return true
}

// floats checks ownership and that every present tensor is Float32.
func (be *Backend) floats(op string, ts ...tensor.Tensor) bool {
	if !be.owned(op, ts...) {
		return false
	}
	for _, t := range ts {
		if t.Buf != nil && t.DType != tensor.Float32 {
			be.fail(op, tensor.ErrDType, "operands %v (the GPU computes in float32)", ts)
			return false
		}
	}
	return true
}

// halves checks ownership and that every present tensor is Float32,
// Float16 or BFloat16: the operands of an operation with half-precision
// kernels (the kernels take each operand's dtype code, dt).
func (be *Backend) halves(op string, ts ...tensor.Tensor) bool {
	if !be.owned(op, ts...) {
		return false
	}
	for _, t := range ts {
		if t.Buf != nil && t.DType != tensor.Float32 && !t.DType.IsHalf() {
			be.fail(op, tensor.ErrDType, "operands %v (float32, float16 or bfloat16 on the GPU)", ts)
			return false
		}
	}
	return true
}

// dt is t's dtype code for a kernel argument (common.cuh's DT_*: the
// tensor.DType value).
func dt(t tensor.Tensor) int { return int(t.DType) }

// check records err, a tensor.Check* result, as the sticky error and
// reports whether it was nil.
func (be *Backend) check(err error) bool {
	if err != nil && be.err == nil {
		be.err = err
	}
	return err == nil
}

// hostBytes views a host slice of a supported type as bytes and its dtype.
func hostBytes(x any) ([]byte, tensor.DType) {
	switch s := x.(type) {
	case []float32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s)), tensor.Float32
	case []int32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s)), tensor.Int32
	case []uint32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s)), tensor.Uint32
	case []int64:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s)), tensor.Int64
	case f16s:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s)), tensor.Float16
	case bf16s:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s)), tensor.BFloat16
	}
	return nil, tensor.Invalid
}

// f16s and bf16s are host bit patterns of Float16 and BFloat16 tensors
// (tensor.F16Bits, tensor.BF16Bits).
type (
	f16s  []uint16
	bf16s []uint16
)

// halfBits rounds float32 host values to dt's bit patterns.
func halfBits(dt tensor.DType, f []float32) any {
	h := make([]uint16, len(f))
	if dt == tensor.Float16 {
		for i, v := range f {
			h[i] = tensor.F16Bits(v)
		}
		return f16s(h)
	}
	for i, v := range f {
		h[i] = tensor.BF16Bits(v)
	}
	return bf16s(h)
}

// Upload copies a host slice into dst through pinned staging memory
// (synchronous with respect to the host slice: it may be reused on return).
// []float64 is accepted for Float32 tensors and rounded.
func (be *Backend) Upload(dst tensor.Tensor, src any) {
	be.graphBreak("Upload")
	if !be.owned("upload", dst) {
		return
	}
	if f64, ok := src.([]float64); ok && (dst.DType == tensor.Float32 || dst.DType.IsHalf()) {
		f := make([]float32, len(f64))
		for i, v := range f64 {
			f[i] = float32(v)
		}
		src = f
	}
	if f32, ok := src.([]float32); ok && dst.DType.IsHalf() {
		src = halfBits(dst.DType, f32)
	}
	b, dt := hostBytes(src)
	if dt == tensor.Invalid || dt != dst.DType || len(b) != dst.Len()*dt.Size() {
		be.fail("upload", tensor.ErrShape, "host %T of %d bytes into %v", src, len(b), dst)
		return
	}
	be.do("upload", func(c *cuda.Ctx) error {
		// Staged in chunks so the pinned buffer stays small.
		const chunk = 64 << 20
		for off := 0; off < len(b); off += chunk {
			n := min(chunk, len(b)-off)
			h, err := be.staging(c, n)
			if err != nil {
				return err
			}
			if err := c.StreamSync(be.s); err != nil { // staging free again
				return err
			}
			copy(h, b[off:off+n])
			if err := c.HtoD(Ptr(dst).Add(off), unsafe.Pointer(&h[0]), n, be.s); err != nil {
				return err
			}
		}
		return c.StreamSync(be.s)
	})
}

// UploadAsync queues a copy from pinned host memory (e.g. a batch decoded
// into cuda.PinnedAllocator buffers) into dst on stream s; the host memory
// must stay untouched until the copy completes.
func (be *Backend) UploadAsync(c *cuda.Ctx, s cuda.Stream, dst tensor.Tensor, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.HtoD(Ptr(dst), unsafe.Pointer(&src[0]), len(src), s)
}

// Download copies src to a host slice of its dtype and length (float32
// tensors may also be read into []float64; Float16 and BFloat16 tensors
// are read into []float32 or []float64, exactly); it waits and returns Err.
func (be *Backend) Download(dst any, src tensor.Tensor) error {
	be.graphBreak("Download")
	be.JoinGrads() // side-stream weight gradients (fused.go)
	if !be.owned("download", src) {
		return be.err
	}
	target := dst
	var f64 []float64
	if d, ok := dst.([]float64); ok && (src.DType == tensor.Float32 || src.DType.IsHalf()) {
		f64 = d
		target = make([]float32, len(d))
	}
	var f32 []float32 // half bits to widen into it
	var bits []uint16
	if d, ok := target.([]float32); ok && src.DType.IsHalf() {
		f32, bits = d, make([]uint16, len(d))
		if src.DType == tensor.Float16 {
			target = f16s(bits)
		} else {
			target = bf16s(bits)
		}
	}
	b, dt := hostBytes(target)
	if dt == tensor.Invalid || dt != src.DType || len(b) != src.Len()*dt.Size() {
		be.fail("download", tensor.ErrShape, "%v into host %T", src, dst)
		return be.err
	}
	be.do("download", func(c *cuda.Ctx) error {
		const chunk = 64 << 20
		for off := 0; off < len(b); off += chunk {
			n := min(chunk, len(b)-off)
			h, err := be.staging(c, n)
			if err != nil {
				return err
			}
			if err := c.DtoH(unsafe.Pointer(&h[0]), Ptr(src).Add(off), n, be.s); err != nil {
				return err
			}
			if err := c.StreamSync(be.s); err != nil {
				return err
			}
			copy(b[off:off+n], h)
		}
		return nil
	})
	for i, h := range bits {
		if src.DType == tensor.Float16 {
			f32[i] = tensor.F16Value(h)
		} else {
			f32[i] = tensor.BF16Value(h)
		}
	}
	if f64 != nil {
		fs := f32
		if fs == nil {
			fs = target.([]float32)
		}
		for i, v := range fs {
			f64[i] = float64(v)
		}
	}
	if be.err != nil {
		return be.err
	}
	return be.Sync()
}

// Fill sets every element to v.
func (be *Backend) Fill(t tensor.Tensor, v float64) {
	if !be.owned("fill", t) || t.Len() == 0 {
		return
	}
	n := t.Len()
	be.do("fill", func(c *cuda.Ctx) error {
		switch t.DType {
		case tensor.Float32:
			return c.Memset32(Ptr(t), math.Float32bits(float32(v)), n, be.s)
		case tensor.Int32:
			return c.Memset32(Ptr(t), uint32(int32(v)), n, be.s)
		case tensor.Uint32:
			return c.Memset32(Ptr(t), uint32(v), n, be.s)
		case tensor.Float16:
			return c.Memset16(Ptr(t), tensor.F16Bits(float32(v)), n, be.s)
		case tensor.BFloat16:
			return c.Memset16(Ptr(t), tensor.BF16Bits(float32(v)), n, be.s)
		}
		x := int64(v)
		if v == float64(tensor.EmptyKey) {
			x = tensor.EmptyKey
		}
		return be.launch1(c, "fill_u64", n, p(t), uint64(x), int64(n))
	})
}

// Copy copies src into dst (same dtype and length).
func (be *Backend) Copy(dst, src tensor.Tensor) {
	if !be.owned("copy", dst, src) || !be.check(tensor.CheckCopy("copy", dst, src)) {
		return
	}
	be.do("copy", func(c *cuda.Ctx) error { return c.DtoD(Ptr(dst), Ptr(src), dst.Len()*dst.DType.Size(), be.s) })
}

// Convert casts src into dst elementwise.
func (be *Backend) Convert(dst, src tensor.Tensor) {
	if !be.owned("convert", dst, src) || !be.check(tensor.CheckConvert("convert", dst, src)) {
		return
	}
	n := dst.Len()
	be.do("convert", func(c *cuda.Ctx) error {
		return be.launch1(c, "convert", n, p(dst), int(dst.DType), p(src), int(src.DType), int64(n))
	})
}

// MemInfo implements tensor.DeviceMemory: the device's free and total
// memory.
func (be *Backend) MemInfo() (free, total int64, err error) {
	err = be.dev.Do(func(c *cuda.Ctx) error {
		var e error
		free, total, e = c.MemInfo()
		return e
	})
	return free, total, err
}

var _ tensor.DeviceMemory = (*Backend)(nil)
