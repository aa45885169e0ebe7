package raw

import (
	"errors"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/formats"
)

// AsyncOptions are the options of the RawAsync reader: the shared reader
// options, the sample layout and HugeCTR's AsyncParam.
//
// Options.Shuffle and Async.Shuffle both ask for the shuffled batch order
// (from Options.Seed); Async.AlignedType Auto pads the in-memory dense width
// to a multiple of 8; Async.Buffered reads through the page cache instead of
// with O_DIRECT. Options.Workers is the number of decoding goroutines,
// Async.NumThreads the number of I/O threads.
type AsyncOptions struct {
	formats.Options
	// Layout is the sample layout (default OneHot).
	Layout Layout
	// Async are the I/O engine's parameters.
	Async asyncio.Params
	// KeyCheck checks keys without adding slot offsets, in the decoding
	// workers (as Options.KeyCheck).
	KeyCheck KeyCheck
	// Window, when set, reads only samples [Lo, Hi) of every batch (as
	// Options.Window): the engine reads only their bytes.
	Window Window
}

// Validate checks the options against a schema.
func (o *AsyncOptions) Validate(s *formats.Schema) error {
	so := Options{Options: o.Options, Layout: o.Layout, Window: o.Window}
	if err := so.Validate(s); err != nil {
		return err
	}
	p := o.Async.WithDefaults()
	return p.Validate()
}

var (
	_ formats.Reader = (*AsyncReader)(nil)
	_ formats.Lender = (*AsyncReader)(nil)
)

// AsyncReader is HugeCTR's RawAsync reader: it reads whole batches of a Raw
// file with the asyncio engine (O_DIRECT, many requests in flight, each batch
// one byte range rounded out to the alignment with the partial head and
// tail trimmed) and decodes them with the same Decoder as Reader. It
// implements formats.Reader and returns exactly the batches of a Reader with
// the same options, in the same order: batch k covers samples [k·B,
// min((k+1)·B, N)), epoch mode ends with a possibly short batch and io.EOF,
// repeat mode cycles forever, and Shuffle permutes the batches of epoch e
// with the permutation Reader draws from (Seed, e).
//
// The engine's dispatcher asks for batch ranges in delivery order, and
// NumThreads × NumBatchesPerThread raw batches are read ahead. With one
// worker, Read takes the next raw batch and decodes it straight into the
// caller's batch. With W > 1 workers (capped by the number of I/O buffers)
// I/O completion and decoding run in parallel with no lock held across a
// wait: each worker claims the next sequence number g (an atomic counter),
// waits for its turn at slot g mod R of a ring of R = W+2 batches (an
// ordered.Ring, as Reader's), takes
// raw batch g from the engine as soon as its own reads are done (whatever
// the state of the others), and decodes it into the slot; Read waits for
// slot g, copies it into the caller's batch (which may be pinned memory)
// and frees the slot, as Reader does; Next lends the slot itself instead,
// saving the copy (the ring batches come from Options.Alloc, which may be
// pinned too). Decoding yields the processor every MiB or so, so the I/O
// goroutines issue their next reads promptly while every core decodes.
// Nothing is allocated per batch. Close stops every goroutine, the
// engine's included, and closes the file.
type AsyncReader struct {
	path   string
	f      asyncio.File
	eng    *asyncio.Reader // nil for an empty file
	notice string
	schema *formats.Schema // in memory (DenseDim padded with AlignAuto)
	dec    *Decoder
	bsize  int
	ssize  int64
	n      int64
	nb     int64
	total  int64 // batches Read returns: nb in epoch mode, -1 in repeat mode
	g      int64 // batches handed out (one worker)

	err     error // sticky
	clamped int64
	pipe    *decodePipe
	alloc   formats.Allocator
	own     *formats.Batch // Next's batch with one worker, made on first use
}

