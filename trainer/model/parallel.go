package model

import (
	"errors"
	"fmt"

	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Parallel makes a Model one rank of a group of ranks that train one model
// together (HugeCTR's multi-GPU and multi-node training, docs/MULTI_GPU.md):
// the global batch (Options.BatchSize) is split over the ranks in equal,
// consecutive sample blocks; the dense network is data-parallel (every rank
// holds all of it, gradients are summed over the ranks); embedding tables
// are sharded (DistributedSlotSparseEmbeddingHash by key, the Localized
// kinds by slot), each rank pooling its rows for the whole global batch.
//
// Every rank reads the same global batches (its own reader on the same
// data) and runs the same calls in the same order: Fit, Evaluate, Predict,
// Save and the freeze calls are collective (FitGroup and Group run them on
// every rank).
type Parallel struct {
	// Comm is this rank's communicator; its Backend is the Model's.
	Comm collective.Comm

	// exchange runs the sharded step (the rank's copy of its samples, the
	// embedding exchange, the gradient all-reduce and the loss reduction)
	// even for one rank, which otherwise trains with the single-device
	// step: the tests prove the exchange on one GPU with it (NCCL with one
	// rank) against the single-device trainer.
	exchange bool
}

// exchangeKind is how an embedding's pooled output reaches the ranks.
type exchangeKind uint8

const (
	// exReduceScatter: every rank pools its rows for all samples (a
	// partial sum); a reduce-scatter sums the partials and hands rank r
	// its block of samples. The backward all-gathers the output gradient.
	// DistributedSlotSparseEmbeddingHash.
	exReduceScatter exchangeKind = iota
	// exAllToAll: a rank owns whole slots (s mod W == rank) and sends each
	// rank its samples' rows of those slots (HugeCTR's all2all of the
	// Localized embeddings); the backward sends the gradients back the
	// same way. W-fold less traffic than the reduce-scatter.
	exAllToAll
)

func (k exchangeKind) String() string {
	switch k {
	case exReduceScatter:
		return "reduce-scatter"
	case exAllToAll:
		return "all-to-all"
	}
	return fmt.Sprintf("exchangeKind(%d)", uint8(k))
}

// parState is the rank's part of a sharded model (Model.par; nil when the
// model trains alone or as the only rank without Parallel.exchange).
type parState struct {
	comm        collective.Comm
	rank, world int
	local       int // B_l = B_g / W: the dense network's batch
	// label and dense are the rank's rows of the feeder's global batch
	// ([B_l, L], [B_l, D]; dense nil without dense input).
	label, dense *layers.Blob
	ex           []*exchange // one per embedding, in model order
	// flat holds every dense gradient for one all-reduce ([1, Σ len]).
	flat tensor.Tensor
	// loss is the model's reported loss: the global batch's mean, the same
	// on every rank ([1]); localLoss the rank's own (its block's mean).
	loss, localLoss tensor.Tensor
	// scale is each head's loss-gradient scale as built (the loss scale
	// times its loss weight; 0 means 1); n, nl the global and the rank's
	// real samples of the current step.
	scale []float64
	n, nl int
	// gath are the heads' predictions gathered from every rank ([B_g, t]).
	gath []tensor.Tensor
}

// exchange is one embedding's exchange between the layer's pooled output
// ([B_g, S·V], partial for a sharded table) and the dense network's input
// ([B_l, S·V], the rank's samples, complete).
type exchange struct {
	e    *embedding
	kind exchangeKind
	out  *layers.Blob // [B_l, S·V]: what the dense network reads
	// all-to-all: G = ⌈S/W⌉ slots a rank (the ranks with fewer send zero
	// columns), send and recv [B_g·G·V], pad [B_l, G·W·V] when W does not
	// divide S; owned are this rank's slots.
	slots, vec, g int
	owned         []int
	send, recv    tensor.Tensor
	pad           tensor.Tensor
	counts        []int
}

// errParallelBatch is the error for a batch the ranks cannot share.
func errParallelBatch(batch, world int) error {
	return fmt.Errorf("batch size %d does not split over %d ranks: the global batch is divided into equal blocks, one a rank "+
		"(as HugeCTR requires batchsize to be a multiple of the GPU count); give a batch size that is a multiple of %d", batch, world, world)
}

// checkParallel validates o.Parallel for a model on be.
func (o *Options) checkParallel() error {
	p := o.Parallel
	if p == nil {
		return nil
	}
	if p.Comm == nil {
		return errors.New("Options.Parallel without a communicator")
	}
	w := p.Comm.Size()
	if w < 1 || p.Comm.Rank() < 0 || p.Comm.Rank() >= w {
		return fmt.Errorf("rank %d of %d ranks", p.Comm.Rank(), w)
	}
	if o.BatchSize%w != 0 {
		return errParallelBatch(o.BatchSize, w)
	}
	return nil
}

// sharded reports whether the model runs the sharded step.
func (o *Options) sharded() bool {
	return o.Parallel != nil && (o.Parallel.Comm.Size() > 1 || o.Parallel.exchange)
}

// newParState makes the rank's state before the layers are built: its
// label and dense rows.
func (m *Model) newParState(p *Parallel) (*parState, error) {
	c := p.Comm
	if c.Backend() != m.be {
		return nil, fmt.Errorf("rank %d's communicator exchanges the tensors of another backend (%s) than the model's (%s): build each rank's model on its communicator's backend",
			c.Rank(), c.Backend().Name(), m.be.Name())
	}
	ps := &parState{comm: c, rank: c.Rank(), world: c.Size(), local: m.batch / c.Size()}
	ps.label = &layers.Blob{Value: m.be.Alloc(tensor.Float32, ps.local, m.feed.LabelDim)}
	if m.feed.Dense != nil {
		ps.dense = &layers.Blob{Value: m.be.Alloc(tensor.Float32, ps.local, m.feed.DenseDim)}
	}
	ps.loss = m.be.Alloc(tensor.Float32, 1)
	return ps, m.be.Err()
}

// labelBlob is the label input of the dense network: the rank's rows, or
// the feeder's batch.
func (m *Model) labelBlob() *layers.Blob {
	if m.par != nil {
		return m.par.label
	}
	return m.feed.Label
}

// denseBlob is the dense input of the network (nil: none).
func (m *Model) denseBlob() *layers.Blob {
	if m.par != nil {
		return m.par.dense
	}
	return m.feed.Dense
}

// newExchange makes embedding e's exchange: the blob the dense network
// reads in place of the layer's output.
func (ps *parState) newExchange(be tensor.Backend, e *embedding, kind exchangeKind) *exchange {
	S, V := e.layer.Cfg.Slots, e.layer.Cfg.VecSize
	x := &exchange{e: e, kind: kind, slots: S, vec: V,
		out: &layers.Blob{Value: be.Alloc(tensor.Float32, ps.local, S*V), Grad: be.Alloc(tensor.Float32, ps.local, S*V)}}
	if kind == exAllToAll {
		W := ps.world
		x.g = (S + W - 1) / W
		for s := ps.rank; s < S; s += W {
			x.owned = append(x.owned, s)
		}
		n := ps.local * W * x.g * V
		x.send, x.recv = be.Alloc(tensor.Float32, n), be.Alloc(tensor.Float32, n)
		if S%W != 0 {
			x.pad = be.Alloc(tensor.Float32, ps.local, x.g*W*V)
		}
		x.counts = make([]int, W)
		for j := range x.counts {
			x.counts[j] = ps.local * x.g * V
		}
	}
	ps.ex = append(ps.ex, x)
	return x
}

// finishPar completes the state once the network is built: the flat
// gradient buffer, the heads' gathered predictions and loss scales.
func (m *Model) finishPar() {
	ps := m.par
	n := 0
	for _, p := range m.params {
		n += p.Grad.Len()
	}
	if n > 0 {
		ps.flat = m.be.Alloc(tensor.Float32, 1, n)
	}
	for _, h := range m.heads {
		ps.gath = append(ps.gath, m.be.Alloc(tensor.Float32, m.batch, h.width()))
		s := 0.0
		if h.loss != nil {
			s = h.loss.Scale
		}
		if s == 0 {
			s = 1
		}
		ps.scale = append(ps.scale, s)
	}
	if !m.lossOut.IsZero() {
		ps.localLoss, m.lossOut = m.lossOut, ps.loss
	}
}

// rowBlock copies rows [r·B_l, (r+1)·B_l) of src [B_g, C] into dst
// [B_l, C], seeing both as one row.
func (ps *parState) rowBlock(be tensor.Backend, dst, src tensor.Tensor) {
	n := dst.Len()
	be.CopyCols(dst.Reshape(1, n), 0, src.Reshape(1, src.Len()), ps.rank*n, n, 0)
}

// parLoad takes the rank's rows of the loaded global batch (n real samples)
// and sets the losses' real rows and gradient scales: each rank's loss
// gradient is a mean over the global batch's samples.
func (m *Model) parLoad(n int) {
	ps := m.par
	ps.rowBlock(m.be, ps.label.Value, m.feed.Label.Value)
	if ps.dense != nil {
		ps.rowBlock(m.be, ps.dense.Value, m.feed.Dense.Value)
	}
	ps.n = n
	ps.nl = min(max(n-ps.rank*ps.local, 0), ps.local)
	for i, h := range m.heads {
		if h.loss == nil {
			continue
		}
		h.loss.Valid = 0
		if ps.nl > 0 && ps.nl < ps.local {
			h.loss.Valid = ps.nl
		}
		if ps.nl > 0 {
			h.loss.Scale = ps.scale[i] * float64(ps.nl) / float64(n)
		}
	}
}

// parUnload restores the losses after a step (full batches).
func (m *Model) parUnload() {
	for i, h := range m.heads {
		if h.loss != nil {
			h.loss.Valid = 0
			h.loss.Scale = m.par.scale[i] / float64(m.par.world)
		}
	}
}

// embForward runs the embeddings and delivers every rank its samples'
// pooled rows.
func (m *Model) embForward(p layers.Pass) error {
	for _, e := range m.embs {
		e.layer.Forward(p)
	}
	ps := m.par
	if ps == nil {
		return nil
	}
	for _, x := range ps.ex {
		if x.kind == exAllToAll {
			ps.packForward(m.be, x)
		}
	}
	err := ps.comm.Group(func() error {
		for _, x := range ps.ex {
			var err error
			pooled := x.e.layer.Outputs()[0].Value
			switch x.kind {
			case exReduceScatter:
				err = ps.comm.ReduceScatter(x.out.Value, pooled, collective.Sum)
			case exAllToAll:
				err = ps.comm.AllToAllV(x.recv, x.counts, x.send, x.counts)
			}
			if err != nil {
				return fmt.Errorf("embedding %s: %w", x.e.g.Top, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, x := range ps.ex {
		if x.kind == exAllToAll {
			ps.unpackForward(m.be, x)
		}
	}
	return nil
}

// packForward copies the rank's slots of the pooled output [B_g, S·V]
// into send, [B_g, G, V] in sample order: rank j's block of samples is
// the j-th contiguous part.
func (ps *parState) packForward(be tensor.Backend, x *exchange) {
	pooled := x.e.layer.Outputs()[0].Value
	B, S, V, W := pooled.Rows(), x.slots, x.vec, ps.world
	if S%W == 0 {
		// [B·G, W·V]: column block r of each row group is slot g·W + r.
		be.CopyCols(x.send.Reshape(B*x.g, V), 0, pooled.Reshape(B*x.g, W*V), ps.rank*V, V, 0)
		return
	}
	snd := x.send.Reshape(B, x.g*V)
	for k, s := range x.owned {
		be.CopyCols(snd, k*V, pooled, s*V, V, 0)
	}
}

// unpackForward turns the received [W(source j), B_l, G, V] into the
// dense input [B_l, S·V]: slot g·W + j is source j's g-th slot.
func (ps *parState) unpackForward(be tensor.Backend, x *exchange) {
	W, V, Bl := ps.world, x.vec, ps.local
	if x.pad.IsZero() {
		be.Permute0213(x.out.Value, x.recv, 1, W, Bl*x.g, V)
		return
	}
	be.Permute0213(x.pad, x.recv, 1, W, Bl*x.g, V)
	be.CopyCols(x.out.Value, 0, x.pad, 0, x.slots*V, 0)
}

// parBackward exchanges the gradients, in one group: every embedding
// gets the output gradient of the whole global batch (for its layer's
// backward), and the dense gradients are summed over the ranks (one
// all-reduce of a flat buffer; none for a frozen dense network).
func (m *Model) parBackward() error {
	ps := m.par
	for _, x := range ps.ex {
		if x.kind == exAllToAll {
			ps.packBackward(m.be, x)
		}
	}
	dense := !m.frozen && !ps.flat.IsZero()
	if dense {
		m.flatGrads(true)
	}
	err := ps.comm.Group(func() error {
		for _, x := range ps.ex {
			var err error
			if x.kind == exAllToAll {
				err = ps.comm.AllToAllV(x.recv, x.counts, x.send, x.counts)
			} else {
				err = ps.comm.AllGather(x.e.layer.Outputs()[0].Grad, x.out.Grad)
			}
			if err != nil {
				return fmt.Errorf("embedding %s gradient: %w", x.e.g.Top, err)
			}
		}
		if dense {
			if err := ps.comm.AllReduce(ps.flat, collective.Sum); err != nil {
				return fmt.Errorf("the dense gradients: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, x := range ps.ex {
		if x.kind == exAllToAll {
			ps.unpackBackward(m.be, x)
		}
	}
	if dense {
		m.flatGrads(false)
	}
	return nil
}

// packBackward turns the dense input's gradient [B_l, S·V] into send
// [W(owner j), B_l, G, V].
func (ps *parState) packBackward(be tensor.Backend, x *exchange) {
	W, V, Bl := ps.world, x.vec, ps.local
	src := x.out.Grad
	if !x.pad.IsZero() {
		be.CopyCols(x.pad, 0, src, 0, x.slots*V, 0)
		src = x.pad
	}
	be.Permute0213(x.send, src, 1, Bl*x.g, W, V)
}

// unpackBackward writes the received gradients of the rank's slots
// ([W(source), B_l, G, V] = [B_g, G, V]) into the layer's output gradient
// [B_g, S·V]; the other slots' columns stay zero.
func (ps *parState) unpackBackward(be tensor.Backend, x *exchange) {
	grad := x.e.layer.Outputs()[0].Grad
	B, S, V, W := grad.Rows(), x.slots, x.vec, ps.world
	if S%W == 0 {
		be.CopyCols(grad.Reshape(B*x.g, W*V), ps.rank*V, x.recv.Reshape(B*x.g, V), 0, V, 0)
		return
	}
	rcv := x.recv.Reshape(B, x.g*V)
	for k, s := range x.owned {
		be.CopyCols(grad, s*V, rcv, k*V, V, 0)
	}
}

// parAfterForward finishes a training forward: a rank without real samples
// in this batch gets no loss gradient, and the model's loss becomes the
// global batch's mean: Σ_r loss_r·n_r/n over the ranks (each rank's
// regularizer term counts Σ n_r/n = 1 time).
func (m *Model) parAfterForward() error {
	ps := m.par
	if ps.nl == 0 {
		for _, h := range m.heads {
			if h.loss != nil {
				m.be.Fill(h.pred.Grad, 0)
			}
		}
	}
	return ps.reduceLoss(m.be)
}

// reduceLoss sets ps.loss to the global mean of the ranks' losses.
func (ps *parState) reduceLoss(be tensor.Backend) error {
	be.Axpby(ps.loss, float64(ps.nl)/float64(ps.n), ps.localLoss, 0, tensor.Tensor{})
	if err := ps.comm.AllReduce(ps.loss, collective.Sum); err != nil {
		return fmt.Errorf("the loss: %w", err)
	}
	return nil
}

// flatGrads copies the dense gradients into the flat buffer (in) or
// back from it.
func (m *Model) flatGrads(in bool) {
	off := 0
	for _, p := range m.params {
		n := p.Grad.Len()
		g := p.Grad.Reshape(1, n)
		if in {
			m.be.CopyCols(m.par.flat, off, g, 0, n, 0)
		} else {
			m.be.CopyCols(g, 0, m.par.flat, off, n, 0)
		}
		off += n
	}
}

// gatherPredictions collects every rank's predictions ([B_l, t] per head)
// into the heads' global [B_g, t] in sample order.
func (m *Model) gatherPredictions() error {
	ps := m.par
	return ps.comm.Group(func() error {
		for i, h := range m.heads {
			if err := ps.comm.AllGather(ps.gath[i], h.pred.Value); err != nil {
				return fmt.Errorf("the predictions: %w", err)
			}
		}
		return nil
	})
}

// predValue is head i's prediction of the whole batch.
func (m *Model) predValue(i int) tensor.Tensor {
	if m.par != nil {
		return m.par.gath[i]
	}
	return m.heads[i].pred.Value
}

// Rank is the model's rank in its group (0 when it trains alone); World
// the group's rank count (1 alone).
func (m *Model) Rank() int {
	if m.comm == nil {
		return 0
	}
	return m.comm.Rank()
}

// World is the number of ranks the model trains over (1 alone).
func (m *Model) World() int {
	if m.comm == nil {
		return 1
	}
	return m.comm.Size()
}

// Comm is the model's communicator (Options.Parallel), nil alone.
func (m *Model) Comm() collective.Comm { return m.comm }

// LocalBatch is the batch the rank's dense network runs: the global batch
// (BatchSize) divided by the rank count.
func (m *Model) LocalBatch() int { return m.batch / m.World() }

// exchangeOf picks embedding e's exchange: all-to-all for the tables
// sharded by slot, reduce-scatter for those sharded by key.
func (m *Model) exchangeOf(e *embedding) exchangeKind {
	if e.layer.Cfg.Kind == layers.DistributedHash {
		return exReduceScatter
	}
	return exAllToAll
}
