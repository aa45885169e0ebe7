package raw

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
	"github.com/ctrkit/ctrkit/internal/hostmem"
)

// MaxExactDense is the largest int32 dense value x the Writer recovers
// exactly from its float32 transform ln(x+1): for every 0 ≤ x ≤ MaxExactDense,
// round(exp(DenseFromInt32(x)) − 1) == x. It is also the end of the range
// where the float32 transform is injective (DenseFromInt32(MaxExactDense+1)
// == DenseFromInt32(MaxExactDense)).
const MaxExactDense = 1049557

var _ formats.Writer = (*Writer)(nil)

// Writer writes a Raw file. It implements formats.Writer: the file is written
// under a temporary name and renamed to its final name by Close.
type Writer struct {
	f   *atomicfile.File
	w   *bufio.Writer
	enc encoder
	rec []byte // one encoded sample
	n   int64  // samples written (or being written)
	err error  // sticky

	// Large ranges are encoded in parallel into a buffer that bg writes
	// while the next ones are encoded.
	bg *bgWrite
}

// bgWrite is a goroutine that writes queued buffers in order, so that the
// next write starts as soon as one ends (no hand-back to the encoding
// goroutine in between), and gives each written buffer back for reuse.
type bgWrite struct {
	queue chan []byte // to write; closed by wait, nil while stopped
	free  chan []byte // written, for reuse
	made  int         // buffers made (at most bgBuffers)
	end   chan error  // the first write error, or nil, once queue is closed and drained
	// failed is set when a write fails, so that the encoder stops early.
	failed atomic.Bool
}

// bgBuffers is the number of encode buffers: one being written, one queued
// behind it, one being encoded.
const bgBuffers = 3

// encoder encodes samples of a schema in a layout.
type encoder struct {
	schema *formats.Schema
	layout Layout
	size   int
	hot    []int
	// oneHot32: float32 label and dense, 32-bit keys, one per slot — the
	// layout encode copies whole when the sample matches it.
	oneHot32 bool
}

func newEncoder(s *formats.Schema, l Layout) (encoder, error) {
	size, err := SampleSize(s, l)
	if err != nil {
		return encoder{}, err
	}
	e := encoder{schema: s, layout: l, size: size}
	e.oneHot32 = s.LabelType == formats.Float32 && s.DenseType == formats.Float32 && s.KeyType == formats.KeyU32
	for _, sl := range s.Slots {
		h := 1
		if l == MultiHot {
			h = sl.Hotness
		}
		e.hot = append(e.hot, h)
		e.oneHot32 = e.oneHot32 && h == 1
	}
	return e, nil
}

// f32bytes views v as its bytes (host order).
func f32bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// Create starts a Raw file at path for samples of schema s in layout l.
func Create(path string, s *formats.Schema, l Layout) (*Writer, error) {
	return CreateWith(nil, path, s, l)
}

// CreateWith is Create with the file made by files (nil: atomicfile.Direct;
// a *atomicfile.Stage commits it with the rest of an output).
func CreateWith(files atomicfile.Creator, path string, s *formats.Schema, l Layout) (*Writer, error) {
	sc := s.Clone()
	enc, err := newEncoder(&sc, l)
	if err != nil {
		return nil, err
	}
	f, err := atomicfile.CreatorOr(files).CreateFile(path)
	if err != nil {
		return nil, err
	}
	return &Writer{f: f, w: bufio.NewWriterSize(f, 1<<20), enc: enc, rec: make([]byte, enc.size)}, nil
}

// Count returns the number of samples written so far.
func (w *Writer) Count() int64 { return w.n }

// Write appends the samples of b. A value the layout cannot hold is an
// ErrValue (label, dense), ErrNNZ (key count) or ErrKeyRange (key) error
// naming the final path and the index and byte offset the sample would have
// had; nothing of that sample is written and the error is sticky.
func (w *Writer) Write(b *formats.Batch) error { return w.WriteRange(b, 0, b.N) }

// WriteRange writes samples [lo, hi) of b (formats.RangeWriter).
func (w *Writer) WriteRange(b *formats.Batch, lo, hi int) error {
	if w.err != nil {
		return w.err
	}
	s := w.enc.schema
	bs := b.Schema
	if bs == nil || bs.LabelDim != s.LabelDim || bs.DenseDim != s.DenseDim || len(bs.Slots) != len(s.Slots) || bs.KeyType != s.KeyType {
		return fmt.Errorf("batch schema does not match the writer's")
	}
	if lo < 0 || hi > b.N || lo > hi {
		return fmt.Errorf("WriteRange(%d, %d) outside the batch of %d", lo, hi, b.N)
	}
	if hi-lo >= 2*parallelMin && runtime.GOMAXPROCS(0) > 1 {
		return w.writeParallel(b, lo, hi)
	}
	if err := w.wait(); err != nil {
		return err
	}
	for i := lo; i < hi; i++ {
		if err := w.enc.encode(w.rec, b, i); err != nil {
			return w.fail(err)
		}
		if _, err := w.w.Write(w.rec); err != nil {
			w.err = w.ioError(w.n*int64(w.enc.size)-int64(w.w.Buffered()), err)
			return w.err
		}
		w.n++
	}
	return nil
}

