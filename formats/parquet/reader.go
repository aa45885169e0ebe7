package parquet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"golang.org/x/sync/errgroup"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/hostmem"
)

// streamBufferSize is the read buffer of one column chunk reader.
const streamBufferSize = 64 << 10

// errClosed is returned by Read after Close.
var errClosed = errors.New("reader closed")

var (
	_ formats.Reader = (*Reader)(nil)
	_ formats.Lender = (*Reader)(nil)
)

// Reader reads a Parquet dataset into batches. It implements formats.Reader;
// it is not safe for concurrent use.
type Reader struct {
	schema *formats.Schema
	o      Options
	files  []fileEntry
	first  *filePlan // the first file's plan, kept (the others are loaded as reached)
	plans  *planner
	numRG  int        // non-empty row groups of one epoch (estimated from the first file)
	sizes  []int64    // slot sizes when o.SlotSizeArray is set, else nil
	offs   []int64    // slot offsets matching sizes
	ranges []KeyRange // Options.KeyRanges when sizes is nil, else nil

	props *parquet.ReaderProperties // shared by the column readers, with a pooling allocator
	pool  *poolAllocator

	cancel context.CancelFunc
	jobs   chan *rgBuf // pieces of row groups in hand-out order; closed by the producer at the end
	free   chan *rgBuf // recycled piece buffers
	nbuf   int         // piece buffers taken so far (at most cap(free))
	made   int         // of them made new, not recycled (tests)
	pieces int         // pieces handed out (tests; written by the producer)
	// tail is the producer's position in the stream of rows modulo
	// BatchSize: the rows of the last batch begun but not completed by the
	// row groups queued so far (see rgBuf.room).
	tail int
	// active counts the tasks with a piece to decode (handed to them and
	// not decoded yet): fewer than Workers leave a worker idle.
	active atomic.Int32
	idle   chan struct{} // active has fallen (cap 1, coalescing)
	// slots holds a token per piece being decoded: at most Workers, shared
	// with the other readers of Options.Alloc when it is a Recycler.
	slots chan struct{}
	done  chan struct{} // closed when the producer (and every task) has returned

	// Consumer state, touched only by Read, Next and Close.
	own    *formats.Batch // Next's batch when it cannot lend a view
	view   formats.Batch  // Next's view into a decoded row group
	lent   *rgBuf         // the piece the view lies in, when it is no longer cur
	peek   *rgBuf         // the next piece, decoded, taken from jobs early by Next
	joined int64          // rows Next copied into a row group's room (tests)
	ones   []int32        // CSR offsets 0, 1, …, BatchSize·S of one-hot batches
	// onesRec is ones' memory when it came from the Recycler (kept there
	// again at Close).
	onesRec *onesBuf
	cur     *rgBuf
	err     error
	eof     bool
	closed  bool
}

// rgBuf is one piece of a row group (rows [at, at+rows) of it; see
// pieceCuts), decoded by its row group's tasks: the producer fills the
// header fields before handing it to them; the consumer reads it after done
// is closed.
type rgBuf struct {
	fp    *filePlan
	rg    int
	at    int   // first row of the piece within its row group
	start int64 // first row of the piece within the file
	rows  int
	// room is how many rows the sample-major arrays hold beyond rows: the
	// head of the next row group that completes the batch begun in this
	// one, which Next copies there (see Reader.join) so as to lend that
	// batch as a view instead of copying all of it.
	room int
	// nslots is the schema's slot count.
	nslots int

	labels, dense []float32 // sample-major, rows × LabelDim / DenseDim
	k32           []uint32  // fixed layout: rows × S keys, sample-major
	k64           []int64
	// fromRec holds the memory of labels, dense, k32 and k64 (in that
	// order) when it came from the reader's Recycler (Options.Alloc: the
	// trainer's pinned allocator), so that one-hot views are lent in
	// pinned memory and upload without a host copy; nil entries are Go
	// heap memory (makeBuf).
	fromRec [4][]byte
	off     [][]int32  // variable layout: per slot, rows+1 offsets into s32/s64
	s32     [][]uint32 // variable layout: per slot keys
	s64     [][]int64

	errs []*formats.Error // per selected column: its first error in this piece
	// parts counts the tasks decoding the row group that have not decoded
	// this piece: one, or several over disjoint columns (see Reader.split).
	parts atomic.Int32
	mu    sync.Mutex // guards err while tasks run
	done  chan struct{}
	err   error
	pos   int // next row to hand out (consumer)
}

