package input

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Staged is one batch ready for a step.
type Staged struct {
	N      int            // samples
	Err    error          // reader or upload error (io.EOF at the end)
	short  bool           // a short batch dropped unstaged (DropShort)
	nnz    []int          // staged: keys per sparse input
	slot   int            // staged: staging slot
	oneHot bool           // staged: one-hot (Feeder.OneHot), its offsets not uploaded
	batch  *formats.Batch // CPU: the batch to load
}

// Prefetcher is the input pipeline of one model: see the package doc.
type Prefetcher struct {
	f      *Feeder
	r      formats.Reader
	lend   formats.Lender // r's lending side when staging (nil: Read)
	stg    tensor.Staging // nil on the CPU
	keys   formats.KeyType
	schema formats.Schema // of bufs
	out    chan Staged
	free   chan *formats.Batch
	quit   chan struct{}
	wg     sync.WaitGroup
	bufs   []*formats.Batch
	dsts   []tensor.Tensor // Commit's destinations: label, dense (keys, offsets skipped)
	keyAt  int             // index of the keys among the staged buffers
	copies []tensor.Copy   // Commit's copies of a one-hot batch (scratch)
	srcs   [][]byte
	nnz    []int     // HostSide's key counts (this prefetcher's own scratch)
	chain  *chain    // StartPasses' passes; nil: one reader per Start
	drop   bool      // DropShort: short batches are not staged
	st     pipeStats // TimeStats (stats.go)
}

// chain is the state of a prefetcher that opens its passes itself.
type chain struct {
	open   func() (formats.Reader, error)
	passes int            // passes to run (0: no bound)
	pass   int            // passes started (the current one included)
	next   formats.Reader // the next pass, opened ahead; nil: not yet
	// nextErr is the error of opening the second pass with the first
	// (StartPasses), reported when the first pass ends.
	nextErr error
	last    int64 // samples of the previous pass (0: unknown)
	// opened is when the next (then current) pass's reader was opened;
	// startup the time from that to its first batch when the first read
	// of a pass had to wait for it (the lead was too short; never lowered);
	// interval the time between batches handed to the consumer (moving
	// average): together the lead the next pass needs.
	opened, sent      time.Time
	startup, interval time.Duration
	first             bool // the next batch read is a pass's first
}

// Lookahead is the fewest batches before a pass ends at which a chained
// prefetcher opens the next pass's reader, so that the reader's start
// (opening files, a Parquet footer, the first row groups or O_DIRECT
// reads) overlaps the last steps of the pass instead of stalling the next
// one. It opens earlier when the last pass's reader took longer to deliver
// its first batch than Lookahead steps last (twice that start-up time
// ahead, at most half a pass ahead).
const Lookahead = 4

// lead is how many batches before the pass's end the next reader opens.
func (c *chain) lead(passBatches int64) int64 {
	n := int64(Lookahead)
	if c.startup > 0 && c.interval > 0 {
		n = max(n, int64(2*c.startup/c.interval)+1)
	}
	return min(n, max(passBatches/2, Lookahead))
}

// tick notes a batch handed to the consumer at now.
func (c *chain) tick(now time.Time) {
	if !c.sent.IsZero() {
		d := now.Sub(c.sent)
		if c.interval == 0 {
			c.interval = d
		} else {
			c.interval = (3*c.interval + d) / 4
		}
	}
	c.sent = now
}

// StartPasses starts reading the first reader open gives and, after it,
// pass after pass from open without a pause: when a pass ends, Next
// reports io.EOF (with or after the pass's last batch) and the following
// Next calls return the next pass's batches, read from a reader that open
// made Lookahead batches before the end (the pass's length is the
// reader's sample count when it reports one, else the previous pass's).
// passes bounds the passes, the first included (0: no bound). The
// prefetcher owns the readers it opens: Stop and Close close them. Every
// pass must have the first's schema.
//
// When another pass follows the first, its reader is opened here too,
// right after the first: a reader allocates its ring of (pinned) batches
// when it opens, and two passes' readers are alive at once around each
// pass boundary, so the second ring is made now, at the start, instead of
// in the middle of the first pass's steps (cuMemHostAlloc of a reader's
// ring takes tens to hundreds of milliseconds). From the third pass on,
// each reader takes the buffers the one two passes before left in the
// Feeder's Recycler.
func (pf *Prefetcher) StartPasses(open func() (formats.Reader, error), passes int) error {
	r, err := open()
	if err != nil {
		return err
	}
	c := &chain{open: open, passes: passes, pass: 1}
	if c.more() {
		// c.opened stays zero: this reader's wait, if any, says nothing
		// about the lead a pass needs.
		c.next, c.nextErr = open()
		if c.nextErr != nil {
			c.next = nil // the error is the second pass's, reported at the first's end
		}
	}
	pf.chain = c
	if err := pf.start(r); err != nil {
		pf.chain = nil
		r.Close()
		if c.next != nil {
			c.next.Close()
		}
		return err
	}
	return nil
}

