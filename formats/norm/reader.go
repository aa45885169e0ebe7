package norm

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ctrkit/ctrkit/formats"
)

// Options configure a Reader. The zero value reads unframed files
// (CheckNone) with the defaults of formats.Options.
type Options struct {
	formats.Options
	// Check is the framing the files must have; a header whose error_check
	// disagrees is an ErrHeader error.
	Check CheckMode
	// SkipCorrupt skips samples whose check byte is wrong, counting them
	// (Reader.Skipped), as HugeCTR does; by default they are ErrChecksum
	// errors.
	SkipCorrupt bool
	// KeyType is the key width when no schema is given (the schema then
	// comes from the first file's header); with a schema, the schema's key
	// type is used and KeyType is ignored.
	KeyType formats.KeyType
	// BufferSize is the size of the read buffer per reader (default 4 MiB,
	// or 1 MiB per worker when that is more); it grows only for a record
	// larger than itself.
	BufferSize int
}

// DefaultBufferSize is the read buffer size when Options.BufferSize is 0
// (and Workers ≤ 4; see readPiece).
const DefaultBufferSize = 4 << 20

// readPiece is the least number of bytes one goroutine reads of a buffer
// refill: a refill of n bytes is split over min(Workers, n/readPiece)
// concurrent preads. One thread copies 2–3 GB/s out of the page cache, which
// is what the Reader decoded per second with any number of workers before
// reads were split (the decoding itself is parallel).
const readPiece = 1 << 20

// Validate checks the options against a schema (nil: the key type alone).
func (o *Options) Validate(s *formats.Schema) error {
	if !o.Check.valid() {
		return fmt.Errorf("invalid check mode %d", int(o.Check))
	}
	if o.KeyType > formats.KeyI64 {
		return fmt.Errorf("invalid key type %d", o.KeyType)
	}
	if o.BufferSize < 0 {
		return fmt.Errorf("negative buffer size %d", o.BufferSize)
	}
	if s == nil {
		return nil
	}
	return o.Options.Validate(s)
}

// Reader reads the samples of a list of Norm files in batches that span
// files. It implements formats.Reader. A Reader is not safe for concurrent
// use; Read decodes with up to Workers goroutines, all joined before Read
// returns, so no goroutine outlives a call (Close only closes the file).
type Reader struct {
	schema  formats.Schema
	opts    Options // with defaults
	dec     *Decoder
	files   []string
	headers []Header
	sizes   []int64

	// The current epoch.
	order []int // file order
	epoch int
	next  int   // index into order of the next file to open
	count int64 // samples returned this epoch

	// The current file.
	f       *os.File
	cur     int // index into files, -1 when no file is open
	buf     []byte
	lo, hi  int   // unconsumed window buf[lo:hi]
	off     int64 // file offset of buf[lo]
	unread  int64 // bytes of the file after buf[hi]
	rec     int64 // records consumed in the file
	skipped int64
	sc      scanned
	spare   []byte // second buffer, filled by prefetch
	pre     int    // bytes prefetch read into spare[prefetchSlack:]
	minRun  int    // minParallelRecords; lowered by tests
	piece   int    // readPiece; lowered by tests
	err     error  // sticky
}

// Open returns a reader of one file.
func Open(path string, s *formats.Schema, o Options) (*Reader, error) {
	return OpenFiles([]string{path}, s, o)
}

// OpenList returns a reader of the files named by a file list (SPEC §1).
func OpenList(fileListPath string, s *formats.Schema, o Options) (*Reader, error) {
	files, err := formats.ReadFileList(fileListPath)
	if err != nil {
		return nil, fmt.Errorf("opening norm file list: %w", err)
	}
	return OpenFiles(files, s, o)
}