// setErr records err as the row group's error unless one is recorded.
func (b *rgBuf) setErr(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// scratch holds a task's decode buffers; reused across row groups.
type scratch struct {
	i32      []int32
	i64      []int64
	f32      []float32
	f64      []float64
	def, rep []int16
	comp     []byte // a compressed page larger than its column's window
	// stage and view are stagePiece's staging block and the piece view of
	// it that the decoders fill.
	stage stageBlock
	view  rgBuf
}

func newReader(files []fileEntry, first *filePlan, pl *planner, s *formats.Schema, o Options) *Reader {
	ncols := len(first.cols)
	// The free lists keep up to the page and decompression buffers of every
	// column chunk that Workers tasks have open at once (pages of up to
	// 1 MiB, as arrow-go and pyarrow write them).
	pool := &poolAllocator{limit: o.Workers * (ncols + 1) * (3 << 20)}
	pool.rec, _ = o.Alloc.(*formats.Recycler)
	r := &Reader{schema: s, o: o, files: files, first: first, plans: pl, pool: pool, props: parquet.NewReaderProperties(pool)}
	// The other footers are not read yet: their row groups are taken to
	// be the first file's, per row.
	firstRG := 0
	for g := 0; g+1 < len(first.rgStart); g++ {
		if first.rgStart[g+1] > first.rgStart[g] {
			firstRG++
		}
	}
	r.numRG = firstRG
	if firstRG > 0 && first.numRows > 0 {
		var rest int64
		for _, e := range files[1:] {
			rest += e.rows
		}
		perRG := max(first.numRows/int64(firstRG), 1)
		r.numRG = int(min(int64(firstRG)+(rest+perRG-1)/perRG, math.MaxInt32))
	}
	// Read column chunks through a small buffer rather than whole: arrow-go
	// allocates the whole chunk otherwise, for every row group and column.
	r.props.BufferedStreamEnabled = true
	r.props.BufferSize = streamBufferSize
	if len(o.SlotSizeArray) > 0 {
		r.sizes = append([]int64(nil), o.SlotSizeArray...)
		r.offs = formats.SlotOffsets(r.sizes)
	} else if len(o.KeyRanges) > 0 {
		r.ranges = append([]KeyRange(nil), o.KeyRanges...)
	}
	// At most two pieces per worker being decoded or decoded ahead of the
	// piece the consumer waits for (row groups decoded side by side end
	// their pieces out of order), Prefetch more decoded ahead, one being
	// handed out; the buffers are made as needed (see takeBuf), as each
	// costs its first touch.
	nbuf := 2*o.Workers + o.Prefetch
	r.jobs = make(chan *rgBuf, nbuf)
	r.free = make(chan *rgBuf, nbuf)
	r.idle = make(chan struct{}, 1)
	if pool.rec != nil {
		// Readers of one Recycler (a training run's passes, opened ahead
		// of their turn) share their slots.
		r.slots = pool.rec.Shared(slotsKey{o.Workers}, func() any { return make(chan struct{}, o.Workers) }).(chan struct{})
	} else {
		r.slots = make(chan struct{}, o.Workers)
	}
	r.done = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.produce(ctx)
	return r
}

// Schema implements formats.Reader.
func (r *Reader) Schema() *formats.Schema { return r.schema }

// NumRows returns the number of rows of one epoch.
func (r *Reader) NumRows() int64 {
	var n int64
	for _, e := range r.files {
		n += e.rows
	}
	return n
}

// Files returns the data files in list order.
func (r *Reader) Files() []string {
	out := make([]string, len(r.files))
	for i, e := range r.files {
		out[i] = e.path
	}
	return out
}

// order returns the file order of an epoch.
func (r *Reader) order(epoch uint64) []int {
	if !r.o.Shuffle {
		out := make([]int, len(r.files))
		for i := range out {
			out[i] = i
		}
		return out
	}
	return rand.New(rand.NewPCG(r.o.Seed, epoch)).Perm(len(r.files))
}

// beforeProduce, when a test sets it, runs as a reader's producer starts,
// before any data is read: the test changes a file between the footer read
// (OpenList) and the first data read without racing the producer.
var beforeProduce func()

// produce schedules the row groups in hand-out order, piece by piece
// (pieceCuts): for each piece it takes a free buffer (the memory bound),
// queues it on jobs and hands it to the tasks of its row group, started with
// its first piece (over disjoint columns: split). A task decodes its columns
// of every piece of its row group in turn, its column readers going on from
// piece to piece, each piece under one of Workers slots (not the whole row
// group, so that a task waiting for its next piece's buffer holds none).
// Buffers go to pieces in hand-out order only, so the piece the consumer
// waits for always has its buffer, and a task its next piece in time.
// Row groups of one file and of different files decode in parallel.
func (r *Reader) produce(ctx context.Context) {
	if beforeProduce != nil {
		beforeProduce()
	}
	var tasks errgroup.Group // bounded: a task has a buffered piece, or is its row group's last
	defer close(r.done)
	defer close(r.jobs)
	defer tasks.Wait()
	for epoch := uint64(0); ; epoch++ {
		order := r.order(epoch)
		for oi, fi := range order {
			// The rows of the epoch's later files, by the metadata.
			var after int64
			for _, fj := range order[oi+1:] {
				after += r.files[fj].rows
			}
			fp := r.first
			if fi > 0 {
				var err error
				if fp, err = r.plans.load(r.files[fi]); err != nil {
					r.fail(ctx, err)
					return
				}
			}
			for g := 0; g < len(fp.rgStart)-1; g++ {
				rows := int(fp.rgStart[g+1] - fp.rgStart[g])
				if rows == 0 {
					continue
				}
				cuts := r.split(fp, g, after+fp.numRows-fp.rgStart[g])
				pieces := pieceCuts(rows, r.tail, r.o.BatchSize, fp.fixed || r.listPieces(fp, g))
				t := &rgTask{fp: fp, g: g, rows: rows, decs: make([]decoder, len(fp.cols))}
				parts := make([]*part, len(cuts)-1)
				for p := range parts {
					parts[p] = &part{ch: make(chan *rgBuf, len(pieces)-1)} // never blocks
				}
				for pi := range len(pieces) - 1 {
					b := r.takeBuf(ctx)
					if b == nil {
						return
					}
					r.setup(b, fp, g, pieces[pi], pieces[pi+1])
					r.pieces++
					b.parts.Store(int32(len(parts)))
					r.jobs <- b // never blocks: jobs holds every buffer
					for _, p := range parts {
						if p.out.Add(1) == 1 {
							r.active.Add(1)
						}
						p.ch <- b
					}
					if pi > 0 {
						continue
					}
					for p, pt := range parts {
						tasks.Go(func() error {
							r.decodeRowGroup(ctx, t, cuts[p], cuts[p+1], pt, len(pieces)-1)
							return nil
						})
					}
				}
			}
			if ctx.Err() != nil {
				return
			}
		}
		if !r.o.Repeat {
			return
		}
	}
}

// minPieceRows is the fewest rows of a piece cut from whole batches
// (pieceCuts): a piece of small batches holds several, so that each is a
// few milliseconds of decoding. A variable so that tests can cut small row
// groups into pieces.
var minPieceRows = 32768

// mergeRows is the fewest rows of a head or tail piece (the rows of a row
// group before its first batch end, or after its last cut) for batches of
// bs: a shorter one is merged into its neighbour. It is small: a merged
// piece's buffer is longer than a batch, and the buffers, which go round
// from piece to piece, all grow to the longest. Merging every head and tail
// under 32768 rows (as minPieceRows did), a fresh 2-worker read of 250 000-row
// files of two row groups (pieces of up to 118 928 rows, batches of 65 536)
// peaked at 195–215 MB of anonymous memory against 155–160 MB with heads and
// tails from 4096 rows on, and read its epoch 5–8% faster (dev VM, where a
// fresh page is costly).
func mergeRows(bs int) int { return min(minPieceRows, max(bs/16, 1024)) }

// pieceCuts returns the pieces a row group of rows rows is decoded in, as
// row bounds 0 = cuts[0] < … < cuts[k] = rows, for a row group whose first
// row is row tail of a batch of bs: pieces end at batch ends; the head (the
// rows that end the batch begun before the row group) is a piece of its own
// and so is the tail, unless shorter than mergeRows; the pieces between hold
// at least minPieceRows rows of whole batches. So every batch but those
// spanning row groups lies in one piece, and a piece buffer is about a
// batch rather than a row group (the fewer and smaller buffers a fresh
// reader touches first, and the sooner the consumer gets the first rows).
// A row group is decoded whole when !cut: one whose list columns are not
// all streamed (listPieces).
func pieceCuts(rows, tail, bs int, cut bool) []int {
	cuts := []int{0}
	if cut && bs > 0 {
		merge := mergeRows(bs)
		last, c := 0, bs-tail%bs // c: the first batch end within the row group
		if tail%bs != 0 && c >= merge && rows-c >= merge {
			cuts = append(cuts, c) // the head
			last, c = c, c+bs
		}
		for c < rows && rows-c >= merge {
			if short := last + minPieceRows - c; short > 0 {
				c += (short + bs - 1) / bs * bs // the first batch end at minPieceRows or more
				continue
			}
			cuts = append(cuts, c)
			last, c = c, c+bs
		}
	}
	return append(cuts, rows)
}

// part is one task of a row group: the pieces handed to it, in order, and
// how many of them it has not decoded yet.
type part struct {
	ch  chan *rgBuf
	out atomic.Int32
}

// rgTask is a row group being decoded, piece by piece, by one or more tasks
// over disjoint columns; decs[ci] is column ci's decoder, which goes on
// from piece to piece.
type rgTask struct {
	fp   *filePlan
	g    int
	rows int
	decs []decoder
}

// fail hands err to the consumer in place of the next row group.
func (r *Reader) fail(ctx context.Context, err error) {
	b := r.takeBuf(ctx)
	if b == nil {
		return
	}
	b.fp, b.rows, b.pos, b.err = nil, 0, 0, err
	b.done = make(chan struct{})
	close(b.done)
	r.jobs <- b
}

// split returns the column cuts of the tasks decoding row group g of fp:
// 0 = cuts[0] < … < cuts[k] = the column count. Whole row groups decoded
// Workers at a time keep every core busy, but a row group is handed out
// only when decoded, and one core decoding it among Workers busy ones takes
// long: the consumer waits for row groups in steps of Workers (a
// conversion's writer stalls), and a dataset of fewer row groups than
// Workers leaves cores idle. So each row group is decoded by Workers/2
// tasks (two row groups in flight, each ready in a fraction of the time),
// or, in a dataset of R < Workers row groups, by ⌈2·Workers/R⌉ (twice the
// workers: tasks of unequal length still end together). The same holds for
// the last row groups of an epoch (epoch mode; left is the rows from row
// group g to the epoch's end): when the m ≤ Workers row groups left would
// leave cores idle as the first of them end, each is decoded by ⌈2·Workers/m⌉
// tasks, so that the workers end the epoch together rather than one of them
// decoding the last row group alone. With 2 or 3 workers, whose row groups
// are decoded whole, Workers side by side (in waves), only the row groups of
// a last wave that is not full are split: a full one ends together anyway,
// and a row group decoded whole is staged (stagePiece), which one split over
// columns is not — on the dev VM a fresh 2-worker epoch of 8 row groups read
// 3–5% faster without splitting its last two. Cuts fall at column bounds that
// balance the columns' uncompressed bytes (balancedCuts); a task has at
// least one column.
func (r *Reader) split(fp *filePlan, g int, left int64) []int {
	nc := len(fp.cols)
	k := r.o.Workers / 2
	if r.numRG < r.o.Workers {
		k = (2*r.o.Workers + r.numRG - 1) / r.numRG
	}
	if rows := fp.rgStart[g+1] - fp.rgStart[g]; !r.o.Repeat && r.o.Workers > 1 && rows > 0 && left <= int64(r.o.Workers)*rows {
		m := int((left + rows - 1) / rows) // ≤ Workers
		if k >= 2 || m <= r.numRG%r.o.Workers {
			k = max(k, (2*r.o.Workers+m-1)/m)
		}
	}
	if k = min(k, nc); k < 2 {
		return []int{0, nc}
	}
	rg := fp.md.RowGroup(g)
	w := make([]int64, nc) // uncompressed bytes
	for ci := range fp.cols {
		w[ci] = 1
		if cc, err := rg.ColumnChunk(fp.cols[ci].leaf); err == nil && cc.TotalUncompressedSize() > 0 {
			w[ci] = cc.TotalUncompressedSize()
		}
	}
	return balancedCuts(w, k)
}

// balancedCuts cuts columns of weights w into k ≤ len(w) contiguous runs
// of at least one column: 0 = cuts[0] < … < cuts[k] = len(w). The heaviest
// run is as light as any k runs allow (C, found by bisection), and within
// that bound each cut falls at the first column bound past its share
// (p/k of the total), so that runs are even where the weights allow. A
// cut at the share alone put a column holding 40% of a row group's bytes
// (DCNv2's 100-hot C21) in one run with its neighbours, 47–50% of the row
// group in one task with 12 or 14 workers. (Cutting it alone did not
// steady DCNv2's pipeline cost on the H200, which swings from 1% to 19%
// between runs: docs/PERFORMANCE.md, the eighteenth session.)
func balancedCuts(w []int64, k int) []int {
	nc := len(w)
	cum := make([]int64, nc+1)
	var heaviest int64
	for i, x := range w {
		cum[i+1] = cum[i] + x
		heaviest = max(heaviest, x)
	}
	total := cum[nc]
	// need[e]: the fewest runs of at most c covering columns e… (each
	// run from e as long as c allows: the fewest, greedily).
	need := make([]int, nc+1)
	fill := func(c int64) {
		j := nc
		for e := nc - 1; e >= 0; e-- {
			for cum[j]-cum[e] > c {
				j--
			}
			need[e] = 1 + need[j]
		}
	}
	lo, hi := heaviest, total // need(hi) = 1 ≤ k; find the least c with need ≤ k
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fill(mid); need[0] <= k {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	c := lo
	fill(c)
	cuts := []int{0}
	for p := 1; p < k; p++ {
		s := cuts[len(cuts)-1]
		// Bounds on the run's end e: the rest fits in k-p runs of at most
		// c (need is non-increasing in e), a column left for each, and
		// this run weighs at most c.
		e := s + 1
		for need[e] > k-p {
			e++
		}
		last := s + 1
		for last+1 <= nc-(k-p) && cum[last+1]-cum[s] <= c {
			last++
		}
		for e < last && cum[e]*int64(k) < total*int64(p) {
			e++
		}
		cuts = append(cuts, e)
	}
	return append(cuts, nc)
}

// takeBuf returns a free piece buffer, or nil when ctx is done. A new
// buffer is made (up to 2·Workers+Prefetch) only when none is free and a
// worker has nothing to decode (fewer than Workers tasks have a piece
// handed to them and not decoded: a task's pieces are decoded one after
// the other, so the second piece of a row group adds no work for a second
// worker): the consumer then holds the others, as Prefetch allows. A fast
// consumer thus needs about Workers+2 buffers, each of which costs the page
// faults of its first touch.
func (r *Reader) takeBuf(ctx context.Context) *rgBuf {
	for {
		select {
		case b := <-r.free:
			return b
		case <-ctx.Done():
			return nil
		default:
		}
		if r.nbuf < cap(r.free) && int(r.active.Load()) < r.o.Workers {
			var b *rgBuf
			if r.pool.rec != nil {
				b, _ = r.pool.rec.Take(rgBufKey{}).(*rgBuf)
			} else {
				b, _ = spareBufs.Get().(*rgBuf)
			}
			if b != nil { // a closed reader's, already touched
				r.nbuf++
				return b
			}
			if r.nbuf > r.o.Workers {
				// A worker is idle, but a buffer may come back as soon:
				// the consumer frees one when the piece it waits for is
				// decoded, which it often is already.
				t := time.NewTimer(waitBeforeNew)
				select {
				case b := <-r.free:
					t.Stop()
					return b
				case <-ctx.Done():
					t.Stop()
					return nil
				case <-t.C:
				}
				if int(r.active.Load()) >= r.o.Workers {
					continue
				}
			}
			r.nbuf++
			r.made++
			return &rgBuf{}
		}
		select {
		case b := <-r.free:
			return b
		case <-ctx.Done():
			return nil
		case <-r.idle:
		}
	}
}

// waitBeforeNew is how long takeBuf waits for a free buffer before making
// one beyond Workers+1 for an idle worker.
const waitBeforeNew = 2 * time.Millisecond

// spareBufs holds the row group buffers of closed readers, for the next
// reader; the garbage collector empties it. Readers given a
// formats.Recycler as Options.Alloc keep them there instead (rgBufKey),
// where garbage collections do not reach.
var spareBufs sync.Pool

type rgBufKey struct{}

// slotsKey is the key of the decoding slots that the readers of a
// Recycler with the same Workers share (formats.Recycler.Shared).
type slotsKey struct{ workers int }

// recycle drops b's references to its reader and puts it in rec (when not
// nil) or spareBufs.
func (b *rgBuf) recycle(rec *formats.Recycler) {
	b.fp, b.err, b.done = nil, nil, nil
	clear(b.errs)
	if rec != nil {
		rec.Keep(rgBufKey{}, b)
		return
	}
	spareBufs.Put(b)
}

// finish picks the error of the row group (the lowest record, then the
// first column, so it does not depend on scheduling) and signals done.
func (b *rgBuf) finish() {
	var best *formats.Error
	for _, e := range b.errs {
		if e != nil && (best == nil || e.Record < best.Record) {
			best = e
		}
	}
	if best != nil && b.err == nil {
		b.err = best
	}
	close(b.done)
}

// viewBuf returns buf (b's view array i: labels, dense, k32, k64) with
// capacity for at least n values, a new buffer of alloc ≥ n values when it
// has less: from rec when lend and rec is not nil, else from the Go heap
// (makeBuf); an outgrown buffer from rec goes back to it. A failed allocation from rec
// falls back to the heap: the batch is then lent in pageable memory, which
// uploads more slowly but correctly.
func viewBuf[T float32 | uint32 | int64](b *rgBuf, i int, rec *formats.Recycler, lend bool, buf []T, n, alloc int) []T {
	if cap(buf) >= n {
		return buf[:n]
	}
	if old := b.fromRec[i]; old != nil && rec != nil {
		b.fromRec[i] = nil
		rec.Free(old)
	}
	if rec != nil && lend && alloc > 0 {
		var z T
		size := int(unsafe.Sizeof(z))
		if alloc <= math.MaxInt/size {
			if mem, err := rec.Alloc(alloc * size); err == nil {
				b.fromRec[i] = mem
				return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), alloc)[:n]
			}
		}
	}
	return makeBuf[T](alloc)[:n]
}

