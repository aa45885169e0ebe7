package tensor

import "math"

// Activation selects an elementwise nonlinearity.
type Activation uint8

// Activations. ELU uses the alpha argument of Act/ActGrad/BiasAct:
// y = x (x > 0), alpha·(eˣ−1) (x ≤ 0).
const (
	Identity Activation = iota
	ReLU
	Sigmoid
	ELU
)

// Combiner pools the rows of one (sample, slot) bag (SPEC §8): Sum; Mean =
// sum/nnz for nnz > 1, the row itself for nnz = 1, zeros for nnz = 0.
type Combiner uint8

// Combiners.
const (
	Sum Combiner = iota
	Mean
)

// EmptyKey marks a free slot of a HashTable; it cannot be stored as a key.
const EmptyKey int64 = -1 << 63

// HashTable is an open-addressing key→row map living on the backend: Keys
// int64 [capacity] (EmptyKey = free), Rows int32 [capacity], Count int32 [1]
// (rows handed out so far). Capacity is a power of two ≥ 2·MaxRows, probing
// is linear from a 64-bit mix of the key, so the same table works from CUDA
// threads with atomicCAS on Keys. Build one with NewHashTable.
//
// RowKeys int64 [MaxRows] (optional; NewHashTable allocates it, EmptyKey
// for a free row) is the inverse map, row → key, written by every insert, so a save reads the keys
// in row order without scanning Keys. Sharded marks one rank's part of a
// sharded table (shard.go): HashLookup maps SkipKey to row −1 there and never
// inserts it; an unsharded table refuses SkipKey like EmptyKey.
type HashTable struct {
	Keys, Rows, Count Tensor
	RowKeys           Tensor
	MaxRows           int
	Sharded           bool
}

// NewHashTable allocates an empty table for at most maxRows rows.
func NewHashTable(be Backend, maxRows int) HashTable {
	c := 16
	for c < 2*maxRows {
		c <<= 1
	}
	h := HashTable{
		Keys:    be.Alloc(Int64, c),
		Rows:    be.Alloc(Int32, c),
		Count:   be.Alloc(Int32, 1),
		RowKeys: be.Alloc(Int64, max(maxRows, 1)),
		MaxRows: maxRows,
	}
	be.Fill(h.Keys, float64(EmptyKey))
	be.Fill(h.RowKeys, float64(EmptyKey))
	return h
}

// HashSlot is the first probe position of key in a table of capacity
// 2^k (mask = capacity−1): the splitmix64 finalizer of the key.
func HashSlot(key int64, mask uint64) uint64 {
	z := uint64(key)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return z & mask
}

// OptKind is an optimizer (SPEC §8).
type OptKind uint8

// Optimizers.
const (
	SGD OptKind = iota
	MomentumSGD
	Nesterov
	AdaGrad
	Adam
)

// UpdateType is how a sparse (embedding) update treats rows not in the batch
// (SPEC §8).
type UpdateType uint8

// Update types. Global and LazyGlobal equal Local for SGD and AdaGrad, whose
// update of a zero-gradient row is the identity.
const (
	Local UpdateType = iota
	Global
	LazyGlobal
)

// Schedule is the learning-rate schedule of SPEC §8, evaluated on the device
// side too (LazyGlobal catch-up needs the rates of skipped steps).
type Schedule struct {
	BaseLR      float64
	WarmupSteps int64
	DecayStart  int64
	DecaySteps  int64
	DecayPower  float64
	EndLR       float64
}

// LR is the rate of step n (n ≥ 1), SPEC §8.
func (s Schedule) LR(n int64) float64 {
	switch {
	case n <= s.WarmupSteps:
		return s.BaseLR * float64(n) / float64(s.WarmupSteps)
	case s.DecayStart == 0:
		return s.BaseLR
	case n <= s.DecayStart:
		return s.BaseLR
	case n <= s.DecayStart+s.DecaySteps:
		f := float64(s.DecayStart+s.DecaySteps-n) / float64(s.DecaySteps)
		return max(s.BaseLR*math.Pow(f, s.DecayPower), s.EndLR)
	}
	return s.EndLR
}

