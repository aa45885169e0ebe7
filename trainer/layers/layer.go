// Package layers implements the trainer's layers (HugeCTR's dense layers,
// losses and sparse embeddings) as forward/backward passes over a
// tensor.Backend, so the same code trains on the CPU and on a GPU.
//
// Data flow: a layer reads input Blobs and owns its output Blobs. Forward
// fills the outputs' Value; Backward reads the outputs' Grad and overwrites
// the inputs' Grad (not accumulates: HugeCTR's graph gives every tensor one
// consumer and inserts Slice layers for fan-out, SPEC HUGECTR_GRAPH §1.5)
// and the layer's parameter gradients. Inputs whose Grad is the zero Tensor
// (data, labels) get no gradient. Losses produce a [1] loss Blob and compute
// their input gradient directly, scaled by 1/global batch (SPEC §8).
//
// HugeCTR layer → constructor:
//
//	InnerProduct, FusedInnerProduct   NewInnerProduct (act Identity / ReLU)
//	ReLU, Sigmoid, ELU                NewActivation
//	Concat, Slice, Reshape            NewConcat, NewSlice, NewReshape (selected slots)
//	Interaction                       NewInteraction (SPEC §8 layout and pad)
//	MultiCross                        NewMultiCross (projection_dim 0 = DCN v1)
//	MLP                               NewMLP (a bias per layer in the file)
//	PReLU_Dice, Cast                  NewDice, NewCast (tensor.MiscOps)
//	FusedReshapeConcat(General)       NewFusedReshapeConcat(General)
//	FusedInnerProduct Head/Body/Tail,
//	Interaction's gradient top        NewInnerProduct, NewInteraction + WithAux
//	Dropout, BatchNorm                NewDropout, NewBatchNorm
//	Add, Sub, ElementwiseMultiply     NewElementwise
//	WeightMultiply, FmOrder2          NewWeightMultiply, NewFmOrder2
//	ReduceSum, ReduceMean, Scale      NewReduce, NewScale
//	Softmax                           NewSoftmax
//	Softmax with a mask (2 bottoms)   NewMaskedSoftmax
//	LayerNorm, MatrixMultiply         NewLayerNorm, NewMatrixMultiply
//	SequenceMask, MultiHeadAttention  NewSequenceMask, NewMultiHeadAttention
//	GRU, Concat (3-D, axis 2)         NewGRU, NewConcat3D (seq.go)
//	BinaryCrossEntropyLoss,
//	CrossEntropyLoss,
//	MultiCrossEntropyLoss             NewLoss (+ NewRegularizer for L1/L2)
//	DistributedSlotSparseEmbeddingHash,
//	LocalizedSlotSparseEmbeddingHash,
//	LocalizedSlotSparseEmbeddingOneHot NewSparseEmbedding
//
// Initialization: the trainable constructors take HugeCTR's
// initializer_types (Init values from the graph's weight_init, bias_init,
// gamma_init, beta_init keys) and draw each weight as HugeCTR's layer does
// (InnerProductFiller, MultiCrossFiller, BatchNormFiller,
// WeightMultiplyFiller; docs/INITIALIZERS.md), on the host from the Ctx's
// seeded source, so a seed gives the same weights on every backend.
//
// Fused kernels: on a backend with tensor.FusedDense (the GPU), InnerProduct
// and MLP compute their weight and bias gradients in one GEMM on the
// backend's side stream, and a chained InnerProduct (ChainReLU; the model
// chains InnerProduct → ReLU → InnerProduct, folding the ReLU layer into a
// Folded pass-through) writes its producer's ReLU and bias gradient from
// the ReLU mask the producer's forward recorded: that backward pass writes
// the producer's output gradient and bias gradient, not only its own input's.
//
// Precision: a Ctx fixes the dtype; Float32 trains, Float64 runs the same
// layers as the reference for the finite-difference gradient checks in this
// package's tests. Half precision (docs/PRECISION.md): with Ctx.Act set to
// Float16 or BFloat16, the layers built next store their activations, their
// gradients and activation-like scratch in it, while parameters and their
// gradients stay in DT (float32 masters); the GEMM layers (InnerProduct,
// MLP, MultiCross) then give their weights a half operand copy
// (Param.Half) that the model refreshes after every change of the masters
// (RefreshHalf). Convert joins a half region to a float32 one.
package layers

