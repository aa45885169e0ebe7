package gpu

import (
	"math"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// optCoef are an update's scalars, computed on the host in float64 as the
// CPU backend does and passed to the kernels as float32 (the OPT_COEF_PARAMS
// of kernels/optim.cu, in order). 1±β and 1+μ are rounded from float64
// rather than formed in float32, which keeps Adam's v within 1e-7 of the
// float64 reference. Inside a CUDA graph step (graph.go) the scalars that
// change from step to step (lr, lrT and the step) go to a device slot, the
// last argument (OptDyn*, null otherwise), and their arguments are 0.
func (be *Backend) optCoef(p tensor.OptParams) []any {
	is := 1.0
	if p.LossScale != 0 {
		is = 1 / p.LossScale
	}
	var lrT float64
	if p.Kind == tensor.Adam {
		t := float64(p.Step)
		lrT = p.LR * math.Sqrt(1-math.Pow(p.Beta2, t)) / (1 - math.Pow(p.Beta1, t))
	}
	lr32, lrT32 := float32(p.LR), float32(lrT)
	dyn := be.stepScalars(uint64(math.Float32bits(lr32))|uint64(math.Float32bits(lrT32))<<32, uint64(p.Step))
	if dyn != 0 {
		lr32, lrT32 = 0, 0
	}
	return []any{int(p.Kind), lr32, float32(p.Momentum), float32(1 + p.Momentum),
		float32(p.Beta1), float32(1 - p.Beta1), float32(p.Beta2), float32(1 - p.Beta2),
		float32(p.Epsilon), float32(is), lrT32, dyn}
}

// optStep is the step argument of opt_sparse_lazy, called after optCoef:
// 0 when optCoef put the step into an OptDyn slot (a graph step whose
// block was not full), which the kernel then reads.
func (be *Backend) optStep(p tensor.OptParams) int64 {
	if be.deferring() && !be.graph.overflow {
		return 0
	}
	return p.Step
}

// optLazy are the LazyGlobal catch-up scalars (OPT_LAZY_PARAMS): the
// schedule, the float64 β's, q = β1/√β2, max(BaseLR, EndLR) and ε.
func optLazy(p tensor.OptParams) []any {
	s := p.Schedule
	return []any{s.BaseLR, s.WarmupSteps, s.DecayStart, s.DecaySteps, s.DecayPower, s.EndLR,
		p.Beta1, p.Beta2, p.Beta1 / math.Sqrt(p.Beta2), max(s.BaseLR, s.EndLR), float32(p.Epsilon)}
}

// optGroup is the number of lanes per embedding row: the power of two ≥ v,
// at most a warp.
func optGroup(v int) int {
	g := 1
	for g < v && g < 32 {
		g <<= 1
	}
	return g
}

// optVec4 reports whether the row kernels may use 16-byte accesses
// (their _v4 variants): V % 4 == 0 and every pointer given (absent states
// are 0) 16-byte aligned.
func optVec4(v int, ptrs ...cuda.Ptr) bool {
	if v%4 != 0 {
		return false
	}
	for _, q := range ptrs {
		if q%16 != 0 {
			return false
		}
	}
	return true
}

// optRowGrid launches a row kernel over n entries in groups of g lanes
// (256-thread blocks, at most 32 blocks per SM, at least one block so the
// device-side count check always runs).
func (be *Backend) optRowGrid(c *cuda.Ctx, name string, n, g int, args ...any) error {
	blocks := max(1, min((n*g+255)/256, be.sms*32))
	return be.launch(c, name, cuda.D1(blocks), cuda.D1(256), 0, args...)
}

// DenseUpdate applies one optimizer step elementwise (opt_dense). Every
// update kernel takes the overflow guard's skip argument (guard.go): null
// unless a guarded step is armed.
func (be *Backend) DenseUpdate(p tensor.OptParams, w, g, s1, s2 tensor.Tensor) {
	const op = "dense_update"
	if !be.floats(op, w, g, s1, s2) || !be.check(tensor.CheckSameLen(op, w, g)) ||
		!be.check(tensor.CheckOptStates(op, p, w.Len(), s1, s2)) {
		return
	}
	n := w.Len()
	if n == 0 {
		return
	}
	args := append([]any{Ptr(w), Ptr(g), Ptr(s1), Ptr(s2), int64(n), be.guardSkip()}, be.optCoef(p)...)
	be.do(op, func(c *cuda.Ctx) error { return be.launch1(c, "opt_dense", n, args...) })
}

// SparseUpdate updates embedding rows from EmbeddingBagGrad's output. The
// count numUniq stays on the device: each kernel is sized for the capacity
// min(len(uniqRows), rows of uniqGrad) and reads the count itself; a count
// above the capacity and rows outside the table are reported through the
// device error record (ErrRange at the next Sync).
//
// As on the CPU, SGD and AdaGrad run Local (their zero-gradient step is the
// identity) and LazyGlobal is Global for the momentum optimizers. Local and
// LazyGlobal run a group of lanes per unique row; Global scatters a
// row→entry map (workspace int32 [rows], −1 = not in the batch) and then
// updates every row of the table. Local and Global use 16-byte loads and
// stores when the width and pointers allow (optVec4); the arithmetic per
// element is the same. The step's scalars reach every kernel through
// optCoef (OPT_COEF_PARAMS) and nowhere else.
func (be *Backend) SparseUpdate(p tensor.OptParams, table, s1, s2, lastStep, uniqRows, uniqGrad, numUniq tensor.Tensor) {
	const op = "sparse_update"
	if !be.floats(op, table, s1, s2, uniqGrad) || !be.owned(op, lastStep, uniqRows, numUniq) ||
		!be.check(tensor.CheckSparseUpdate(op, p, table, s1, s2, uniqRows, numUniq)) {
		return
	}
	v, rows := table.Cols(), table.Rows()
	if uniqGrad.Cols() != v {
		be.fail(op, tensor.ErrShape, "unique gradients %v for table %v", uniqGrad, table)
		return
	}
	mode, err := tensor.SparseMode(op, p, lastStep, rows)
	if !be.check(err) {
		return
	}
	capacity := min(uniqRows.Len(), uniqGrad.Rows())
	if uniqGrad.IsZero() {
		capacity = 0
	}
	gl := optGroup(v)
	sfx := ""
	if optVec4(v, Ptr(table), Ptr(s1), Ptr(s2), Ptr(uniqGrad)) {
		gl, sfx = optGroup(v/4), "_v4"
	}
	coef := be.optCoef(p)
	step := be.optStep(p) // here, while the step is held back: not in the closure, which runs after
	flag, opc, skip := be.flag, uint64(opSparseUpdate), be.guardSkip()
	be.do(op, func(c *cuda.Ctx) error {
		switch mode {
		case tensor.Local:
			args := append([]any{Ptr(table), Ptr(s1), Ptr(s2), Ptr(uniqRows), Ptr(uniqGrad), Ptr(numUniq),
				int64(capacity), int64(rows), v, gl, flag, opc, skip}, coef...)
			return be.optRowGrid(c, "opt_sparse_local"+sfx, capacity, gl, args...)
		case tensor.Global:
			pos, err := be.workspace(c, 4*max(rows, 1))
			if err != nil {
				return err
			}
			if rows > 0 {
				if err := c.Memset32(pos, 0xffffffff, rows, be.s); err != nil {
					return err
				}
			}
			err = be.launch1(c, "opt_sparse_scatter", max(capacity, 1),
				pos, Ptr(uniqRows), Ptr(numUniq), int64(capacity), int64(rows), flag, opc)
			if err != nil || rows == 0 {
				return err
			}
			args := append([]any{Ptr(table), Ptr(s1), Ptr(s2), pos, Ptr(uniqGrad), int64(rows), v, gl, skip}, coef...)
			return be.optRowGrid(c, "opt_sparse_global"+sfx, rows, gl, args...)
		default: // LazyGlobal Adam (scalar lanes: the catch-up is per element)
			gl := optGroup(v)
			args := append([]any{Ptr(table), Ptr(s1), Ptr(s2), Ptr(lastStep), Ptr(uniqRows), Ptr(uniqGrad), Ptr(numUniq),
				int64(capacity), int64(rows), v, gl, step, flag, opc, skip}, coef...)
			args = append(args, optLazy(p)...)
			return be.optRowGrid(c, "opt_sparse_lazy", capacity, gl, args...)
		}
	})
}

// LazyFlush brings every row of a LazyGlobal Adam table up to p.Step (a
// group of lanes per table row, the catch-up of SparseUpdate); a no-op for
// other optimizers.
func (be *Backend) LazyFlush(p tensor.OptParams, table, s1, s2, lastStep tensor.Tensor) {
	const op = "lazy_flush"
	if p.Kind != tensor.Adam {
		return
	}
	if !be.floats(op, table, s1, s2) || !be.owned(op, lastStep) ||
		!be.check(tensor.CheckOptStates(op, p, table.Len(), s1, s2)) ||
		!be.check(tensor.CheckWant(op, lastStep, tensor.Int32, table.Rows())) {
		return
	}
	v, rows := table.Cols(), table.Rows()
	if rows == 0 {
		return
	}
	gl := optGroup(v)
	args := append([]any{Ptr(table), Ptr(s1), Ptr(s2), Ptr(lastStep), int64(rows), v, gl, p.Step, be.guardSkip()}, optLazy(p)...)
	be.do(op, func(c *cuda.Ctx) error { return be.optRowGrid(c, "opt_lazy_flush", rows, gl, args...) })
}
