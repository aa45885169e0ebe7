package model

import (
	"fmt"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// stagingBackend is the CPU backend with a tensor.Stager, so the staged
// path of the input pipeline (Stage on the prefetch goroutine, Commit on
// the training goroutine) runs without a GPU, and counts its pinned
// allocations and stagings.
type stagingBackend struct {
	*cpu.Backend
	allocs   atomic.Int64 // PinnedAllocator().Alloc calls
	stagings atomic.Int64 // NewStaging calls
	short    atomic.Int64 // Stage calls of a batch shorter than the slot
	// failAt, when > 0, makes the failAt-th Stage call fail; badCommits
	// counts Commits of a slot that no Stage handed out.
	failAt     int64
	stages     atomic.Int64
	badCommits atomic.Int64
}

func newStagingBackend(t testing.TB) *stagingBackend { return &stagingBackend{Backend: cpuBackend(t)} }

func (b *stagingBackend) PinnedAllocator() tensor.HostAllocator { return countingPinned{b} }

type countingPinned struct{ b *stagingBackend }

func (a countingPinned) Alloc(n int) ([]byte, error) {
	a.b.allocs.Add(1)
	return formats.HeapAllocator{}.Alloc(n)
}
func (countingPinned) Free([]byte) {}

func (b *stagingBackend) NewStaging(dsts []tensor.Tensor, stageTypes []tensor.DType) (tensor.Staging, error) {
	if stageTypes != nil {
		return nil, fmt.Errorf("test staging: stage types unsupported")
	}
	b.stagings.Add(1)
	s := &cpuStaging{be: b, free: make(chan int, 2)}
	for slot := range 2 {
		for _, d := range dsts {
			s.bufs[slot] = append(s.bufs[slot], make([]byte, 0, d.Len()*d.DType.Size()))
			s.tens[slot] = append(s.tens[slot], b.Alloc(d.DType, d.Len()))
		}
		s.free <- slot
	}
	return s, b.Err()
}

// cpuStaging copies the host buffers on Stage and uploads them on Commit
// (all backend calls on the training goroutine).
type cpuStaging struct {
	be   *stagingBackend
	free chan int
	held [2]atomic.Bool // handed out by Stage, not yet committed
	bufs [2][][]byte
	tens [2][]tensor.Tensor
}

func (s *cpuStaging) Stage(srcs [][]byte) (int, error) {
	slot := <-s.free
	if n := s.be.stages.Add(1); n == s.be.failAt {
		s.free <- slot
		return 0, fmt.Errorf("test staging: stage %d fails", n)
	}
	for i, src := range srcs {
		if len(src) > cap(s.bufs[slot][i]) {
			s.free <- slot
			return 0, fmt.Errorf("test staging: %d bytes for a buffer of %d", len(src), cap(s.bufs[slot][i]))
		}
		s.bufs[slot][i] = append(s.bufs[slot][i][:0], src...)
	}
	if len(srcs) > 0 && len(srcs[0]) < cap(s.bufs[slot][0]) { // the labels
		s.be.short.Add(1)
	}
	s.held[slot].Store(true)
	return slot, nil
}

func (s *cpuStaging) Commit(slot int, dsts []tensor.Tensor, then func([]tensor.Tensor)) {
	if !s.held[slot].Swap(false) {
		s.be.badCommits.Add(1)
		return // a second free of the slot would let two batches share it
	}
	defer func() { s.free <- slot }()
	if dsts == nil && then == nil {
		return
	}
	staged := make([]tensor.Tensor, len(s.bufs[slot]))
	for i, buf := range s.bufs[slot] {
		t := s.tens[slot][i]
		n := len(buf) / t.DType.Size()
		staged[i] = t.Prefix(n)
		if n > 0 {
			s.be.Upload(staged[i], typed(t.DType, buf, n))
		}
		if i < len(dsts) && !dsts[i].IsZero() && n > 0 {
			s.be.Copy(dsts[i].Prefix(n), staged[i])
		}
	}
	if then != nil {
		then(staged)
	}
}

func (s *cpuStaging) Close() error {
	for _, ts := range s.tens {
		for _, t := range ts {
			s.be.Free(t)
		}
	}
	return nil
}

func typed(dt tensor.DType, b []byte, n int) any {
	p := unsafe.Pointer(unsafe.SliceData(b))
	switch dt {
	case tensor.Float32:
		return unsafe.Slice((*float32)(p), n)
	case tensor.Int32:
		return unsafe.Slice((*int32)(p), n)
	case tensor.Uint32:
		return unsafe.Slice((*uint32)(p), n)
	case tensor.Int64:
		return unsafe.Slice((*int64)(p), n)
	case tensor.Float64:
		return unsafe.Slice((*float64)(p), n)
	}
	panic(dt)
}

// deviceBackend is a stagingBackend whose tensors count as device memory
// (tensor.DeviceMemory) with free bytes free.
type deviceBackend struct {
	*stagingBackend
	free int64
}

func (b *deviceBackend) MemInfo() (int64, int64, error) { return b.free, 2 * b.free, nil }

var (
	_ tensor.Stager       = (*stagingBackend)(nil)
	_ tensor.DeviceMemory = (*deviceBackend)(nil)
)
