package model

import (
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// The training input pipeline. A prefetch goroutine reads batches ahead of
// the training loop; on a GPU backend it also uploads them:
//
//	reader ──Read──▶ batch (pinned) ──pack/Stage──▶ staging slot (device)
//	                                                     │ Commit (compute stream)
//	training loop ◀─────────── slot, key counts ─────────┘
//
// On the GPU the batch buffers come from pinned memory, and when the
// batch's layout already is the network's (one sparse input, no one-hot
// offsets to remove) its buffers upload as they are (32-bit keys widen on
// the device); otherwise the prefetcher repacks into pinned host buffers
// first. The copy runs on the uploader's stream while the previous step
// computes; the training goroutine never waits for the host.
//
// On the CPU the prefetcher only reads ahead: batches alternate between two
// buffers and the loop loads them synchronously.

// staged is one batch ready for a step.
type staged struct {
	n     int
	nnz   []int          // GPU: keys per sparse input
	slot  int            // GPU: uploader slot
	batch *formats.Batch // CPU: the batch to load
	err   error          // reader or upload error (io.EOF at the end)
}

type prefetcher struct {
	m      *Model
	r      formats.Reader
	up     *gpu.Uploader // nil on the CPU
	out    chan staged
	free   chan *formats.Batch
	quit   chan struct{}
	wg     sync.WaitGroup
	bufs   []*formats.Batch
	host   *hostInputs
	direct bool // GPU: upload batch buffers as they are
	dsts   []tensor.Tensor
}

// newPrefetcher starts reading r.
func (m *Model) newPrefetcher(r formats.Reader) (*prefetcher, error) {
	pf := &prefetcher{m: m, r: r, out: make(chan staged, 1), free: make(chan *formats.Batch, 2), quit: make(chan struct{})}
	f := m.feed
	var alloc formats.Allocator
	gb, onGPU := m.be.(*gpu.Backend)
	if onGPU {
		alloc = gb.PinnedAllocator()
		sch := r.Schema()
		pf.direct = len(f.inputs) == 1 && f.oneHot[0] == nil
		stage := []tensor.DType{tensor.Invalid}
		pf.dsts = []tensor.Tensor{f.label.Value}
		if f.dense != nil {
			pf.dsts = append(pf.dsts, f.dense.Value)
			stage = append(stage, tensor.Invalid)
		}
		for _, in := range f.inputs {
			pf.dsts = append(pf.dsts, in.Keys, in.Offsets)
			kt := tensor.Invalid
			if pf.direct && sch.KeyType != formats.KeyI64 {
				kt = tensor.Uint32
			}
			stage = append(stage, kt, tensor.Invalid)
		}
		up, err := gb.NewUploader(pf.dsts, stage)
		if err != nil {
			return nil, err
		}
		pf.up = up
		if !pf.direct {
			if pf.host, err = newHostInputs(f, alloc); err != nil {
				up.Close()
				return nil, err
			}
		}
	}
	nb := 2
	if onGPU {
		nb = 1 // Stage returns once the copy has read the batch
	}
	for i := 0; i < nb; i++ {
		b, err := formats.NewBatch(r.Schema(), m.batch, alloc)
		if err != nil {
			pf.close()
			return nil, err
		}
		pf.bufs = append(pf.bufs, b)
		pf.free <- b
	}
	pf.wg.Add(1)
	go pf.run()
	return pf, nil
}

func (pf *prefetcher) run() {
	defer pf.wg.Done()
	defer close(pf.out)
	for {
		var b *formats.Batch
		select {
		case b = <-pf.free:
		case <-pf.quit:
			return
		}
		n, err := pf.r.Read(b)
		st := staged{n: n, batch: b, err: err}
		if err != nil && err != io.EOF {
			pf.send(st)
			return
		}
		if pf.up != nil && n == pf.m.batch {
			st.slot, st.nnz, st.err = pf.stage(b)
			if st.err == nil {
				st.err = err
			}
			st.batch = nil
			pf.free <- b
		}
		// A short batch on the GPU keeps its buffer: commit loads it
		// synchronously (once an epoch), release hands it back.
		if !pf.send(st) || st.err != nil {
			return
		}
	}
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

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// stage uploads a full batch into a staging slot.
func (pf *prefetcher) stage(b *formats.Batch) (int, []int, error) {
	f := pf.m.feed
	var srcs [][]byte
	var nnz []int
	if pf.direct {
		if b.Schema.LabelDim != f.labelDim || b.Schema.DenseDim != f.denseDim || b.Schema.NumSlots() != f.totalSlot {
			return 0, nil, fmt.Errorf("data has %d labels, %d dense, %d slots; the model wants %d, %d, %d",
				b.Schema.LabelDim, b.Schema.DenseDim, b.Schema.NumSlots(), f.labelDim, f.denseDim, f.totalSlot)
		}
		k := int(b.Offsets[b.N*f.totalSlot])
		if k > f.capKeys[0] {
			return 0, nil, fmt.Errorf("batch of %d keys, the model allows %d", k, f.capKeys[0])
		}
		srcs = append(srcs, bytesOf(b.Labels))
		if f.dense != nil {
			srcs = append(srcs, bytesOf(b.Dense))
		}
		if b.Keys64 != nil {
			srcs = append(srcs, bytesOf(b.Keys64[:k]))
		} else {
			srcs = append(srcs, bytesOf(b.Keys32[:k]))
		}
		srcs = append(srcs, bytesOf(b.Offsets[:b.N*f.totalSlot+1]))
		nnz = []int{k}
	} else {
		var err error
		if nnz, err = pf.host.pack(f, b); err != nil {
			return 0, nil, err
		}
		srcs = append(srcs, bytesOf(pf.host.label))
		if f.dense != nil {
			srcs = append(srcs, bytesOf(pf.host.dense))
		}
		for k := range f.inputs {
			srcs = append(srcs, bytesOf(pf.host.keys[k][:nnz[k]]), bytesOf(pf.host.off[k]))
		}
	}
	slot, err := pf.up.Stage(srcs)
	return slot, nnz, err
}

// next returns the next batch: n samples (n < batch size only at the end),
// ready to train with commit; st.err is io.EOF with (or after) the
// reader's last batch.
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
	for k, in := range pf.m.feed.inputs {
		in.NNZ = st.nnz[k]
	}
	pf.up.Commit(st.slot, pf.dsts)
	return pf.m.be.Err()
}

// release hands back what st holds when it is not trained on: the CPU
// batch, or the GPU staging slot (Commit with no inputs copies nothing).
func (pf *prefetcher) release(st staged) {
	if st.batch != nil {
		pf.free <- st.batch
	}
	if pf.up != nil && st.nnz != nil {
		pf.up.Commit(st.slot, nil)
	}
}

// close stops the goroutine and frees the buffers (the reader is the
// caller's).
func (pf *prefetcher) close() {
	select {
	case <-pf.quit:
		return
	default:
		close(pf.quit)
	}
	for st := range pf.out {
		pf.release(st)
	}
	pf.wg.Wait()
	if pf.up != nil {
		pf.up.Close()
	}
	for _, b := range pf.bufs {
		b.Free()
	}
}