// OpenAsync opens the Raw file at path (with O_DIRECT unless
// o.Async.Buffered; a file system that refuses it is read through the page
// cache and Notice says so) and returns a RawAsync reader over it.
func OpenAsync(path string, s *formats.Schema, o AsyncOptions) (*AsyncReader, error) {
	if err := o.Validate(s); err != nil {
		return nil, err
	}
	f, notice, err := asyncio.OpenFile(path, !o.Async.Buffered)
	if err != nil {
		return nil, err
	}
	r, err := NewAsyncReader(f, s, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.notice = notice
	return r, nil
}

// NewAsyncReader returns a RawAsync reader over f, whose Name names the data
// in errors and whose Size gives the sample count (a size that is not a
// multiple of the sample size is an ErrSize error). The reader owns f from
// a successful return on: Close closes it. On error f is left open, except
// when allocating the decode ring fails after the engine started (the
// engine's Close closes f then).
func NewAsyncReader(f asyncio.File, s *formats.Schema, o AsyncOptions) (*AsyncReader, error) {
	if err := o.Validate(s); err != nil {
		return nil, err
	}
	o.Options = o.Options.WithDefaults()
	p := o.Async.WithDefaults()
	fs := s.Clone()
	dec, err := newDecoder(&fs, o.Layout, o.Options, o.KeyCheck)
	if err != nil {
		return nil, err
	}
	ms, err := alignDecoder(dec, p.AlignedType)
	if err != nil {
		return nil, err
	}
	path, size := f.Name(), f.Size()
	ss := int64(dec.SampleSize())
	n, err := countSamples(path, size, ss, o.Layout, o.Repeat)
	if err != nil {
		return nil, err
	}
	B := int64(o.BatchSize)
	r := &AsyncReader{
		path: path, f: f, schema: ms, dec: dec, alloc: o.Alloc,
		bsize: o.BatchSize, ssize: ss, n: n, nb: (n + B - 1) / B,
	}
	r.total = r.nb
	if o.Repeat {
		r.total = -1
	}
	if r.nb == 0 {
		return r, nil
	}
	seq := &sequencer{nb: r.nb, repeat: o.Repeat, shuffle: o.Shuffle || p.Shuffle, seed: o.Seed, epoch: -1}
	src := func() (asyncio.Range, bool) {
		_, k, ok := seq.claim()
		if !ok {
			return asyncio.Range{}, false
		}
		lo := k * B
		hi := min(lo+B, n)
		if w := o.Window; w.Set() {
			lo, hi = min(lo+int64(w.Lo), hi), min(lo+int64(w.Hi), hi)
		}
		return asyncio.Range{Off: lo * ss, Len: (hi - lo) * ss}, true
	}
	if nbuf := int64(p.NumThreads) * int64(p.NumBatchesPerThread); !o.Repeat && nbuf > r.nb {
		// An epoch has fewer batches than the engine would buffer: no
		// more buffers than batches (a 16-batch file read by 16 threads
		// × 4 allocated 64 buffers of a batch each, per pass).
		p.NumBatchesPerThread = int((r.nb + int64(p.NumThreads) - 1) / int64(p.NumThreads))
	}
	eng, err := asyncio.NewReader(f, src, min(B, n)*ss, p)
	if err != nil {
		return nil, err
	}
	r.eng = eng
	workers := min(o.Workers, p.NumThreads*p.NumBatchesPerThread)
	if !o.Repeat && int64(workers) > r.nb {
		workers = int(r.nb)
	}
	if workers > 1 {
		pipe, err := r.startPipe(workers, o.Alloc)
		if err != nil {
			eng.Close()
			return nil, err
		}
		r.pipe = pipe
	}
	return r, nil
}

// Schema returns the schema batches are decoded in (DenseDim rounded up to a
// multiple of 8 with aligned_type Auto).
func (r *AsyncReader) Schema() *formats.Schema { return r.schema }

// NumSamples returns the number of samples in the file.
func (r *AsyncReader) NumSamples() int64 { return r.n }

// SampleSize returns the bytes per sample in the file.
func (r *AsyncReader) SampleSize() int { return int(r.ssize) }

// Notice is non-empty when O_DIRECT was asked for and refused, so the file
// is read through the page cache.
func (r *AsyncReader) Notice() string { return r.notice }

// Engine names the I/O engine ("pread").
func (r *AsyncReader) Engine() string {
	if r.eng == nil {
		return "none"
	}
	return r.eng.Engine()
}

// Alignment returns the I/O alignment in use (0 for an empty file, which is
// never read).
func (r *AsyncReader) Alignment() int {
	if r.eng == nil {
		return 0
	}
	return r.eng.Alignment()
}

// BytesRead returns the bytes read from the file so far, alignment padding
// and read-ahead included.
func (r *AsyncReader) BytesRead() int64 {
	if r.eng == nil {
		return 0
	}
	return r.eng.BytesRead()
}

// Clamped returns how many negative int32 dense values were clamped to 0 in
// the batches returned so far.
func (r *AsyncReader) Clamped() int64 { return r.clamped }

// Read fills b with the next batch and returns its size (see AsyncReader).
// b must have been made for Schema (or a schema of its shape) with Cap ≥
// the batch size. Errors are sticky; I/O errors are *formats.Error values
// naming the file, the byte offset of the failing read and its record.
func (r *AsyncReader) Read(b *formats.Batch) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if err := r.dec.fits(b, r.bsize); err != nil {
		return 0, err
	}
	if r.pipe != nil {
		return r.pipe.readTo(b, &r.clamped, &r.err)
	}
	return r.readOne(b)
}

