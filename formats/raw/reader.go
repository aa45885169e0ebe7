package raw

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"

	"github.com/ctrkit/ctrkit/formats"
)

// Options are the Raw reader options: the shared reader options and the
// sample layout.
type Options struct {
	formats.Options
	// Layout is the sample layout (default OneHot).
	Layout Layout
	// AlignDense is HugeCTR's aligned_type Auto: the dense width in memory
	// (the reader's Schema().DenseDim) is rounded up to a multiple of 8 and
	// the padding columns are 0; the file is never padded.
	AlignDense bool
	// KeyCheck checks keys without adding slot offsets (see KeyCheck);
	// with SlotSizeArray (offsets, which check already) it is refused.
	KeyCheck KeyCheck
	// Window, when Hi > 0, reads of every batch only its samples
	// [Lo, Hi) (counted from the batch's first sample, cut to the batch):
	// a batch of n ≤ Lo samples reads none and Read returns 0 with no
	// error. Only those samples' bytes are read. The batches stay those
	// of BatchSize (the same order, shuffled or not), so the readers of
	// windows [0, w), [w, 2w), … together read each batch once (the
	// processes of a run with --data-shard samples).
	Window Window
}

// Window is a part of every batch: samples [Lo, Hi) of it.
type Window struct{ Lo, Hi int }

// Set reports whether the window is set (Hi > 0).
func (w Window) Set() bool { return w.Hi > 0 }

// KeyCheck asks a Raw reader to check every key against its slot's size
// while it decodes (in its workers), leaving the keys as stored: slot s's
// keys must lie in [0, Sizes[s]), or with Global in [P_s, P_s +
// Sizes[s]), P_s the sum of the sizes before s. Empty Sizes: no check.
type KeyCheck struct {
	Sizes  []int64
	Global bool
}

// Validate checks the options against a schema.
func (o *Options) Validate(s *formats.Schema) error {
	if err := o.Options.Validate(s); err != nil {
		return err
	}
	if w := o.Window; w.Lo < 0 || w.Hi < 0 || (w.Set() && w.Lo >= w.Hi) {
		return fmt.Errorf("raw: batch window [%d, %d) is empty or negative", w.Lo, w.Hi)
	}
	_, err := SampleSize(s, o.Layout)
	return err
}

// newDecoder is NewDecoder with the reader options' key check and the
// offsets of batches of bsize samples prepared.
func newDecoder(s *formats.Schema, l Layout, o formats.Options, kc KeyCheck) (*Decoder, error) {
	dec, err := NewDecoder(s, l, o.SlotSizeArray)
	if err != nil {
		return nil, err
	}
	if len(kc.Sizes) > 0 {
		if len(o.SlotSizeArray) > 0 {
			return nil, fmt.Errorf("a key check without offsets and a slot_size_array with offsets at once")
		}
		if err := dec.CheckKeys(kc.Sizes, kc.Global); err != nil {
			return nil, err
		}
	}
	dec.PrepareOffsets(o.BatchSize)
	return dec, nil
}

var (
	_ formats.Reader = (*Reader)(nil)
	_ formats.Lender = (*Reader)(nil)
)

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("reader closed")

// Reader reads a Raw file batch by batch. It implements formats.Reader.
//
// Batch k of an epoch holds samples [k·B, min((k+1)·B, N)) of the file, B the
// batch size and N the sample count, so only the last batch of the file may
// be short. In epoch mode the batches come in file order (k = 0, 1, …) and
// Read returns io.EOF after the last; in repeat mode the epochs follow one
// another forever, each ending with the same possibly short batch. With
// Shuffle, the order of the batches within epoch e is a permutation drawn
// from (Seed, e): every sample still comes exactly once per epoch, batch k of
// the permutation still covers samples [k·B, (k+1)·B) of the file, and the
// same seed gives the same order.
//
// With Workers > 1, worker goroutines take the next batch number in turn,
// read the batch's bytes with one ReadAt into their own buffer and decode it
// into slot g mod R of a ring of R = Workers+2 batches (an ordered.Ring);
// Read waits for slot g, copies it into the caller's batch and frees it;
// Next (formats.Lender) lends slot g itself, saving the copy (the ring
// batches come from Options.Alloc, which may be pinned memory), and frees it
// at the next call. Batches therefore come out strictly in order and are
// identical for any worker count; memory is bounded by Workers read buffers
// and R batches. With one worker there are no goroutines: Read reads and
// decodes straight into the caller's batch, Next into a batch of the
// reader's. Options.KeyCheck checks keys in the workers while they decode,
// so no per-key work is left to the consumer's goroutine.
// Reset rewinds to the first batch; Close stops every goroutine.
type Reader struct {
	path   string
	ra     io.ReaderAt
	closer io.Closer // the file opened by Open, nil otherwise
	schema *formats.Schema
	dec    *Decoder // used by Read (one worker); workers use clones
	bsize  int
	win    Window // Options.Window
	ssize  int64  // bytes per sample
	n      int64  // samples in the file
	nb     int64  // batches per epoch

	err     error // sticky
	clamped int64 // negative dense values clamped in the batches returned

	// One worker.
	seq sequencer
	buf []byte

	// More workers.
	pipe    *decodePipe
	workers int
	bufLen  int
	alloc   formats.Allocator
	own     *formats.Batch // Next's batch with one worker, made on first use
	// rbufs are the workers' read buffers; with a *formats.Recycler as
	// Options.Alloc they are kept at Close (and Reset) for the next
	// reader, so a training run's reader per pass reuses them instead of
	// allocating and faulting in Workers × batch bytes each pass.
	rbufs [][]byte
}