// ioError is err, from a write of the file's bytes from offset off on (the
// first not yet in the file), with the file's final name and that offset.
func (w *Writer) ioError(off int64, err error) error {
	return fmt.Errorf("writing %s from byte %d: %w", w.f.Final(), off, err)
}

// fail makes err, the encoding error of the next sample, the writer's
// sticky error.
func (w *Writer) fail(err error) error {
	w.err = &formats.Error{Format: "raw", Path: w.f.Final(), Offset: w.n * int64(w.enc.size), Record: w.n, Err: err}
	return w.err
}

// parallelMin is the fewest samples one goroutine of writeParallel encodes.
const parallelMin = 8192

// wait waits for the buffers queued for the background writer to be
// written and stops it (its buffers are kept for the next start); the first
// write error becomes the writer's.
func (w *Writer) wait() error {
	bg := w.bg
	if bg == nil || bg.queue == nil {
		return nil
	}
	close(bg.queue)
	err := <-bg.end
	bg.queue = nil
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

// startBG starts the background writer.
func (w *Writer) startBG() {
	if w.bg == nil {
		w.bg = &bgWrite{free: make(chan []byte, bgBuffers)}
	}
	bg := w.bg
	bg.queue, bg.end = make(chan []byte, bgBuffers), make(chan error, 1)
	bg.failed.Store(false)
	queue, end := bg.queue, bg.end
	off := w.n * int64(w.enc.size) // of the first byte queued
	go func() {
		var err error
		for p := range queue {
			if err == nil {
				start := off - int64(w.w.Buffered())
				if _, err = w.w.Write(p); err != nil {
					err = w.ioError(start, err)
					bg.failed.Store(true)
				}
				off += int64(len(p))
			}
			bg.free <- p
		}
		end <- err
	}()
}

// buffer returns an encode buffer of n bytes: a written one, a new one while
// fewer than bgBuffers exist, else the next to be written.
func (bg *bgWrite) buffer(n int) []byte {
	var b []byte
	select {
	case b = <-bg.free:
	default:
		if bg.made < bgBuffers {
			bg.made++
		} else {
			b = <-bg.free
		}
	}
	if cap(b) < n {
		b = hostmem.AlignedAlloc(n, 64)
	}
	return b[:n]
}

// writeParallel is WriteRange for large ranges: the samples are encoded by
// up to GOMAXPROCS goroutines, each into its part of one buffer, which is
// then queued for the background writer while the caller goes on. As in the
// serial path, the samples before the first one that fails to encode are
// written, and none after. A write error is returned by a later call (and
// by Close).
func (w *Writer) writeParallel(b *formats.Batch, lo, hi int) error {
	if w.bg == nil || w.bg.queue == nil {
		w.startBG()
	} else if w.bg.failed.Load() {
		return w.wait()
	}
	n, size := hi-lo, w.enc.size
	buf := w.bg.buffer(n * size)
	parts := min(runtime.GOMAXPROCS(0), n/parallelMin)
	bad, errs := make([]int, parts), make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		plo, phi := lo+n*p/parts, lo+n*(p+1)/parts
		bad[p] = phi
		wg.Go(func() {
			for i := plo; i < phi; i++ {
				if err := w.enc.encode(buf[(i-lo)*size:], b, i); err != nil {
					bad[p], errs[p] = i, err
					return
				}
			}
		})
	}
	wg.Wait()
	good, err := hi, error(nil)
	for p := range parts { // the first failing part holds the first failing sample
		if errs[p] != nil {
			good, err = bad[p], errs[p]
			break
		}
	}
	w.bg.queue <- buf[:(good-lo)*size] // never blocks: bgBuffers buffers exist
	w.n += int64(good - lo)
	if err != nil {
		if werr := w.wait(); werr != nil {
			return werr
		}
		return w.fail(err)
	}
	return nil
}

