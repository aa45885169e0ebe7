// Package keysets builds HugeCTR keyset files (SPEC §6): the unique keys of
// a dataset, slot offsets applied, as a bare little-endian array of the key
// type (uint32 or int64), no header:
//
//	+--------+--------+-----+--------+
//	| key 0  | key 1  | ... | key n-1|   4 or 8 bytes each, unique, ascending
//	+--------+--------+-----+--------+
//
// HugeCTR writes one per file list (<list>.keyset) for its embedding cache;
// an empty keyset is an error. When every slot size is known, keys are
// collected in a bitmap of Σ sizes bits (4 MiB for Criteo Kaggle's 33.8M
// keys); otherwise in a hash set.
package keysets

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// Set collects unique keys.
type Set struct {
	kt     formats.KeyType
	bitmap []uint64 // when the key space is bounded
	hash   map[int64]struct{}
	n      int64
}

// maxBitmapKeys bounds the key space held as a bitmap (1 GiB of bits).
const maxBitmapKeys = 8 << 30

// NewSet returns an empty set for keys of type kt. space is the number of
// possible keys (Σ slot sizes) or 0 when unknown.
func NewSet(kt formats.KeyType, space int64) *Set {
	s := &Set{kt: kt}
	if space > 0 && space <= maxBitmapKeys {
		s.bitmap = make([]uint64, (space+63)/64)
	} else {
		s.hash = make(map[int64]struct{})
	}
	return s
}

// Add adds every key of b.
func (s *Set) Add(b *formats.Batch) error {
	nk := b.NumKeys()
	for j := 0; j < nk; j++ {
		k := b.Key(j)
		if s.bitmap != nil {
			if k < 0 || k >= int64(len(s.bitmap))*64 {
				return fmt.Errorf("key %d outside the key space of %d: %w", k, int64(len(s.bitmap))*64, formats.ErrKeyRange)
			}
			w, m := k>>6, uint64(1)<<(k&63)
			if s.bitmap[w]&m == 0 {
				s.bitmap[w] |= m
				s.n++
			}
			continue
		}
		if _, ok := s.hash[k]; !ok {
			s.hash[k] = struct{}{}
			s.n++
		}
	}
	return nil
}

// Len returns the number of unique keys.
func (s *Set) Len() int64 { return s.n }

// Keys returns the keys in ascending order.
func (s *Set) Keys() []int64 {
	out := make([]int64, 0, s.n)
	if s.bitmap != nil {
		for w, word := range s.bitmap {
			for word != 0 {
				t := bits.TrailingZeros64(word)
				out = append(out, int64(w)*64+int64(t))
				word &= word - 1
			}
		}
		return out
	}
	for k := range s.hash {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// WriteTo writes the keyset file bytes: the keys ascending, little-endian
// in the key type.
func (s *Set) WriteTo(w io.Writer) (int64, error) {
	if s.n == 0 {
		return 0, errors.New("empty keyset (HugeCTR rejects it)")
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var buf [8]byte
	var n int64
	for _, k := range s.Keys() {
		if s.kt == formats.KeyI64 {
			binary.LittleEndian.PutUint64(buf[:], uint64(k))
			bw.Write(buf[:8])
			n += 8
		} else {
			if k < 0 || k > 1<<32-1 {
				return n, fmt.Errorf("key %d does not fit i32 keys: %w", k, formats.ErrKeyRange)
			}
			binary.LittleEndian.PutUint32(buf[:], uint32(k))
			bw.Write(buf[:4])
			n += 4
		}
	}
	return n, bw.Flush()
}

// WriteFile writes the keyset to path atomically.
func (s *Set) WriteFile(path string) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	if _, err := s.WriteTo(f); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// Build reads every sample of r into a new set.
func Build(r formats.Reader, space int64, batchSize int, progress func(int)) (*Set, error) {
	s := NewSet(r.Schema().KeyType, space)
	b, err := formats.NewBatch(r.Schema(), batchSize, nil)
	if err != nil {
		return nil, err
	}
	defer b.Free()
	for {
		n, err := r.Read(b)
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		if err := s.Add(b); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(n)
		}
	}
}

// Read parses a keyset file's bytes.
func Read(data []byte, kt formats.KeyType) ([]int64, error) {
	ks := kt.Size()
	if len(data) == 0 || len(data)%ks != 0 {
		return nil, fmt.Errorf("%d bytes is not a non-empty array of %d-byte keys: %w", len(data), ks, formats.ErrSize)
	}
	out := make([]int64, len(data)/ks)
	for i := range out {
		if ks == 8 {
			out[i] = int64(binary.LittleEndian.Uint64(data[i*8:]))
		} else {
			out[i] = int64(binary.LittleEndian.Uint32(data[i*4:]))
		}
	}
	return out, nil
}
