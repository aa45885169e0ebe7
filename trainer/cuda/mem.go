package cuda

import (
	"fmt"
	"sort"
	"unsafe"
)

// pool is a caching allocator over a raw allocator: freed blocks are kept
// per rounded size and handed out again; when the raw allocator runs out,
// the cache is released and the allocation retried once.
type pool struct {
	kind    string
	alloc   func(n int) (uintptr, error)
	release func(p uintptr) error
	free    map[int][]uintptr
	size    map[uintptr]int // live blocks → rounded size
	InUse   int64
	Cached  int64
	Peak    int64
}

// roundSize: 512-byte granules below 1 MiB, 2 MiB granules above, so
// batch-sized buffers of one shape always share a bin.
func roundSize(n int) int {
	if n <= 0 {
		return 512
	}
	if n < 1<<20 {
		return (n + 511) &^ 511
	}
	return (n + (2<<20 - 1)) &^ (2<<20 - 1)
}

func (p *pool) get(n int) (uintptr, error) {
	if p.free == nil {
		p.free, p.size = map[int][]uintptr{}, map[uintptr]int{}
	}
	r := roundSize(n)
	if l := p.free[r]; len(l) > 0 {
		a := l[len(l)-1]
		p.free[r] = l[:len(l)-1]
		p.Cached -= int64(r)
		p.size[a] = r
		p.InUse += int64(r)
		return a, nil
	}
	a, err := p.alloc(r)
	if err != nil && IsOutOfMemory(err) && p.Cached > 0 {
		p.drainFree()
		a, err = p.alloc(r)
	}
	if err != nil {
		return 0, fmt.Errorf("allocating %d bytes of %s memory (%d in use, %d cached): %w", n, p.kind, p.InUse, p.Cached, err)
	}
	p.size[a] = r
	p.InUse += int64(r)
	p.Peak = max(p.Peak, p.InUse)
	return a, nil
}

func (p *pool) put(a uintptr) error {
	r, ok := p.size[a]
	if !ok {
		return fmt.Errorf("cuda: freeing %s address %#x not allocated here", p.kind, a)
	}
	delete(p.size, a)
	p.InUse -= int64(r)
	p.Cached += int64(r)
	p.free[r] = append(p.free[r], a)
	return nil
}

func (p *pool) drainFree() {
	sizes := make([]int, 0, len(p.free))
	for s := range p.free {
		sizes = append(sizes, s)
	}
	sort.Ints(sizes)
	for _, s := range sizes {
		for _, a := range p.free[s] {
			p.release(a)
		}
	}
	clear(p.free)
	p.Cached = 0
}

// drain releases everything, live blocks included (context teardown).
func (p *pool) drain() {
	p.drainFree()
	for a := range p.size {
		p.release(a)
	}
	clear(p.size)
	p.InUse = 0
}

func (c *Ctx) rawMalloc(n int) (uintptr, error) {
	var a uintptr
	return a, check("cuMemAlloc_v2", call(drv.cuMemAlloc, uintptr(unsafe.Pointer(&a)), uintptr(n)))
}

func (c *Ctx) rawFree(a uintptr) error { return check("cuMemFree_v2", call(drv.cuMemFree, a)) }

const memHostAllocPortable = 1

func (c *Ctx) rawHostAlloc(n int) (uintptr, error) {
	var a uintptr
	return a, check("cuMemHostAlloc", call(drv.cuMemHostAlloc, uintptr(unsafe.Pointer(&a)), uintptr(n), memHostAllocPortable))
}

func (c *Ctx) rawHostFree(a uintptr) error { return check("cuMemFreeHost", call(drv.cuMemFreeHost, a)) }

// Malloc returns n bytes of device memory from the caching allocator.
func (c *Ctx) Malloc(n int) (Ptr, error) {
	a, err := c.dmem.get(n)
	return Ptr(a), err
}

// Free returns device memory to the cache. Work already queued on a stream
// may still use it: reuse is safe for work queued later on the same stream.
func (c *Ctx) Free(p Ptr) error { return c.dmem.put(uintptr(p)) }

// DeviceMemory reports the caching allocator's bytes in use, cached and the
// peak in use.
func (c *Ctx) DeviceMemory() (inUse, cached, peak int64) {
	return c.dmem.InUse, c.dmem.Cached, c.dmem.Peak
}

// HostAlloc returns n bytes of pinned, portable host memory.
func (c *Ctx) HostAlloc(n int) ([]byte, error) {
	a, err := c.hmem.get(n)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(unsafePtr(a)), roundSize(n))[:n:n], nil
}