// ReleaseTo implements formats.Releaser: a Recycler's Drain hands b's
// memory from the Recycler back to a (b is dropped after it).
func (b *rgBuf) ReleaseTo(a formats.Allocator) {
	for i, m := range b.fromRec {
		if m != nil {
			a.Free(m)
			b.fromRec[i] = nil
		}
	}
	b.labels, b.dense, b.k32, b.k64 = nil, nil, nil, nil
}

const hugePage = hostmem.HugePage

// makeBuf makes a row group buffer of n values; a large one lies on huge
// pages (hostmem.AlignedAlloc).
func makeBuf[T byte | float32 | int32 | uint32 | int64](n int) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	if n > (math.MaxInt-2*hugePage)/size || n*size < hugePage {
		return make([]T, n)
	}
	b := hostmem.AlignedAlloc(n*size, size)
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// setup sizes b for rows [lo, hi) of row group g of fp.
func (r *Reader) setup(b *rgBuf, fp *filePlan, g, lo, hi int) {
	s := r.schema
	S := len(s.Slots)
	b.fp, b.rg, b.at, b.start, b.nslots = fp, g, lo, fp.rgStart[g]+int64(lo), S
	b.rows = hi - lo
	b.pos, b.err = 0, nil
	b.done = make(chan struct{})
	b.room = 0
	bs := r.o.BatchSize
	// Only a row group's last piece can end inside a batch; its room is
	// what the row group's would be (roomFor).
	rg := int(fp.rgStart[g+1] - fp.rgStart[g])
	if bs > 0 {
		if t := (r.tail + b.rows) % bs; fp.fixed && t > 0 && bs-t <= roomFor(rg, bs) {
			b.room = bs - t
		}
		r.tail = (r.tail + b.rows) % bs
	}
	// A new buffer is made with the most room its row group can get, and
	// for the longest piece of its row group (the head or tail piece holds
	// up to about two minPieceRows more than a batch), so that pieces and
	// row groups of one size with and without room (or of two sizes, as a
	// file's last is shorter) share buffers; capacity not used is never
	// touched, so costs no page faults.
	all, most := b.rows+b.room, b.rows
	if fp.fixed && bs > 0 {
		most = max(most, min(rg, bs+2*minPieceRows)) + roomFor(rg, bs)
	}
	most = max(most, all)
	// A multi-hot piece is copied into the reader's own (Options.Alloc)
	// batch, never lent: its arrays need not come from the Recycler.
	rec, lend := r.pool.rec, fp.fixed
	b.labels = viewBuf(b, 0, rec, lend, b.labels, all*s.LabelDim, most*s.LabelDim)[:b.rows*s.LabelDim]
	b.dense = viewBuf(b, 1, rec, lend, b.dense, all*s.DenseDim, most*s.DenseDim)[:b.rows*s.DenseDim]
	i64 := s.KeyType == formats.KeyI64
	if fp.fixed {
		n := all * S
		if i64 {
			b.k64 = viewBuf(b, 3, rec, lend, b.k64, n, most*S)[:b.rows*S]
		} else {
			b.k32 = viewBuf(b, 2, rec, lend, b.k32, n, most*S)[:b.rows*S]
		}
	} else {
		for len(b.off) < S {
			b.off = append(b.off, nil)
			b.s32 = append(b.s32, nil)
			b.s64 = append(b.s64, nil)
		}
		for i := 0; i < S; i++ {
			if cap(b.off[i]) < b.rows+1 {
				b.off[i] = make([]int32, b.rows+1)
			}
			b.off[i] = b.off[i][:b.rows+1]
			b.off[i][0] = 0
			b.s32[i] = b.s32[i][:0]
			b.s64[i] = b.s64[i][:0]
		}
	}
	nc := len(fp.cols)
	if cap(b.errs) < nc {
		b.errs = make([]*formats.Error, nc)
	}
	b.errs = b.errs[:nc]
	clear(b.errs)
}

