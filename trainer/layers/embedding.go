package layers

import (
	"fmt"
	"math"
	"slices"

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
	// ((1+StateCopies)·4·VecSize)) (HugeCTR max_vocabulary_size_per_gpu;
	// per rank when sharded).
	WorkspaceMB float64
	// StateCopies is the optimizer's per-weight state count (Adam 2, +1
	// for LazyGlobal; AdaGrad, Momentum, Nesterov 1; SGD 0).
	StateCopies int
	// SlotSizes are required for OneHot (rows = Σ sizes, slot offsets =
	// prefix sums) and select per-slot initial bounds √(1/slot_size) there
	// and for LocalizedHash (a row takes the bound of the slot it was
	// inserted from).
	SlotSizes []int64
	// MaxNNZ is the largest key count of a batch (of the global batch
	// when sharded).
	MaxNNZ int
	// Shard is the rank this table part lives on (the zero value: one
	// rank holds the whole table). DistributedHash ranks hold the keys k
	// with floorMod(k, World) == Rank, Localized ones the slots s with s
	// mod World == Rank.
	Shard Shard
}

// MaxRows is the table's row capacity on this rank (OneHot: the rows of
// the slots the rank holds).
func (cfg EmbeddingConfig) MaxRows() int {
	if cfg.Kind == LocalizedOneHot {
		var n int64
		for s, sz := range cfg.SlotSizes {
			if cfg.Shard.OwnsSlot(s) {
				n += sz
			}
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

// Hash rows start in U(−hashBound, hashBound) (HugeCTR's default for
// DistributedSlot tables and LocalizedHash tables without slot sizes).
const hashBound = 0.05

// SparseEmbedding looks keys up in an embedding table and pools each
// (sample, slot) bag: output [B, Slots·VecSize].
//
// Sharded (Cfg.Shard.World > 1): B is the global batch and the input the
// global batch's keys; the table holds only this rank's rows and the output
// is this rank's partial pooling (foreign keys add zero; Mean divides by the
// whole bag's length, so the ranks' partial outputs sum to the single-rank
// output). The trainer reduces the outputs over the ranks and, in backward,
// gathers the whole [B, Slots·VecSize] gradient into the output's Grad;
// Backward then aggregates it over this rank's rows only.
//
// Initial rows (docs/LAYERS.md, tensor/shard.go): a hash row is
// initialised when a training Forward inserts its key, from the seed and
// the key alone (InitHashRows), so it is the same whatever row or rank it
// lands on; a one-hot row from the seed and its global row. Rows a model
// file loaded keep the file's values.
type SparseEmbedding struct {
	c     *Ctx
	Cfg   EmbeddingConfig
	in    *SparseInput
	out   *Blob
	Table tensor.Tensor // [MaxRows, VecSize] (a one-hot rank without slots: 1 unused row)
	// Hash is the key→row table (hash kinds). Hash.RowKeys[r] is the key of
	// row r for r < Hash.Count[0] (the rows a save writes, in row order).
	Hash tensor.HashTable
	// Sparse gradient of the last Backward: UniqRows[:n], UniqGrad[:n]
	// with n = NumUniq[0] (device-resident).
	UniqRows, UniqGrad, NumUniq tensor.Tensor
	// ZeroRowGrad makes Backward zero UniqGrad first, so its rows past
	// NumUniq hold no stale values (RowGrad).
	ZeroRowGrad bool
	// RowSlots (LocalizedHash only) is the slot each row was inserted
	// from, int32 [MaxRows], −1 for a free row: the smallest slot of the
	// row's key in the training batch that inserted it (HugeCTR's slot_id).
	RowSlots tensor.Tensor
	// Seed keys the initial rows (one draw of the Ctx's source at build,
	// the same on every rank).
	Seed              uint64
	rows              tensor.Tensor
	masked            tensor.Tensor // this rank's keys (SkipKey for others'), sharded hash kinds
	first             tensor.Tensor // Count before the inserting lookup
	slotBound         tensor.Tensor // per-slot initial bounds (LocalizedHash with slot sizes)
	slotOff, slotSize tensor.Tensor
	ownedSlots        []int
	blocks            []rowBlock // OneHot: the owned slots' rows, in slot order
}

// rowBlock is one owned one-hot slot: global rows [global, global+n) are
// local rows [local, local+n).
type rowBlock struct{ global, local, n int64 }

// NewSparseEmbedding builds the layer for batches of batch samples (the
// global batch when sharded).
func NewSparseEmbedding(c *Ctx, cfg EmbeddingConfig, in *SparseInput, batch int) (*SparseEmbedding, error) {
	if cfg.VecSize <= 0 || cfg.Slots <= 0 || cfg.MaxNNZ < 0 || batch <= 0 {
		return nil, shapeErr("SparseEmbedding", "vec %d slots %d max nnz %d batch %d", cfg.VecSize, cfg.Slots, cfg.MaxNNZ, batch)
	}
	if err := cfg.Shard.check("SparseEmbedding"); err != nil {
		return nil, err
	}
	if cfg.Kind == LocalizedOneHot && len(cfg.SlotSizes) != cfg.Slots {
		return nil, shapeErr("SparseEmbedding", "OneHot needs %d slot sizes, got %d", cfg.Slots, len(cfg.SlotSizes))
	}
	rows := cfg.MaxRows()
	if rows < 0 || rows > math.MaxInt32 || rows == 0 && (cfg.Kind != LocalizedOneHot || !cfg.Shard.Sharded()) {
		return nil, fmt.Errorf("SparseEmbedding: %d rows (workspace %v MB, vec %d): %w", rows, cfg.WorkspaceMB, cfg.VecSize, tensor.ErrShape)
	}
	n := max(cfg.MaxNNZ, 1)
	l := &SparseEmbedding{c: c, Cfg: cfg, in: in, out: c.Blob(batch, cfg.Slots*cfg.VecSize),
		Table: c.alloc(max(rows, 1), cfg.VecSize), rows: c.BE.Alloc(tensor.Int32, n),
		UniqRows: c.BE.Alloc(tensor.Int32, n), UniqGrad: c.alloc(n, cfg.VecSize), NumUniq: c.BE.Alloc(tensor.Int32, 1),
		Seed: c.Rand.Uint64()}
	for s := range cfg.Slots {
		if cfg.Kind == DistributedHash || cfg.Shard.OwnsSlot(s) {
			l.ownedSlots = append(l.ownedSlots, s)
		}
	}
	if cfg.Kind == LocalizedOneHot {
		l.initOneHot(rows)
		return l, nil
	}
	l.Hash = tensor.NewHashTable(c.BE, rows)
	l.Hash.Sharded = cfg.Shard.Sharded()
	l.first = c.BE.Alloc(tensor.Int32, 1)
	if l.Hash.Sharded {
		l.masked = c.BE.Alloc(tensor.Int64, n)
	}
	if cfg.Kind == LocalizedHash {
		l.RowSlots = c.BE.Alloc(tensor.Int32, rows)
		c.BE.Fill(l.RowSlots, -1)
		if len(cfg.SlotSizes) == cfg.Slots {
			b := make([]float64, cfg.Slots)
			for s, sz := range cfg.SlotSizes {
				b[s] = math.Sqrt(1 / float64(max(sz, 1)))
			}
			l.slotBound = c.alloc(cfg.Slots)
			c.upload(l.slotBound, b)
		}
	}
	return l, nil
}

// initOneHot lays out the slots this rank holds (local offsets: prefix sums
// over them; −1 for the others) and uploads their initial rows, each from
// its global row: slot s's rows are U(±√(1/slot_size)).
func (l *SparseEmbedding) initOneHot(rows int) {
	c, cfg := l.c, l.Cfg
	v := cfg.VecSize
	l.slotOff, l.slotSize = c.BE.Alloc(tensor.Int64, cfg.Slots), c.BE.Alloc(tensor.Int64, cfg.Slots)
	off := make([]int64, cfg.Slots)
	var f32 []float32
	var f64 []float64
	if c.DT == tensor.Float64 {
		f64 = make([]float64, max(rows, 1)*v)
	} else {
		f32 = make([]float32, max(rows, 1)*v)
	}
	var global, local int64
	for s, sz := range cfg.SlotSizes {
		if !cfg.Shard.OwnsSlot(s) {
			off[s] = -1
			global += sz
			continue
		}
		off[s] = local
		l.blocks = append(l.blocks, rowBlock{global, local, sz})
		a := math.Sqrt(1 / float64(max(sz, 1)))
		for k := range sz {
			g, r := global+k, int(local+k)
			if f64 != nil {
				tensor.InitRow64(f64[r*v:r*v+v], l.Seed, tensor.InitTagOneHot, g, a)
			} else {
				tensor.InitRow32(f32[r*v:r*v+v], l.Seed, tensor.InitTagOneHot, g, a)
			}
		}
		global += sz
		local += sz
	}
	c.BE.Upload(l.slotOff, off)
	c.BE.Upload(l.slotSize, cfg.SlotSizes)
	if f64 != nil {
		c.BE.Upload(l.Table, f64)
	} else {
		c.BE.Upload(l.Table, f32)
	}
}

// Forward maps this batch's keys to rows (inserting new keys while
// training, then initialising their rows from their keys) and pools them.
// A sharded hash table first masks the keys of other ranks (row −1).
func (l *SparseEmbedding) Forward(p Pass) {
	keys, rows := l.in.Keys.Prefix(l.in.NNZ), l.rows.Prefix(l.in.NNZ)
	be := l.c.BE
	if l.Cfg.Kind == LocalizedOneHot {
		be.SlotRows(rows, keys, l.in.Offsets, l.slotOff, l.slotSize)
	} else {
		if l.Hash.Sharded {
			m := l.masked.Prefix(l.in.NNZ)
			be.MaskKeys(m, keys, l.in.Offsets, l.Cfg.Slots, l.Cfg.Shard.Rank, l.Cfg.Shard.World, l.Cfg.Kind == LocalizedHash)
			keys = m
		}
		if p.Training {
			be.Copy(l.first, l.Hash.Count)
		}
		be.HashLookup(l.Hash, keys, rows, p.Training)
		if p.Training {
			if !l.RowSlots.IsZero() {
				be.RecordSlots(l.RowSlots, rows, l.in.Offsets, l.Cfg.Slots)
			}
			be.InitHashRows(l.Table, l.Hash, l.first, l.Seed, hashBound, l.RowSlots, l.slotBound)
		}
	}
	be.EmbeddingBag(l.out.Value, l.Table, rows, l.in.Offsets, l.Cfg.Combiner)
}

// Backward aggregates the output gradient per distinct row into UniqRows,
// UniqGrad and NumUniq (this rank's rows only when sharded).
func (l *SparseEmbedding) Backward(Pass) {
	if l.ZeroRowGrad {
		l.c.BE.Fill(l.UniqGrad, 0)
	}
	l.c.BE.EmbeddingBagGrad(l.UniqRows, l.UniqGrad, l.NumUniq, l.out.Grad, l.rows.Prefix(l.in.NNZ), l.in.Offsets, l.Cfg.Combiner)
}

// RowGrad is the unique-row gradient the last Backward wrote (UniqGrad,
// float32 [MaxNNZ, VecSize]): the rows past NumUniq[0] are zero when the
// Backward ran with ZeroRowGrad set, so a check of the whole tensor (the
// fp16 overflow guard) sees this step's values only.
func (l *SparseEmbedding) RowGrad() tensor.Tensor { return l.UniqGrad }

// Params returns nothing: the table is updated sparsely from UniqGrad.
func (l *SparseEmbedding) Params() []Param { return nil }

// Outputs returns [B, Slots·VecSize].
func (l *SparseEmbedding) Outputs() []*Blob { return []*Blob{l.out} }

// RowKeys is the hash table's row → key map, int64 [MaxRows]: the key of
// row r for r < Hash.Count[0] (EmptyKey beyond); the zero Tensor for
// OneHot.
func (l *SparseEmbedding) RowKeys() tensor.Tensor { return l.Hash.RowKeys }

// OwnedSlots lists the slots whose keys this rank's table holds, ascending:
// every slot for DistributedHash (its keys are sharded, not its slots) and
// an unsharded table, s mod World == Rank for the Localized kinds.
func (l *SparseEmbedding) OwnedSlots() []int { return l.ownedSlots }

// GlobalRows (OneHot) returns the global row, the key of HugeCTR's model
// file, of each local row of the table, ascending (a new slice): the owned
// slots' rows in slot order. One rank holds every row (GlobalRows()[r] =
// r); a rank without slots holds none (its Table's single row is unused).
// nil for hash kinds.
func (l *SparseEmbedding) GlobalRows() []int64 {
	if l.Cfg.Kind != LocalizedOneHot {
		return nil
	}
	var n int64
	for _, b := range l.blocks {
		n += b.n
	}
	g := make([]int64, 0, n)
	for _, b := range l.blocks {
		for k := range b.n {
			g = append(g, b.global+k)
		}
	}
	return g
}

// LocalRow (OneHot) is the local row of global row g, or −1 when another
// rank holds it, g is beyond the slots or the table is a hash table.
func (l *SparseEmbedding) LocalRow(g int64) int {
	i, _ := slices.BinarySearchFunc(l.blocks, g, func(b rowBlock, g int64) int {
		switch {
		case g < b.global:
			return 1
		case g >= b.global+b.n:
			return -1
		}
		return 0
	})
	if i == len(l.blocks) || g < l.blocks[i].global || g >= l.blocks[i].global+l.blocks[i].n {
		return -1
	}
	return int(l.blocks[i].local + g - l.blocks[i].global)
}