// encode writes sample i of b into p (SampleSize bytes). A failure wraps
// formats.ErrValue, ErrNNZ or ErrKeyRange.
func (e *encoder) encode(p []byte, b *formats.Batch, i int) error {
	s := e.schema
	p = p[:e.size]
	if e.oneHot32 && nativeLE && b.Keys32 != nil {
		// Float label and dense, 32-bit one-hot keys: three copies when
		// every slot of the sample holds one key.
		S := len(e.hot)
		off := b.Offsets[i*S : i*S+S+1]
		k0, ok := int(off[0]), int(off[S])-int(off[0]) == S
		for si := 0; ok && si < S; si++ {
			ok = off[si+1]-off[si] == 1
		}
		if ok {
			n := copy(p, f32bytes(b.Labels[i*s.LabelDim:(i+1)*s.LabelDim]))
			n += copy(p[n:], f32bytes(b.Dense[i*s.DenseDim:(i+1)*s.DenseDim]))
			copy(p[n:], unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b.Keys32[k0:k0+S]))), 4*S))
			return nil
		}
	}
	for j, v := range b.Labels[i*s.LabelDim : (i+1)*s.LabelDim] {
		if s.LabelType == formats.Int32 {
			if v != float32(math.Trunc(float64(v))) || v < math.MinInt32 || v >= math.MaxInt32 {
				return fmt.Errorf("%w: label %d = %v is not an int32 value", formats.ErrValue, j, v)
			}
			binary.LittleEndian.PutUint32(p, uint32(int32(v)))
		} else {
			binary.LittleEndian.PutUint32(p, math.Float32bits(v))
		}
		p = p[4:]
	}
	for j, v := range b.Dense[i*s.DenseDim : (i+1)*s.DenseDim] {
		if s.DenseType == formats.Int32 {
			x, err := DenseToInt32(v)
			if err != nil {
				return fmt.Errorf("%w: dense %d: %v", formats.ErrValue, j, err)
			}
			binary.LittleEndian.PutUint32(p, uint32(x))
		} else {
			binary.LittleEndian.PutUint32(p, math.Float32bits(v))
		}
		p = p[4:]
	}
	wide := e.layout == MultiHot && s.KeyType == formats.KeyI64
	S := len(e.hot)
	off := b.Offsets[i*S : i*S+S+1]
	for si, h := range e.hot {
		lo, hi := int(off[si]), int(off[si+1])
		if hi-lo != h {
			return fmt.Errorf("%w: slot %d has %d keys, the %s layout holds %d", formats.ErrNNZ, si, hi-lo, e.layout, h)
		}
		switch {
		case b.Keys32 != nil && !wide: // the common case: 32-bit keys, nothing to check
			for _, k := range b.Keys32[lo:hi] {
				binary.LittleEndian.PutUint32(p, k)
				p = p[4:]
			}
			continue
		case b.Keys32 != nil:
			for _, k := range b.Keys32[lo:hi] {
				binary.LittleEndian.PutUint64(p, uint64(k))
				p = p[8:]
			}
			continue
		}
		for _, k := range b.Keys64[lo:hi] {
			if wide {
				binary.LittleEndian.PutUint64(p, uint64(k))
				p = p[8:]
				continue
			}
			if k < 0 || k > math.MaxUint32 {
				return fmt.Errorf("%w: slot %d key %d does not fit 4 bytes", formats.ErrKeyRange, si, k)
			}
			binary.LittleEndian.PutUint32(p, uint32(k))
			p = p[4:]
		}
	}
	return nil
}

// DenseToInt32 inverts formats.DenseFromInt32: it returns the x whose
// transform is exactly v (the smallest such x where the float32 transform
// is not injective, above MaxExactDense). A NaN, negative or infinite v, or
// one that is not the transform of any int32 — a value the int32 layout
// cannot hold, such as 0.5 — is an error: writing it would silently change
// the data (write float32 values instead).
func DenseToInt32(v float32) (int32, error) {
	if x, ok := formats.Int32FromDense(v); ok {
		return x, nil
	}
	if v != v || v < 0 || math.IsInf(float64(v), 0) {
		return 0, fmt.Errorf("value %v is not ln(x+1) of an integer x ≥ 0", v)
	}
	x := math.Round(math.Exp(float64(v)) - 1)
	if x > math.MaxInt32 {
		return 0, fmt.Errorf("value %v is ln(x+1) of x = %v, above int32", v, x)
	}
	// exp of a float32 logarithm can land one off; the exact preimage is
	// among the neighbours.
	for _, c := range [...]float64{x, x - 1, x + 1} {
		if c >= 0 && c <= math.MaxInt32 && formats.DenseFromInt32(int32(c)) == v {
			for c > 0 && formats.DenseFromInt32(int32(c-1)) == v {
				c--
			}
			return int32(c), nil
		}
	}
	return 0, fmt.Errorf("value %v is not ln(x+1) of an integer x (the int32 layout cannot hold it; write float32 label/dense)", v)
}

// Close flushes the samples and moves the file to its final name. After an
// error from Write, Close removes the temporary file and returns that error.
func (w *Writer) Close() error {
	w.wait()
	if w.err != nil {
		w.f.Abort()
		return w.err
	}
	w.err = fmt.Errorf("writer closed")
	if err := w.w.Flush(); err != nil {
		w.f.Abort()
		return w.ioError(w.n*int64(w.enc.size)-int64(w.w.Buffered()), err)
	}
	return w.f.Commit()
}

// Abort removes the temporary file; nothing is left under the final name.
func (w *Writer) Abort() error {
	if w == nil {
		return nil
	}
	w.wait()
	if w.err == nil {
		w.err = fmt.Errorf("writer aborted")
	}
	return w.f.Abort()
}