// roomFor is the most rows of room (rgBuf.room) a row group of rows rows
// gets for batches of bs: any head of the next row group (bs-1 rows) when
// the row group holds a batch, its last piece then holding at most about
// two batches, which is less than a copied batch and the reader's own batch
// buffer would (two of `ctrkit gen`'s boundaries of row groups of 131072
// and 118928 rows need 36432 rows for batches of 65536); half the row group
// for shorter ones, whose buffers the room would more than double.
func roomFor(rows, bs int) int {
	if rows >= bs {
		return bs - 1
	}
	return rows / 2
}

// nextJob returns the next piece in hand-out order once it is decoded,
// or nil (eof set) at the end of the stream.
func (r *Reader) nextJob() *rgBuf {
	if j := r.peek; j != nil {
		r.peek = nil
		return j
	}
	j, ok := <-r.jobs
	if !ok {
		r.eof = true
		return nil
	}
	<-j.done
	return j
}

// release frees the row group of the last view when it is no longer cur.
func (r *Reader) release() {
	if r.lent != nil {
		r.free <- r.lent
		r.lent = nil
	}
}

// join makes the next batch, which begins in c (cur) with fewer than
// BatchSize rows left there, one view when it can: it copies the rows that
// complete it from the head of the next row group into c's room and lends
// rows [c.pos, c.pos+BatchSize) of c, the next row group becoming cur. It
// reports false (the next row group, if taken, kept in peek) when c has no
// room for them or the next row group is missing, failed or too short.
func (r *Reader) join(c *rgBuf) bool {
	bs, need := r.o.BatchSize, r.o.BatchSize-(c.rows-c.pos)
	if c.room < need || r.eof {
		return false
	}
	j := r.nextJob()
	if j == nil {
		return false
	}
	if j.err != nil || j.fp == nil || !j.fp.fixed || j.rows < need {
		r.peek = j
		return false
	}
	s := r.schema
	L, D, S, hi := s.LabelDim, s.DenseDim, len(s.Slots), c.rows+need
	copy(c.labels[c.rows*L:hi*L], j.labels[:need*L])
	copy(c.dense[c.rows*D:hi*D], j.dense[:need*D])
	v := &r.view
	*v = formats.Batch{Schema: s, N: bs,
		Labels:  c.labels[c.pos*L : hi*L : hi*L],
		Dense:   c.dense[c.pos*D : hi*D : hi*D],
		Offsets: r.ones[: bs*S+1 : bs*S+1]}
	if s.KeyType == formats.KeyI64 {
		copy(c.k64[c.rows*S:hi*S], j.k64[:need*S])
		v.Keys64 = c.k64[c.pos*S : hi*S : hi*S]
	} else {
		copy(c.k32[c.rows*S:hi*S], j.k32[:need*S])
		v.Keys32 = c.k32[c.pos*S : hi*S : hi*S]
	}
	c.pos = c.rows
	j.pos = need
	r.lent, r.cur = c, j
	r.joined += int64(need)
	return true
}

