package cpu

import (
	"math"

	"github.com/ctrkit/ctrkit/trainer/metrics"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// coef are an update's scalars in the tensor dtype, computed once per call
// in float64 on the host (a CUDA kernel receives them as arguments).
type coef[T float] struct {
	kind                    tensor.OptKind
	lr, mu, b1, b2, eps, is T
	lrT                     T // Adam: lr·√(1−β2^t)/(1−β1^t)
}

func mkCoef[T float](p tensor.OptParams) coef[T] {
	is := 1.0
	if p.LossScale != 0 {
		is = 1 / p.LossScale
	}
	c := coef[T]{kind: p.Kind, lr: T(p.LR), mu: T(p.Momentum), b1: T(p.Beta1), b2: T(p.Beta2), eps: T(p.Epsilon), is: T(is)}
	if p.Kind == tensor.Adam {
		t := float64(p.Step)
		c.lrT = T(p.LR * math.Sqrt(1-math.Pow(p.Beta2, t)) / (1 - math.Pow(p.Beta1, t)))
	}
	return c
}

// step updates w[i], s1[i], s2[i] with gradient g (not yet unscaled).
func (c *coef[T]) step(w, s1, s2 []T, i int, g T) {
	g *= c.is
	switch c.kind {
	case tensor.SGD:
		w[i] -= c.lr * g
	case tensor.MomentumSGD:
		m := c.mu*s1[i] - c.lr*g
		s1[i] = m
		w[i] += m
	case tensor.Nesterov:
		a := s1[i]
		an := c.mu*a - c.lr*g
		s1[i] = an
		w[i] += -c.mu*a + (1+c.mu)*an
	case tensor.AdaGrad:
		s := s1[i] + g*g
		s1[i] = s
		w[i] -= c.lr * g / (T(math.Sqrt(float64(s))) + c.eps)
	case tensor.Adam:
		m := c.b1*s1[i] + (1-c.b1)*g
		v := c.b2*s2[i] + (1-c.b2)*g*g
		s1[i], s2[i] = m, v
		w[i] -= c.lrT * m / (T(math.Sqrt(float64(v))) + c.eps)
	}
}

// DenseUpdate applies one optimizer step elementwise.
func (be *Backend) DenseUpdate(p tensor.OptParams, w, g, s1, s2 tensor.Tensor) {
	dt, ok := be.floats("dense_update", w, g, s1, s2)
	if !ok || !be.check(tensor.CheckSameLen("dense_update", w, g)) ||
		!be.check(tensor.CheckOptStates("dense_update", p, w.Len(), s1, s2)) {
		return
	}
	if dt == tensor.Float32 {
		denseUpdate(be, mkCoef[float32](p), data[float32](w), data[float32](g), opt[float32](s1), opt[float32](s2))
	} else {
		denseUpdate(be, mkCoef[float64](p), data[float64](w), data[float64](g), opt[float64](s1), opt[float64](s2))
	}
}

func denseUpdate[T float](be *Backend, c coef[T], w, g, s1, s2 []T) {
	be.par(len(w), elemGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			c.step(w, s1, s2, i, g[i])
		}
	})
}

// SparseUpdate updates embedding rows (Local, Global or LazyGlobal).
//
// Global and LazyGlobal matter only for MomentumSGD, Nesterov and Adam (the
// zero-gradient step of SGD and AdaGrad is the identity, so they run Local);
// LazyGlobal is implemented for Adam and runs as Global for the momentum
// optimizers.
func (be *Backend) SparseUpdate(p tensor.OptParams, table, s1, s2, lastStep, uniqRows, uniqGrad, numUniq tensor.Tensor) {
	const op = "sparse_update"
	dt, ok := be.floats(op, table, s1, s2, uniqGrad)
	if !ok || !be.owned(op, lastStep, uniqRows, numUniq) ||
		!be.check(tensor.CheckSparseUpdate(op, p, table, s1, s2, uniqRows, numUniq)) {
		return
	}
	nu := int(data[int32](numUniq)[0])
	v, rows := table.Cols(), table.Rows()
	if nu < 0 || nu > uniqRows.Len() || uniqGrad.Cols() != v || uniqGrad.Rows() < nu {
		be.fail(op, tensor.ErrShape, "%d unique rows in %v %v for table %v", nu, uniqRows, uniqGrad, table)
		return
	}
	ur := data[int32](uniqRows)[:nu]
	for u, r := range ur {
		if r < 0 || int(r) >= rows {
			be.fail(op, tensor.ErrRange, "row %d (entry %d) outside table of %d rows", r, u, rows)
			return
		}
	}
	mode, err := tensor.SparseMode(op, p, lastStep, rows)
	if !be.check(err) {
		return
	}
	if dt == tensor.Float32 {
		sparseUpdate(be, mode, p, mkCoef[float32](p), data[float32](table), opt[float32](s1), opt[float32](s2), opt[int32](lastStep), ur, data[float32](uniqGrad), v)
	} else {
		sparseUpdate(be, mode, p, mkCoef[float64](p), data[float64](table), opt[float64](s1), opt[float64](s2), opt[int32](lastStep), ur, data[float64](uniqGrad), v)
	}
}