// samplesOf is a reader's sample count when it knows it (0: unknown).
func samplesOf(r formats.Reader) int64 {
	switch c := r.(type) {
	case interface{ NumSamples() int64 }:
		return c.NumSamples()
	case interface{ NumRows() int64 }:
		return c.NumRows()
	}
	return 0
}

// more reports whether another pass follows the current one.
func (c *chain) more() bool { return c.passes <= 0 || c.pass < c.passes }

// ahead opens the next pass's reader when the current pass has at most
// Lookahead batches left after got samples.
func (pf *Prefetcher) ahead(got int64) {
	c := pf.chain
	if c == nil || c.next != nil || c.nextErr != nil || !c.more() {
		return
	}
	want := samplesOf(pf.r)
	if want <= 0 {
		want = c.last
	}
	B := int64(pf.f.batch)
	if want <= 0 || (want-got+B-1)/B > c.lead((want+B-1)/B) {
		return
	}
	c.opened = time.Now()
	if r, err := c.open(); err == nil {
		c.next = r
	} // else: opened (and its error reported) at the pass's end
}

// turn switches to the next pass's reader after the current one's end:
// false (with the error sent) when there is none or it cannot be used.
func (pf *Prefetcher) turn(got int64) bool {
	c := pf.chain
	if c == nil || !c.more() {
		return false
	}
	r := c.next
	c.next = nil
	if err := c.nextErr; err != nil {
		c.nextErr = nil
		pf.send(Staged{Err: err})
		return false
	}
	if r == nil {
		var err error
		c.opened = time.Now()
		if r, err = c.open(); err != nil {
			pf.send(Staged{Err: err})
			return false
		}
	}
	if !reflect.DeepEqual(*r.Schema(), pf.schema) {
		r.Close()
		pf.send(Staged{Err: errors.New("the next pass over the data has another schema than the first")})
		return false
	}
	lend, _ := r.(formats.Lender)
	if pf.stg != nil && (lend == nil) != (pf.lend == nil) {
		r.Close()
		pf.send(Staged{Err: errors.New("the next pass's reader lends batches differently from the first")})
		return false
	}
	pf.r.Close()
	pf.r, c.last, c.pass, c.first = r, got, c.pass+1, true
	if pf.stg != nil {
		pf.lend = lend
	}
	return true
}

// DropShort tells the prefetcher that its consumer trains full batches
// only (a repeating reader's pass ends in max_iter mode, a benchmark's
// steps, drop_incomplete_batch): a batch shorter than the batch size is
// then handed on with its N but not staged (no host-side check, no upload;
// Commit refuses it, Release drops it), so that the next pass's first
// batch is staged while the pass's last full batch trains instead of
// after a discarded upload.
func (pf *Prefetcher) DropShort(on bool) { pf.drop = on }

// NewPrefetcher returns an idle prefetcher of f's inputs; Start starts
// it on a reader. One prefetcher serves a whole run: after Stop, Start
// points it at the next pass's reader and keeps its staging slots and
// pinned batches.
func NewPrefetcher(f *Feeder) *Prefetcher { return &Prefetcher{f: f} }

// Start starts reading r (the prefetcher is idle: new, or after Stop).
// The staging slots and batches of the previous reader are kept when r's
// schema is the same (a new pass over the same data). The reader stays
// the caller's.
func (pf *Prefetcher) Start(r formats.Reader) error {
	pf.chain = nil
	return pf.start(r)
}

