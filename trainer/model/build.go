package model

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ctrkit/ctrkit/internal/progress"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/input"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/optim"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// ErrUnsupported reports a model ctrkit's trainer cannot build (a layer type
// or optimizer it does not implement); it unwraps to graph.ErrUnsupported.
var ErrUnsupported = graph.ErrUnsupported

// Options configure Build.
type Options struct {
	// BatchSize is the network's batch size (required).
	BatchSize int
	// Seed drives the initializers and dropout.
	Seed uint64
	// Optimizer is the model optimizer with its learning rate and schedule;
	// nil takes cfg.Optimizer, else graph.DefaultOptimizer.
	Optimizer *graph.Optimizer
	// SlotSizeArray is the data's slot_size_array over all slots of the
	// file (SPEC §3.3): the device adds its prefix sums to the keys of
	// hash embeddings' inputs and checks every key against its slot's
	// size; OneHot embeddings read the keys slot-local. Empty: keys are
	// used as stored.
	SlotSizeArray []int64
	// LossScale is the mixed-precision loss scale (HugeCTR's scaler; 0
	// means 1): the loss gradient is multiplied by it and the optimizers
	// divide it out. A power of two (HugeCTR allows 128, 256, 512, 1024)
	// cancels exactly in float32: training equals training without it.
	LossScale float64
	// MixedPrecision is HugeCTR's use_mixed_precision: Cast layers round
	// to binary16 values (CastLayer<float, __half>); else they are exact.
	MixedPrecision bool
	// Precision is the arithmetic (docs/PRECISION.md): FP32 and TF32
	// train in float32 (TF32 is the backend's GEMM mode, OpenBackend);
	// FP16 and BF16 run the half-capable layers in half precision with
	// float32 master weights, on a backend that stores half tensors (the
	// GPU; the CPU refuses them). FP16 checks every step's gradients for
	// overflow (tensor.OverflowGuard) and skips the steps that overflow.
	Precision graph.Precision
	// LossWeights weight the losses of a multi-task model by the name of
	// the label each loss reads (HugeCTR compile(loss_names, loss_weights);
	// the graph JSON holds none): the model's loss is Σ w·loss, trained as
	// such. Unnamed losses weigh 1.
	LossWeights map[string]float64
	// Parallel places the model as one rank of a group (parallel.go); nil:
	// the model trains alone on its backend.
	Parallel *Parallel
	// CUDAGraph runs the training step as a CUDA graph on a backend with
	// graphs (graph.go; HugeCTR's use_cuda_graph, the solver's
	// "cuda_graph"); false trains every step eagerly.
	CUDAGraph bool
}

// Validate reports invalid options.
func (o *Options) Validate() error {
	if o.BatchSize <= 0 {
		return fmt.Errorf("batch size %d must be positive", o.BatchSize)
	}
	if o.LossScale < 0 {
		return fmt.Errorf("loss scale %v < 0", o.LossScale)
	}
	if o.Precision > graph.BF16 {
		return fmt.Errorf("precision %v: want fp32, tf32, fp16 or bf16", o.Precision)
	}
	if o.Precision.Half() && o.Parallel != nil {
		return fmt.Errorf("precision %s trains on one device: a group of ranks trains fp32 or tf32", o.Precision)
	}
	return o.checkParallel()
}

// embedding is one sparse embedding with its input and optimizer.
type embedding struct {
	g      graph.SparseEmbedding
	layer  *layers.SparseEmbedding
	input  int // index into Model.inputs
	opt    *optim.Optimizer
	frozen bool
}

