package datagen

import (
	"bufio"
	"fmt"
	"math"
	"strconv"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// CriteoWriter writes Criteo-style text: one line per sample,
//
//	label \t I1 … \t In \t C1 … \t Cm \n
//
// with the label an integer, the dense values decimal integers and the
// categoricals 8 lowercase hex digits; a missing value is an empty field. A
// dense value is missing when it is NaN; a categorical when its key is −1.
// Key k of slot s is written as CriteoHash(s, k), a bijection of the 32-bit
// keys, so distinct keys stay distinct and hot keys do not look like small
// numbers. It implements formats.Writer for schemas with one key per slot,
// writing under a temporary name renamed by Close.
type CriteoWriter struct {
	f   *atomicfile.File
	w   *bufio.Writer
	buf []byte
	err error // sticky
}

// CreateCriteo starts a Criteo text file at path.
func CreateCriteo(path string) (*CriteoWriter, error) { return createCriteo(nil, path) }

func createCriteo(files atomicfile.Creator, path string) (*CriteoWriter, error) {
	f, err := atomicfile.CreatorOr(files).CreateFile(path)
	if err != nil {
		return nil, err
	}
	return &CriteoWriter{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// CriteoHash maps key k (< 2^32) of slot s to its text value: an
// invertible 32-bit mix of k keyed by s.
func CriteoHash(s int, k int64) uint32 {
	h := uint32(k) ^ uint32(s)*0x9e3779b9
	h ^= h >> 16
	h *= 0x7feb352d
	h ^= h >> 15
	h *= 0x846ca68b
	h ^= h >> 16
	return h
}

const hexDigits = "0123456789abcdef"

// Write appends the samples of b as text lines.
func (w *CriteoWriter) Write(b *formats.Batch) error {
	if w.err != nil {
		return w.err
	}
	s := b.Schema
	if s.LabelDim != 1 {
		w.err = fmt.Errorf("criteo text needs exactly one label, schema has %d", s.LabelDim)
		return w.err
	}
	S := len(s.Slots)
	for i := 0; i < b.N; i++ {
		buf := w.buf[:0]
		buf = strconv.AppendInt(buf, int64(b.Labels[i]), 10)
		for _, v := range b.Dense[i*s.DenseDim : (i+1)*s.DenseDim] {
			buf = append(buf, '\t')
			if !math.IsNaN(float64(v)) {
				buf = strconv.AppendInt(buf, int64(v), 10)
			}
		}
		for sl := 0; sl < S; sl++ {
			buf = append(buf, '\t')
			lo, hi := b.Row(i, sl)
			if hi-lo != 1 {
				w.err = fmt.Errorf("criteo text: sample %d slot %d has %d keys, want 1", i, sl, hi-lo)
				return w.err
			}
			k := b.Key(lo)
			if k < 0 {
				continue
			}
			h := CriteoHash(sl, k)
			for sh := 28; sh >= 0; sh -= 4 {
				buf = append(buf, hexDigits[h>>uint(sh)&15])
			}
		}
		buf = append(buf, '\n')
		w.buf = buf
		if _, err := w.w.Write(buf); err != nil {
			w.err = err
			return err
		}
	}
	return nil
}

// Close flushes the text and renames the file to its final name.
func (w *CriteoWriter) Close() error {
	if w.err != nil {
		w.f.Abort()
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		w.f.Abort()
		return err
	}
	w.err = fmt.Errorf("criteo writer closed")
	return w.f.Commit()
}

// Abort removes the temporary file.
func (w *CriteoWriter) Abort() error {
	w.err = fmt.Errorf("criteo writer aborted")
	return w.f.Abort()
}
