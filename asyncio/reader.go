package asyncio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/ctrkit/ctrkit/internal/hostmem"
	"github.com/ctrkit/ctrkit/internal/ordered"
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

	free    chan *Buffer // buffers ready for reuse
	threads []ioThread
	// done is the completion table: range seq is reserved in it (Acquire)
	// from its dispatch until Get takes it, so the dispatcher never runs
	// more than its length ahead of the oldest range not yet taken.
	done *ordered.Ring[*Buffer]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closed atomic.Bool

	next     int64 // Next's sequence number; Next's goroutine only
	err      error // Next's sticky error; Next's goroutine only
	bytes    atomic.Int64
	requests atomic.Int64
	engine   string
}

// ioThread is one of the NumThreads I/O threads: it keeps IODepth block
// requests in flight, taking the blocks from the queue all threads share.
// One feeder cuts the ranges into that queue in sequence order, so the
// NumThreads × IODepth requests in flight are always the oldest blocks not
// yet read: the next range the consumer waits for gets the whole device
// instead of 1/NumThreads of it (with one range per thread, every range in
// flight finished at about the same time, the first batch of a pass
// waiting for the reads of NumThreads batches).
type ioThread struct {
	bufs chan *Buffer // the ranges dispatched, in order (shared)
	jobs chan job     // their blocks, in order, for every thread's readers (shared)
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
		return nil, fmt.Errorf("max range length %d must be > 0", maxLen)
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
		r.free <- &Buffer{mem: getBuffer(bufLen, align)}
	}
	r.done = ordered.New[*Buffer](nbuf)
	r.threads = make([]ioThread, p.NumThreads)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	// The readers of each thread: IODepth goroutines blocking in pread, or
	// one goroutine driving an io_uring with IODepth reads in flight.
	readers, start := p.IODepth, func(t *ioThread) {
		for k := 0; k < p.IODepth; k++ {
			go r.worker(t)
		}
	}
	r.engine = "pread"
	if p.Engine == "io_uring" || (p.Engine == "" && f.Direct()) {
		s, err := r.startURing(f)
		switch {
		case err == nil:
			readers, start, r.engine = 1, s, "io_uring"
		case p.Engine == "io_uring":
			r.cancel()
			return nil, fmt.Errorf("%w", err)
		}
	}
	r.wg.Add(2 + p.NumThreads*readers)
	bufs, jobs := make(chan *Buffer, nbuf), make(chan job, p.NumThreads*p.IODepth)
	for i := range r.threads {
		t := &r.threads[i]
		t.bufs, t.jobs = bufs, jobs
		start(t)
	}
	go r.feed(&r.threads[0])
	go r.dispatch(src)
	return r, nil
}

// alignedAlloc returns a read buffer: batch buffers are tens of MB and sit
// on huge pages (hostmem.AlignedAlloc), which makes pinning them for
// O_DIRECT far cheaper.
func alignedAlloc(n, align int) []byte { return hostmem.AlignedAlloc(n, align) }

// Alignment returns the alignment in use: max(IOAlignment, the device's
// logical block size when reading with O_DIRECT).
func (r *Reader) Alignment() int { return r.align }

// Engine names the I/O engine: "io_uring" or "pread".
func (r *Reader) Engine() string { return r.engine }

// File returns the file being read.
func (r *Reader) File() File { return r.f }

// BytesRead returns the bytes read from the file so far, alignment
// padding included.
func (r *Reader) BytesRead() int64 { return r.bytes.Load() }

// Requests returns the number of read requests issued so far.
func (r *Reader) Requests() int64 { return r.requests.Load() }

// complete publishes a buffer whose blocks are all read (or failed).
func (r *Reader) complete(b *Buffer) { r.done.Publish(b.Seq, nil) }

func (r *Reader) dispatch(src Source) {
	defer r.wg.Done()
	size := r.f.Size()
	a := int64(r.align)
	seq := int64(0)
	defer func() { r.done.End(seq) }()
	for ; ; seq++ {
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
		slot, ok := r.done.Acquire(seq)
		if !ok {
			return
		}
		*slot = buf
		buf.Range, buf.Seq, buf.err = rg, seq, nil
		if rg.Off < 0 || rg.Len < 0 || rg.Len > r.maxLen || rg.Off+rg.Len > size {
			buf.err = r.errorf(rg.Off, rg.Len, io.ErrUnexpectedEOF,
				"range [%d, %d) outside the file (%d bytes) or longer than %d", rg.Off, rg.Off+rg.Len, size, r.maxLen)
			buf.Data = nil
			r.complete(buf)
			seq++ // the failed range is the last one
			return
		}
		start := rg.Off &^ (a - 1)
		buf.Data = buf.mem[rg.Off-start : rg.Off-start+rg.Len]
		if rg.Len == 0 {
			r.complete(buf)
			continue
		}
		end := (rg.Off + rg.Len + a - 1) &^ (a - 1)
		buf.pending.Store(int32((end - start + int64(r.block) - 1) / int64(r.block)))
		select {
		case r.threads[0].bufs <- buf: // shared by all threads
		case <-r.ctx.Done():
			return
		}
	}
}