// Model is an executable network on a backend.
type Model struct {
	Graph *graph.Graph // with HugeCTR's automatic slices
	Info  *graph.Info

	be tensor.Backend
	// bar counts the samples of Evaluate and Predict (RunEvaluate,
	// RunPredict); nil: none.
	bar   *progress.Bar
	ctx   *layers.Ctx
	batch int
	feed  *input.Feeder
	// evalPf is the evaluation pipeline of a Fit (kept across its
	// evaluations); nil: each evaluation builds its own.
	evalPf *input.Prefetcher
	embs   []*embedding
	dense  []layers.Layer // one per Graph.Layers entry
	params []layers.Param // dense parameters in file order
	// heads are the outputs: one per loss layer, in layer order, or the
	// inference output of a graph without loss (multitask.go).
	heads      []*head
	predW      int             // prediction width (Σ heads' widths)
	total      *layers.LossSum // several losses or weights ≠ 1; else nil
	lossOut    tensor.Tensor   // the model's [1] loss (zero: inference graph)
	labelSlice layers.Layer    // splits several labels; else nil
	reg        *layers.Regularizer
	opt        *optim.Optimizer
	sched      optim.Schedule
	frozen     bool
	iter       uint64 // training iterations run (dropout counter)
	optCfg     *graph.Optimizer
	half       bool              // Options.MixedPrecision
	prec       graph.Precision   // Options.Precision
	lossScale  float64           // Options.LossScale
	precLine   string            // the precision plan's log line (precision.go)
	guard      *stepGuard        // fp16's overflow guard (precision_step.go); nil: none
	aux        map[string]auxRef // plumbing tops of the fused forms (build_misc.go)
	prof       *profiler         // spans of profiled steps (profile.go); nil: off
	// comm is the rank's communicator (Options.Parallel; nil alone), par
	// the state of the sharded step (parallel.go; nil: the single-device
	// step).
	comm collective.Comm
	par  *parState
	// graph runs training steps as a CUDA graph (graph.go); nil: off.
	graph *stepGraph
}

// Build constructs the network of cfg on be.
func Build(cfg *graph.Config, be tensor.Backend, o Options) (*Model, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	gopt := o.Optimizer
	if gopt == nil {
		gopt = cfg.Optimizer
	}
	if gopt == nil {
		gopt = graph.DefaultOptimizer()
	}
	g := *cfg.Graph
	if err := g.AutoSlice(gopt); err != nil {
		return nil, err
	}
	info, err := g.Infer(gopt)
	if err != nil {
		return nil, err
	}
	if err := checkHostMemory(&g, info, gopt, be, o.BatchSize); err != nil {
		return nil, err
	}
	if o.Precision.Half() && !halfBackend(be) {
		return nil, errCPUHalf(o.Precision)
	}
	m := &Model{Graph: &g, Info: info, be: be, batch: o.BatchSize, optCfg: gopt, half: o.MixedPrecision,
		prec: o.Precision, lossScale: o.LossScale, ctx: layers.NewCtx(be, tensor.Float32, o.Seed)}
	plan := planPrecision(&g, info, o.Precision)
	m.sched = schedule(gopt)
	dcfg, err := optConfig(gopt, o.LossScale)
	if err != nil {
		return nil, err
	}
	if m.opt, err = optim.New(be, dcfg, m.sched); err != nil {
		return nil, err
	}
	m.feed, err = input.NewFeeder(be, o.BatchSize, &g, o.SlotSizeArray)
	if err != nil {
		return nil, err
	}
	if o.Parallel != nil {
		m.comm = o.Parallel.Comm
		if o.sharded() {
			if m.par, err = m.newParState(o.Parallel); err != nil {
				return nil, err
			}
			m.ctx.Shard = layers.Shard{Rank: m.par.rank, World: m.par.world}
		}
	}
	blobs := map[string]*layers.Blob{}
	if err := m.bindLabels(blobs); err != nil {
		return nil, err
	}
	cv := newConverter(m, &plan, blobs) // labels stay float32
	if d := m.denseBlob(); d != nil {
		blobs[g.Input.DenseTop] = d
		cv.outputs(tensor.Float32, d)
	}
	m.ctx.Act = plan.Act // the embeddings' pooled outputs
	for i, ge := range g.Embeddings {
		e, err := m.buildEmbedding(ge, info.Embeddings[i], gopt, o.LossScale)
		if err != nil {
			return nil, fmt.Errorf("embedding %d (%s): %w", i, ge.Top, err)
		}
		m.embs = append(m.embs, e)
		blobs[ge.Top] = e.layer.Outputs()[0]
		cv.outputs(plan.Act, blobs[ge.Top])
		if m.par != nil {
			blobs[ge.Top] = m.par.newExchange(be, e, m.exchangeOf(e)).out
		}
	}
	fz := newFusion(&g, info, be) // fused.go
	for i := range g.Layers {
		gl := g.Layers[i]
		var l layers.Layer
		restore, convs, err := cv.inputs(i, gl, blobs)
		if err == nil {
			if l = fz.build(i, gl, blobs); l == nil {
				l, err = m.buildLayer(gl, info.Layers[i], blobs)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s %v): %w", 1+len(g.Embeddings)+i, gl.Type, gl.Top, err)
		}
		fz.built(i, gl, l, blobs)
		restore()
		if len(convs) > 0 {
			l = &converted{Layer: l, convs: convs}
		}
		m.dense = append(m.dense, l)
		outs := l.Outputs()
		if len(outs) != len(gl.Top) {
			return nil, fmt.Errorf("layer %s: %d outputs for %d tops", gl.Type, len(outs), len(gl.Top))
		}
		for j, t := range gl.Top {
			blobs[t] = outs[j]
		}
		cv.outputs(plan.dtype(i), outs...)
		m.params = append(m.params, l.Params()...)
	}
	m.ctx.Act = tensor.Invalid
	if err := m.finishHeads(blobs, o); err != nil {
		return nil, err
	}
	m.precLine = plan.summary(cv.n)
	if m.par != nil {
		m.finishPar()
	}
	m.opt.AddDense(m.params...)
	m.refreshHalf()
	if o.Precision == graph.FP16 {
		if m.guard, err = newStepGuard(m, o.LossScale); err != nil {
			return nil, err
		}
		for _, e := range m.embs {
			e.layer.ZeroRowGrad = true // the guard checks the whole RowGrad
		}
	}
	if err := be.Sync(); err != nil {
		return nil, fmt.Errorf("building the model on %s: %w", be.Name(), err)
	}
	if o.CUDAGraph {
		m.graph = newStepGraph(m) // graph.go
	}
	return m, nil
}

