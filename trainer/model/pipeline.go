package model

import (
	"errors"
	"io"
	"reflect"
	"sync"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The training input pipeline. A prefetch goroutine reads batches ahead of
// the training loop; on a backend that stages uploads (tensor.Stager, the
// GPU) it also uploads them:
//
//	reader ──Next (lent) or Read──▶ batch (pinned) ──Stage──▶ staging slot (device)
//	                                                              │ Commit (compute stream):
//	training loop ◀── slot, key counts ──  labels, dense copied; SplitInputs from the staged keys
//
// The batch is the reader's own when it lends (Parquet, RawAsync: decoded
// into pinned memory from the model's allocator) or the prefetcher's
// pinned batch that Read fills (Norm, Raw): file → pinned batch → device,
// no other host copy. Keys are staged as decoded (32- or 64-bit, one CSR
// over every slot, slot-local); the device widens them, adds the slot
// offsets and splits them by input. The copy runs on the staging stream
// while the previous step computes; the training goroutine never waits for
// the host. Short batches stage the same way (commit zeroes the padding).
//
// On the CPU the prefetcher only reads ahead: batches alternate between two
// buffers and the loop loads them synchronously.

// staged is one batch ready for a step.
type staged struct {
	n     int
	nnz   []int          // staged: keys per sparse input
	slot  int            // staged: staging slot
	batch *formats.Batch // CPU: the batch to load
	err   error          // reader or upload error (io.EOF at the end)
}

type prefetcher struct {
	m      *Model
	r      formats.Reader
	lend   formats.Lender // r's lending side when staging (nil: Read)
	stg    tensor.Staging // nil on the CPU
	keys   formats.KeyType
	schema formats.Schema // of bufs
	out    chan staged
	free   chan *formats.Batch
	quit   chan struct{}
	wg     sync.WaitGroup
	bufs   []*formats.Batch
	dsts   []tensor.Tensor // Commit's destinations: label, dense (keys, offsets skipped)
	keyAt  int             // index of the keys among the staged buffers
	srcs   [][]byte
}

// hostAlloc is the allocator of batches that the backend stages without a
// copy (pinned memory on the GPU), or nil (Go heap).
func (m *Model) hostAlloc() formats.Allocator {
	if st, ok := m.be.(tensor.Stager); ok {
		return st.PinnedAllocator()
	}
	return nil
}

// newPrefetcher starts reading r. One prefetcher serves a whole run:
// rearm points it at the next pass's reader and keeps its staging slots
// and pinned batches.
func (m *Model) newPrefetcher(r formats.Reader) (*prefetcher, error) {
	pf := &prefetcher{m: m}
	if err := pf.rearm(r); err != nil {
		pf.close()
		return nil, err
	}
	return pf, nil
}

// rearm starts reading r (the prefetcher is stopped: new, or after stop).
// The staging slots and batches of the previous reader are kept when r's
// schema is the same (a new pass over the same data).
func (pf *prefetcher) rearm(r formats.Reader) error {
	m, f := pf.m, pf.m.feed
	pf.r = r
	st, onStager := m.be.(tensor.Stager)
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
			shape := []tensor.Tensor{f.label.Value}
			pf.dsts = []tensor.Tensor{f.label.Value}
			if f.dense != nil {
				shape = append(shape, f.dense.Value)
				pf.dsts = append(pf.dsts, f.dense.Value)
			}
			pf.keyAt = len(shape)
			shape = append(shape, f.rawKeys(sch.KeyType), f.rawOff)
			pf.dsts = append(pf.dsts, tensor.Tensor{}, tensor.Tensor{})
			if err := m.be.Err(); err != nil {
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
		b, err := formats.NewBatch(sch, m.batch, m.hostAlloc())
		if err != nil {
			return err
		}
		pf.bufs = append(pf.bufs, b)
	}
	pf.free = make(chan *formats.Batch, len(pf.bufs))
	for _, b := range pf.bufs {
		pf.free <- b
	}
	pf.out, pf.quit = make(chan staged, 1), make(chan struct{})
	pf.wg.Add(1)
	go pf.run()
	return nil
}

func (pf *prefetcher) run() {
	defer pf.wg.Done()
	defer close(pf.out)
	for {
		var b *formats.Batch
		var n int
		var err error
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
		st := staged{n: n, batch: b, err: err}
		if err != nil && !errors.Is(err, io.EOF) {
			st.batch = pf.recycle(b)
			pf.send(st)
			return
		}
		if pf.stg != nil {
			if n > 0 {
				st.slot, st.nnz, st.err = pf.stage(b)
				if st.err == nil {
					st.err = err
				}
			}
			st.batch = pf.recycle(b)
		}
		if !pf.send(st) || st.err != nil {
			return
		}
	}
}

// recycle hands a staged batch's buffer back (a lent batch is the
// reader's) and returns nil.
func (pf *prefetcher) recycle(b *formats.Batch) *formats.Batch {
	if b != nil && pf.lend == nil && pf.stg != nil {
		pf.free <- b
	}
	return nil
}

func (pf *prefetcher) send(st staged) bool {
	select {
	case pf.out <- st:
		return true
	case <-pf.quit:
		pf.release(st)
		return false
	}
}

// stage uploads a batch into a staging slot: its labels, dense values,
// keys and offsets as the reader decoded them.
func (pf *prefetcher) stage(b *formats.Batch) (int, []int, error) {
	srcs, nnz, err := pf.hostSide(b)
	if err != nil {
		return 0, nil, err
	}
	nnz = append([]int(nil), nnz...)
	slot, err := pf.stg.Stage(srcs)
	return slot, nnz, err
}

// hostSide is all the host does for a staged batch: check it, count each
// input's keys and name the byte ranges to copy (no copy, no allocation).
func (pf *prefetcher) hostSide(b *formats.Batch) ([][]byte, []int, error) {
	f := pf.m.feed
	nnz, err := f.check(b)
	if err != nil {
		return nil, nil, err
	}
	n, S := b.N, f.totalSlot
	k := int(b.Offsets[n*S])
	pf.srcs = append(pf.srcs[:0], bytesOf(b.Labels[:n*f.labelDim]))
	if f.dense != nil {
		pf.srcs = append(pf.srcs, bytesOf(b.Dense[:n*f.denseDim]))
	}
	if b.Keys64 != nil {
		pf.srcs = append(pf.srcs, bytesOf(b.Keys64[:k]))
	} else {
		pf.srcs = append(pf.srcs, bytesOf(b.Keys32[:k]))
	}
	pf.srcs = append(pf.srcs, bytesOf(b.Offsets[:n*S+1]))
	return pf.srcs, nnz, nil
}

// next returns the next batch: n samples (n < batch size only at the end
// of a source), ready to train with commit; st.err is io.EOF with (or
// after) the reader's last batch.
func (pf *prefetcher) next() staged {
	st, ok := <-pf.out
	if !ok {
		return staged{err: io.EOF}
	}
	return st
}

// commit makes st the network's input.
func (pf *prefetcher) commit(st staged) error {
	if st.batch != nil {
		defer func() { pf.free <- st.batch }()
		return pf.m.feed.load(st.batch)
	}
	f := pf.m.feed
	if st.n < pf.m.batch {
		pf.m.be.Fill(f.label.Value, 0)
		if f.dense != nil {
			pf.m.be.Fill(f.dense.Value, 0)
		}
	}
	pf.stg.Commit(st.slot, pf.dsts, func(staged []tensor.Tensor) {
		keys := staged[pf.keyAt]
		if keys.Len() == 0 {
			keys = f.rawKeys(keysType(keys)).Prefix(1) // no keys: any buffer
		}
		f.splitInputs(keys, staged[pf.keyAt+1], st.n, st.nnz)
	})
	return pf.m.be.Err()
}

func keysType(t tensor.Tensor) formats.KeyType {
	if t.DType == tensor.Int64 {
		return formats.KeyI64
	}
	return formats.KeyU32
}

// release hands back what st holds when it is not trained on: the CPU
// batch, or the staging slot (Commit with no inputs copies nothing).
func (pf *prefetcher) release(st staged) {
	if st.batch != nil {
		pf.free <- st.batch
	}
	if pf.stg != nil && st.nnz != nil {
		pf.stg.Commit(st.slot, nil, nil)
	}
}

// stop stops the goroutine and hands back what it staged; rearm starts
// it again on another reader (the reader is the caller's).
func (pf *prefetcher) stop() {
	if pf.quit == nil {
		return
	}
	close(pf.quit)
	for st := range pf.out {
		pf.release(st)
	}
	pf.wg.Wait()
	pf.quit = nil
}

// close stops the goroutine and frees the buffers (the reader is the
// caller's).
func (pf *prefetcher) close() {
	pf.stop()
	if pf.stg != nil {
		pf.stg.Close()
		pf.stg = nil
	}
	for _, b := range pf.bufs {
		b.Free()
	}
	pf.bufs = nil
}
