//go:build linux

package asyncio

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// uring is one io_uring instance (Linux 5.6+: IORING_OP_READ), owned by one
// I/O thread's goroutine. The kernel shares three regions with us:
//
//	SQ ring: head | tail | mask | entries | flags | dropped | array[entries] (u32 indices into SQEs)
//	CQ ring: head | tail | mask | entries | overflow | cqes[entries] (16 B: user_data u64, res i32, flags u32)
//	SQEs:    entries × 64 B (opcode u8, flags u8, ioprio u16, fd i32, off u64, addr u64, len u32, …, user_data u64 @32)
//
// We write SQEs and advance the SQ tail (store-release); the kernel
// advances the CQ tail; we read CQEs and advance the CQ head.
type uring struct {
	fd             int
	sq, cq, sqes   []byte
	sqHead, sqTail *uint32
	sqMask         uint32
	sqArray        []uint32
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []byte
	pending        uint32 // SQEs written, not yet submitted
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  [10]uint32 // head, tail, ring_mask, ring_entries, flags, dropped, array, resv1, user_addr(2)
	cqOff                                                                  [10]uint32 // head, tail, ring_mask, ring_entries, overflow, cqes, flags, resv1, user_addr(2)
}

const (
	uringOffSQRing   = 0
	uringOffCQRing   = 0x8000000
	uringOffSQEs     = 0x10000000
	uringFeatSingleM = 1
	uringOpRead      = 22
	uringEnterGetEv  = 1
)

var errNoUring = errors.New("io_uring unavailable")

func newURing(entries int) (*uring, error) {
	var p uringParams
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, fmt.Errorf("%w: io_uring_setup: %v", errNoUring, e)
	}
	u := &uring{fd: int(fd)}
	sqSize := int(p.sqOff[6] + p.sqEntries*4)
	cqSize := int(p.cqOff[5] + p.cqEntries*16)
	if p.features&uringFeatSingleM != 0 {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	fail := func(what string, err error) (*uring, error) {
		u.close()
		return nil, fmt.Errorf("%w: mmap %s: %v", errNoUring, what, err)
	}
	if u.sq, err = unix.Mmap(u.fd, uringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail("SQ ring", err)
	}
	if p.features&uringFeatSingleM != 0 {
		u.cq = u.sq
	} else if u.cq, err = unix.Mmap(u.fd, uringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail("CQ ring", err)
	}
	if u.sqes, err = unix.Mmap(u.fd, uringOffSQEs, int(p.sqEntries)*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail("SQEs", err)
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	u.sqHead, u.sqTail, u.sqMask = u32(u.sq, p.sqOff[0]), u32(u.sq, p.sqOff[1]), *u32(u.sq, p.sqOff[2])
	u.sqArray = unsafe.Slice(u32(u.sq, p.sqOff[6]), p.sqEntries)
	u.cqHead, u.cqTail, u.cqMask = u32(u.cq, p.cqOff[0]), u32(u.cq, p.cqOff[1]), *u32(u.cq, p.cqOff[2])
	u.cqes = u.cq[p.cqOff[5] : p.cqOff[5]+p.cqEntries*16]
	return u, nil
}

func (u *uring) close() {
	if u.sqes != nil {
		unix.Munmap(u.sqes)
	}
	if u.cq != nil && &u.cq[0] != &u.sq[0] {
		unix.Munmap(u.cq)
	}
	if u.sq != nil {
		unix.Munmap(u.sq)
	}
	unix.Close(u.fd)
}

// prepRead queues a read of len(p) bytes at off of fd into p (which must
// stay alive and unmoved until its completion: Go heap memory does not
// move). The caller never has more requests in flight than SQ entries.
func (u *uring) prepRead(fd int, p []byte, off int64, user uint64) {
	tail := atomic.LoadUint32(u.sqTail) + u.pending
	i := tail & u.sqMask
	sqe := u.sqes[i*64 : i*64+64]
	clear(sqe)
	sqe[0] = uringOpRead
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(fd)
	*(*uint64)(unsafe.Pointer(&sqe[8])) = uint64(off)
	*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))
	*(*uint32)(unsafe.Pointer(&sqe[24])) = uint32(len(p))
	*(*uint64)(unsafe.Pointer(&sqe[32])) = user
	u.sqArray[i] = i
	u.pending++
}

// submitAndWait publishes the queued SQEs and waits for at least one
// completion.
func (u *uring) submitAndWait() error {
	n := u.pending
	atomic.StoreUint32(u.sqTail, atomic.LoadUint32(u.sqTail)+n)
	u.pending = 0
	for {
		_, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), uintptr(n), 1, uringEnterGetEv, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR, syscall.EAGAIN, syscall.EBUSY:
			n = 0 // the SQEs were taken; wait again
			continue
		}
		return fmt.Errorf("io_uring_enter: %w", e)
	}
}

