package tensor

// Half-precision training (docs/PRECISION.md). With --precision fp16
// (HugeCTR's use_mixed_precision) or bf16 the dense network's activations,
// their gradients and the GEMMs' operands are Float16 or BFloat16
// tensors; dense weights are float32 masters with a half operand copy
// refreshed after each update; embedding tables stay float32; weight and
// bias gradients are float32 (the GEMMs accumulate in float32 and write
// them so). Operations take half operands where their documentation says
// so; the others fail with ErrDType.

// OverflowGuard is implemented by backends that train in half precision
// (the GPU): the overflow check of fp16 loss scaling, on the device, with
// no host synchronisation, so it runs inside a CUDA graph.
//
// A step: GuardBegin; GuardCheck on every gradient the updates read;
// the updates (DenseUpdate, SparseUpdate, LazyFlush: each does nothing
// when the flag is raised); GuardEnd. A skipped step leaves weights and
// optimizer state (moments, LazyGlobal's last steps) as they were; the
// host's step count and learning-rate schedule still advance.
type OverflowGuard interface {
	// GuardBegin clears the step's overflow flag and arms the guard:
	// until GuardEnd the update operations do nothing when the flag is
	// raised.
	GuardBegin()
	// GuardCheck raises the flag when an element of t (Float32, Float16
	// or BFloat16) is Inf or NaN.
	GuardCheck(t Tensor)
	// GuardEnd disarms the guard and counts the step as skipped when the
	// flag is raised.
	GuardEnd()
	// GuardSkipped is the number of steps skipped since the backend was
	// made (it synchronises).
	GuardSkipped() (int64, error)
}
