package layers

import (
	"fmt"
	"math"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// EmbeddingKind is HugeCTR's sparse embedding type.
type EmbeddingKind uint8

// Embedding kinds. On one device DistributedSlotSparseEmbeddingHash and
// LocalizedSlotSparseEmbeddingHash are the same key→row hash table; the
// OneHot kind maps key + slot offset straight to a row.
const (
	DistributedHash EmbeddingKind = iota
	LocalizedHash
	LocalizedOneHot
)

// EmbeddingConfig describes a SparseEmbedding.
type EmbeddingConfig struct {
	Kind     EmbeddingKind
	VecSize  int
	Slots    int
	Combiner tensor.Combiner
	// WorkspaceMB bounds a hash table's rows: floor(MB·2²⁰ /
	// ((1+StateCopies)·4·VecSize)) (HugeCTR max_vocabulary_size_per_gpu).
	WorkspaceMB float64
	// StateCopies is the optimizer's per-weight state count (Adam 2, +1
	// for LazyGlobal; AdaGrad, Momentum, Nesterov 1; SGD 0).
	StateCopies int
	// SlotSizes are required for OneHot (rows = Σ sizes, slot offsets =
	// prefix sums) and select per-slot initialization there and for
	// LocalizedHash.
	SlotSizes []int64
	// MaxNNZ is the largest key count of a batch.
	MaxNNZ int
}

// MaxRows is the table's row capacity.
func (cfg EmbeddingConfig) MaxRows() int {
	if cfg.Kind == LocalizedOneHot {
		var n int64
		for _, s := range cfg.SlotSizes {
			n += s
		}
		return int(n)
	}
	return int(math.Floor(cfg.WorkspaceMB * (1 << 20) / float64((1+cfg.StateCopies)*4*cfg.VecSize)))
}

// SparseInput is one batch of sparse keys in CSR form over (sample, slot)
// bags: Keys int64 [≥NNZ] (capacity), Offsets int32 [B·Slots+1].
type SparseInput struct {
	Keys, Offsets tensor.Tensor
	NNZ           int
}

// SparseEmbedding looks keys up in an embedding table and pools each
// (sample, slot) bag: output [B, Slots·VecSize].
type SparseEmbedding struct {
	c     *Ctx
	Cfg   EmbeddingConfig
	in    *SparseInput
	out   *Blob
	Table tensor.Tensor // [MaxRows, VecSize]
	Hash  tensor.HashTable
	// Sparse gradient of the last Backward: UniqRows[:n], UniqGrad[:n]
	// with n = NumUniq[0] (device-resident).
	UniqRows, UniqGrad, NumUniq tensor.Tensor
	// RowSlots (LocalizedHash only) is the slot each row was inserted
	// from, int32 [MaxRows], −1 for a free row: the smallest slot of the
	// row's key in the training batch that inserted it (HugeCTR's slot_id).
	RowSlots          tensor.Tensor
	rows              tensor.Tensor
	slotOff, slotSize tensor.Tensor
}

// NewSparseEmbedding builds the layer for batches of batch samples.
func NewSparseEmbedding(c *Ctx, cfg EmbeddingConfig, in *SparseInput, batch int) (*SparseEmbedding, error) {
	if cfg.VecSize <= 0 || cfg.Slots <= 0 || cfg.MaxNNZ < 0 || batch <= 0 {
		return nil, shapeErr("SparseEmbedding", "vec %d slots %d max nnz %d batch %d", cfg.VecSize, cfg.Slots, cfg.MaxNNZ, batch)
	}
	if cfg.Kind == LocalizedOneHot && len(cfg.SlotSizes) != cfg.Slots {
		return nil, shapeErr("SparseEmbedding", "OneHot needs %d slot sizes, got %d", cfg.Slots, len(cfg.SlotSizes))
	}
	rows := cfg.MaxRows()
	if rows <= 0 || rows > math.MaxInt32 {
		return nil, fmt.Errorf("layers: SparseEmbedding: %d rows (workspace %v MB, vec %d): %w", rows, cfg.WorkspaceMB, cfg.VecSize, tensor.ErrShape)
	}
	n := max(cfg.MaxNNZ, 1)
	l := &SparseEmbedding{c: c, Cfg: cfg, in: in, out: c.Blob(batch, cfg.Slots*cfg.VecSize),
		Table: c.alloc(rows, cfg.VecSize), rows: c.BE.Alloc(tensor.Int32, n),
		UniqRows: c.BE.Alloc(tensor.Int32, n), UniqGrad: c.alloc(n, cfg.VecSize), NumUniq: c.BE.Alloc(tensor.Int32, 1)}
	if cfg.Kind == LocalizedOneHot {
		l.slotOff, l.slotSize = c.BE.Alloc(tensor.Int64, cfg.Slots), c.BE.Alloc(tensor.Int64, cfg.Slots)
		off := make([]int64, cfg.Slots)
		init := make([]float64, rows*cfg.VecSize)
		var o int64
		for s, sz := range cfg.SlotSizes {
			off[s] = o
			a := math.Sqrt(1 / float64(max(sz, 1)))
			for i := o * int64(cfg.VecSize); i < (o+sz)*int64(cfg.VecSize); i++ {
				init[i] = -a + 2*a*c.Rand.Float64()
			}
			o += sz
		}
		c.BE.Upload(l.slotOff, off)
		c.BE.Upload(l.slotSize, cfg.SlotSizes)
		c.upload(l.Table, init)
	} else {
		l.Hash = tensor.NewHashTable(c.BE, rows)
		if cfg.Kind == LocalizedHash {
			l.RowSlots = c.BE.Alloc(tensor.Int32, rows)
			c.BE.Fill(l.RowSlots, -1)
		}
		if cfg.Kind == LocalizedHash && len(cfg.SlotSizes) == cfg.Slots {
			c.upload(l.Table, slotUniform(c, cfg, rows))
		} else {
			c.Uniform(l.Table, -0.05, 0.05)
		}
	}
	return l, nil
}

// Forward maps this batch's keys to rows (inserting new keys while
// training) and pools them.
func (l *SparseEmbedding) Forward(p Pass) {
	keys, rows := l.in.Keys.Prefix(l.in.NNZ), l.rows.Prefix(l.in.NNZ)
	if l.Cfg.Kind == LocalizedOneHot {
		l.c.BE.SlotRows(rows, keys, l.in.Offsets, l.slotOff, l.slotSize)
	} else {
		l.c.BE.HashLookup(l.Hash, keys, rows, p.Training)
		if p.Training && !l.RowSlots.IsZero() {
			l.c.BE.RecordSlots(l.RowSlots, rows, l.in.Offsets, l.Cfg.Slots)
		}
	}
	l.c.BE.EmbeddingBag(l.out.Value, l.Table, rows, l.in.Offsets, l.Cfg.Combiner)
}

// Backward aggregates the output gradient per distinct row into UniqRows,
// UniqGrad and NumUniq.
func (l *SparseEmbedding) Backward(Pass) {
	l.c.BE.EmbeddingBagGrad(l.UniqRows, l.UniqGrad, l.NumUniq, l.out.Grad, l.rows.Prefix(l.in.NNZ), l.in.Offsets, l.Cfg.Combiner)
}

// Params returns nothing: the table is updated sparsely from UniqGrad.
func (l *SparseEmbedding) Params() []Param { return nil }

// Outputs returns [B, Slots·VecSize].
func (l *SparseEmbedding) Outputs() []*Blob { return []*Blob{l.out} }

// slotUniform is HugeCTR's init_embedding_per_gpu for a LocalizedHash
// table with slot_size_array: slot s's block of slot_size rows, in slot
// order from row 0, is U(±√(1/slot_size)); rows past Σ sizes stay 0 (HugeCTR
// leaves them as allocated) and a table smaller than Σ sizes is cut off.
func slotUniform(c *Ctx, cfg EmbeddingConfig, rows int) []float64 {
	v := make([]float64, rows*cfg.VecSize)
	i := 0
	for _, sz := range cfg.SlotSizes {
		a := math.Sqrt(1 / float64(max(sz, 1)))
		for n := int64(0); n < sz*int64(cfg.VecSize) && i < len(v); n++ {
			v[i] = -a + 2*a*c.Rand.Float64()
			i++
		}
	}
	return v
}