// Next returns the next batch without copying it: the batch belongs to the
// reader (allocated with Options.Alloc, so it may be pinned memory) and
// stays valid until the next call of Next or Read, or Close. With more than
// one worker it is a ring slot the workers decoded into, which saves Read's
// copy; with one worker the reader decodes into a batch of its own. At the
// end of data (epoch mode) it returns nil, io.EOF.
func (r *AsyncReader) Next() (*formats.Batch, error) {
	return lendNext(r.pipe, &r.clamped, &r.err, &r.own, r.schema, r.bsize, r.alloc, r.readOne)
}

// readOne decodes the next raw batch into b (one worker).
func (r *AsyncReader) readOne(b *formats.Batch) (int, error) {
	if r.total >= 0 && r.g >= r.total {
		b.SetLen(0)
		r.err = io.EOF
		return 0, io.EOF
	}
	buf, err := r.eng.Next()
	if err != nil {
		r.err = r.ioError(err)
		return 0, r.err
	}
	r.g++
	c0 := r.dec.Clamped()
	err = r.decode(r.dec, buf, b)
	r.eng.Release(buf)
	if err != nil {
		r.err = err
		return 0, err
	}
	r.clamped += r.dec.Clamped() - c0
	return b.N, nil
}

// decodeSlice is about how many file bytes decode decodes between two
// yields of the processor.
const decodeSlice = 1 << 20

// decode decodes the raw batch buf into b, in slices of about decodeSlice
// bytes (whole samples) with a runtime.Gosched between them. Decoding is
// pure CPU work and Go preempts it only every 10 ms; the yields let an I/O
// goroutine whose pread just returned get a processor within a fraction of
// a millisecond and issue its next request, so that with O_DIRECT the disk
// stays busy while every processor decodes.
func (r *AsyncReader) decode(dec *Decoder, buf *asyncio.Buffer, b *formats.Batch) error {
	b.SetLen(0)
	data := buf.Data
	per := max(1, decodeSlice/int(r.ssize)) * int(r.ssize)
	off := buf.Range.Off
	for {
		n := min(per, len(data))
		if err := dec.Decode(data[:n], b, r.path, off/r.ssize, off); err != nil {
			return err
		}
		data, off = data[n:], off+int64(n)
		if len(data) == 0 {
			return nil
		}
		runtime.Gosched()
	}
}

// ioError turns an engine error into the package's: Format "raw", the
// record holding the failing byte, the same path, offset and cause. An
// io.EOF before the last batch (which the engine never gives) reads as a
// truncated file.
func (r *AsyncReader) ioError(err error) error {
	var ae *asyncio.Error
	if errors.As(err, &ae) {
		rec := int64(-1)
		if ae.Offset >= 0 {
			rec = ae.Offset / r.ssize
		}
		return &formats.Error{Format: "raw", Path: ae.Path, Offset: ae.Offset, Record: rec, Op: "reading batch", Err: ae.Err}
	}
	if err == io.EOF {
		return formats.Truncated("raw", r.path, -1, -1, "batch")
	}
	return err
}

// Close stops the decoding goroutines and the I/O engine, waits for them and
// closes the file. Read returns ErrClosed afterwards.
func (r *AsyncReader) Close() error {
	if r.err == ErrClosed {
		return nil
	}
	r.err = ErrClosed
	if r.own != nil {
		r.own.Free()
		r.own = nil
	}
	if r.eng == nil {
		return r.f.Close()
	}
	pipe := r.pipe
	r.pipe = nil
	if pipe != nil {
		pipe.stop()
	}
	err := r.eng.Close() // wakes the workers waiting in Get; closes f
	if pipe != nil {
		pipe.wait()
	}
	return err
}

// startPipe starts the ordered parallel decoder of AsyncReader: worker g
// takes raw batch g from the engine (Get: waiting only for its own reads)
// and decodes it into its ring slot.
func (r *AsyncReader) startPipe(workers int, alloc formats.Allocator) (*decodePipe, error) {
	var claimed atomic.Int64 // next sequence number a worker claims
	claim := func() (g, k int64, ok bool) {
		g = claimed.Add(1) - 1
		return g, g, r.total < 0 || g < r.total
	}
	newFill := func() fillFunc {
		dec := r.dec.Clone()
		return func(g, _ int64, d *decoded) error {
			d.clamped = 0
			buf, err := r.eng.Get(g)
			if err != nil {
				// io.EOF: the engine stopped after a range outside the
				// file, whose error the consumer meets first; ErrClosed:
				// Close.
				return r.ioError(err)
			}
			c0 := dec.Clamped()
			err = r.decode(dec, buf, d.b)
			r.eng.Release(buf)
			d.clamped = dec.Clamped() - c0
			return err
		}
	}
	return startPipe(r.schema, r.bsize, alloc, workers, r.total, claim, newFill)
}
