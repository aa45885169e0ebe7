package norm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Check is the framing to write (HugeCTR's generator default is
	// CheckSum; the zero value is CheckNone).
	Check CheckMode
	// Files creates the output files (nil: atomicfile.Direct, each renamed
	// by its Close; a *atomicfile.Stage commits a dataset as a unit).
	Files atomicfile.Creator
}

// Validate reports invalid options.
func (o *WriterOptions) Validate() error {
	if !o.Check.valid() {
		return fmt.Errorf("invalid check mode %d", int(o.Check))
	}
	return nil
}

// Writer writes one Norm file. It implements formats.Writer. Keys are
// written as given: whether they are slot-local or carry slot offsets is
// the caller's choice. A Writer is not safe for concurrent use.
type Writer struct {
	f      *atomicfile.File
	bw     *bufio.Writer
	schema formats.Schema
	check  CheckMode
	n      int64  // records written
	rec    []byte // scratch for one record
	err    error  // sticky
}

// Create starts writing the Norm file path for samples of schema s. The
// data goes to a temporary file (atomicfile.Create) that Close renames.
func Create(path string, s *formats.Schema, o WriterOptions) (*Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	f, err := atomicfile.CreatorOr(o.Files).CreateFile(path)
	if err != nil {
		return nil, fmt.Errorf("creating norm file: %w", err)
	}
	w := &Writer{f: f, bw: bufio.NewWriterSize(f, 1<<20), schema: s.Clone(), check: o.Check}
	if _, err := w.bw.Write(AppendHeader(nil, w.header(), o.Check)); err != nil {
		f.Abort()
		return nil, fmt.Errorf("writing norm header of %s: %w", path, err)
	}
	return w, nil
}

func (w *Writer) header() Header {
	return Header{ErrorCheck: int64(w.check), NumRecords: w.n, LabelDim: int64(w.schema.LabelDim),
		DenseDim: int64(w.schema.DenseDim), SlotNum: int64(len(w.schema.Slots))}
}

// Write appends the samples of b.
func (w *Writer) Write(b *formats.Batch) error { return w.WriteRange(b, 0, b.N) }

// WriteRange writes samples [lo, hi) of b (formats.RangeWriter).
func (w *Writer) WriteRange(b *formats.Batch, lo, hi int) error {
	if w.err != nil {
		return w.err
	}
	s := b.Schema
	if s.LabelDim != w.schema.LabelDim || s.DenseDim != w.schema.DenseDim || len(s.Slots) != len(w.schema.Slots) || s.KeyType != w.schema.KeyType {
		return fmt.Errorf("batch schema %d/%d/%d %s, writer %d/%d/%d %s", s.LabelDim, s.DenseDim, len(s.Slots), s.KeyType,
			w.schema.LabelDim, w.schema.DenseDim, len(w.schema.Slots), w.schema.KeyType)
	}
	if lo < 0 || hi > b.N || lo > hi {
		return fmt.Errorf("WriteRange(%d, %d) outside the batch of %d", lo, hi, b.N)
	}
	for i := lo; i < hi; i++ {
		for si, sl := range w.schema.Slots {
			if lo, hi := b.Row(i, si); sl.MaxNNZ > 0 && hi-lo > sl.MaxNNZ {
				return fmt.Errorf("writing %s: sample %d slot %d has %d keys, max %d: %w", w.f.Final(), i, si, hi-lo, sl.MaxNNZ, formats.ErrNNZ)
			}
		}
		w.rec = AppendRecord(w.rec[:0], b, i, w.check)
		if _, err := w.bw.Write(w.rec); err != nil {
			w.err = fmt.Errorf("writing norm record to %s: %w", w.f.Final(), err)
			return w.err
		}
		w.n++
	}
	return nil
}

// AppendRecord appends sample i of b, encoded as a Norm record (framed when
// m is CheckSum), to dst.
func AppendRecord(dst []byte, b *formats.Batch, i int, m CheckMode) []byte {
	s := b.Schema
	start := len(dst)
	if m == CheckSum {
		dst = append(dst, 0, 0, 0, 0)
	}
	for _, v := range b.Labels[i*s.LabelDim : (i+1)*s.LabelDim] {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
	}
	for _, v := range b.Dense[i*s.DenseDim : (i+1)*s.DenseDim] {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
	}
	for si := range s.Slots {
		lo, hi := b.Row(i, si)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(hi-lo))
		if b.Keys64 != nil {
			for _, k := range b.Keys64[lo:hi] {
				dst = binary.LittleEndian.AppendUint64(dst, uint64(k))
			}
		} else {
			for _, k := range b.Keys32[lo:hi] {
				dst = binary.LittleEndian.AppendUint32(dst, k)
			}
		}
	}
	if m == CheckSum {
		payload := dst[start+4:]
		binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
		dst = append(dst, checksum(payload))
	}
	return dst
}

// Records returns the number of records written so far.
func (w *Writer) Records() int64 { return w.n }

// Close flushes the data, rewrites the header's number_of_records (and its
// check byte) and moves the file to its final name.
func (w *Writer) Close() error {
	if w.err != nil {
		w.f.Abort()
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.f.Abort()
		return fmt.Errorf("writing norm file %s: %w", w.f.Final(), err)
	}
	if _, err := w.f.WriteAt(AppendHeader(nil, w.header(), w.check), 0); err != nil {
		w.f.Abort()
		return fmt.Errorf("rewriting norm header of %s: %w", w.f.Final(), err)
	}
	w.err = errors.New("writer closed")
	return w.f.Commit()
}

// Abort discards the file.
func (w *Writer) Abort() error {
	if w == nil {
		return nil
	}
	w.err = errors.New("writer aborted")
	return w.f.Abort()
}

var _ formats.Writer = (*Writer)(nil)