// Read implements formats.Reader: it fills b with the next BatchSize rows
// (fewer at the end of an epoch) and returns how many.
func (r *Reader) Read(b *formats.Batch) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	s := r.schema
	if b.Schema == nil || b.Schema.LabelDim != s.LabelDim || b.Schema.DenseDim != s.DenseDim ||
		len(b.Schema.Slots) != len(s.Slots) || b.Schema.KeyType != s.KeyType {
		return 0, errors.New("batch schema does not match the reader's")
	}
	bs := r.o.BatchSize
	if b.Cap() < bs {
		return 0, fmt.Errorf("batch capacity %d < batch size %d", b.Cap(), bs)
	}
	r.release()
	labels, dense, offsets, k32, k64 := b.Full()
	offsets[0] = 0
	n, nk := 0, 0
	for n < bs {
		c := r.cur
		if c == nil || c.pos == c.rows {
			if c != nil {
				r.cur = nil
				r.free <- c
			}
			if r.eof {
				break
			}
			job := r.nextJob()
			if job == nil {
				break
			}
			if job.err != nil {
				r.err = job.err
				r.free <- job
				b.SetLen(0)
				return 0, r.err
			}
			r.cur = job
			continue
		}
		k := min(bs-n, c.rows-c.pos)
		need := c.keysIn(c.pos, c.pos+k)
		if nk+need > math.MaxInt32 {
			r.err = formats.Errorf("parquet", c.fp.path, -1, c.start+int64(c.pos), formats.ErrSize, "more than %d keys in one batch", math.MaxInt32)
			b.SetLen(0)
			return 0, r.err
		}
		if nk+need > b.KeyCap() {
			b.SetLen(n)
			if err := b.ReserveKeys(nk + need); err != nil {
				r.err = err
				b.SetLen(0)
				return 0, err
			}
			labels, dense, offsets, k32, k64 = b.Full()
		}
		r.copyRows(&views{labels, dense, offsets, k32, k64}, c, n, k, nk)
		nk += need
		n += k
		c.pos += k
	}
	if n == 0 && r.eof {
		b.SetLen(0)
		return 0, io.EOF
	}
	b.SetLen(n)
	return n, nil
}