func (pf *Prefetcher) start(r formats.Reader) error {
	f := pf.f
	pf.r = r
	st, onStager := f.be.(tensor.Stager)
	sch := r.Schema()
	if pf.bufs != nil && !reflect.DeepEqual(*sch, pf.schema) {
		for _, b := range pf.bufs {
			b.Free()
		}
		pf.bufs = nil
	}
	if pf.stg != nil && pf.keys != sch.KeyType {
		pf.stg.Close()
		pf.stg = nil
	}
	nb := 2
	if onStager {
		if pf.stg == nil {
			shape := []tensor.Tensor{f.Label.Value}
			pf.dsts = []tensor.Tensor{f.Label.Value}
			if f.Dense != nil {
				shape = append(shape, f.Dense.Value)
				pf.dsts = append(pf.dsts, f.Dense.Value)
			}
			pf.keyAt = len(shape)
			shape = append(shape, f.rawKeys(sch.KeyType), f.rawOff)
			pf.dsts = append(pf.dsts, tensor.Tensor{}, tensor.Tensor{})
			if err := f.be.Err(); err != nil {
				return err
			}
			stg, err := st.NewStaging(shape, nil)
			if err != nil {
				return err
			}
			pf.stg, pf.keys = stg, sch.KeyType
		}
		pf.lend, _ = r.(formats.Lender)
		nb = 1 // Stage returns once the copy has read the batch
		if pf.lend != nil {
			nb = 0
		}
	}
	pf.schema = sch.Clone()
	for len(pf.bufs) < nb {
		b, err := formats.NewBatch(sch, f.batch, f.HostAlloc())
		if err != nil {
			return err
		}
		pf.bufs = append(pf.bufs, b)
	}
	pf.free = make(chan *formats.Batch, len(pf.bufs))
	for _, b := range pf.bufs {
		pf.free <- b
	}
	// One staged batch ahead, and room for a pass's end beside it, so
	// that the next pass's first batch stages while the last one trains.
	pf.out, pf.quit = make(chan Staged, 2), make(chan struct{})
	pf.wg.Add(1)
	go pf.run()
	return nil
}

func (pf *Prefetcher) run() {
	defer pf.wg.Done()
	defer close(pf.out)
	var got int64 // samples of this pass so far
	held := 0     // samples of short batches dropped and not yet sent (DropShort)
	for {
		var b *formats.Batch
		var n int
		var err error
		t0, ts := time.Now(), pf.st.now()
		if pf.lend != nil {
			select {
			case <-pf.quit:
				return
			default:
			}
			if b, err = pf.lend.Next(); b != nil {
				n = b.N
			}
		} else {
			select {
			case b = <-pf.free:
			case <-pf.quit:
				return
			}
			t0, ts = time.Now(), pf.st.now() // not the wait for a free buffer
			n, err = pf.r.Read(b)
		}
		pf.st.add(statRead, ts)
		if c := pf.chain; c != nil && c.first {
			// A wait of more than a millisecond for the pass's first batch:
			// the reader needed this much longer than its lead.
			if d := time.Since(t0); d > time.Millisecond && !c.opened.IsZero() {
				c.startup = max(c.startup, t0.Sub(c.opened)+d)
			}
			c.first = false
		}
		got += int64(n)
		st := Staged{N: n, batch: b, Err: err}
		if err != nil && !errors.Is(err, io.EOF) {
			st.batch = pf.recycle(b)
			pf.send(st)
			return
		}
		st.short = pf.drop && n > 0 && n < pf.f.batch
		if pf.stg != nil {
			if n > 0 && !st.short {
				st.slot, st.nnz, st.oneHot, st.Err = pf.stage(b)
				if st.Err == nil {
					st.Err = err
				}
			}
			st.batch = pf.recycle(b)
			if st.short || held > 0 {
				// A dropped short batch is not sent on its own but with
				// the pass's end, so that it takes no place in out ahead
				// of the next pass's first batch.
				switch {
				case st.short:
					held += n
					if st.Err == nil {
						pf.ahead(got)
						continue
					}
					st.N, held = held, 0
				case n == 0: // the pass's end after it
					st.N, st.short, held = held, true, 0
				default: // data after a short batch (not a reader's order)
					if !pf.send(Staged{N: held, short: true}) {
						return
					}
					held = 0
				}
			}
		}
		if !pf.send(st) {
			return
		}
		if pf.chain != nil && n > 0 {
			pf.chain.tick(time.Now())
		}
		if st.Err == nil {
			pf.ahead(got)
			continue
		}
		if !errors.Is(st.Err, io.EOF) {
			return
		}
		t0 = pf.st.now()
		ok := pf.turn(got)
		pf.st.add(statTurn, t0)
		if !ok {
			return
		}
		got = 0
	}
}

// recycle hands a staged batch's buffer back (a lent batch is the
// reader's) and returns nil.
func (pf *Prefetcher) recycle(b *formats.Batch) *formats.Batch {
	if b != nil && pf.lend == nil && pf.stg != nil {
		pf.free <- b
	}
	return nil
}

func (pf *Prefetcher) send(st Staged) bool {
	select {
	case pf.out <- st:
		return true
	case <-pf.quit:
		pf.Release(st)
		return false
	}
}

// stage uploads a batch into a staging slot: its labels, dense values,
// keys and offsets as the reader decoded them (no offsets for a one-hot
// batch, which it reports).
func (pf *Prefetcher) stage(b *formats.Batch) (int, []int, bool, error) {
	t0 := pf.st.now()
	srcs, nnz, err := pf.HostSide(b)
	if err != nil {
		return 0, nil, false, err
	}
	nnz = append([]int(nil), nnz...)
	oneHot := pf.f.OneHot(b)
	if oneHot {
		srcs[len(srcs)-1] = nil // the offsets
	}
	pf.st.add(statHostSide, t0)
	t0 = pf.st.now()
	slot, err := pf.stg.Stage(srcs)
	pf.st.add(statStage, t0)
	if err != nil {
		// No slot is held: without key counts Release commits none.
		return 0, nil, false, err
	}
	return slot, nnz, oneHot, nil
}