import (
	"fmt"
	"math/rand/v2"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Blob is an activation and its gradient (same shape; Grad may be zero for
// inputs that need none).
type Blob struct {
	Value, Grad tensor.Tensor
}

// Param is a trainable dense tensor and its gradient.
type Param struct {
	Name        string
	Value, Grad tensor.Tensor
	// Half is the weight's half-precision operand copy (Ctx.Act's dtype)
	// that a half layer's GEMMs read; the zero Tensor: none (the GEMMs
	// read Value). It is valid after RefreshHalf: the model refreshes it
	// after initialisation, every update and every load of Value. A half
	// InnerProduct's bias has one on a backend with fused kernels (their
	// epilogues add a bias of the output's half type).
	Half tensor.Tensor
	// Regularize marks weights the L1/L2 regularizer applies to
	// (InnerProduct W; not biases).
	Regularize bool
}

// Operand is the tensor a GEMM reads for the weight: Half when the layer
// has a half copy, else Value.
func (p Param) Operand() tensor.Tensor {
	if !p.Half.IsZero() {
		return p.Half
	}
	return p.Value
}

// RefreshHalf rewrites the half copies of ps from their float32 masters
// (Convert; Params without a copy are skipped) and returns how many it
// rewrote.
func RefreshHalf(be tensor.Backend, ps []Param) int {
	n := 0
	for _, p := range ps {
		if !p.Half.IsZero() {
			h := p.Half
			if h.Len() != p.Value.Len() { // zero-padded rows below the master's (InnerProduct)
				h = h.Prefix(p.Value.Len()).Reshape(p.Value.Shape...)
			}
			be.Convert(h, p.Value)
			n++
		}
	}
	return n
}

// Pass describes one forward/backward: Training selects batch statistics
// (BatchNorm) and dropout; Iter keys the dropout mask (same Iter, same mask).
type Pass struct {
	Training bool
	Iter     uint64
}

// Layer is one node of the network.
type Layer interface {
	Forward(p Pass)
	Backward(p Pass)
	Params() []Param
	Outputs() []*Blob
}

// Ctx carries what construction needs: the backend, the dtype and the
// initializer's random source.
type Ctx struct {
	BE tensor.Backend
	DT tensor.DType
	// Act is the dtype of the activations and their gradients (Blob) and
	// of activation-like scratch of the layers built next: Float16 or
	// BFloat16 in a half region; Invalid (the zero value): DT. The model
	// sets it per layer (docs/PRECISION.md).
	Act  tensor.DType
	Rand *rand.Rand
	// Shard is the rank the layers are built for (the zero value: one
	// rank); the trainer sets it before building. Dropout draws the mask
	// of its rank's samples of the global batch.
	Shard Shard
	// nextID numbers layers for dropout seeds.
	nextID uint64
}

// NewCtx returns a construction context.
func NewCtx(be tensor.Backend, dt tensor.DType, seed uint64) *Ctx {
	return &Ctx{BE: be, DT: dt, Rand: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// ActDT is the activation dtype: Act, or DT when Act is unset.
func (c *Ctx) ActDT() tensor.DType {
	if c.Act == tensor.Invalid {
		return c.DT
	}
	return c.Act
}

// Half reports whether the layers built next run in half precision.
func (c *Ctx) Half() bool { return c.ActDT().IsHalf() }

// Blob allocates a blob with a gradient, in the activation dtype.
func (c *Ctx) Blob(shape ...int) *Blob {
	dt := c.ActDT()
	return &Blob{Value: c.BE.Alloc(dt, shape...), Grad: c.BE.Alloc(dt, shape...)}
}

// alloc allocates a parameter-like tensor (DT); act an activation-like
// one (ActDT).
func (c *Ctx) alloc(shape ...int) tensor.Tensor { return c.BE.Alloc(c.DT, shape...) }
func (c *Ctx) act(shape ...int) tensor.Tensor   { return c.BE.Alloc(c.ActDT(), shape...) }

// weight allocates a GEMM weight: its master and gradient in DT, and in a
// half region its half operand copy.
func (c *Ctx) weight(name string, reg bool, shape ...int) Param {
	p := Param{Name: name, Value: c.alloc(shape...), Grad: c.alloc(shape...), Regularize: reg}
	if c.Half() {
		p.Half = c.act(shape...)
	}
	return p
}

// upload writes float64 host values into a tensor of the context's dtype.
func (c *Ctx) upload(t tensor.Tensor, v []float64) {
	if c.DT == tensor.Float64 {
		c.BE.Upload(t, v)
		return
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	c.BE.Upload(t, f)
}

// Normal fills t with N(0, σ²).
func (c *Ctx) Normal(t tensor.Tensor, sigma float64) {
	v := make([]float64, t.Len())
	for i := range v {
		v[i] = c.Rand.NormFloat64() * sigma
	}
	c.upload(t, v)
}

// Uniform fills t with U(lo, hi).
func (c *Ctx) Uniform(t tensor.Tensor, lo, hi float64) {
	v := make([]float64, t.Len())
	for i := range v {
		v[i] = lo + (hi-lo)*c.Rand.Float64()
	}
	c.upload(t, v)
}

func shapeErr(layer string, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", layer, tensor.ErrShape, fmt.Sprintf(format, args...))
}

func needBatch(layer string, bs ...*Blob) error {
	for _, b := range bs {
		if b == nil || b.Value.IsZero() {
			return shapeErr(layer, "missing input")
		}
		if b.Value.Rows() != bs[0].Value.Rows() {
			return shapeErr(layer, "batch sizes %v and %v differ", bs[0].Value, b.Value)
		}
	}
	return nil
}
