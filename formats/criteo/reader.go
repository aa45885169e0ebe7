package criteo

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ctrkit/ctrkit/formats"
)

// Format is the text dialect.
type Format uint8

const (
	// Auto detects the dialect of each file from its first line: a tab
	// means TSV, else a comma means CSV.
	Auto Format = iota
	// TSV is Criteo's raw log dialect: tab-separated fields.
	TSV
	// CSV is comma-separated fields (usually after a header row).
	CSV
)

func (f Format) sep() byte {
	switch f {
	case TSV:
		return '\t'
	case CSV:
		return ','
	}
	return 0
}

func (f Format) String() string {
	switch f {
	case TSV:
		return "criteo-tsv"
	case CSV:
		return "criteo-csv"
	}
	return "criteo"
}

// ParseFormat accepts "tsv"/"criteo-tsv", "csv"/"criteo-csv" and
// "auto"/"criteo"/"".
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimPrefix(strings.ToLower(s), "criteo-")) {
	case "tsv", "txt", "tab":
		return TSV, nil
	case "csv":
		return CSV, nil
	case "auto", "criteo", "":
		return Auto, nil
	}
	return 0, fmt.Errorf("unknown text format %q (want tsv, csv or auto)", s)
}

// Default column counts of Criteo's logs.
const (
	DefaultNumDense = 13
	DefaultNumCat   = 26
)

// Layout describes the text: dialect and column counts, shared by the
// Reader and BuildVocab.
type Layout struct {
	// Format is the dialect (default Auto).
	Format Format
	// NumDense and NumCat are the numbers of integer and categorical
	// columns after the label (default 13 and 26; -1 for none).
	NumDense, NumCat int
	// SkipBad skips malformed lines and counts them (Stats.Skipped)
	// instead of failing with an error.
	SkipBad bool
	// AnyHeader accepts a header row with any column names, checking only
	// the column count; by default they must be label, I1.., C1...
	AnyHeader bool
}

func (l Layout) withDefaults() Layout {
	switch {
	case l.NumDense == 0:
		l.NumDense = DefaultNumDense
	case l.NumDense < 0:
		l.NumDense = 0
	}
	switch {
	case l.NumCat == 0:
		l.NumCat = DefaultNumCat
	case l.NumCat < 0:
		l.NumCat = 0
	}
	return l
}

// Validate reports an impossible layout.
func (l *Layout) Validate() error {
	if l.Format > CSV {
		return fmt.Errorf("invalid format %d", l.Format)
	}
	d := l.withDefaults()
	if d.NumDense > 1<<16 || d.NumCat > 1<<16 {
		return fmt.Errorf("%d dense and %d categorical columns: too many", d.NumDense, d.NumCat)
	}
	return nil
}

// Options are the Reader options. Exactly one of Buckets and Vocab chooses
// how categorical values become slot-local keys.
type Options struct {
	// Options are the shared reader options. Shuffle is not supported
	// (text is read as a stream). SlotSizeArray, when set, adds slot
	// offsets (SPEC §3.3) to the slot-local keys; each entry must be at
	// least the slot's key count (Buckets[s] or Vocab.SlotSizes()[s]).
	formats.Options
	Layout
	// KeyType is the key type of the batches (default i32).
	KeyType formats.KeyType
	// Buckets maps by hashing: slot s has Buckets[s] ≥ 2 keys (see Hash).
	Buckets []int64
	// Vocab maps by a vocabulary built with BuildVocab.
	Vocab *Vocab
}

// slotSizes returns the number of slot-local keys of every slot.
func (o *Options) slotSizes() []int64 {
	if o.Vocab != nil {
		return o.Vocab.SlotSizes()
	}
	return o.Buckets
}

// Validate checks the options.
func (o *Options) Validate() error {
	if err := o.Layout.Validate(); err != nil {
		return err
	}
	l := o.Layout.withDefaults()
	if o.Shuffle {
		return errors.New("Shuffle is not supported for text input")
	}
	if (o.Buckets == nil) == (o.Vocab == nil) {
		return errors.New("exactly one of Buckets (hashing) and Vocab must be set")
	}
	sizes := o.slotSizes()
	if len(sizes) != l.NumCat {
		return fmt.Errorf("%d slot sizes for %d categorical columns", len(sizes), l.NumCat)
	}
	for s, n := range sizes {
		if n < 2 {
			return fmt.Errorf("slot %d has %d keys, want ≥ 2", s, n)
		}
		if uint64(n)-1 > o.KeyType.Max() {
			return fmt.Errorf("slot %d has %d keys, more than key type %s holds", s, n, o.KeyType)
		}
		if len(o.SlotSizeArray) == len(sizes) && o.SlotSizeArray[s] < n {
			return fmt.Errorf("slot_size_array[%d] = %d below the slot's %d keys", s, o.SlotSizeArray[s], n)
		}
	}
	sc := o.schema()
	if err := sc.Validate(); err != nil {
		return err
	}
	return o.Options.Validate(&sc)
}

