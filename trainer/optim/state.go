package optim

import "github.com/ctrkit/ctrkit/trainer/tensor"

// Config returns the optimizer's configuration.
func (o *Optimizer) Config() Config { return o.cfg }

// Schedule returns the learning-rate schedule.
func (o *Optimizer) Schedule() Schedule { return o.sched }

// SetSchedule replaces the learning-rate schedule (HugeCTR's reset of the
// LR scheduler); the step counter is kept unless SetStep is called.
func (o *Optimizer) SetSchedule(s Schedule) { o.sched = s }

// SetStep sets the number of steps applied (restoring a checkpoint, or 0
// to restart the schedule). LazyGlobal rows are brought up to date first.
func (o *Optimizer) SetStep(n int64) {
	o.Flush()
	o.step = n
	for _, s := range o.sparse {
		if !s.last.IsZero() {
			o.be.Fill(s.last, float64(n))
		}
	}
}

// DenseState returns the state tensors of the i-th dense parameter in
// AddDense order (Momentum m, Nesterov accumulator, AdaGrad sum, Adam m in
// s1; Adam v in s2); unused states are zero Tensors.
func (o *Optimizer) DenseState(i int) (s1, s2 tensor.Tensor) {
	return o.dense[i].s1, o.dense[i].s2
}

// NumDense is the number of registered dense parameters.
func (o *Optimizer) NumDense() int { return len(o.dense) }

// EmbeddingState returns the per-row state tensors ([rows, vec], like the
// table) of the i-th embedding in AddEmbedding order.
func (o *Optimizer) EmbeddingState(i int) (s1, s2 tensor.Tensor) {
	return o.sparse[i].s1, o.sparse[i].s2
}