// Next returns the next batch without copying it when it can: when the
// dataset is one-hot (every cat column scalar) and the next BatchSize rows
// lie within one row group, the batch is a read-only view of the decoded row
// group; when they begin in one row group and end in the next, and the first
// has room for the rest (rgBuf.room: the producer leaves up to half a batch),
// only those rows are copied there and the batch is a view too; otherwise the
// rows are copied, as Read does, into a batch of the reader's own (allocated
// with Options.Alloc). Either way the batch belongs
// to the reader, must not be modified, and stays valid until the next call
// of Next or Read, or Close. The batches are those Read would return. At the
// end of data (epoch mode) it returns nil, io.EOF.
func (r *Reader) Next() (*formats.Batch, error) {
	if r.err != nil {
		return nil, r.err
	}
	r.release()
	for r.cur == nil || r.cur.pos == r.cur.rows {
		if r.cur != nil {
			r.free <- r.cur
			r.cur = nil
		}
		if r.eof {
			return nil, io.EOF
		}
		job := r.nextJob()
		if job == nil {
			return nil, io.EOF
		}
		if job.err != nil {
			r.err = job.err
			r.free <- job
			return nil, r.err
		}
		r.cur = job
	}
	c, bs, s := r.cur, r.o.BatchSize, r.schema
	if c.fp.fixed {
		r.makeOnes()
	}
	if c.fp.fixed && c.rows-c.pos < bs && r.join(c) {
		return &r.view, nil
	}
	if c.fp.fixed && c.rows-c.pos < bs && r.peek == nil && !r.eof {
		r.peek = r.nextJob() // nil at the end: the short last batch is a view too
	}
	if c.fp.fixed && c.rows-c.pos < bs && r.peek == nil && r.eof {
		bs = c.rows - c.pos
	}
	if !c.fp.fixed || c.rows-c.pos < bs {
		if r.own == nil {
			b, err := formats.NewBatch(s, bs, r.o.Alloc)
			if err != nil {
				return nil, err
			}
			r.own = b
		}
		if _, err := r.Read(r.own); err != nil {
			return nil, err
		}
		return r.own, nil
	}
	L, D, S, lo, hi := s.LabelDim, s.DenseDim, len(s.Slots), c.pos, c.pos+bs
	v := &r.view
	*v = formats.Batch{Schema: s, N: bs,
		Labels:  c.labels[lo*L : hi*L : hi*L],
		Dense:   c.dense[lo*D : hi*D : hi*D],
		Offsets: r.ones[: bs*S+1 : bs*S+1]}
	if s.KeyType == formats.KeyI64 {
		v.Keys64 = c.k64[lo*S : hi*S : hi*S]
	} else {
		v.Keys32 = c.k32[lo*S : hi*S : hi*S]
	}
	c.pos = hi
	return v, nil
}