// OpenFiles returns a reader of files, read in order (or shuffled per
// epoch, see the package doc). Every file's header is read and validated
// here; when s is nil the schema is the first header's (slots unbounded,
// key type o.KeyType, slot sizes from o.SlotSizeArray).
func OpenFiles(files []string, s *formats.Schema, o Options) (*Reader, error) {
	if len(files) == 0 {
		return nil, errors.New("no files to read")
	}
	if err := o.Validate(s); err != nil {
		return nil, err
	}
	if s != nil {
		if err := s.Validate(); err != nil {
			return nil, err
		}
	}
	r := &Reader{files: files, cur: -1, minRun: minParallelRecords, piece: readPiece}
	r.opts = o
	r.opts.Options = o.Options.WithDefaults()
	if r.opts.BufferSize == 0 {
		r.opts.BufferSize = max(DefaultBufferSize, r.opts.Workers*readPiece)
	}
	for i, path := range files {
		h, size, err := readHeader(path, o.Check)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			if s == nil {
				r.schema = h.Schema(o.KeyType)
				for j, n := range o.SlotSizeArray {
					if j < len(r.schema.Slots) {
						r.schema.Slots[j].Size = n
					}
				}
				if err := h.Validate(nil, o.Check, size); err != nil {
					return nil, withPath(err, path)
				}
				if err := r.opts.Options.Validate(&r.schema); err != nil {
					return nil, err
				}
			} else {
				r.schema = s.Clone()
			}
		}
		if err := h.Validate(&r.schema, o.Check, size); err != nil {
			return nil, withPath(err, path)
		}
		r.headers = append(r.headers, h)
		r.sizes = append(r.sizes, size)
	}
	dec, err := NewDecoder(&r.schema, DecoderOptions{Check: o.Check, SkipCorrupt: o.SkipCorrupt, SlotSizeArray: o.SlotSizeArray})
	if err != nil {
		return nil, err
	}
	r.dec = dec
	r.startEpoch(0)
	return r, nil
}

// readHeader reads and parses the header of path, returning the file size.
func readHeader(path string, m CheckMode) (Header, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, 0, &formats.Error{Format: "norm", Path: path, Offset: -1, Record: -1, Op: "open", Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Header{}, 0, &formats.Error{Format: "norm", Path: path, Offset: -1, Record: -1, Op: "stat", Err: err}
	}
	var hb [FramedHeaderSize]byte
	n, err := io.ReadFull(f, hb[:m.headerLen()])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return Header{}, 0, &formats.Error{Format: "norm", Path: path, Offset: 0, Record: -1, Op: "reading header", Err: err}
	}
	h, _, err := ParseHeader(hb[:n], m)
	if err != nil {
		return Header{}, 0, withPath(err, path)
	}
	return h, fi.Size(), nil
}

// withPath fills in the path of a *formats.Error built without one.
func withPath(err error, path string) error {
	var fe *formats.Error
	if errors.As(err, &fe) && fe.Path == "" {
		fe.Path = path
	}
	return err
}

// Schema implements formats.Reader.
func (r *Reader) Schema() *formats.Schema { return &r.schema }

// Files returns the data files in list order.
func (r *Reader) Files() []string { return r.files }

// Header returns the header of file i (list order).
func (r *Reader) Header(i int) Header { return r.headers[i] }

// Skipped returns the number of records skipped for a bad check byte
// (Options.SkipCorrupt) so far.
func (r *Reader) Skipped() int64 { return r.skipped }

// startEpoch sets the file order of epoch e: list order, or with Shuffle a
// permutation drawn from PCG(Seed, e).
func (r *Reader) startEpoch(e int) {
	r.epoch, r.next, r.count = e, 0, 0
	if r.order == nil {
		r.order = make([]int, len(r.files))
	}
	for i := range r.order {
		r.order[i] = i
	}
	if r.opts.Shuffle {
		rng := rand.New(rand.NewPCG(r.opts.Seed, uint64(e)))
		rng.Shuffle(len(r.order), func(i, j int) { r.order[i], r.order[j] = r.order[j], r.order[i] })
	}
}

// Reset rewinds the reader to the start of epoch 0 and clears a sticky
// error.
func (r *Reader) Reset() error {
	r.closeFile()
	r.err = nil
	r.skipped = 0
	r.startEpoch(0)
	return nil
}