func sparseUpdate[T float](be *Backend, mode tensor.UpdateType, p tensor.OptParams, c coef[T], w, s1, s2 []T, last, ur []int32, ug []T, v int) {
	switch mode {
	case tensor.Local:
		be.par(len(ur), max(1, 1024/max(v, 1)), func(lo, hi int) {
			for u := lo; u < hi; u++ {
				base := int(ur[u]) * v
				for i := 0; i < v; i++ {
					c.step(w, s1, s2, base+i, ug[u*v+i])
				}
			}
		})
	case tensor.Global:
		rows := len(w) / max(v, 1)
		be.idx = grow(be.idx, rows)
		idx := be.idx
		fill(idx, -1)
		for u, r := range ur {
			idx[r] = int32(u)
		}
		be.par(rows, max(1, elemGrain/max(v, 1)), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				u := idx[r]
				for i := 0; i < v; i++ {
					var g T
					if u >= 0 {
						g = ug[int(u)*v+i]
					}
					c.step(w, s1, s2, r*v+i, g)
				}
			}
		})
	case tensor.LazyGlobal:
		be.par(len(ur), max(1, 256/max(v, 1)), func(lo, hi int) {
			for u := lo; u < hi; u++ {
				r := int(ur[u])
				lazyCatchUp(p, w[r*v:r*v+v], s1[r*v:r*v+v], s2[r*v:r*v+v], int64(last[r]), p.Step-1)
				last[r] = int32(p.Step)
				for i := 0; i < v; i++ {
					c.step(w, s1, s2, r*v+i, ug[u*v+i])
				}
			}
		})
	}
}

// LazyFlush catches every row up to p.Step.
func (be *Backend) LazyFlush(p tensor.OptParams, table, s1, s2, lastStep tensor.Tensor) {
	const op = "lazy_flush"
	if p.Kind != tensor.Adam {
		return
	}
	dt, ok := be.floats(op, table, s1, s2)
	if !ok || !be.check(tensor.CheckOptStates(op, p, table.Len(), s1, s2)) ||
		!be.check(tensor.CheckWant(op, lastStep, tensor.Int32, table.Rows())) {
		return
	}
	if dt == tensor.Float32 {
		lazyFlush(be, p, data[float32](table), data[float32](s1), data[float32](s2), data[int32](lastStep), table.Cols())
	} else {
		lazyFlush(be, p, data[float64](table), data[float64](s1), data[float64](s2), data[int32](lastStep), table.Cols())
	}
}

func lazyFlush[T float](be *Backend, p tensor.OptParams, w, m, v []T, last []int32, n int) {
	be.par(len(last), max(1, 256/max(n, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			lazyCatchUp(p, w[r*n:r*n+n], m[r*n:r*n+n], v[r*n:r*n+n], int64(last[r]), p.Step)
			last[r] = int32(p.Step)
		}
	})
}

// lazyCatchUp brings one Adam row from step `from` to step `to` as if it
// had received zero gradients at steps from+1…to (what Global does).
//
// Closed form: after k zero-gradient steps m = β1ᵏ·m₀ and v = β2ᵏ·v₀; the
// weight moves by −Σ_{j} lr_j·√(1−β2ʲ)/(1−β1ʲ)·β1^i·m₀/(√(β2^i·v₀)+ε)
// (i = j−from), which has no closed form with ε and a scheduled lr, so the
// series is summed term by term (the same float operations as stepwise
// Global); its terms shrink like (β1/√β2)^i, and the sum stops once a
// rigorous bound on all remaining terms falls below 2⁻⁴⁰ of the row's
// largest |w|, which cannot change a float32 weight. m and v are set from the powers at the end.
func lazyCatchUp[T float](p tensor.OptParams, w, m, v []T, from, to int64) {
	k := to - from
	if k <= 0 {
		return
	}
	q := p.Beta1 / math.Sqrt(p.Beta2)
	maxLR := max(p.Schedule.BaseLR, p.Schedule.EndLR)
	var wmax float64
	for _, x := range w {
		wmax = max(wmax, math.Abs(float64(x)))
	}
	for i := range w {
		m0, v0 := float64(m[i]), float64(v[i])
		if m0 == 0 {
			continue
		}
		mj, vj := m[i], v[i]
		b1, b2, eps := T(p.Beta1), T(p.Beta2), T(p.Epsilon)
		for j := from + 1; j <= to; j++ {
			mj *= b1
			vj *= b2
			t := float64(j)
			lrT := p.Schedule.LR(j) * math.Sqrt(1-math.Pow(p.Beta2, t)) / (1 - math.Pow(p.Beta1, t))
			step := T(lrT) * mj / (T(math.Sqrt(float64(vj))) + eps)
			w[i] -= step
			if q < 1 && vj > 0 {
				// Every later term is ≤ maxLR/(1−β1)·|m|/√v·qⁱ (bias factor
				// ≤ 1/(1−β1), m/√v shrinks by q per step, ε only helps).
				rest := maxLR / (1 - p.Beta1) * math.Abs(float64(mj)) / math.Sqrt(float64(vj)) * q / (1 - q)
				if rest < wmax*0x1p-40 {
					break
				}
			}
		}
		m[i] = T(m0 * math.Pow(p.Beta1, float64(k)))
		v[i] = T(v0 * math.Pow(p.Beta2, float64(k)))
	}
}

// AUC downloads nothing: the CPU tensors are host memory.
func (be *Backend) AUC(scores, labels tensor.Tensor) (float64, error) {
	dt, ok := be.floats("auc", scores, labels)
	if !ok || !be.check(tensor.CheckSameLen("auc", scores, labels)) {
		return 0, be.err
	}
	if dt == tensor.Float32 {
		return metrics.AUC(data[float32](scores), data[float32](labels)), nil
	}
	s, l := data[float64](scores), data[float64](labels)
	s32, l32 := make([]float32, len(s)), make([]float32, len(l))
	for i := range s {
		s32[i], l32[i] = float32(s[i]), float32(l[i])
	}
	return metrics.AUC(s32, l32), nil
}