// makeOnes makes the CSR offsets of one-hot views: from the reader's
// Recycler when it has one (pinned memory in training, kept for the next
// reader: onesBuf), else the process's shared array.
func (r *Reader) makeOnes() {
	if r.ones != nil {
		return
	}
	n := r.o.BatchSize*len(r.schema.Slots) + 1
	if rec := r.pool.rec; rec != nil {
		o, _ := rec.Take(onesKey{}).(*onesBuf)
		if o != nil && len(o.a) < n {
			o.ReleaseTo(rec)
			o = nil
		}
		if o == nil {
			if mem, err := rec.Alloc(4 * n); err == nil {
				o = &onesBuf{mem: mem, a: unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(mem))), n)}
				for i := range o.a {
					o.a[i] = int32(i)
				}
			}
		}
		if o != nil {
			r.onesRec = o
			r.ones = o.a[:n:n]
			return
		}
	}
	r.ones = sharedOnes(n)
}

// onesBuf is a reader's one-hot offsets 0, 1, …, n-1 in its Recycler's
// memory, kept there between readers (onesKey).
type onesBuf struct {
	mem []byte
	a   []int32
}

type onesKey struct{}

// ReleaseTo implements formats.Releaser.
func (o *onesBuf) ReleaseTo(a formats.Allocator) {
	if o.mem != nil {
		a.Free(o.mem)
		o.mem, o.a = nil, nil
	}
}

// ones holds 0, 1, …, len-1: the offsets of every one-hot view, read only,
// so one array serves every reader of the process (the next epoch's reader
// does not make and write its 7 MB again).
var ones struct {
	sync.Mutex
	a []int32
}

// sharedOnes returns 0, 1, …, n-1 from the shared array, grown (on huge
// pages) when shorter than n; readers keep the array they were given.
func sharedOnes(n int) []int32 {
	ones.Lock()
	defer ones.Unlock()
	if len(ones.a) < n {
		a := makeBuf[int32](n)
		for i := range a {
			a[i] = int32(i)
		}
		ones.a = a
	}
	return ones.a[:n:n]
}

// views are a batch's buffers at full capacity.
type views struct {
	labels, dense []float32
	offsets       []int32
	k32           []uint32
	k64           []int64
}

// minCopyRows is the fewest rows worth a goroutine of their own in copyRows.
const minCopyRows = 4096