// OptParams are the hyper-parameters of one update call. Step is t (1-based,
// the step being applied; Adam's bias correction uses it), LR the rate of
// that step. Gradients are divided by LossScale (0 means 1).
type OptParams struct {
	Kind      OptKind
	Update    UpdateType
	LR        float64
	Step      int64
	Momentum  float64 // μ of MomentumSGD and Nesterov
	Beta1     float64
	Beta2     float64
	Epsilon   float64
	LossScale float64
	// Schedule gives LazyGlobal the rates of the steps a row skipped.
	Schedule Schedule
}

// BNParams configure BatchNorm: running = (1−Factor)·running + Factor·batch
// (the running variance uses the unbiased batch variance), y =
// γ(x−μ)/√(σ²+Eps)+β with the biased batch variance.
type BNParams struct {
	Factor float64
	Eps    float64
}

// Backend is the set of batched operations the trainer runs on. Tensors
// passed to one Backend must have been allocated by it. Unless stated,
// operations treat tensors as [Rows, Cols] matrices, operands of one call
// must not alias unless stated, floating operands share one float dtype, and
// a scalar parameter (float64) is converted to that dtype before use.
type Backend interface {
	// Name identifies the backend ("cpu", "cuda:0").
	Name() string
	// Err returns the first error of any operation so far (sticky).
	Err() error
	// Sync waits for issued operations and returns Err.
	Sync() error

	// Alloc returns a zeroed tensor.
	Alloc(dt DType, shape ...int) Tensor
	// Free releases t's storage; t must not be used again.
	Free(t Tensor)
	// Upload copies a host slice ([]float32, []float64, []int32, []int64 or
	// []uint32 matching dst.DType, length dst.Len()) into dst.
	Upload(dst Tensor, src any)
	// Download copies src into a host slice of its dtype and length; it
	// synchronizes and returns Err.
	Download(dst any, src Tensor) error
	// Fill sets every element to v (converted to t's dtype).
	Fill(t Tensor, v float64)
	// Copy copies src into dst (same dtype and length).
	Copy(dst, src Tensor)
	// Convert casts src into dst elementwise (same length, any dtypes; Go
	// conversion rules), e.g. uint32 keys widened to int64 on the device.
	Convert(dst, src Tensor)

	// Gemm: C = alpha·op(A)·op(B) + beta·C, row-major, op transposes when
	// asked. C must not alias A or B.
	Gemm(transA, transB bool, alpha float64, a, b Tensor, beta float64, c Tensor)
	// AddBias: y[r,c] += bias[c].
	AddBias(y, bias Tensor)
	// ColSum: dst[c] = beta·dst[c] + Σ_r x[r,c] (bias gradient).
	ColSum(dst Tensor, beta float64, x Tensor)
	// BiasAct: y = act(x + bias) per row; y may alias x (fused
	// InnerProduct epilogue).
	BiasAct(a Activation, alpha float64, y, x, bias Tensor)
	// Act: y = act(x); y may alias x.
	Act(a Activation, alpha float64, y, x Tensor)
	// ActGrad: dx = dy·act'(x), using y = act(x) where cheaper (ReLU and
	// Sigmoid read y, ELU reads x); dx may alias dy.
	ActGrad(a Activation, alpha float64, dx, dy, x, y Tensor)
	// Axpby: dst = a·x + b·y elementwise; y may be the zero Tensor (then b
	// is ignored); dst may alias x or y.
	Axpby(dst Tensor, a float64, x Tensor, b float64, y Tensor)
	// Mul: dst = beta·dst + x⊙y elementwise.
	Mul(dst Tensor, beta float64, x, y Tensor)
	// RowScale: dst[r,c] = beta·dst[r,c] + x[r,c]·s[r] (s has Rows elements).
	RowScale(dst Tensor, beta float64, x, s Tensor)
	// RowDot: dst[r] = Σ_c x[r,c]·y[r,c].
	RowDot(dst, x, y Tensor)
	// CopyCols: dst[r, dc+j] = beta·dst[r, dc+j] + src[r, sc+j] for j <
	// width: the block copy behind Concat, Slice and Reshape-with-slots.
	CopyCols(dst Tensor, dstCol int, src Tensor, srcCol, width int, beta float64)
	// Reduce sees src as [outer, n, inner] and sets dst[o,i] = scale·Σ_k
	// src[o,k,i].
	Reduce(dst, src Tensor, outer, n, inner int, scale float64)
	// Broadcast sees dst as [outer, n, inner]: dst[o,k,i] = beta·dst[o,k,i]
	// + scale·src[o,i] (the backward of Reduce).
	Broadcast(dst Tensor, beta float64, src Tensor, outer, n, inner int, scale float64)
	// SumSquares: out[0] += scale·Σ x², and SumAbs: out[0] += scale·Σ|x|
	// (regularizer losses).
	SumSquares(out Tensor, x Tensor, scale float64)
	SumAbs(out Tensor, x Tensor, scale float64)
	// SignAxpy: dst += a·sign(x) (L1 gradient).
	SignAxpy(dst Tensor, a float64, x Tensor)

	// HashLookup maps int64 keys to int32 rows. With insert, keys not in the
	// table get new rows: the distinct missing keys of this call in ascending
	// key order receive Count, Count+1, … (deterministic on every backend);
	// ErrTableFull when Count would exceed MaxRows. Without insert a missing
	// key maps to row −1. Inserts write RowKeys[row] = key when RowKeys is
	// present. EmptyKey is ErrRange; so is SkipKey unless h.Sharded (then
	// its row is −1).
	HashLookup(h HashTable, keys, rows Tensor, insert bool)
	// SlotRows (one-hot embedding): rows[j] = keys[j] + slotOffsets[s] where
	// s = bag(j) mod numSlots for CSR offsets; ErrRange unless 0 ≤ keys[j] <
	// slotSizes[s]. slotOffsets and slotSizes are int64 [numSlots]. A
	// negative slotOffsets[s] marks a slot another rank holds: its keys are
	// range-checked the same and get row −1.
	SlotRows(rows, keys, offsets, slotOffsets, slotSizes Tensor)
	// RecordSlots notes the slot each row is first seen in (a Localized
	// embedding's slot_id): rowSlots int32 [table rows] holds −1 for a row
	// not yet seen; for the rows of this call (positions j of rows under
	// CSR offsets, slot bag(j) mod numSlots) still at −1 it becomes the
	// smallest slot the row occurs in within this call (deterministic on
	// every backend). Rows < 0 are skipped; ErrRange for a row beyond
	// rowSlots.
	RecordSlots(rowSlots, rows, offsets Tensor, numSlots int)
	// EmbeddingBag: out[bag, :] = combine(table[rows[j], :] for j in bag),
	// bags given by CSR offsets int32 [bags+1]; out is [bags, V] (the same
	// bytes as [B, S·V]). Rows < 0 (missing keys) contribute zeros.
	EmbeddingBag(out, table, rows, offsets Tensor, c Combiner)
	// EmbeddingBagGrad aggregates the gradient of EmbeddingBag per distinct
	// row: it sorts the occurrences by row and segment-reduces, writing the
	// distinct rows ascending to uniqRows int32 [≥nnz], their summed
	// gradients to uniqGrad [≥nnz, V] and their count to numUniq int32 [1].
	EmbeddingBagGrad(uniqRows, uniqGrad, numUniq, dOut, rows, offsets Tensor, c Combiner)

	// Interaction (DLRM dot, SPEC §8): x0 [B,d], emb [B, n·d] → out [B,
	// d + n(n+1)/2 + 1].
	Interaction(out, x0, emb Tensor)
	// InteractionGrad writes dx0 and demb from dOut.
	InteractionGrad(dx0, demb, dOut, x0, emb Tensor)
	// FmOrder2: in [B, f·k] → out [B, k], out = ½((Σ_i v_i)² − Σ_i v_i²).
	FmOrder2(out, in Tensor)
	// FmOrder2Grad: din[b,i,j] = dOut[b,j]·(Σ_i' v_i'j − v_ij).
	FmOrder2Grad(din, dOut, in Tensor)
	// BatchNorm normalizes each column over the batch (training: batch
	// statistics, saved to saveMean/saveInvStd and folded into the running
	// ones; inference: running statistics).
	BatchNorm(p BNParams, training bool, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd Tensor)
	// BatchNormGrad writes dx and dgamma, dbeta (overwritten).
	BatchNormGrad(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd Tensor)
	// Dropout: y = x·keep/(1−rate) with keep drawn from Philox-4x32-10
	// (PhiloxUniform(seed, counter, i) ≥ rate for element i).
	Dropout(y, x Tensor, rate float64, seed, counter uint64)
	// DropoutGrad: dx = dy·keep/(1−rate) with the same mask.
	DropoutGrad(dx, dy Tensor, rate float64, seed, counter uint64)
	// Softmax over each row; SoftmaxGrad: dx = y⊙(dy − Σ dy⊙y).
	Softmax(y, x Tensor)
	SoftmaxGrad(dx, dy, y Tensor)

	// BCE (SPEC §8, fused sigmoid) over logits x [B,T] and labels y [B,T]
	// with optional per-column weights w [T]: loss[0] = (1/B)·Σ w_t·bce,
	// dx = gradScale·w_t·(σ(x)−y). loss is a [1] tensor (overwritten).
	BCE(loss, dx, x, y, w Tensor, gradScale float64)
	// MaskedBCE is BCE with HugeCTR MultiCrossEntropyLoss's label mask
	// (loss.cu MultiCrossEntropy_Kernel): an entry whose label is below
	// −0.5 adds 0 to the loss and gets dx 0. Masked entries still count in
	// the mean: loss[0] = (1/B)·Σ over unmasked entries of w_t·bce.
	MaskedBCE(loss, dx, x, y, w Tensor, gradScale float64)
	// SoftmaxCE: x [B,C] logits, labels [B,1] class indices (float): loss[0]
	// = mean −log softmax(x)[label], dx = gradScale·(softmax(x) − onehot).
	SoftmaxCE(loss, dx, x, labels Tensor, gradScale float64)

	// DenseUpdate applies one optimizer step to w from g with state s1
	// (Momentum m, Nesterov accumulator, AdaGrad sum, Adam m) and s2 (Adam
	// v); unused states may be zero Tensors.
	DenseUpdate(p OptParams, w, g, s1, s2 Tensor)
	// SparseUpdate applies one step to the rows of an embedding table from
	// EmbeddingBagGrad's output, per p.Update. lastStep (int32 [table rows],
	// LazyGlobal only) holds the step each row was last brought up to date.
	SparseUpdate(p OptParams, table, s1, s2, lastStep, uniqRows, uniqGrad, numUniq Tensor)
	// LazyFlush brings every row of a LazyGlobal Adam table up to step
	// p.Step (the skipped zero-gradient steps, as SparseUpdate's catch-up)
	// so the table equals Global's, e.g. before saving; a no-op for other
	// optimizers.
	LazyFlush(p OptParams, table, s1, s2, lastStep Tensor)

	// AUC is the exact ROC AUC of scores against labels (labels as
	// weights, ties ½); it synchronizes.
	AUC(scores, labels Tensor) (float64, error)

	// SeqOps: attention, GRU, LayerNorm, sequence mask (seq.go).
	SeqOps
	// ShardOps: key masks and key-derived initial rows of sharded
	// embedding tables (shard.go).
	ShardOps
}
