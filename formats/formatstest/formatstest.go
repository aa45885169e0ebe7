// Package formatstest holds what the format packages' tests share: seeded
// random datasets, batching helpers, a ReadAll that drains any
// formats.Reader, and a sample-by-sample comparison.
package formatstest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/ctrkit/ctrkit/formats"
)

// Dataset is a whole dataset held sample by sample, for tests.
type Dataset struct {
	Schema formats.Schema
	Labels [][]float32
	Dense  [][]float32
	Keys   [][][]int64 // [sample][slot][key]
}

// Len returns the number of samples.
func (d *Dataset) Len() int { return len(d.Labels) }

// RandomSchema options.
type RandomSchema struct {
	MaxLabel, MaxDense, MaxSlots int // inclusive upper bounds (label ≥ 1)
	MaxNNZ                       int // per-slot max nnz drawn in [1, MaxNNZ]
	KeyType                      formats.KeyType
	FixedHotness                 bool // every slot fixed hotness (Raw multi-hot)
	OneHot                       bool // every slot exactly one key
}

// NewSchema draws a random schema. Slot sizes are drawn in [1, 1000].
func NewSchema(rng *rand.Rand, o RandomSchema) formats.Schema {
	s := formats.Schema{KeyType: o.KeyType}
	s.LabelDim = 1 + rng.IntN(max(o.MaxLabel, 1))
	s.DenseDim = rng.IntN(o.MaxDense + 1)
	n := 1 + rng.IntN(max(o.MaxSlots, 1))
	for i := 0; i < n; i++ {
		sl := formats.Slot{Name: fmt.Sprintf("C%d", i+1), Size: 1 + rng.Int64N(1000)}
		switch {
		case o.OneHot:
			sl.MaxNNZ, sl.Hotness = 1, 1
		case o.FixedHotness:
			sl.Hotness = 1 + rng.IntN(max(o.MaxNNZ, 1))
			sl.MaxNNZ = sl.Hotness
		default:
			sl.MaxNNZ = 1 + rng.IntN(max(o.MaxNNZ, 1))
		}
		s.Slots = append(s.Slots, sl)
	}
	return s
}

// Values says how labels and dense values are drawn.
type Values int

const (
	// AnyFloat draws labels in {0,1} and dense uniform in [-1, 2).
	AnyFloat Values = iota
	// IntegerValued draws labels in {0,1} and dense as ln(x+1) of an
	// integer x in [0, 1000], the values the Raw int32 encoding can hold.
	IntegerValued
)

// NewDataset draws n samples of schema s. Keys are slot-local in [0, Size);
// a slot with Hotness has exactly that many keys, otherwise nnz is drawn in
// [minNNZ, MaxNNZ].
func NewDataset(rng *rand.Rand, s formats.Schema, n, minNNZ int, v Values) *Dataset {
	d := &Dataset{Schema: s}
	for i := 0; i < n; i++ {
		lab := make([]float32, s.LabelDim)
		for j := range lab {
			lab[j] = float32(rng.IntN(2))
		}
		den := make([]float32, s.DenseDim)
		for j := range den {
			if v == IntegerValued {
				den[j] = formats.DenseFromInt32(int32(rng.IntN(1001)))
			} else {
				den[j] = rng.Float32()*3 - 1
			}
		}
		keys := make([][]int64, len(s.Slots))
		for si, sl := range s.Slots {
			nnz := sl.Hotness
			if nnz == 0 {
				nnz = minNNZ + rng.IntN(sl.MaxNNZ-minNNZ+1)
			}
			ks := make([]int64, nnz)
			for j := range ks {
				ks[j] = rng.Int64N(max(sl.Size, 1))
			}
			keys[si] = ks
		}
		d.Labels = append(d.Labels, lab)
		d.Dense = append(d.Dense, den)
		d.Keys = append(d.Keys, keys)
	}
	return d
}

