package asyncio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
)

// Range is a byte range of the file.
type Range struct {
	Off, Len int64
}

// Source yields the ranges to read, in order; ok is false at the end.
// It is called from the reader's dispatcher goroutine only.
type Source func() (r Range, ok bool)

// Buffer is one range read into aligned memory. Data stays valid until the
// buffer is passed to Release.
type Buffer struct {
	Range Range
	// Seq is the 0-based position of the range in the Source's order.
	Seq int64
	// Data is the range's bytes, trimmed from the aligned read.
	Data []byte

	mem     []byte // aligned backing memory
	pending atomic.Int32
	mu      sync.Mutex // guards err
	err     error
	done    chan struct{}
}

func (b *Buffer) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// Reader reads ranges of one file asynchronously; see the package doc.
type Reader struct {
	f      File
	p      Params
	align  int
	block  int
	maxLen int64

	free  chan *Buffer // buffers ready for reuse
	queue chan *Buffer // dispatched buffers, in Source order
	jobs  chan job

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	err      error // sticky; Next's goroutine only
	closed   bool
	bytes    atomic.Int64
	requests atomic.Int64
}

type job struct {
	buf  *Buffer
	off  int64 // aligned file offset
	mem  int   // offset into buf.mem
	n    int   // aligned request length
	want int   // bytes expected (less than n at end of file)
}

// NewReader starts reading the ranges of src from f, none longer than
// maxLen bytes. The Reader owns f and closes it in Close.
func NewReader(f File, src Source, maxLen int64, p Params) (*Reader, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if maxLen <= 0 {
		return nil, fmt.Errorf("ctrkit/asyncio: max range length %d must be > 0", maxLen)
	}
	align := p.IOAlignment
	if bs := f.BlockSize(); f.Direct() && bs > align {
		align = bs
	}
	block := (p.IOBlockSize + align - 1) &^ (align - 1)
	r := &Reader{
		f: f, p: p, align: align, block: block, maxLen: maxLen,
	}
	nbuf := p.NumThreads * p.NumBatchesPerThread
	bufLen := int((maxLen+int64(align)-1)&^int64(align-1)) + align
	r.free = make(chan *Buffer, nbuf)
	for i := 0; i < nbuf; i++ {
		r.free <- &Buffer{mem: alignedAlloc(bufLen, align)}
	}
	r.queue = make(chan *Buffer, nbuf)
	r.jobs = make(chan job, p.NumThreads*p.IODepth)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	workers := p.NumThreads * p.IODepth
	r.wg.Add(workers + 1)
	for i := 0; i < workers; i++ {
		go r.worker()
	}
	go r.dispatch(src)
	return r, nil
}

func alignedAlloc(n, align int) []byte {
	buf := make([]byte, n+align)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & uintptr(align-1))
	return buf[off : off+n : off+n]
}

// Alignment returns the alignment in use: max(IOAlignment, the device's
// logical block size when reading with O_DIRECT).
func (r *Reader) Alignment() int { return r.align }

// Engine names the I/O engine ("pread").
func (r *Reader) Engine() string { return "pread" }

// File returns the file being read.
func (r *Reader) File() File { return r.f }

// BytesRead returns the bytes read from the file so far, alignment
// padding included.
func (r *Reader) BytesRead() int64 { return r.bytes.Load() }

// Requests returns the number of read requests issued so far.
func (r *Reader) Requests() int64 { return r.requests.Load() }