// readBufKey keys the workers' read buffers in a Recycler, by length.
type readBufKey struct{ n int }

// Open opens the Raw file at path holding samples of schema s in layout
// o.Layout. The sample count comes from the file size; a size that is not a
// multiple of the sample size is an ErrSize error.
func Open(path string, s *formats.Schema, o Options) (*Reader, error) {
	if err := o.Validate(s); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewReader(f, st.Size(), path, s, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader reads size bytes of Raw samples from ra; path names the data in
// errors. With Workers > 1, ReadAt is called from several goroutines at once
// (as io.ReaderAt allows). Close does not close ra.
func NewReader(ra io.ReaderAt, size int64, path string, s *formats.Schema, o Options) (*Reader, error) {
	if err := o.Validate(s); err != nil {
		return nil, err
	}
	o.Options = o.Options.WithDefaults()
	sc := s.Clone()
	dec, err := newDecoder(&sc, o.Layout, o.Options, o.KeyCheck)
	if err != nil {
		return nil, err
	}
	ms, err := memSchema(dec, o.AlignDense)
	if err != nil {
		return nil, err
	}
	ss := int64(dec.SampleSize())
	n, err := countSamples(path, size, ss, o.Layout, o.Repeat)
	if err != nil {
		return nil, err
	}
	B := int64(o.BatchSize)
	r := &Reader{
		path: path, ra: ra, schema: ms, dec: dec, alloc: o.Alloc,
		bsize: o.BatchSize, ssize: ss, n: n, nb: (n + B - 1) / B, win: o.Window,
	}
	r.seq = sequencer{nb: r.nb, repeat: o.Repeat, shuffle: o.Shuffle, seed: o.Seed, epoch: -1}
	if r.nb == 0 {
		return r, nil
	}
	workers := o.Workers
	if !o.Repeat && int64(workers) > r.nb {
		workers = int(r.nb)
	}
	bufLen := ss * min(B, n)
	if workers <= 1 {
		r.buf = make([]byte, bufLen)
		return r, nil
	}
	r.workers, r.bufLen = workers, int(bufLen)
	p, err := r.startPipeline(workers, int(bufLen), o.Alloc)
	if err != nil {
		return nil, err
	}
	r.pipe = p
	return r, nil
}

// Reset rewinds the reader to the first batch of epoch 0 (the same order as
// after Open) and clears a sticky error and the clamp count. It fails after
// Close.
func (r *Reader) Reset() error {
	if r.err == ErrClosed {
		return ErrClosed
	}
	r.seq = sequencer{nb: r.seq.nb, repeat: r.seq.repeat, shuffle: r.seq.shuffle, seed: r.seq.seed, epoch: -1, perm: r.seq.perm}
	r.err, r.clamped = nil, 0
	if r.pipe != nil {
		r.pipe.stop()
		r.pipe.wait()
		r.pipe = nil
		r.keepReadBufs()
		p, err := r.startPipeline(r.workers, r.bufLen, r.alloc)
		if err != nil {
			r.err = err
			return err
		}
		r.pipe = p
	}
	return nil
}

// Schema returns the schema batches are decoded in.
func (r *Reader) Schema() *formats.Schema { return r.schema }

// NumSamples returns the number of samples in the file.
func (r *Reader) NumSamples() int64 { return r.n }

// SampleSize returns the bytes per sample.
func (r *Reader) SampleSize() int { return int(r.ssize) }

// Clamped returns how many negative int32 dense values were clamped to 0 in
// the batches returned so far.
func (r *Reader) Clamped() int64 { return r.clamped }

// Read fills b with the next batch and returns its size (see Reader). b must
// have been made for a schema of the reader's shape with Cap ≥ the batch
// size.
func (r *Reader) Read(b *formats.Batch) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if err := r.dec.fits(b, r.bsize); err != nil {
		return 0, err
	}
	if r.pipe != nil {
		return r.pipe.readTo(b, &r.clamped, &r.err)
	}
	_, k, ok := r.seq.claim()
	if !ok {
		b.SetLen(0)
		r.err = io.EOF
		return 0, io.EOF
	}
	c0 := r.dec.Clamped()
	if err := r.readBatch(k, r.buf, b, r.dec); err != nil {
		r.err = err
		return 0, err
	}
	r.clamped += r.dec.Clamped() - c0
	return b.N, nil
}

// Next returns the next batch without copying it (formats.Lender): the
// batch belongs to the reader (allocated with Options.Alloc, so it may be
// pinned memory) and stays valid until the next call of Next or Read, or
// Reset or Close. With more than one worker it is the ring slot a worker
// decoded into, which saves Read's copy; with one worker the reader
// decodes into a batch of its own. At the end of data (epoch mode) it
// returns nil, io.EOF.
func (r *Reader) Next() (*formats.Batch, error) {
	return lendNext(r.pipe, &r.clamped, &r.err, &r.own, r.schema, r.bsize, r.alloc, r.Read)
}

// readBatch reads batch k of the file into buf and decodes it into b.
func (r *Reader) readBatch(k int64, buf []byte, b *formats.Batch, dec *Decoder) error {
	B := int64(r.bsize)
	lo := k * B
	hi := min(lo+B, r.n)
	if r.win.Set() {
		lo, hi = min(lo+int64(r.win.Lo), hi), min(lo+int64(r.win.Hi), hi)
	}
	src := buf[:(hi-lo)*r.ssize]
	off := lo * r.ssize
	nr, err := r.ra.ReadAt(src, off)
	if nr < len(src) {
		rec := lo + int64(nr)/r.ssize
		at := rec * r.ssize
		if err == nil || err == io.EOF {
			return formats.Truncated("raw", r.path, at, rec, "sample")
		}
		return &formats.Error{Format: "raw", Path: r.path, Offset: at, Record: rec, Op: "reading batch", Err: err}
	}
	b.SetLen(0)
	return dec.Decode(src, b, r.path, lo, off)
}

// Close stops the reader's goroutines and closes the file opened by Open.
// Read returns ErrClosed afterwards.
func (r *Reader) Close() error {
	if r.err == ErrClosed {
		return nil
	}
	r.err = ErrClosed
	if r.pipe != nil {
		r.pipe.stop()
		r.pipe.wait()
		r.pipe = nil
	}
	r.keepReadBufs()
	if r.own != nil {
		r.own.Free()
		r.own = nil
	}
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

// sequencer numbers the batches: claim g = 0, 1, … maps to batch k of the
// file, through the epoch's permutation when shuffling.
type sequencer struct {
	nb      int64
	repeat  bool
	shuffle bool
	seed    uint64

	next  int64 // next g to claim
	epoch int64 // epoch of perm, -1 before the first
	perm  []int64
}

// claim returns the next sequence number g and its batch k, or ok == false
// at the end of data (epoch mode).
func (q *sequencer) claim() (g, k int64, ok bool) {
	g = q.next
	if q.nb == 0 || (!q.repeat && g >= q.nb) {
		return g, 0, false
	}
	q.next++
	e, k := g/q.nb, g%q.nb
	if !q.shuffle {
		return g, k, true
	}
	if e != q.epoch {
		if q.perm == nil {
			q.perm = make([]int64, q.nb)
		}
		for i := range q.perm {
			q.perm[i] = int64(i)
		}
		rng := rand.New(rand.NewPCG(q.seed, uint64(e)))
		rng.Shuffle(len(q.perm), func(i, j int) { q.perm[i], q.perm[j] = q.perm[j], q.perm[i] })
		q.epoch = e
	}
	return g, q.perm[k], true
}

// startPipeline starts the ordered parallel decoder (see Reader) from the
// reader's sequencer position.
func (r *Reader) startPipeline(workers, bufLen int, alloc formats.Allocator) (*decodePipe, error) {
	var mu sync.Mutex // guards seq
	seq := r.seq
	total := r.nb
	if seq.repeat {
		total = -1
	}
	claim := func() (g, k int64, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		return seq.claim()
	}
	rec, _ := alloc.(*formats.Recycler)
	newFill := func() fillFunc {
		dec := r.dec.Clone()
		var buf []byte
		if rec != nil {
			buf, _ = rec.Take(readBufKey{bufLen}).([]byte)
		}
		if buf == nil {
			buf = make([]byte, bufLen)
		}
		r.rbufs = append(r.rbufs, buf)
		return func(_, k int64, d *decoded) error {
			c0 := dec.Clamped()
			err := r.readBatch(k, buf, d.b, dec)
			d.clamped = dec.Clamped() - c0
			return err
		}
	}
	return startPipe(r.schema, r.bsize, alloc, workers, total, claim, newFill)
}

// keepReadBufs hands the stopped workers' read buffers to a Recycler
// allocator (formats.Recycler.Keep), else drops them.
func (r *Reader) keepReadBufs() {
	if rec, ok := r.alloc.(*formats.Recycler); ok {
		for _, b := range r.rbufs {
			rec.Keep(readBufKey{len(b)}, b)
		}
	}
	r.rbufs = nil
}