func schedule(o *graph.Optimizer) optim.Schedule {
	s := optim.DefaultSchedule()
	if o.LearningRate > 0 {
		s.BaseLR = float64(o.LearningRate)
	}
	if o.WarmupSteps > 0 {
		s.WarmupSteps = o.WarmupSteps
	}
	s.DecayStart = o.DecayStart
	if o.DecaySteps > 0 {
		s.DecaySteps = o.DecaySteps
	}
	if o.DecayPower > 0 {
		s.DecayPower = float64(o.DecayPower)
	}
	s.EndLR = float64(o.EndLR)
	return s
}

func optConfig(o *graph.Optimizer, lossScale float64) (optim.Config, error) {
	kinds := map[string]tensor.OptKind{"SGD": tensor.SGD, "MomentumSGD": tensor.MomentumSGD,
		"Nesterov": tensor.Nesterov, "AdaGrad": tensor.AdaGrad, "Adam": tensor.Adam}
	k, ok := kinds[o.Type]
	if !ok {
		return optim.Config{}, fmt.Errorf("%w: optimizer %s", ErrUnsupported, o.Type)
	}
	c := optim.DefaultConfig(k)
	switch o.UpdateType {
	case "Local":
		c.Update = tensor.Local
	case "LazyGlobal":
		c.Update = tensor.LazyGlobal
	default:
		c.Update = tensor.Global
	}
	if k == tensor.Adam {
		c.Beta1, c.Beta2, c.Epsilon = float64(o.Beta1), float64(o.Beta2), float64(o.Epsilon)
	}
	if k == tensor.AdaGrad {
		c.Epsilon, c.InitialAccu = float64(o.Epsilon), float64(o.InitialAccuValue)
	}
	c.Momentum = float64(o.MomentumFactor)
	c.AtomicUpdate = o.AtomicUpdate
	c.LossScale = lossScale
	return c, c.Validate()
}