// Read implements formats.Reader: it fills b with the next BatchSize
// samples (fewer only at the end of an epoch in epoch mode) and returns
// their number, or 0 and io.EOF at the end of data.
func (r *Reader) Read(b *formats.Batch) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.dec == nil {
		return 0, errors.New("read of closed reader")
	}
	if b.Cap() < r.opts.BatchSize {
		return 0, fmt.Errorf("batch capacity %d below batch size %d", b.Cap(), r.opts.BatchSize)
	}
	if err := r.dec.checkBatch(b); err != nil {
		return 0, err
	}
	b.SetLen(0)
	for b.N < r.opts.BatchSize {
		if r.cur < 0 {
			if r.next == len(r.order) {
				if !r.opts.Repeat || r.count == 0 {
					break
				}
				r.startEpoch(r.epoch + 1)
			}
			if err := r.openFile(r.order[r.next]); err != nil {
				return r.fail(b, err)
			}
			r.next++
		}
		if err := r.step(b); err != nil {
			return r.fail(b, err)
		}
	}
	if b.N == 0 {
		return 0, io.EOF
	}
	return b.N, nil
}

func (r *Reader) fail(b *formats.Batch, err error) (int, error) {
	r.err = err
	r.closeFile()
	b.SetLen(0)
	return 0, err
}

// step decodes records of the current file into b, refilling the buffer
// when it holds no whole record, and closes the file after its last record.
func (r *Reader) step(b *formats.Batch) error {
	path := r.files[r.cur]
	left := r.headers[r.cur].NumRecords - r.rec
	if left == 0 {
		if extra := int64(r.hi-r.lo) + r.unread; extra > 0 {
			return formats.Errorf("norm", path, r.off, r.rec, formats.ErrSize, "%d bytes after the %d records the header announces", extra, r.rec)
		}
		r.closeFile()
		return nil
	}
	limit := int(min(left, int64(1<<30)))
	pos := Pos{Path: path, Offset: r.off, Record: r.rec}
	src := r.buf[r.lo:r.hi]
	var res Result
	var err error
	done, n0 := false, b.N
	if w := r.opts.Workers; w > 1 {
		r.dec.scan(src, limit, r.opts.BatchSize-b.N, &r.sc)
		if R := r.sc.records(); R >= max(r.minRun, 2) {
			done = true
			w = min(w, R/max(r.minRun/4, 1), len(r.sc.rec)-1)
			if len(src)-r.sc.end() <= prefetchSlack && r.unread > 0 {
				// The run ends the window: read what follows while
				// decoding it.
				var g errgroup.Group
				g.Go(r.prefetch)
				res, err = r.dec.decodeScanned(src, b, r.opts.BatchSize, pos, w, &r.sc)
				if perr := g.Wait(); perr != nil && err == nil {
					err = perr
				}
				if err == nil {
					r.swap(res.Consumed)
				}
				res.Consumed = 0 // swap moved the window
			} else {
				res, err = r.dec.decodeScanned(src, b, r.opts.BatchSize, pos, w, &r.sc)
			}
		}
	}
	if !done {
		res, err = r.dec.decode(src, b, limit, r.opts.BatchSize, pos)
	}
	r.count += int64(b.N - n0)
	r.lo += res.Consumed
	r.off += int64(res.Consumed)
	r.rec += int64(res.Records)
	r.skipped += int64(res.Skipped)
	if err != nil {
		return err
	}
	if res.Records > 0 || b.N == r.opts.BatchSize {
		return nil
	}
	// No whole record in the window: read more.
	return r.fill()
}

// prefetchSlack is room kept at the front of the spare buffer for the
// partial record left at the end of the current window.
const prefetchSlack = 64 << 10

// prefetch reads the next bytes of the file into r.spare[prefetchSlack:]
// (run on its own goroutine while the window is decoded; it touches only
// r.spare, r.pre and the file).
func (r *Reader) prefetch() error {
	if n := r.opts.BufferSize + prefetchSlack; len(r.spare) < n {
		r.spare = make([]byte, n) // once or twice per Reader: buffers only swap
	}
	want := int(min(int64(len(r.spare)-prefetchSlack), r.unread))
	got, err := r.readAt(r.spare[prefetchSlack:prefetchSlack+want], r.sizes[r.cur]-r.unread)
	r.pre = got
	if err != nil {
		path := r.files[r.cur]
		if err == io.EOF {
			return formats.Truncated("norm", path, -1, -1, "file shrank while reading")
		}
		return &formats.Error{Format: "norm", Path: path, Offset: -1, Record: -1, Op: "read", Err: err}
	}
	return nil
}