// Batches splits d into batches of at most size samples.
func (d *Dataset) Batches(size int) ([]*formats.Batch, error) {
	var out []*formats.Batch
	for lo := 0; lo < d.Len(); lo += size {
		hi := min(lo+size, d.Len())
		b, err := formats.NewBatch(&d.Schema, size, nil)
		if err != nil {
			return nil, err
		}
		for i := lo; i < hi; i++ {
			if err := b.AppendSample(d.Labels[i], d.Dense[i], d.Keys[i]); err != nil {
				return nil, err
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// WriteAll writes d through w in batches of size and closes w.
func (d *Dataset) WriteAll(w formats.Writer, size int) error {
	bs, err := d.Batches(size)
	if err != nil {
		w.Abort()
		return err
	}
	for _, b := range bs {
		if err := w.Write(b); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

// WithOffsets returns a copy of d whose keys have slot offsets added.
func (d *Dataset) WithOffsets(sizes []int64) *Dataset {
	off := formats.SlotOffsets(sizes)
	c := &Dataset{Schema: d.Schema, Labels: d.Labels, Dense: d.Dense}
	for _, keys := range d.Keys {
		ck := make([][]int64, len(keys))
		for s, ks := range keys {
			ck[s] = make([]int64, len(ks))
			for j, k := range ks {
				ck[s][j] = k + off[s]
			}
		}
		c.Keys = append(c.Keys, ck)
	}
	return c
}

// ReadAll drains r with batches of capacity batchSize (which must be ≥ the
// reader's batch size), stopping at io.EOF, or after limit samples when
// limit > 0 (for repeat mode).
func ReadAll(r formats.Reader, batchSize, limit int) (*Dataset, error) {
	s := r.Schema()
	d := &Dataset{Schema: s.Clone()}
	b, err := formats.NewBatch(s, batchSize, nil)
	if err != nil {
		return nil, err
	}
	defer b.Free()
	for limit <= 0 || d.Len() < limit {
		n, err := r.Read(b)
		if err == io.EOF {
			if n != 0 {
				return d, fmt.Errorf("formatstest: Read returned n=%d with io.EOF", n)
			}
			break
		}
		if err != nil {
			return d, err
		}
		if n != b.N {
			return d, fmt.Errorf("formatstest: Read returned n=%d, batch holds %d", n, b.N)
		}
		if err := CheckBatch(b); err != nil {
			return d, err
		}
		for i := 0; i < n; i++ {
			d.AppendFrom(b, i)
		}
	}
	return d, nil
}

// AppendFrom appends a copy of sample i of b.
func (d *Dataset) AppendFrom(b *formats.Batch, i int) {
	s := b.Schema
	d.Labels = append(d.Labels, append([]float32(nil), b.Labels[i*s.LabelDim:(i+1)*s.LabelDim]...))
	d.Dense = append(d.Dense, append([]float32(nil), b.Dense[i*s.DenseDim:(i+1)*s.DenseDim]...))
	keys := make([][]int64, len(s.Slots))
	for si := range keys {
		lo, hi := b.Row(i, si)
		keys[si] = make([]int64, 0, hi-lo)
		for j := lo; j < hi; j++ {
			keys[si] = append(keys[si], b.Key(j))
		}
	}
	d.Keys = append(d.Keys, keys)
}

// CheckBatch verifies the length invariants documented on formats.Batch.
func CheckBatch(b *formats.Batch) error {
	s := b.Schema
	S := len(s.Slots)
	if len(b.Labels) != b.N*s.LabelDim || len(b.Dense) != b.N*s.DenseDim || len(b.Offsets) != b.N*S+1 {
		return fmt.Errorf("formatstest: batch of %d: lengths labels %d dense %d offsets %d", b.N, len(b.Labels), len(b.Dense), len(b.Offsets))
	}
	if b.Offsets[0] != 0 {
		return errors.New("formatstest: Offsets[0] != 0")
	}
	for r := 0; r < b.N*S; r++ {
		if b.Offsets[r+1] < b.Offsets[r] {
			return fmt.Errorf("formatstest: offsets decrease at row %d", r)
		}
	}
	nk := len(b.Keys32) + len(b.Keys64)
	if nk != int(b.Offsets[b.N*S]) {
		return fmt.Errorf("formatstest: %d keys, offsets say %d", nk, b.Offsets[b.N*S])
	}
	return nil
}

// Diff returns "" when a and b hold the same samples (float values compared
// exactly, bit for bit except NaN == NaN), else a description of the first
// difference.
func Diff(a, b *Dataset) string {
	if a.Len() != b.Len() {
		return fmt.Sprintf("sample count %d vs %d", a.Len(), b.Len())
	}
	for i := 0; i < a.Len(); i++ {
		if d := diffF(a.Labels[i], b.Labels[i]); d != "" {
			return fmt.Sprintf("sample %d label: %s", i, d)
		}
		if d := diffF(a.Dense[i], b.Dense[i]); d != "" {
			return fmt.Sprintf("sample %d dense: %s", i, d)
		}
		if len(a.Keys[i]) != len(b.Keys[i]) {
			return fmt.Sprintf("sample %d: %d slots vs %d", i, len(a.Keys[i]), len(b.Keys[i]))
		}
		for s := range a.Keys[i] {
			x, y := a.Keys[i][s], b.Keys[i][s]
			if len(x) != len(y) {
				return fmt.Sprintf("sample %d slot %d: nnz %d vs %d (%v vs %v)", i, s, len(x), len(y), x, y)
			}
			for j := range x {
				if x[j] != y[j] {
					return fmt.Sprintf("sample %d slot %d key %d: %d vs %d", i, s, j, x[j], y[j])
				}
			}
		}
	}
	return ""
}

func diffF(x, y []float32) string {
	if len(x) != len(y) {
		return fmt.Sprintf("width %d vs %d", len(x), len(y))
	}
	for j := range x {
		if x[j] != y[j] && !(x[j] != x[j] && y[j] != y[j]) {
			return fmt.Sprintf("[%d] %v vs %v", j, x[j], y[j])
		}
	}
	return ""
}
