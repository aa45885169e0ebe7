package formats

import (
	"fmt"
	"runtime"
)

// Options are the reader options shared by every format. The zero value is
// useful: batches of DefaultBatchSize, epoch mode, GOMAXPROCS workers, no slot
// offsets, file order.
type Options struct {
	// BatchSize is the number of samples per batch (default DefaultBatchSize).
	BatchSize int
	// Repeat cycles over the data forever (HugeCTR repeat_dataset); the
	// default, epoch mode, ends with a possibly short last batch and io.EOF.
	Repeat bool
	// Workers decode in parallel (default GOMAXPROCS). The samples and their
	// order never depend on it.
	Workers int
	// SlotSizeArray enables slot offsets (SPEC §3.3): key k of slot s
	// becomes k + Σ_{j<s} SlotSizeArray[j], and k ≥ SlotSizeArray[s] is an
	// ErrKeyRange error. Empty means keys are passed through.
	SlotSizeArray []int64
	// Shuffle permutes the order of batches (Raw) or files (Norm, Parquet)
	// every epoch, from Seed; the same seed gives the same order.
	Shuffle bool
	Seed    uint64
	// Alloc supplies batch buffers for readers that allocate their own
	// (nil: Go heap).
	Alloc Allocator
	// MemoryLimit, when > 0, bounds the buffers of readers that decode
	// whole units ahead of the consumer (Parquet row groups): they run
	// fewer workers, down to one, to stay under it. Batches are not
	// counted. 0: no bound.
	MemoryLimit int64
}

// DefaultBatchSize is the batch size when Options.BatchSize is 0.
const DefaultBatchSize = 1024

// WithDefaults returns o with zero fields replaced by their defaults.
func (o Options) WithDefaults() Options {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Alloc == nil {
		o.Alloc = HeapAllocator{}
	}
	return o
}

// Validate checks the options against a schema.
func (o *Options) Validate(s *Schema) error {
	if o.BatchSize < 0 {
		return fmt.Errorf("batch size %d must be > 0", o.BatchSize)
	}
	if len(o.SlotSizeArray) == 0 {
		return nil
	}
	if len(o.SlotSizeArray) != len(s.Slots) {
		return fmt.Errorf("slot_size_array has %d entries, schema has %d slots", len(o.SlotSizeArray), len(s.Slots))
	}
	var total uint64
	for i, n := range o.SlotSizeArray {
		if n <= 0 {
			return fmt.Errorf("slot_size_array[%d] = %d must be > 0", i, n)
		}
		total += uint64(n)
	}
	if total-1 > s.KeyType.Max() {
		return fmt.Errorf("slot_size_array sums to %d, more keys than key type %s holds", total, s.KeyType)
	}
	return nil
}

// SlotOffsets returns offset[s] = Σ_{j<s} sizes[j], or nil for empty sizes.
func SlotOffsets(sizes []int64) []int64 {
	if len(sizes) == 0 {
		return nil
	}
	off := make([]int64, len(sizes))
	var sum int64
	for i, n := range sizes {
		off[i] = sum
		sum += n
	}
	return off
}

// Reader is the grammar every format's reader follows (see the package doc).
type Reader interface {
	// Schema returns the schema batches are decoded in.
	Schema() *Schema
	// Read fills b (which must have been made for Schema, with Cap ≥ the
	// reader's batch size) with the next batch and returns its size.
	Read(b *Batch) (int, error)
	// Close stops the reader's goroutines and closes its files.
	Close() error
}

// Lender is a reader that can lend its own decoded batches instead of
// copying into the caller's (parquet.Reader, raw.AsyncReader): a lent batch
// must not be modified and stays valid until the next Next, Read or Close.
// At the end of data Next returns nil, io.EOF.
type Lender interface {
	Next() (*Batch, error)
}

// Writer writes batches in a format. Close finishes the output (header
// counts, footers) and moves it from its temporary name to its final name;
// Abort removes the temporary file instead.
type Writer interface {
	Write(b *Batch) error
	Close() error
	Abort() error
}

// RangeWriter is a Writer that can write part of a batch; dataset writers
// that roll over to a new file every N samples use it.
type RangeWriter interface {
	Writer
	// WriteRange writes samples [lo, hi) of b.
	WriteRange(b *Batch, lo, hi int) error
}