// HostFree returns pinned memory from HostAlloc to the cache.
func (c *Ctx) HostFree(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	return c.hmem.put(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// unsafePtr converts a C address (not Go memory) to a pointer.
func unsafePtr(a uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(nil), a) }

// HtoD queues a copy of n bytes from host address src (pinned memory for an
// asynchronous copy; pageable memory makes the driver stage it) to dst.
func (c *Ctx) HtoD(dst Ptr, src unsafe.Pointer, n int, s Stream) error {
	if c.tape != nil {
		if skip, err := c.tape.host("cuMemcpyHtoDAsync"); skip {
			return err
		}
	}
	if n == 0 {
		return nil
	}
	return check("cuMemcpyHtoDAsync_v2", call(drv.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

// DtoH queues a copy of n bytes from src to host memory dst.
func (c *Ctx) DtoH(dst unsafe.Pointer, src Ptr, n int, s Stream) error {
	if c.tape != nil {
		if skip, err := c.tape.host("cuMemcpyDtoHAsync"); skip {
			return err
		}
	}
	if n == 0 {
		return nil
	}
	return check("cuMemcpyDtoHAsync_v2", call(drv.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

// DtoD queues a device-to-device copy.
func (c *Ctx) DtoD(dst, src Ptr, n int, s Stream) error {
	if c.tape != nil && c.tape.note("cuMemcpyDtoDAsync", 0, uint64(dst), uint64(src), uint64(n), uint64(s)) {
		return nil
	}
	if n == 0 {
		return nil
	}
	return check("cuMemcpyDtoDAsync_v2", call(drv.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

// Memset32 queues setting n 32-bit words at dst to v.
func (c *Ctx) Memset32(dst Ptr, v uint32, n int, s Stream) error {
	if c.tape != nil && c.tape.note("cuMemsetD32Async", 0, uint64(dst), uint64(v), uint64(n), uint64(s)) {
		return nil
	}
	if n == 0 {
		return nil
	}
	return check("cuMemsetD32Async", call(drv.cuMemsetD32Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s)))
}

// Memset16 queues setting n 16-bit words at dst to v.
func (c *Ctx) Memset16(dst Ptr, v uint16, n int, s Stream) error {
	if c.tape != nil && c.tape.note("cuMemsetD16Async", 0, uint64(dst), uint64(v), uint64(n), uint64(s)) {
		return nil
	}
	if n == 0 {
		return nil
	}
	return check("cuMemsetD16Async", call(drv.cuMemsetD16Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s)))
}

// Memset8 queues setting n bytes at dst to v.
func (c *Ctx) Memset8(dst Ptr, v byte, n int, s Stream) error {
	if c.tape != nil && c.tape.note("cuMemsetD8Async", 0, uint64(dst), uint64(v), uint64(n), uint64(s)) {
		return nil
	}
	if n == 0 {
		return nil
	}
	return check("cuMemsetD8Async", call(drv.cuMemsetD8Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s)))
}

// NewStream creates a non-blocking stream.
func (c *Ctx) NewStream() (Stream, error) {
	var s uintptr
	return Stream(s), check("cuStreamCreate", call(drv.cuStreamCreate, uintptr(unsafe.Pointer(&s)), 1))
}

// DestroyStream destroys s.
func (c *Ctx) DestroyStream(s Stream) error {
	c.ltRelease(s)
	return check("cuStreamDestroy", call(drv.cuStreamDestroy, uintptr(s)))
}

// StreamSync waits for s.
func (c *Ctx) StreamSync(s Stream) error {
	if c.tape != nil {
		if skip, err := c.tape.host("cuStreamSynchronize"); skip {
			return err
		}
	}
	return check("cuStreamSynchronize", call(drv.cuStreamSynchronize, uintptr(s)))
}

// NewEvent creates an event; timing=false makes a cheaper sync-only event.
func (c *Ctx) NewEvent(timing bool) (Event, error) {
	var e uintptr
	flags := uintptr(2) // CU_EVENT_DISABLE_TIMING
	if timing {
		flags = 0
	}
	return Event(e), check("cuEventCreate", call(drv.cuEventCreate, uintptr(unsafe.Pointer(&e)), flags))
}

// DestroyEvent destroys e.
func (c *Ctx) DestroyEvent(e Event) error {
	return check("cuEventDestroy", call(drv.cuEventDestroy, uintptr(e)))
}

// Record records e on s.
func (c *Ctx) Record(e Event, s Stream) error {
	if c.tape != nil && c.tape.note("cuEventRecord", 0, uint64(e), uint64(s)) {
		return nil
	}
	return check("cuEventRecord", call(drv.cuEventRecord, uintptr(e), uintptr(s)))
}

// Wait makes s wait for e (no host wait).
func (c *Ctx) Wait(s Stream, e Event) error {
	if c.tape != nil && c.tape.note("cuStreamWaitEvent", 0, uint64(s), uint64(e)) {
		return nil
	}
	return check("cuStreamWaitEvent", call(drv.cuStreamWaitEvent, uintptr(s), uintptr(e), 0))
}

// EventSync waits on the host for e.
func (c *Ctx) EventSync(e Event) error {
	if c.tape != nil {
		if skip, err := c.tape.host("cuEventSynchronize"); skip {
			return err
		}
	}
	return check("cuEventSynchronize", call(drv.cuEventSynchronize, uintptr(e)))
}

// EventDone reports whether the work before e has completed, without
// waiting (cuEventQuery).
func (c *Ctx) EventDone(e Event) (bool, error) {
	if c.tape != nil {
		if skip, err := c.tape.host("cuEventQuery"); skip {
			return false, err
		}
	}
	const notReady = 600 // CUDA_ERROR_NOT_READY
	r := call(drv.cuEventQuery, uintptr(e))
	if r == notReady {
		return false, nil
	}
	return r == 0, check("cuEventQuery", r)
}

// Elapsed is the time between two timing events in milliseconds.
func (c *Ctx) Elapsed(start, end Event) (float32, error) {
	var ms float32
	return ms, check("cuEventElapsedTime", call(drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end)))
}