// readAt fills p from the current file at offset off, split over up to
// Workers concurrent preads of at least readPiece bytes (joined before it
// returns). It returns the bytes read from the start of p; fewer than
// len(p) come with an error, io.EOF when the file ended.
func (r *Reader) readAt(p []byte, off int64) (int, error) {
	parts := min(r.opts.Workers, len(p)/r.piece)
	if parts <= 1 {
		n, err := r.f.ReadAt(p, off)
		if n == len(p) {
			err = nil
		}
		return n, err
	}
	got, errs := make([]int, parts), make([]error, parts)
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := len(p)*i/parts, len(p)*(i+1)/parts
		wg.Go(func() {
			got[i], errs[i] = r.f.ReadAt(p[lo:hi], off+int64(lo))
			if got[i] == hi-lo {
				errs[i] = nil
			}
		})
	}
	wg.Wait()
	n := 0
	for i := range parts {
		n += got[i]
		if errs[i] != nil {
			return n, errs[i]
		}
	}
	return n, nil
}

// swap makes the window the bytes of buf[lo+consumed:hi] followed by the
// r.pre prefetched bytes of the spare buffer, and swaps the buffers.
func (r *Reader) swap(consumed int) {
	left := r.buf[r.lo+consumed : r.hi]
	start := prefetchSlack - len(left)
	copy(r.spare[start:], left)
	r.off += int64(consumed)
	r.buf, r.spare = r.spare, r.buf
	r.lo, r.hi = start, prefetchSlack+r.pre
	r.unread -= int64(r.pre)
}

// fill moves the window to the front of the buffer and reads more of the
// file, growing the buffer when the window fills it. Growth is bounded by
// the file size.
func (r *Reader) fill() error {
	path := r.files[r.cur]
	if r.unread == 0 {
		return formats.Truncated("norm", path, r.off, r.rec, fmt.Sprintf("record (file ends after %d of %d records)", r.rec, r.headers[r.cur].NumRecords))
	}
	n := copy(r.buf, r.buf[r.lo:r.hi])
	r.lo, r.hi = 0, n
	if n == len(r.buf) {
		grown := make([]byte, int(min(int64(2*len(r.buf)), int64(n)+r.unread)))
		copy(grown, r.buf[:n])
		r.buf = grown
	}
	want := int(min(int64(len(r.buf)-n), r.unread))
	got, err := r.readAt(r.buf[n:n+want], r.sizes[r.cur]-r.unread)
	r.hi += got
	r.unread -= int64(got)
	if err != nil {
		if err == io.EOF {
			return formats.Truncated("norm", path, r.off+int64(r.hi-r.lo), r.rec, "file shrank while reading")
		}
		return &formats.Error{Format: "norm", Path: path, Offset: r.off + int64(r.hi-r.lo), Record: r.rec, Op: "read", Err: err}
	}
	return nil
}

func (r *Reader) openFile(i int) error {
	path := r.files[i]
	f, err := os.Open(path)
	if err != nil {
		return &formats.Error{Format: "norm", Path: path, Offset: -1, Record: -1, Op: "open", Err: err}
	}
	hl := int64(r.opts.Check.headerLen())
	if r.buf == nil {
		r.buf = make([]byte, r.opts.BufferSize)
	}
	r.f, r.cur = f, i
	r.lo, r.hi, r.off, r.rec = 0, 0, hl, 0
	r.unread = max(r.sizes[i]-hl, 0)
	return nil
}

func (r *Reader) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	r.cur = -1
	r.lo, r.hi = 0, 0
}

// Close closes the open file. Read after Close fails.
func (r *Reader) Close() error {
	r.closeFile()
	r.dec = nil
	r.buf, r.spare = nil, nil
	return nil
}

var _ formats.Reader = (*Reader)(nil)
