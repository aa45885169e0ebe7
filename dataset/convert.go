package dataset

import (
	"errors"
	"io"
	"time"

	"github.com/ctrkit/ctrkit/formats"
)

// ConvertStats is what a conversion did.
type ConvertStats struct {
	Samples int64
	Seconds float64
}

// Convert streams every sample of src into a new dataset at dst. Memory is
// bounded by a few batches (and a Parquet row group): nothing holds the
// whole dataset. Readers decode on all cores (o.Workers); keys are converted
// to the output key type, a key that does not fit being an ErrKeyRange
// error. On error the output file being written is removed.
func Convert(src *Dataset, dst string, out Output, o formats.Options, progress func(samples int)) (ConvertStats, error) {
	var st ConvertStats
	start := time.Now()
	outSchema, err := OutputSchema(src.Schema, out)
	if err != nil {
		return st, err
	}
	o = o.WithDefaults()
	r, err := src.Open(o)
	if err != nil {
		return st, err
	}
	defer r.Close()
	w, err := Create(dst, &outSchema, out)
	if err != nil {
		return st, err
	}
	in, err := formats.NewBatch(r.Schema(), o.BatchSize, o.Alloc)
	if err != nil {
		w.Abort()
		return st, err
	}
	defer in.Free()
	var conv *formats.Batch
	if r.Schema().KeyType != outSchema.KeyType {
		if conv, err = formats.NewBatch(&outSchema, o.BatchSize, o.Alloc); err != nil {
			w.Abort()
			return st, err
		}
		defer conv.Free()
	}
	for {
		n, err := r.Read(in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w.Abort()
			return st, err
		}
		b := in
		if conv != nil {
			if err := ConvertKeys(conv, in); err != nil {
				w.Abort()
				return st, err
			}
			b = conv
		}
		if err := w.Write(b); err != nil {
			w.Abort()
			return st, err
		}
		st.Samples += int64(n)
		if progress != nil {
			progress(n)
		}
	}
	if err := w.Close(); err != nil {
		return st, err
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// ConvertKeys copies src into dst, whose schema has the same shape but
// another key type.
func ConvertKeys(dst, src *formats.Batch) error {
	if err := dst.ReserveKeys(src.NumKeys()); err != nil {
		return err
	}
	labels, dense, offsets, k32, k64 := dst.Full()
	copy(labels, src.Labels)
	copy(dense, src.Dense)
	copy(offsets, src.Offsets)
	nk := src.NumKeys()
	switch {
	case k64 != nil && src.Keys32 != nil:
		for i, k := range src.Keys32[:nk] {
			k64[i] = int64(k)
		}
	case k32 != nil && src.Keys64 != nil:
		for i, k := range src.Keys64[:nk] {
			if k < 0 || k > 1<<32-1 {
				return formats.Errorf("convert", "", -1, int64(i), formats.ErrKeyRange, "key %d at batch position %d does not fit i32 keys (use --i64-input-key)", k, i)
			}
			k32[i] = uint32(k)
		}
	case k64 != nil:
		copy(k64, src.Keys64[:nk])
	default:
		copy(k32, src.Keys32[:nk])
	}
	dst.SetLen(src.N)
	return nil
}