func (m *Model) buildEmbedding(ge graph.SparseEmbedding, ei graph.EmbeddingInfo, model *graph.Optimizer, lossScale float64) (*embedding, error) {
	in := -1
	for k, s := range m.Graph.Input.Sparse {
		if s.Top == ge.Bottom {
			in = k
		}
	}
	if in < 0 {
		return nil, fmt.Errorf("bottom %q is not a sparse input", ge.Bottom)
	}
	gopt := ge.Optimizer
	if gopt == nil {
		gopt = model
	}
	ocfg, err := optConfig(gopt, lossScale)
	if err != nil {
		return nil, err
	}
	sp := m.Graph.Input.Sparse[in]
	ec := layers.EmbeddingConfig{VecSize: ge.VecSize, Slots: sp.SlotNum, StateCopies: ocfg.StateCopies(),
		MaxNNZ: m.batch * sp.MaxFeatures(), Shard: m.ctx.Shard}
	switch ge.Type {
	case graph.DistributedHash:
		ec.Kind = layers.DistributedHash
	case graph.LocalizedHash:
		ec.Kind = layers.LocalizedHash
		ec.SlotSizes = ge.SlotSizeArray // per-slot initialization
	case graph.LocalizedOneHot, graph.Hybrid:
		// HybridSparseEmbedding on one device is a one-hot table: the
		// frequent/infrequent split only changes multi-GPU communication.
		ec.Kind = layers.LocalizedOneHot
		ec.SlotSizes = ge.SlotSizeArray
	default:
		return nil, fmt.Errorf("%w: embedding type %s", ErrUnsupported, ge.Type)
	}
	if ge.Combiner == "mean" {
		ec.Combiner = tensor.Mean
	}
	// The workspace that holds exactly ei.Rows rows (half a row of slack
	// against rounding in MaxRows).
	ec.WorkspaceMB = (float64(ei.Rows) + 0.5) * float64((1+ec.StateCopies)*4*ge.VecSize) / (1 << 20)
	if ei.Rows <= 0 || ei.Rows > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d table rows", ErrUnsupported, ei.Rows)
	}
	l, err := layers.NewSparseEmbedding(m.ctx, ec, m.feed.Inputs[in], m.batch)
	if err != nil {
		return nil, err
	}
	o, err := optim.New(m.be, ocfg, m.sched)
	if err != nil {
		return nil, err
	}
	o.AddEmbedding(l)
	return &embedding{g: ge, layer: l, input: in, opt: o}, nil
}

