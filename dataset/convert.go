package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ctrkit/ctrkit/formats"
)

// ConvertStats is what a conversion did.
type ConvertStats struct {
	Samples int64
	Seconds float64
	// ReadWorkers is the number of goroutines that decoded the input
	// (ReadWorkers of o.Workers; see Convert).
	ReadWorkers int
}

// ReadWorkers is the number of decoding goroutines a conversion of a
// binary dataset (Norm, Raw, Parquet) to Raw on threads threads gives its
// reader on a machine of cores cores (GOMAXPROCS): from 8 cores on, at most
// three quarters of them. The Raw writer encodes on all cores between its
// writes, and the kernel copies the written bytes into the page cache on
// one thread per file (buffered writes to one file are serialized); with
// every core decoding, that thread waits for a core, and a conversion to
// Raw runs at its pace. Measured on a 16-core VM (gpu-host,
// docs/PERFORMANCE.md): Parquet → Raw at 12.9–15.4 M samples/s decoding on
// 16 goroutines, 18.6–21.3 M on 12. Writers that compress (Parquet) keep
// every core busy themselves (Norm → Parquet ran as fast on 12 as on 16)
// and Criteo text is slow to parse: those conversions decode on every
// thread.
func ReadWorkers(threads, cores int) int {
	if cores >= 8 {
		return min(threads, ReaderShare(cores))
	}
	return threads
}

// ReaderShare is how many of cores a reader decodes on beside a consumer
// that needs cores of its own (a conversion's writer, ReadWorkers; the
// training loop, input.ReaderWorkers): three quarters of them, at least
// one.
func ReaderShare(cores int) int { return max(1, cores-cores/4) }

// convertDepth is the number of batches in flight between the reading and
// the writing goroutine: one being filled, one being written, one queued.
const convertDepth = 3