// HostSide is all the host does for a staged batch: check it, count each
// input's keys and name the byte ranges to copy (no copy, no allocation).
func (pf *Prefetcher) HostSide(b *formats.Batch) ([][]byte, []int, error) {
	f := pf.f
	nnz, err := f.CheckInto(pf.nnz, b)
	if err != nil {
		return nil, nil, err
	}
	pf.nnz = nnz
	n, S := b.N, f.totalSlot
	k := int(b.Offsets[n*S])
	pf.srcs = append(pf.srcs[:0], bytesOf(b.Labels[:n*f.LabelDim]))
	if f.Dense != nil {
		pf.srcs = append(pf.srcs, bytesOf(b.Dense[:n*f.DenseDim]))
	}
	if b.Keys64 != nil {
		pf.srcs = append(pf.srcs, bytesOf(b.Keys64[:k]))
	} else {
		pf.srcs = append(pf.srcs, bytesOf(b.Keys32[:k]))
	}
	pf.srcs = append(pf.srcs, bytesOf(b.Offsets[:n*S+1]))
	return pf.srcs, nnz, nil
}

// Next returns the next batch: N samples (N < batch size only at the end
// of a source), ready to use with Commit (or handed back with Release);
// Err is io.EOF with (or after) the reader's last batch.
func (pf *Prefetcher) Next() Staged {
	st, ok := <-pf.out
	if !ok {
		return Staged{Err: io.EOF}
	}
	return st
}

// Commit makes st the network's input.
func (pf *Prefetcher) Commit(st Staged) error {
	f := pf.f
	if st.short {
		pf.Release(st)
		return fmt.Errorf("a batch of %d samples, short of %d, dropped unstaged (DropShort) cannot be trained", st.N, f.batch)
	}
	if st.batch != nil {
		defer func() { pf.free <- st.batch }()
		return f.Load(st.batch)
	}
	if st.N < f.batch {
		f.be.Fill(f.Label.Value, 0)
		if f.Dense != nil {
			f.be.Fill(f.Dense.Value, 0)
		}
	}
	// A one-hot batch's labels and dense values are copied by its split
	// (SplitOneHot), in the same launch, rather than by Commit.
	dsts := pf.dsts
	if st.oneHot {
		dsts = nil
	}
	pf.stg.Commit(st.slot, dsts, func(staged []tensor.Tensor) {
		keys := staged[pf.keyAt]
		if keys.Len() == 0 {
			keys = f.rawKeys(keysType(keys)).Prefix(1) // no keys: any buffer
		}
		var copies []tensor.Copy
		if st.oneHot {
			copies = pf.copies[:0]
			for k, d := range pf.dsts {
				if src := staged[k]; !d.IsZero() && src.Len() > 0 {
					copies = append(copies, tensor.Copy{Dst: d.Prefix(src.Len()), Src: src})
				}
			}
			pf.copies = copies
		}
		f.splitInputs(keys, staged[pf.keyAt+1], st.N, st.nnz, st.oneHot, copies)
	})
	return pf.f.be.Err()
}

func keysType(t tensor.Tensor) formats.KeyType {
	if t.DType == tensor.Int64 {
		return formats.KeyI64
	}
	return formats.KeyU32
}

// Release hands back what st holds when it is not used: the CPU batch, or
// the staging slot.
func (pf *Prefetcher) Release(st Staged) {
	if st.batch != nil {
		pf.free <- st.batch
	}
	if pf.stg != nil && st.nnz != nil {
		pf.stg.Commit(st.slot, nil, nil)
	}
}

// Stop stops the goroutine and hands back what it staged; Start starts
// it again on another reader.
func (pf *Prefetcher) Stop() {
	if pf.quit == nil {
		return
	}
	close(pf.quit)
	for st := range pf.out {
		pf.Release(st)
	}
	pf.wg.Wait()
	pf.quit = nil
	if c := pf.chain; c != nil {
		pf.r.Close()
		if c.next != nil {
			c.next.Close()
		}
		pf.chain = nil
	}
}

// Close stops the goroutine and frees the buffers (the reader is the
// caller's; StartPasses' readers are the prefetcher's).
func (pf *Prefetcher) Close() {
	pf.Stop()
	if pf.stg != nil {
		pf.stg.Close()
		pf.stg = nil
	}
	for _, b := range pf.bufs {
		b.Free()
	}
	pf.bufs = nil
}