func (m *Model) buildLayer(gl graph.DenseLayer, li graph.LayerInfo, blobs map[string]*layers.Blob) (layers.Layer, error) {
	var ins []*layers.Blob
	for _, b := range gl.Bottom {
		x, ok := blobs[b]
		if !ok {
			return nil, fmt.Errorf("input %q has no tensor (sparse inputs feed embeddings only)", b)
		}
		ins = append(ins, x)
	}
	if err := m.checkAux(gl); err != nil {
		return nil, err
	}
	c := m.ctx
	x := ins[0]
	one := func() error {
		if len(ins) != 1 {
			return fmt.Errorf("%s takes one bottom, has %d", gl.Type, len(ins))
		}
		return nil
	}
	if l, ok, err := m.buildRowwise(gl, li, ins); ok { // 3-D InnerProduct, Slice
		return l, err
	}
	var l layers.Layer
	var err error
	switch gl.Type {
	case graph.InnerProduct:
		in, ierr := initializers("weight_init", gl.WeightInit, "bias_init", gl.BiasInit)
		if ierr != nil {
			return nil, ierr
		}
		l, err = layers.NewInnerProduct(c, x, gl.NumOutput, tensor.Identity, in...)
	case graph.FusedInnerProduct:
		l, err = m.buildFusedFC(gl, ins)
	case graph.Cast, graph.PReLUDice, graph.FusedReshapeConcat, graph.FusedReshapeConcatGeneral, graph.MLP:
		l, err = m.buildMisc(gl, li, ins, m.half)
	case graph.ReLU:
		l, err = layers.NewActivation(c, x, tensor.ReLU, 0)
	case graph.Sigmoid:
		l, err = layers.NewActivation(c, x, tensor.Sigmoid, 0)
	case graph.ELU:
		l, err = layers.NewActivation(c, x, tensor.ELU, float64(gl.Alpha))
	case graph.Dropout:
		l, err = layers.NewDropout(c, x, float64(gl.Rate))
	case graph.BatchNorm:
		in, ierr := initializers("gamma_init", gl.GammaInit, "beta_init", gl.BetaInit)
		if ierr != nil {
			return nil, ierr
		}
		l, err = layers.NewBatchNorm(c, x, tensor.BNParams{Factor: float64(gl.Factor), Eps: float64(gl.Eps)}, in...)
	case graph.Concat:
		if len(li.In[0].Dims) == 2 && gl.Axis == 2 {
			l, err = m.buildSeq(gl, li, ins)
			break
		}
		l, err = layers.NewConcat(c, ins...)
	case graph.Reshape:
		if len(gl.Selected) > 0 {
			l, err = layers.NewReshape(c, x, 0, gl.Selected, li.In[0].Last())
		} else {
			lead := gl.LeadingDim
			if gl.TimeStep > 0 {
				lead *= gl.TimeStep
			}
			l, err = layers.NewReshape(c, x, lead, nil, 0)
		}
	case graph.Slice:
		l, err = layers.NewSlice(c, x, gl.Ranges)
	case graph.Interaction:
		if len(ins) != 2 || len(gl.Top) > 2 {
			return nil, fmt.Errorf("Interaction with %d bottoms, %d tops (want 2 bottoms, 1 top or 2: the output and its gradient)", len(ins), len(gl.Top))
		}
		if len(gl.Top) == 2 {
			l, err = m.buildInteraction2(gl, ins)
			break
		}
		l, err = layers.NewInteraction(c, ins[0], ins[1])
	case graph.MultiCross:
		in, ierr := initializers("weight_init", gl.WeightInit, "bias_init", gl.BiasInit)
		if ierr != nil {
			return nil, ierr
		}
		l, err = layers.NewMultiCross(c, x, gl.NumLayers, gl.ProjectionDim, in...)
	case graph.Add:
		l, err = layers.NewElementwise(c, layers.Add, ins...)
	case graph.Sub:
		l, err = layers.NewElementwise(c, layers.Sub, ins...)
	case graph.ElementwiseMultiply:
		l, err = layers.NewElementwise(c, layers.Multiply, ins...)
	case graph.WeightMultiply:
		in, ierr := initializers("weight_init", gl.WeightInit)
		if ierr != nil {
			return nil, ierr
		}
		l, err = layers.NewWeightMultiply(c, x, gl.WeightDims[1], in...)
	case graph.FmOrder2:
		l, err = layers.NewFmOrder2(c, x, gl.OutDim)
	case graph.ReduceSum, graph.ReduceMean:
		// [B·Rows, Dims…]: the graph's axis indexes these dims directly.
		dims := append([]int{x.Value.Rows()}, li.In[0].Dims...)
		l, err = layers.NewReduce(c, x, dims, gl.Axis, gl.Type == graph.ReduceMean)
	case graph.Softmax:
		if len(ins) == 2 {
			l, err = m.buildSeq(gl, li, ins) // masked
			break
		}
		if err := one(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		l, err = layers.NewSoftmax(c, x)
	case graph.LayerNorm, graph.MatrixMultiply, graph.SequenceMask, graph.MultiHeadAttention, graph.GRU:
		l, err = m.buildSeq(gl, li, ins)
	case graph.Scale:
		l, err = layers.NewScale(c, x, gl.Axis, int(gl.Factor))
	case graph.BinaryCrossEntropyLoss, graph.CrossEntropyLoss, graph.MultiCrossEntropyLoss:
		kind := map[string]layers.LossKind{graph.BinaryCrossEntropyLoss: layers.BinaryCrossEntropy,
			graph.CrossEntropyLoss: layers.CrossEntropy, graph.MultiCrossEntropyLoss: layers.MultiCrossEntropy}[gl.Type]
		var tw []float64
		for _, w := range gl.TargetWeight {
			tw = append(tw, float64(w))
		}
		var ll *layers.Loss
		ll, err = layers.NewLoss(c, kind, ins[0], ins[1], tw)
		if err == nil {
			err = m.addHead(gl, ll, ins[0])
		}
		l = ll
	default:
		return nil, fmt.Errorf("%w: layer type %s", ErrUnsupported, gl.Type)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// initializers maps (key, name) pairs of a layer's initializer keys to
// HugeCTR's initializer_types list.
func initializers(kv ...string) ([]layers.Init, error) {
	var in []layers.Init
	for i := 0; i+1 < len(kv); i += 2 {
		v, err := layers.ParseInit(kv[i+1])
		if err == nil && v == layers.InitSinusoidal {
			err = fmt.Errorf("initializer Sinusoidal fills embedding tables only")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kv[i], err)
		}
		in = append(in, v)
	}
	return in, nil
}

// BatchSize is the network's batch size.
func (m *Model) BatchSize() int { return m.batch }

// Backend returns the backend the model runs on.
func (m *Model) Backend() tensor.Backend { return m.be }

// NumEmbeddings is the number of sparse embeddings.
func (m *Model) NumEmbeddings() int { return len(m.embs) }

// FreezeDense stops updates of the dense network (HugeCTR freeze_dense);
// UnfreezeDense resumes them. A frozen part keeps the model's one
// learning-rate schedule: it resumes at the rate of the current step.
func (m *Model) FreezeDense()   { m.frozen = true }
func (m *Model) UnfreezeDense() { m.frozen = false }

// EmbeddingNames are the names of the sparse embeddings (their top
// tensors, HugeCTR's sparse_embedding_name), in model order.
func (m *Model) EmbeddingNames() []string {
	var ns []string
	for _, e := range m.embs {
		ns = append(ns, e.g.Top)
	}
	return ns
}

// FreezeEmbedding stops updates of the named embedding (HugeCTR
// freeze_embedding(name)); UnfreezeEmbedding resumes them. An unknown name
// is an error listing the model's embeddings.
func (m *Model) FreezeEmbedding(name string) error   { return m.setFrozen(name, true) }
func (m *Model) UnfreezeEmbedding(name string) error { return m.setFrozen(name, false) }

// FreezeEmbeddings and UnfreezeEmbeddings freeze or unfreeze every
// embedding (HugeCTR freeze_embedding(), unfreeze_embedding()).
func (m *Model) FreezeEmbeddings() {
	for _, e := range m.embs {
		e.frozen = true
	}
}
func (m *Model) UnfreezeEmbeddings() {
	for _, e := range m.embs {
		e.frozen = false
	}
}

func (m *Model) setFrozen(name string, f bool) error {
	for _, e := range m.embs {
		if e.g.Top == name {
			e.frozen = f
			return nil
		}
	}
	return fmt.Errorf("no embedding named %q: the model's embeddings are %s", name, strings.Join(m.EmbeddingNames(), ", "))
}

// ResetLRScheduler replaces the model's learning-rate schedule and
// restarts it at step 1 (HugeCTR reset_learning_rate_scheduler; its
// checks: rates ≥ 0, decay_power ≥ 1). ctrkit's optimizers count one step
// for the schedule and Adam's bias correction, so the bias correction
// restarts too (HugeCTR's continues).
func (m *Model) ResetLRScheduler(s optim.Schedule) error {
	if !(s.BaseLR >= 0) || s.WarmupSteps < 0 || s.DecayStart < 0 || s.DecaySteps <= 0 || !(s.DecayPower >= 1) || !(s.EndLR >= 0) {
		return fmt.Errorf("bad learning-rate schedule (want lr ≥ 0, warmup_steps ≥ 0, decay_start ≥ 0, decay_steps ≥ 1, decay_power ≥ 1, end_lr ≥ 0): %+v", s)
	}
	m.sched = s
	for _, o := range m.optimizers() {
		o.SetSchedule(s)
		o.SetStep(0)
	}
	return nil
}

// SetLearningRate makes every later step use rate lr (HugeCTR
// set_learning_rate) until ResetLRScheduler: HugeCTR's fit() sets the
// scheduler's rate before each iteration, ctrkit's steps take theirs from
// the schedule, which becomes the constant lr. Frozen parts stay frozen.
func (m *Model) SetLearningRate(lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 0) {
		return fmt.Errorf("learning rate %v: want a finite rate ≥ 0", lr)
	}
	s := m.sched
	s.BaseLR, s.WarmupSteps, s.DecayStart, s.EndLR = lr, 0, 0, lr
	m.sched = s
	for _, o := range m.optimizers() {
		o.Flush() // LazyGlobal catch-up must not see the new rate for past steps
		o.SetSchedule(s)
	}
	return nil
}

func (m *Model) optimizers() []*optim.Optimizer {
	os := []*optim.Optimizer{m.opt}
	for _, e := range m.embs {
		os = append(os, e.opt)
	}
	return os
}

// LR is the learning rate of the next step.
func (m *Model) LR() float64 { return m.opt.LR() }

// Iter is the number of training steps run.
func (m *Model) Iter() int64 { return int64(m.iter) }

var errShortBatch = errors.New("short batch")
