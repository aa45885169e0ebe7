package raw

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/ctrkit/ctrkit/formats"
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
	f   *formats.File
	w   *bufio.Writer
	enc encoder
	rec []byte // one encoded sample
	buf []byte // encoded samples of a range written in parallel
	n   int64  // samples written
	err error  // sticky
}

// encoder encodes samples of a schema in a layout.
type encoder struct {
	schema *formats.Schema
	layout Layout
	size   int
	hot    []int
}

func newEncoder(s *formats.Schema, l Layout) (encoder, error) {
	size, err := SampleSize(s, l)
	if err != nil {
		return encoder{}, err
	}
	e := encoder{schema: s, layout: l, size: size}
	for _, sl := range s.Slots {
		h := 1
		if l == MultiHot {
			h = sl.Hotness
		}
		e.hot = append(e.hot, h)
	}
	return e, nil
}

// Create starts a Raw file at path for samples of schema s in layout l.
func Create(path string, s *formats.Schema, l Layout) (*Writer, error) {
	sc := s.Clone()
	enc, err := newEncoder(&sc, l)
	if err != nil {
		return nil, err
	}
	f, err := formats.CreateFile(path)
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
		return fmt.Errorf("ctrkit/formats/raw: batch schema does not match the writer's")
	}
	if lo < 0 || hi > b.N || lo > hi {
		return fmt.Errorf("ctrkit/formats/raw: WriteRange(%d, %d) outside the batch of %d", lo, hi, b.N)
	}
	if hi-lo >= 2*parallelMin && runtime.GOMAXPROCS(0) > 1 {
		return w.writeParallel(b, lo, hi)
	}
	for i := lo; i < hi; i++ {
		if err := w.enc.encode(w.rec, b, i); err != nil {
			return w.fail(err)
		}
		if _, err := w.w.Write(w.rec); err != nil {
			w.err = err
			return err
		}
		w.n++
	}
	return nil
}

// fail makes err, the encoding error of the next sample, the writer's
// sticky error.
func (w *Writer) fail(err error) error {
	w.err = &formats.Error{Format: "raw", Path: w.f.Final(), Offset: w.n * int64(w.enc.size), Record: w.n, Err: err}
	return w.err
}

// parallelMin is the fewest samples one goroutine of writeParallel encodes.
const parallelMin = 8192

// writeParallel is WriteRange for large ranges: the samples are encoded by
// up to GOMAXPROCS goroutines, each into its part of one buffer, which is
// then written at once. As in the serial path, the samples before the first
// one that fails to encode are written, and none after.
func (w *Writer) writeParallel(b *formats.Batch, lo, hi int) error {
	n, size := hi-lo, w.enc.size
	if cap(w.buf) < n*size {
		w.buf = formats.AlignedAlloc(n*size, 64)
	}
	buf := w.buf[:n*size]
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
	if _, werr := w.w.Write(buf[:(good-lo)*size]); werr != nil {
		w.err = werr
		return werr
	}
	w.n += int64(good - lo)
	if err != nil {
		return w.fail(err)
	}
	return nil
}

// encode writes sample i of b into p (SampleSize bytes). A failure wraps
// formats.ErrValue, ErrNNZ or ErrKeyRange.
func (e *encoder) encode(p []byte, b *formats.Batch, i int) error {
	s := e.schema
	p = p[:e.size]
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
	for si, h := range e.hot {
		lo, hi := b.Row(i, si)
		if hi-lo != h {
			return fmt.Errorf("%w: slot %d has %d keys, the %s layout holds %d", formats.ErrNNZ, si, hi-lo, e.layout, h)
		}
		for j := lo; j < hi; j++ {
			k := b.Key(j)
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
	if w.err != nil {
		w.f.Abort()
		return w.err
	}
	w.err = fmt.Errorf("ctrkit/formats/raw: writer closed")
	if err := w.w.Flush(); err != nil {
		w.f.Abort()
		return err
	}
	return w.f.Commit()
}

// Abort removes the temporary file; nothing is left under the final name.
func (w *Writer) Abort() error {
	if w.err == nil {
		w.err = fmt.Errorf("ctrkit/formats/raw: writer aborted")
	}
	return w.f.Abort()
}
