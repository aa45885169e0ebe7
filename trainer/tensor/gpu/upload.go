package gpu

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Uploader moves batches from pinned host memory to the device on a copy
// stream of its own, so the upload of batch n+1 overlaps the training step
// of batch n:
//
//	prefetch goroutine                 training goroutine
//	  decode batch n+1 (pinned)
//	  Stage: copy stream waits          Commit(n): compute stream waits
//	    released[s], H2D into             ready[s], device copies
//	    staging s, records ready[s]        staging s → inputs, records
//	  (host waits for its copies)          released[s], slot s free again
//
// stageSlots staging slots (device buffers sized like the inputs) take
// turns. Stage is called from one goroutine (the prefetcher) and Commit
// from the training goroutine; the free-slot channel orders them, and
// events order the two streams on the device: nothing waits on the host
// except Stage for its own copies (so its host buffers can be refilled).
type Uploader struct {
	be    *Backend
	s     cuda.Stream
	slots [stageSlots]stageSlot
	free  chan int
	done  chan struct{}
	ct    copyTimes // TimeCopies (profile.go)
}

// stageSlots is the number of staging slots: one being committed, one
// staged and waiting in the prefetcher's queue, one the prefetcher copies
// into meanwhile. With two, the next batch's copy could start only once
// the previous Commit had freed its slot: on the H200 (2026-12-03, bf16
// DLRM from Parquet at batch 2048) the pipeline cost 15.8–16.4% of the
// resident rate with two slots, 10.2–10.6% with three and 9.6–9.7% with
// four (not worth a fourth batch-sized device buffer: at batch 65 536 the
// cost is 1.7–2.1% either way).
const stageSlots = 3

type stageSlot struct {
	bufs     []tensor.Tensor // device staging, one per input, of the input's dtype and capacity
	sizes    []int           // bytes staged this round
	staged   []tensor.Tensor // Commit's views of bufs (reused)
	ready    cuda.Event      // copies into this slot done (copy stream)
	released cuda.Event      // compute has read this slot (compute stream)
	copied   cuda.Event      // for the host wait in Stage
}