// reap calls fn for every completion ready.
func (u *uring) reap(fn func(user uint64, res int32)) {
	head := atomic.LoadUint32(u.cqHead)
	tail := atomic.LoadUint32(u.cqTail)
	for ; head != tail; head++ {
		c := u.cqes[(head&u.cqMask)*16:]
		fn(*(*uint64)(unsafe.Pointer(&c[0])), *(*int32)(unsafe.Pointer(&c[8])))
	}
	atomic.StoreUint32(u.cqHead, head)
}

// fdFile is implemented by files the io_uring engine can read (OpenFile's).
type fdFile interface{ Fd() uintptr }

// uringWorker is thread t's reader when the engine is io_uring: one
// goroutine keeps up to IODepth block reads in flight on its own ring,
// resubmits the rest of a short read, and completes buffers like the
// pread workers. On Close it waits for the reads in flight before
// returning, so no buffer is written after the Reader lets it go.
func (r *Reader) uringWorker(t *ioThread, u *uring, fd int) {
	defer r.wg.Done()
	defer u.close()
	depth := r.p.IODepth
	type req struct {
		j    job
		done int
	}
	reqs := make([]req, depth)
	free := make([]int, 0, depth)
	for i := depth - 1; i >= 0; i-- {
		free = append(free, i)
	}
	inflight := 0
	issue := func(k int) {
		q := &reqs[k]
		p := q.j.buf.mem[q.j.mem+q.done : q.j.mem+q.j.n]
		r.requests.Add(1)
		u.prepRead(fd, p, q.j.off+int64(q.done), uint64(k))
	}
	finish := func(k int, err error) {
		q := &reqs[k]
		if err != nil {
			q.j.buf.fail(err)
		}
		if q.j.buf.pending.Add(-1) == 0 {
			r.complete(q.j.buf)
		}
		q.j = job{}
		free = append(free, k)
		inflight--
	}
	for {
		stopping := r.ctx.Err() != nil
		for !stopping && inflight < depth {
			var j job
			if inflight == 0 {
				select {
				case j = <-t.jobs:
				case <-r.ctx.Done():
					stopping = true
					continue
				}
			} else {
				select {
				case j = <-t.jobs:
				default:
				}
				if j.buf == nil {
					break
				}
			}
			k := free[len(free)-1]
			free = free[:len(free)-1]
			reqs[k] = req{j: j}
			inflight++
			issue(k)
		}
		if inflight == 0 {
			return
		}
		if err := u.submitAndWait(); err != nil {
			// The ring is unusable: fail what is in flight (after the
			// kernel let go of it is unknowable, so stop reading).
			for k := range reqs {
				if reqs[k].j.buf != nil {
					finish(k, r.errorf(reqs[k].j.off+int64(reqs[k].done), int64(reqs[k].j.want-reqs[k].done), err, ""))
				}
			}
			return
		}
		u.reap(func(user uint64, res int32) {
			k := int(user)
			q := &reqs[k]
			switch {
			case res < 0:
				finish(k, r.errorf(q.j.off+int64(q.done), int64(q.j.want-q.done), syscall.Errno(-res), ""))
				return
			case res == 0 && q.done < q.j.want:
				finish(k, r.errorf(q.j.off+int64(q.done), int64(q.j.want-q.done), io.ErrUnexpectedEOF, "file ended %d bytes early", q.j.want-q.done))
				return
			}
			q.done += int(res)
			r.bytes.Add(int64(res))
			if q.done >= q.j.want {
				finish(k, nil)
				return
			}
			if r.ctx.Err() != nil {
				finish(k, ErrClosed)
				return
			}
			issue(k) // a short read: the rest of the block
		})
	}
}

// startURing returns the io_uring workers' start function for f, or an
// error when the engine cannot run (no fd, no io_uring).
func (r *Reader) startURing(f File) (func(t *ioThread), error) {
	ff, ok := f.(fdFile)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no file descriptor", errNoUring, f.Name())
	}
	fd := int(ff.Fd())
	rings := make([]*uring, len(r.threads))
	for i := range rings {
		u, err := newURing(r.p.IODepth)
		if err != nil {
			for _, x := range rings[:i] {
				x.close()
			}
			return nil, err
		}
		rings[i] = u
	}
	next := 0
	return func(t *ioThread) {
		u := rings[next]
		next++
		go r.uringWorker(t, u, fd)
	}, nil
}
