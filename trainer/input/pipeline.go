package input

import (
	"errors"
	"io"
	"reflect"
	"sync"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Staged is one batch ready for a step.
type Staged struct {
	N     int            // samples
	Err   error          // reader or upload error (io.EOF at the end)
	nnz   []int          // staged: keys per sparse input
	slot  int            // staged: staging slot
	batch *formats.Batch // CPU: the batch to load
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
	srcs   [][]byte
	nnz    []int // HostSide's key counts (this prefetcher's own scratch)
	// open, when not nil, opens the next pass (StartPasses): the
	// goroutine reads pass after pass and owns the readers.
	open         func() (formats.Reader, error)
	passes, pass int       // StartPasses' limit (0: none) and the pass being read (1-based)
	st           pipeStats // TimeStats (stats.go)
}

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
	pf.open = nil
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
	pf.out, pf.quit = make(chan Staged, 1), make(chan struct{})
	pf.wg.Add(1)
	go pf.run()
	return nil
}

func (pf *Prefetcher) run() {
	defer pf.wg.Done()
	defer close(pf.out)
	for {
		var b *formats.Batch
		var n int
		var err error
		t0 := pf.st.now()
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
			n, err = pf.r.Read(b)
		}
		pf.st.add(statRead, t0)
		st := Staged{N: n, batch: b, Err: err}
		if err != nil && !errors.Is(err, io.EOF) {
			st.batch = pf.recycle(b)
			pf.send(st)
			return
		}
		if pf.stg != nil {
			if n > 0 {
				st.slot, st.nnz, st.Err = pf.stage(b)
				if st.Err == nil {
					st.Err = err
				}
			}
			st.batch = pf.recycle(b)
		}
		if !pf.send(st) {
			return
		}
		if st.Err != nil && (pf.open == nil || st.Err != io.EOF || !pf.nextPass()) {
			return
		}
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
// keys and offsets as the reader decoded them.
func (pf *Prefetcher) stage(b *formats.Batch) (int, []int, error) {
	t0 := pf.st.now()
	srcs, nnz, err := pf.HostSide(b)
	if err != nil {
		return 0, nil, err
	}
	nnz = append([]int(nil), nnz...)
	pf.st.add(statHostSide, t0)
	t0 = pf.st.now()
	slot, err := pf.stg.Stage(srcs)
	pf.st.add(statStage, t0)
	return slot, nnz, err
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
	pf.stg.Commit(st.slot, pf.dsts, func(staged []tensor.Tensor) {
		keys := staged[pf.keyAt]
		if keys.Len() == 0 {
			keys = f.rawKeys(keysType(keys)).Prefix(1) // no keys: any buffer
		}
		f.splitInputs(keys, staged[pf.keyAt+1], st.N, st.nnz)
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
	if pf.open != nil && pf.r != nil {
		pf.r.Close()
		pf.r, pf.lend = nil, nil
	}
}

// Close stops the goroutine and frees the buffers (the reader is the
// caller's).
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

// StartPasses starts reading the passes open returns, one after another,
// with no pause between them: when a pass's reader ends, the goroutine
// opens the next one at once and goes on reading while the caller trains
// on the last batches of the pass before (the pipeline never drains at a
// pass boundary). Next returns io.EOF with (or after) each pass's last
// batch, as with Start, and the next pass's batches after it; an error
// opening a pass is the Err of the Next after that pass's io.EOF, and
// ends the reading. The readers are the prefetcher's: Stop closes the
// current one. Every pass must have the first pass's schema. passes > 0
// reads that many passes (the last ends with io.EOF as with Start); 0
// reads on until Stop.
func (pf *Prefetcher) StartPasses(open func() (formats.Reader, error), passes int) error {
	r, err := open()
	if err != nil {
		return err
	}
	pf.open, pf.passes, pf.pass = open, passes, 1
	if err := pf.start(r); err != nil {
		pf.open = nil
		r.Close()
		return err
	}
	return nil
}

// nextPass (the goroutine, StartPasses) closes the ended pass's reader and
// opens the next; false when it could not (the error sent) or when the
// prefetcher is stopping.
func (pf *Prefetcher) nextPass() bool {
	select {
	case <-pf.quit:
		return false
	default:
	}
	if pf.passes > 0 && pf.pass >= pf.passes {
		return false
	}
	pf.pass++
	pf.r.Close()
	pf.r, pf.lend = nil, nil
	r, err := pf.open()
	if err == nil && !reflect.DeepEqual(*r.Schema(), pf.schema) {
		r.Close()
		err = errors.New("the next pass's data has another schema than the first pass's")
	}
	if err == nil {
		lend, _ := r.(formats.Lender)
		if pf.stg != nil && lend == nil && len(pf.bufs) == 0 {
			r.Close()
			err = errors.New("the next pass's reader does not lend its batches (the first pass's did)")
		} else if pf.stg != nil {
			pf.lend = lend
		}
	}
	if err != nil {
		pf.send(Staged{Err: err})
		return false
	}
	pf.r = r
	return true
}