// NewUploader makes an uploader for inputs shaped like dsts (the tensors
// Commit fills: dtype and capacity of each staging buffer). An input staged
// with a different host dtype (Int32 keys for an Int64 input) names it in
// stageTypes (Invalid means the input's own dtype).
func (be *Backend) NewUploader(dsts []tensor.Tensor, stageTypes []tensor.DType) (*Uploader, error) {
	u := &Uploader{be: be, free: make(chan int, stageSlots), done: make(chan struct{})}
	for i := range u.slots {
		sl := &u.slots[i]
		for k, d := range dsts {
			dt := d.DType
			if k < len(stageTypes) && stageTypes[k] != tensor.Invalid {
				dt = stageTypes[k]
			}
			sl.bufs = append(sl.bufs, be.Alloc(dt, max(d.Len(), 1)))
		}
		sl.sizes = make([]int, len(dsts))
	}
	if err := be.Err(); err != nil {
		return nil, err
	}
	err := be.dev.Do(func(c *cuda.Ctx) error {
		var err error
		if u.s, err = c.NewStream(); err != nil {
			return err
		}
		for i := range u.slots {
			sl := &u.slots[i]
			for _, e := range []*cuda.Event{&sl.ready, &sl.released, &sl.copied} {
				if *e, err = c.NewEvent(false); err != nil {
					return err
				}
			}
			// released starts "done" so the first Stage need not wait.
			if err := c.Record(sl.released, be.s); err != nil {
				return err
			}
		}
		return u.newCopyTimers(c)
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: uploader: %w", err)
	}
	for i := range u.slots {
		u.free <- i
	}
	return u, nil
}

// PinnedAllocator is an allocator (a formats.Allocator) of pinned host
// memory of this backend's device, for batches that Stage uploads.
func (be *Backend) PinnedAllocator() tensor.HostAllocator { return cuda.PinnedAllocator{Dev: be.dev} }

// NewStaging implements tensor.Stager with an Uploader.
func (be *Backend) NewStaging(dsts []tensor.Tensor, stageTypes []tensor.DType) (tensor.Staging, error) {
	return be.NewUploader(dsts, stageTypes)
}

// Stage uploads srcs[k] (host bytes, ideally pinned) into staging slot
// buffers and returns the slot for Commit. It blocks until a slot is free
// and until its copies have finished reading srcs. Close makes it return
// an error.
func (u *Uploader) Stage(srcs [][]byte) (int, error) {
	var slot int
	select {
	case slot = <-u.free:
	case <-u.done:
		return 0, fmt.Errorf("gpu: uploader closed")
	}
	sl := &u.slots[slot]
	if len(srcs) != len(sl.bufs) {
		return 0, fmt.Errorf("gpu: staging %d buffers into %d inputs", len(srcs), len(sl.bufs))
	}
	timed := u.timing()
	err := u.be.dev.Do(func(c *cuda.Ctx) error {
		if err := c.Wait(u.s, sl.released); err != nil {
			return err
		}
		if timed {
			if err := u.markCopy(c, slot, 0); err != nil {
				return err
			}
		}
		for k, b := range srcs {
			capB := sl.bufs[k].Len() * sl.bufs[k].DType.Size()
			if len(b) > capB {
				return fmt.Errorf("gpu: staging %d bytes into input %d of %d bytes", len(b), k, capB)
			}
			sl.sizes[k] = len(b)
			if len(b) > 0 {
				if err := c.HtoD(Ptr(sl.bufs[k]), unsafe.Pointer(&b[0]), len(b), u.s); err != nil {
					return err
				}
			}
		}
		if timed {
			if err := u.markCopy(c, slot, 1); err != nil {
				return err
			}
		}
		if err := c.Record(sl.ready, u.s); err != nil {
			return err
		}
		return c.Record(sl.copied, u.s)
	})
	// Wait for the copies by polling between Do calls, so the device
	// goroutine stays free for the training goroutine's launches meanwhile
	// (a 24 MB batch takes about half a millisecond at 50 GB/s).
	for done := false; err == nil && !done; {
		err = u.be.dev.Do(func(c *cuda.Ctx) error {
			var err error
			done, err = c.EventDone(sl.copied)
			return err
		})
		if err == nil && !done {
			time.Sleep(50 * time.Microsecond)
		}
	}
	if err == nil && timed {
		err = u.addCopy(slot)
	}
	if err != nil {
		u.free <- slot
		return 0, err
	}
	return slot, nil
}

// Commit makes the compute stream wait for slot's copies, copies the staged
// bytes into dsts (converting Int32 staging into Int64 inputs; a zero
// Tensor skips an entry), runs then (when not nil) on the staged buffers,
// each cut to the elements staged, and frees the slot once the compute
// stream is past them. Errors are the backend's sticky error.
func (u *Uploader) Commit(slot int, dsts []tensor.Tensor, then func(staged []tensor.Tensor)) {
	be := u.be
	sl := &u.slots[slot]
	defer func() { u.free <- slot }()
	// One round trip to the device goroutine for the whole commit.
	be.batched(func() { u.commit(sl, dsts, then) })
}

func (u *Uploader) commit(sl *stageSlot, dsts []tensor.Tensor, then func(staged []tensor.Tensor)) {
	be := u.be
	be.do("upload", func(c *cuda.Ctx) error { return c.Wait(be.s, sl.ready) })
	for k, d := range dsts {
		src := sl.bufs[k]
		if sl.sizes[k] == 0 || d.IsZero() {
			continue
		}
		n := sl.sizes[k] / src.DType.Size()
		if src.DType == d.DType {
			be.do("upload", func(c *cuda.Ctx) error { return c.DtoD(Ptr(d), Ptr(src), sl.sizes[k], be.s) })
			continue
		}
		be.Convert(d.Prefix(n), src.Prefix(n))
	}
	if then != nil {
		sl.staged = sl.staged[:0]
		for k, b := range sl.bufs {
			sl.staged = append(sl.staged, b.Prefix(sl.sizes[k]/b.DType.Size()))
		}
		then(sl.staged)
	}
	be.do("upload", func(c *cuda.Ctx) error { return c.Record(sl.released, be.s) })
}

// Close stops Stage and frees the staging buffers (after the device is
// done with them).
func (u *Uploader) Close() error {
	select {
	case <-u.done:
		return nil
	default:
		close(u.done)
	}
	err := u.be.dev.Do(func(c *cuda.Ctx) error {
		if err := c.StreamSync(u.s); err != nil {
			return err
		}
		if err := c.StreamSync(u.be.s); err != nil {
			return err
		}
		for i := range u.slots {
			sl := &u.slots[i]
			c.DestroyEvent(sl.ready)
			c.DestroyEvent(sl.released)
			c.DestroyEvent(sl.copied)
		}
		u.freeCopyTimers(c)
		return c.DestroyStream(u.s)
	})
	for i := range u.slots {
		for _, b := range u.slots[i].bufs {
			u.be.Free(b)
		}
	}
	return err
}