// Convert streams every sample of src into a new dataset at dst.
//
// Reading and writing overlap. A reader that lends its decoded batches
// (formats.Lender) decodes ahead on o.Workers goroutines of its own while
// one goroutine writes each batch it lends. Otherwise one goroutine reads
// (the readers decode on o.Workers goroutines of their own) and converts
// keys to the output key type, another encodes and writes, and a fixed set
// of convertDepth batches circulates between them (reader → writer → back
// to the reader), so memory
// is bounded by those batches plus the writer's buffer (a Parquet row
// group): nothing holds the whole dataset. A key that does not fit the
// output key type is an ErrKeyRange error. On error the output being
// written is removed (Writer.Abort). o.Workers is the number of threads to
// use (default GOMAXPROCS), ReadWorkers of which decode a binary dataset
// converted to Raw (all of them otherwise). progress, when not nil, is
// called from the writing goroutine after each batch is written.
//
// The output is committed as a unit when complete (see Create); when ctx is
// cancelled, or on any error, it is removed and a dataset that was at dst
// stays as it was. The error then wraps ctx.Err().
func Convert(ctx context.Context, src *Dataset, dst string, out Output, o formats.Options, progress func(samples int)) (ConvertStats, error) {
	var st ConvertStats
	start := time.Now()
	outSchema, err := OutputSchema(src.Schema, out)
	if err != nil {
		return st, err
	}
	o = o.WithDefaults()
	if out.Format == Raw && src.Format != CriteoTSV && src.Format != CriteoCSV {
		o.Workers = ReadWorkers(o.Workers, runtime.GOMAXPROCS(0))
	}
	st.ReadWorkers = o.Workers
	hint := "" // for a key that does not fit 32 bits
	if src.Format == Parquet && src.Schema.KeyType == formats.KeyU32 {
		hint = "read 64-bit keys with --i64-input-key"
	}
	if src.Format == Parquet && src.Schema.KeyType == formats.KeyI64 && outSchema.KeyType == formats.KeyU32 {
		// The Parquet reader narrows (and range-checks) keys as it decodes:
		// no second pass over every batch.
		s := *src
		s.Schema = src.Schema.Clone()
		s.Schema.KeyType = formats.KeyU32
		src, hint = &s, "keep i64 keys: --out-key-type i64"
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	out.Inputs = append(append([]string(nil), src.Files...), src.List)
	r, err := src.Open(o)
	if err != nil {
		return st, err
	}
	defer r.Close()
	convert := r.Schema().KeyType != outSchema.KeyType
	finish := func(w formats.Writer, err error) (ConvertStats, error) {
		if err != nil {
			w.Abort()
			if hint != "" && errors.Is(err, formats.ErrKeyRange) {
				err = fmt.Errorf("%w (%s)", err, hint)
			}
			return st, err
		}
		if err := w.Close(); err != nil {
			return st, err
		}
		st.Seconds = time.Since(start).Seconds()
		return st, nil
	}
	if nx, ok := r.(formats.Lender); ok && !convert {
		// The reader lends decoded batches (decoding ahead on its own
		// goroutines): one goroutine writes them as they come, with no copy.
		w, err := Create(dst, &outSchema, out)
		if err != nil {
			return st, err
		}
		for {
			if err := ctx.Err(); err != nil {
				return finish(w, err)
			}
			b, err := nx.Next()
			if errors.Is(err, io.EOF) {
				return finish(w, nil)
			}
			if err == nil {
				err = w.Write(b)
			}
			if err != nil {
				return finish(w, err)
			}
			st.Samples += int64(b.N)
			if progress != nil {
				progress(b.N)
			}
		}
	}
	bs := r.Schema()
	var in *formats.Batch // the reader's batch when keys are converted
	if convert {
		bs = &outSchema
		if in, err = formats.NewBatch(r.Schema(), o.BatchSize, o.Alloc); err != nil {
			return st, err
		}
		defer in.Free()
	}
	pool := make([]*formats.Batch, 0, convertDepth)
	defer func() {
		for _, b := range pool {
			b.Free()
		}
	}()
	for range convertDepth {
		b, err := formats.NewBatch(bs, o.BatchSize, o.Alloc)
		if err != nil {
			return st, err
		}
		pool = append(pool, b)
	}

	w, err := Create(dst, &outSchema, out)
	if err != nil {
		return st, err
	}
	free := make(chan *formats.Batch, len(pool))
	full := make(chan *formats.Batch, len(pool))
	for _, b := range pool {
		free <- b
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { // reader
		defer close(full)
		var read int64 // samples read before this batch
		for {
			var b *formats.Batch
			select {
			case b = <-free:
			case <-gctx.Done():
				return gctx.Err()
			}
			dstB := b
			if convert {
				dstB = in
			}
			_, err := r.Read(dstB)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if convert {
				if err := ConvertKeys(b, in); err != nil {
					var fe *formats.Error
					if errors.As(err, &fe) && fe.Record >= 0 {
						fe.Record += read // the sample's index in the dataset
						fe.Path = src.Path
					}
					return err
				}
			}
			read += int64(b.N)
			full <- b
		}
	})
	g.Go(func() error { // writer
		for b := range full {
			if err := gctx.Err(); err != nil {
				return err
			}
			if err := w.Write(b); err != nil {
				return err
			}
			st.Samples += int64(b.N)
			if progress != nil {
				progress(b.N)
			}
			free <- b
		}
		return nil
	})
	return finish(w, g.Wait())
}

// ConvertKeys copies src into dst, whose schema has the same shape but
// another key type. An i64 key outside [0, 2^32) does not fit i32 keys: an
// ErrKeyRange *formats.Error whose Record is the sample's index in the batch.
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
				// The sample and slot of key i: the CSR row holding it.
				row := sort.Search(len(src.Offsets)-1, func(r int) bool { return int(src.Offsets[r+1]) > i })
				ns := max(len(src.Schema.Slots), 1)
				return formats.Errorf("convert", "", -1, int64(row/ns), formats.ErrKeyRange,
					"slot %d key %d does not fit i32 keys (keep i64 keys: --out-key-type i64)", row%ns, k)
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