func (r *Reader) dispatch(src Source) {
	defer r.wg.Done()
	defer close(r.queue)
	size := r.f.Size()
	a := int64(r.align)
	for seq := int64(0); ; seq++ {
		rg, ok := src()
		if !ok {
			return
		}
		var buf *Buffer
		select {
		case buf = <-r.free:
		case <-r.ctx.Done():
			return
		}
		buf.Range, buf.Seq, buf.err = rg, seq, nil
		buf.done = make(chan struct{})
		if rg.Off < 0 || rg.Len < 0 || rg.Len > r.maxLen || rg.Off+rg.Len > size {
			buf.err = r.errorf(rg.Off, io.ErrUnexpectedEOF,
				"range [%d, %d) outside the file (%d bytes) or longer than %d", rg.Off, rg.Off+rg.Len, size, r.maxLen)
			close(buf.done)
			select {
			case r.queue <- buf:
			case <-r.ctx.Done():
			}
			return
		}
		start := rg.Off &^ (a - 1)
		end := (rg.Off + rg.Len + a - 1) &^ (a - 1)
		buf.Data = buf.mem[rg.Off-start : rg.Off-start+rg.Len]
		nblocks := int32((end - start + int64(r.block) - 1) / int64(r.block))
		if rg.Len == 0 {
			nblocks = 0
		}
		buf.pending.Store(nblocks)
		if nblocks == 0 {
			close(buf.done)
		}
		select {
		case r.queue <- buf:
		case <-r.ctx.Done():
			return
		}
		for off := start; off < end && rg.Len > 0; off += int64(r.block) {
			n := min(int64(r.block), end-off)
			want := min(off+n, size) - off
			select {
			case r.jobs <- job{buf: buf, off: off, mem: int(off - start), n: int(n), want: int(want)}:
			case <-r.ctx.Done():
				return
			}
		}
	}
}

func (r *Reader) worker() {
	defer r.wg.Done()
	for {
		select {
		case j := <-r.jobs:
			if err := r.read(j); err != nil {
				j.buf.fail(err)
			}
			if j.buf.pending.Add(-1) == 0 {
				close(j.buf.done)
			}
		case <-r.ctx.Done():
			return
		}
	}
}

// read reads one block, retrying after short reads that return bytes.
func (r *Reader) read(j job) error {
	p := j.buf.mem[j.mem : j.mem+j.n]
	done := 0
	for done < j.want {
		if r.ctx.Err() != nil {
			return r.ctx.Err()
		}
		r.requests.Add(1)
		n, err := r.f.ReadAt(p[done:], j.off+int64(done))
		if n < 0 || n > len(p)-done {
			return r.errorf(j.off+int64(done), errors.New("read returned an invalid count"), "%d", n)
		}
		done += n
		r.bytes.Add(int64(n))
		if done >= j.want {
			return nil
		}
		switch {
		case err == io.EOF || (err == nil && n == 0):
			return r.errorf(j.off+int64(done), io.ErrUnexpectedEOF, "file ended %d bytes early", j.want-done)
		case err != nil:
			return r.errorf(j.off+int64(done), err, "")
		}
	}
	return nil
}

func (r *Reader) errorf(off int64, err error, format string, args ...any) error {
	if format != "" {
		err = fmt.Errorf("%w: "+format, append([]any{err}, args...)...)
	}
	return &formats.Error{Format: "asyncio", Path: r.f.Name(), Offset: off, Record: -1, Op: "read", Err: err}
}

// Next returns the next range's buffer, in Source order, waiting for its
// reads to finish; io.EOF after the last one. Errors are sticky.
func (r *Reader) Next() (*Buffer, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.closed {
		return nil, errors.New("ctrkit/asyncio: Next after Close")
	}
	buf, ok := <-r.queue
	if !ok {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			return nil, err
		}
		r.err = io.EOF
		return nil, io.EOF
	}
	<-buf.done
	buf.mu.Lock()
	err := buf.err
	buf.mu.Unlock()
	if err != nil {
		r.err = err
		r.Release(buf)
		return nil, err
	}
	return buf, nil
}

// Release returns a buffer obtained from Next for reuse.
func (r *Reader) Release(b *Buffer) {
	if b == nil {
		return
	}
	b.Data = nil
	select {
	case r.free <- b:
	default: // cannot happen: the pool is exactly as large as the channel
	}
}

// Close stops the dispatcher and the I/O goroutines, waits for them, and
// closes the file.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.cancel()
	r.wg.Wait()
	return r.f.Close()
}
