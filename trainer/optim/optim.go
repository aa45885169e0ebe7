// Package optim holds the trainer's optimizers and learning-rate schedule
// (SPEC §8). The host keeps the step counter and evaluates the schedule;
// every update runs on the backend as one batched kernel per tensor
// (tensor.Backend DenseUpdate and SparseUpdate), so a GPU step needs no
// device→host transfer.
package optim

import (
	"fmt"

	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Schedule is SPEC §8's learning-rate schedule.
type Schedule = tensor.Schedule

// DefaultSchedule returns SPEC §8's defaults: lr 0.001, warmup 1,
// decay_start 0, decay_steps 1, power 2, end_lr 0.
func DefaultSchedule() Schedule {
	return Schedule{BaseLR: 0.001, WarmupSteps: 1, DecayStart: 0, DecaySteps: 1, DecayPower: 2, EndLR: 0}
}

// Config is an optimizer (HugeCTR CreateOptimizer).
type Config struct {
	Kind   tensor.OptKind
	Update tensor.UpdateType
	// Momentum is MomentumSGD's and Nesterov's momentum_factor.
	Momentum float64
	// Beta1, Beta2, Epsilon: Adam (Epsilon also AdaGrad).
	Beta1, Beta2, Epsilon float64
	// InitialAccu is AdaGrad's initial accumulator value.
	InitialAccu float64
	// AtomicUpdate is SGD's atomic_update. Gradients reach the update
	// already summed per row (EmbeddingBagGrad), so it does not change
	// results; it is kept for model-file and JSON parity.
	AtomicUpdate bool
	// LossScale divides gradients (0 means 1).
	LossScale float64
}

// DefaultConfig returns kind with SPEC §8 defaults (β1 0.9, β2 0.999,
// ε 1e-7, Global update).
func DefaultConfig(kind tensor.OptKind) Config {
	return Config{Kind: kind, Update: tensor.Global, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, AtomicUpdate: true}
}

// Validate reports an invalid configuration.
func (c Config) Validate() error {
	if c.Kind > tensor.Adam || c.Update > tensor.LazyGlobal {
		return fmt.Errorf("unknown optimizer %d or update type %d", c.Kind, c.Update)
	}
	if c.Kind == tensor.Adam && (c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1) {
		return fmt.Errorf("Adam betas %v, %v outside [0,1)", c.Beta1, c.Beta2)
	}
	if c.LossScale < 0 {
		return fmt.Errorf("loss scale %v < 0", c.LossScale)
	}
	return nil
}

// StateCopies is the optimizer state per weight (the c of HugeCTR's
// embedding vocabulary formula): Adam 2 (+1 for LazyGlobal), AdaGrad,
// MomentumSGD and Nesterov 1, SGD 0.
func (c Config) StateCopies() int {
	switch c.Kind {
	case tensor.Adam:
		if c.Update == tensor.LazyGlobal {
			return 3
		}
		return 2
	case tensor.SGD:
		return 0
	}
	return 1
}

type dense struct {
	p      layers.Param
	s1, s2 tensor.Tensor
}

type sparse struct {
	e            *layers.SparseEmbedding
	s1, s2, last tensor.Tensor
}

// Optimizer updates registered dense parameters and embedding tables.
type Optimizer struct {
	be     tensor.Backend
	cfg    Config
	sched  Schedule
	step   int64
	dense  []dense
	sparse []sparse
	// skipping: Skip advanced the step since the last Update (LazyGlobal
	// rows are marked up to date at the next Update).
	skipping bool
}

// New returns an optimizer at step 0.
func New(be tensor.Backend, cfg Config, sched Schedule) (*Optimizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sched.WarmupSteps < 0 || sched.DecaySteps <= 0 && sched.DecayStart > 0 {
		return nil, fmt.Errorf("learning-rate schedule %+v: invalid", sched)
	}
	return &Optimizer{be: be, cfg: cfg, sched: sched}, nil
}

func (o *Optimizer) states(dt tensor.DType, shape []int) (s1, s2 tensor.Tensor) {
	if o.cfg.Kind != tensor.SGD {
		s1 = o.be.Alloc(dt, shape...)
		if o.cfg.Kind == tensor.AdaGrad && o.cfg.InitialAccu != 0 {
			o.be.Fill(s1, o.cfg.InitialAccu)
		}
	}
	if o.cfg.Kind == tensor.Adam {
		s2 = o.be.Alloc(dt, shape...)
	}
	return s1, s2
}

// AddDense registers dense parameters.
func (o *Optimizer) AddDense(ps ...layers.Param) {
	for _, p := range ps {
		s1, s2 := o.states(p.Value.DType, p.Value.Shape)
		o.dense = append(o.dense, dense{p, s1, s2})
	}
}

// AddEmbedding registers an embedding table (updated from its UniqGrad).
func (o *Optimizer) AddEmbedding(e *layers.SparseEmbedding) {
	s1, s2 := o.states(e.Table.DType, e.Table.Shape)
	s := sparse{e: e, s1: s1, s2: s2}
	if o.cfg.Update == tensor.LazyGlobal {
		s.last = o.be.Alloc(tensor.Int32, e.Table.Rows())
	}
	o.sparse = append(o.sparse, s)
}

// Step is the number of steps applied.
func (o *Optimizer) Step() int64 { return o.step }

// LR is the rate the next Update will use.
func (o *Optimizer) LR() float64 { return o.sched.LR(o.step + 1) }

// Params returns the kernel parameters of step n.
func (o *Optimizer) Params(n int64) tensor.OptParams {
	return tensor.OptParams{Kind: o.cfg.Kind, Update: o.cfg.Update, LR: o.sched.LR(n), Step: n,
		Momentum: o.cfg.Momentum, Beta1: o.cfg.Beta1, Beta2: o.cfg.Beta2, Epsilon: o.cfg.Epsilon,
		LossScale: o.cfg.LossScale, Schedule: o.sched}
}

// Skip advances the step without changing weights or state: a frozen
// part of the model (HugeCTR freeze_dense, freeze_embedding) keeps the
// model's one learning-rate schedule, so it resumes at the rate of the
// step the rest of the model is at. LazyGlobal rows are brought up to date
// when skipping starts and take the skipped steps as applied.
func (o *Optimizer) Skip() {
	if !o.skipping && o.cfg.Update == tensor.LazyGlobal {
		o.Flush()
	}
	o.skipping = true
	o.step++
}

// Update applies one step to everything registered, from the gradients the
// last Backward left.
func (o *Optimizer) Update() { o.UpdateEach(nil) }

// UpdateEach is Update calling after(i), when not nil, once the update of
// the i-th dense parameter (AddDense order) is issued: a profiler's hook.
func (o *Optimizer) UpdateEach(after func(i int)) {
	if o.skipping {
		o.skipping = false
		for _, s := range o.sparse {
			if !s.last.IsZero() {
				o.be.Fill(s.last, float64(o.step))
			}
		}
	}
	o.step++
	p := o.Params(o.step)
	for i, d := range o.dense {
		o.be.DenseUpdate(p, d.p.Value, d.p.Grad, d.s1, d.s2)
		if after != nil {
			after(i)
		}
	}
	for _, s := range o.sparse {
		o.be.SparseUpdate(p, s.e.Table, s.s1, s.s2, s.last, s.e.UniqRows, s.e.UniqGrad, s.e.NumUniq)
	}
}

// Flush brings LazyGlobal embedding rows up to date (every row as if
// updated every step, equal to Global); call it before saving or
// evaluating a table elsewhere. A no-op for other update types.
func (o *Optimizer) Flush() {
	if o.cfg.Update != tensor.LazyGlobal || o.step == 0 {
		return
	}
	p := o.Params(o.step)
	for _, s := range o.sparse {
		o.be.LazyFlush(p, s.e.Table, s.s1, s.s2, s.last)
	}
}