// feed cuts the dispatched ranges, in order, into blocks for every
// thread's readers (t's channels are all threads').
func (r *Reader) feed(t *ioThread) {
	defer r.wg.Done()
	size := r.f.Size()
	a := int64(r.align)
	for {
		var buf *Buffer
		select {
		case buf = <-t.bufs:
		case <-r.ctx.Done():
			return
		}
		rg := buf.Range
		start := rg.Off &^ (a - 1)
		end := (rg.Off + rg.Len + a - 1) &^ (a - 1)
		for off := start; off < end; off += int64(r.block) {
			n := min(int64(r.block), end-off)
			want := min(off+n, size) - off
			select {
			case t.jobs <- job{buf: buf, off: off, mem: int(off - start), n: int(n), want: int(want)}:
			case <-r.ctx.Done():
				return
			}
		}
	}
}

func (r *Reader) worker(t *ioThread) {
	defer r.wg.Done()
	for {
		select {
		case j := <-t.jobs:
			if err := r.read(j); err != nil {
				j.buf.fail(err)
			}
			if j.buf.pending.Add(-1) == 0 {
				r.complete(j.buf)
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
			return ErrClosed
		}
		r.requests.Add(1)
		n, err := r.f.ReadAt(p[done:], j.off+int64(done))
		if n < 0 || n > len(p)-done {
			return r.errorf(j.off+int64(done), int64(j.want-done), errors.New("read returned an invalid count"), "%d", n)
		}
		done += n
		r.bytes.Add(int64(n))
		if done >= j.want {
			return nil
		}
		switch {
		case err == io.EOF || (err == nil && n == 0):
			return r.errorf(j.off+int64(done), int64(j.want-done), io.ErrUnexpectedEOF, "file ended %d bytes early", j.want-done)
		case err != nil:
			return r.errorf(j.off+int64(done), int64(j.want-done), err, "")
		}
	}
	return nil
}

// errorf returns the *Error of a read of n bytes at off that failed with
// err (and a detail message when format is not empty).
func (r *Reader) errorf(off, n int64, err error, format string, args ...any) error {
	if format != "" {
		err = fmt.Errorf("%w: "+format, append([]any{err}, args...)...)
	}
	return &Error{Op: "read", Path: r.f.Name(), Offset: off, Len: n, Err: err}
}

// Get waits for the range with sequence number seq to be read and returns
// its buffer, or io.EOF when the Source ended before seq (or stopped after
// a range outside the file), or ErrClosed. A range whose read failed gives
// its error (an *Error naming the file and the byte offset), and its
// buffer is released. Get and Release may be called from many goroutines at
// once, Close included, which lets several consumers take and process
// ranges in parallel; each sequence number must be asked for once, by one
// caller. The dispatcher stays at most NumThreads × NumBatchesPerThread
// ranges ahead of the oldest range not yet taken, so every range must
// eventually be taken for the reader to move on. Do not mix Get with Next.
func (r *Reader) Get(seq int64) (*Buffer, error) {
	if seq < 0 {
		return nil, fmt.Errorf("negative sequence number %d", seq)
	}
	if r.closed.Load() {
		return nil, ErrClosed
	}
	slot, err := r.done.Take(seq) // io.EOF past the end, ErrClosed on Close
	if err != nil {
		return nil, err
	}
	buf := *slot
	*slot = nil
	r.done.Release(seq) // the dispatcher may wait for this slot
	buf.mu.Lock()
	err = buf.err
	buf.mu.Unlock()
	if err != nil {
		r.Release(buf)
		return nil, err
	}
	return buf, nil
}

// Next returns the next range's buffer, in Source order, waiting for its
// reads to finish; io.EOF after the last one. Errors are sticky. Next is
// for a single consumer; see Get for many.
func (r *Reader) Next() (*Buffer, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.closed.Load() {
		return nil, ErrClosed
	}
	buf, err := r.Get(r.next)
	if err != nil {
		r.err = err
		return nil, err
	}
	r.next++
	return buf, nil
}

// Release returns a buffer obtained from Next or Get for reuse. It may be
// called from any goroutine.
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

// Close stops the dispatcher and the I/O goroutines, wakes the callers
// waiting in Get or Next (they get ErrClosed), waits for the goroutines,
// and closes the file. It is safe to call more than once, and concurrently
// with Get and Release.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	r.cancel()
	r.done.Cancel(ErrClosed)
	r.wg.Wait()
	// No request is in flight now: the buffers not lent to a caller go
	// back to the pool for the next reader (the next pass of a training
	// run reuses them instead of allocating and faulting in as much
	// memory again); those still lent are left to the garbage collector.
	for {
		select {
		case b := <-r.free:
			putBuffer(b.mem, r.align)
		default:
			return r.f.Close()
		}
	}
}

// bufPools holds the read buffers of closed Readers by (length,
// alignment), in sync.Pools: a reader opened soon after another one of the
// same shape (the next pass over a file) takes its buffers, and the
// garbage collector frees those nobody takes.
var bufPools sync.Map // [2]int{len, align} → *sync.Pool of *[]byte

func getBuffer(n, align int) []byte {
	if p, ok := bufPools.Load([2]int{n, align}); ok {
		if b, ok := p.(*sync.Pool).Get().(*[]byte); ok {
			return *b
		}
	}
	return alignedAlloc(n, align)
}

func putBuffer(b []byte, align int) {
	p, _ := bufPools.LoadOrStore([2]int{len(b), align}, new(sync.Pool))
	p.(*sync.Pool).Put(&b)
}