func (o *Options) schema() formats.Schema {
	l := o.Layout.withDefaults()
	sc := formats.NewSchema(1, l.NumDense, nil, o.slotSizes(), o.KeyType)
	for i := range sc.Slots {
		sc.Slots[i].Hotness = 1
	}
	return sc
}

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("reader closed")

// Stats counts what a Reader or BuildVocab has seen.
type Stats struct {
	// Samples is the number of samples parsed (returned, for a Reader,
	// or about to be).
	Samples int64
	// Skipped is the number of malformed lines skipped (SkipBad).
	Skipped int64
	// Clamped is the number of dense values outside the int32 range that
	// were clamped to it.
	Clamped int64
}

// Reader reads Criteo text files as batches. It implements formats.Reader;
// see the package doc for the pipeline and the mapping.
type Reader struct {
	schema *formats.Schema
	bsize  int
	nd, nc int
	p      *pipeline

	cur   *chunk // chunk being consumed, nil between chunks
	pos   int    // next sample of cur
	err   error  // sticky
	stats Stats
}

// Open starts reading the text files paths, in order, as one stream.
func Open(paths []string, o Options) (*Reader, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("no input files")
	}
	o.Options = o.Options.WithDefaults()
	l := o.Layout.withDefaults()
	sc := o.schema()
	m := mapping{buckets: o.Buckets, vocab: o.Vocab, offsets: formats.SlotOffsets(o.SlotSizeArray)}
	r := &Reader{schema: &sc, bsize: o.BatchSize, nd: l.NumDense, nc: l.NumCat}
	r.p = startPipeline(append([]string(nil), paths...), l, o.Repeat, true, m, o.Workers, 2*o.Workers+2, readerChunkSize)
	return r, nil
}

// readerChunkSize is the text bytes per chunk; it also bounds a line's
// length. Tests lower it to exercise chunk boundaries.
var readerChunkSize = 1 << 20

// Schema returns the schema of the batches: label_dim 1, NumDense dense,
// NumCat one-hot slots C1.. sized by Buckets or the Vocab.
func (r *Reader) Schema() *formats.Schema { return r.schema }

// Stats returns the counts so far.
func (r *Reader) Stats() Stats { return r.stats }

// Read fills b with up to the batch size of samples. It returns io.EOF at
// the end of the files (epoch mode); a malformed line is an *formats.Error
// (unless SkipBad) returned after the samples before it.
func (r *Reader) Read(b *formats.Batch) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	s := b.Schema
	if s.LabelDim != 1 || s.DenseDim != r.nd || len(s.Slots) != r.nc || s.KeyType != r.schema.KeyType {
		return 0, fmt.Errorf("batch schema %d/%d/%d %s, reader %d/%d/%d %s",
			s.LabelDim, s.DenseDim, len(s.Slots), s.KeyType, 1, r.nd, r.nc, r.schema.KeyType)
	}
	if b.Cap() < r.bsize {
		return 0, fmt.Errorf("batch capacity %d below batch size %d", b.Cap(), r.bsize)
	}
	if err := b.ReserveKeys(r.bsize * r.nc); err != nil {
		return 0, err
	}
	labels, dense, offsets, k32, k64 := b.Full()
	nd, nc := r.nd, r.nc
	n := 0
	for n < r.bsize {
		if r.cur != nil && r.pos == r.cur.n {
			if r.cur.err != nil {
				if n > 0 {
					break
				}
				r.err = r.cur.err
				return 0, r.err
			}
			r.p.release(r.cur)
			r.cur = nil
		}
		if r.cur == nil {
			c, err := r.p.next()
			if err != nil {
				if n > 0 && err == io.EOF {
					break
				}
				r.err = err
				b.SetLen(0)
				return 0, err
			}
			r.cur, r.pos = c, 0
			r.stats.Samples += int64(c.n)
			r.stats.Skipped += c.skipped
			r.stats.Clamped += c.clamped
		}
		c := r.cur
		m := min(r.bsize-n, c.n-r.pos)
		copy(labels[n:n+m], c.labels[r.pos:r.pos+m])
		copy(dense[n*nd:(n+m)*nd], c.dense[r.pos*nd:(r.pos+m)*nd])
		src := c.keys[r.pos*nc : (r.pos+m)*nc]
		if k64 != nil {
			dst := k64[n*nc : (n+m)*nc]
			for j, k := range src {
				dst[j] = int64(k)
			}
		} else {
			dst := k32[n*nc : (n+m)*nc]
			for j, k := range src {
				dst[j] = uint32(k)
			}
		}
		n += m
		r.pos += m
	}
	for j := 0; j <= n*nc; j++ {
		offsets[j] = int32(j)
	}
	b.SetLen(n)
	return n, nil
}

// Close stops the reader's goroutines and closes its files. Read returns
// ErrClosed afterwards.
func (r *Reader) Close() error {
	if r.p != nil {
		r.p.stop()
		r.p = nil
	}
	r.err = ErrClosed
	return nil
}