// keysIn returns the number of keys in rows [lo, hi) of c.
func (c *rgBuf) keysIn(lo, hi int) int {
	if c.fp.fixed {
		return (hi - lo) * c.nslots
	}
	n := 0
	for si := 0; si < c.nslots; si++ {
		n += int(c.off[si][hi] - c.off[si][lo])
	}
	return n
}

// copyRows copies rows [c.pos, c.pos+k) of c to samples [n, n+k) of the
// batch, whose first nk keys are taken. Large copies are split by rows over
// up to Workers goroutines: every piece knows where its keys start, so the
// pieces are independent.
func (r *Reader) copyRows(v *views, c *rgBuf, n, k, nk int) {
	parts := min(r.o.Workers, k/minCopyRows)
	if parts <= 1 {
		r.copyRange(v, c, n, c.pos, c.pos+k, nk)
		return
	}
	per := (k + parts - 1) / parts
	var g errgroup.Group
	for lo := 0; lo < k; lo += per {
		hi := min(lo+per, k)
		at := nk + c.keysIn(c.pos, c.pos+lo)
		g.Go(func() error {
			r.copyRange(v, c, n+lo, c.pos+lo, c.pos+hi, at)
			return nil
		})
	}
	g.Wait()
}

// copyRange copies rows [lo, hi) of c to samples from n on, keys from nk on.
func (r *Reader) copyRange(v *views, c *rgBuf, n, lo, hi, nk int) {
	s := r.schema
	L, D, S := s.LabelDim, s.DenseDim, len(s.Slots)
	k := hi - lo
	copy(v.labels[n*L:(n+k)*L], c.labels[lo*L:hi*L])
	copy(v.dense[n*D:(n+k)*D], c.dense[lo*D:hi*D])
	if c.fp.fixed {
		if v.k64 != nil {
			copy(v.k64[nk:nk+k*S], c.k64[lo*S:hi*S])
		} else {
			copy(v.k32[nk:nk+k*S], c.k32[lo*S:hi*S])
		}
		o := v.offsets[n*S+1 : (n+k)*S+1]
		for j := range o {
			o[j] = int32(nk + j + 1)
		}
		return
	}
	o := v.offsets[n*S+1 : (n+k)*S+1]
	if v.k64 != nil {
		transpose(v.k64[nk:], c.s64[:S], c.off[:S], lo, hi, nk, o, r.o.Workers)
	} else {
		transpose(v.k32[nk:], c.s32[:S], c.off[:S], lo, hi, nk, o, r.o.Workers)
	}
}

// transpose copies the keys of rows [lo, hi) of slot-major keys (slot si's
// rows delimited by off[si]) sample by sample into dst, and sets the
// batch's offsets o (the first key being key nk of the batch). It runs in
// the consumer's goroutine (Read, Next) and moves every key of a multi-hot
// batch — 214 a row in the DLRM-DCNv2 shape, 112 MB a 65536-row batch, which
// took one core 25–40 ms on the dev VM, longer than a training step on the
// H200 — so the offsets are summed first and the keys then copied by up to
// workers goroutines over ranges of at least transposeRows rows.
func transpose[K int64 | uint32](dst []K, keys [][]K, off [][]int32, lo, hi, nk int, o []int32, workers int) {
	S := len(keys)
	at, i := int32(nk), 0
	for row := lo; row < hi; row++ {
		for si := range keys {
			at += off[si][row+1] - off[si][row]
			o[i] = at
			i++
		}
	}
	parts := min(workers, (hi-lo)/transposeRows)
	if parts <= 1 {
		copyRows(dst, keys, off, lo, hi)
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		a, b := lo+(hi-lo)*p/parts, lo+(hi-lo)*(p+1)/parts
		from := 0
		if a > lo {
			from = int(o[(a-lo)*S-1]) - nk
		}
		wg.Go(func() { copyRows(dst[from:], keys, off, a, b) })
	}
	wg.Wait()
}

// transposeRows is the fewest rows a goroutine of transpose copies.
const transposeRows = 2048

// copyRows copies the keys of rows [lo, hi) of slot-major keys sample by
// sample to dst; a row's few keys of a slot are moved one by one (a call
// of copy costs more than moving them).
func copyRows[K int64 | uint32](dst []K, keys [][]K, off [][]int32, lo, hi int) {
	at := 0
	for row := lo; row < hi; row++ {
		for si, ks := range keys {
			a, b := int(off[si][row]), int(off[si][row+1])
			if b-a > 8 {
				at += copy(dst[at:], ks[a:b])
				continue
			}
			for _, k := range ks[a:b] {
				dst[at] = k
				at++
			}
		}
	}
}

// Close stops the producer and every decoding task and closes the files.
// Read returns an error afterwards.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.cancel()
	<-r.done
	// Every task has returned: hand the row group and page buffers to the
	// next reader.
	r.pool.release()
	for _, b := range []*rgBuf{r.cur, r.lent, r.peek} {
		if b != nil {
			b.recycle(r.pool.rec)
		}
	}
	r.cur, r.lent, r.peek = nil, nil, nil
	if r.onesRec != nil {
		r.pool.rec.Keep(onesKey{}, r.onesRec)
		r.onesRec, r.ones = nil, nil
	}
	for b := range r.jobs {
		r.free <- b
	}
	for len(r.free) > 0 {
		(<-r.free).recycle(r.pool.rec)
	}
	if r.err == nil {
		r.err = errClosed
	}
	if r.own != nil {
		r.own.Free()
		r.own = nil
	}
	r.view = formats.Batch{}
	return nil
}
