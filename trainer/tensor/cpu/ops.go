package cpu

import (
	"math"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

const elemGrain = 1 << 14 // elements per goroutine, at least

// AddBias: y[r,c] += bias[c].
func (be *Backend) AddBias(y, bias tensor.Tensor) {
	be.BiasAct(tensor.Identity, 0, y, y, bias)
}

// BiasAct: y = act(x + bias).
func (be *Backend) BiasAct(a tensor.Activation, alpha float64, y, x, bias tensor.Tensor) {
	dt, ok := be.floats("bias_act", y, x, bias)
	if !ok || !be.check(tensor.CheckBiasAct("bias_act", y, x, bias)) {
		return
	}
	if dt == tensor.Float32 {
		biasAct(be, a, float32(alpha), data[float32](y), data[float32](x), data[float32](bias))
	} else {
		biasAct(be, a, alpha, data[float64](y), data[float64](x), data[float64](bias))
	}
}

func biasAct[T float](be *Backend, a tensor.Activation, alpha T, y, x, b []T) {
	n := len(b)
	if n == 0 {
		return
	}
	rows := len(x) / n
	be.par(rows, max(1, elemGrain/n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*n:r*n+n], y[r*n:r*n+n]
			for c, bv := range b {
				yr[c] = act(a, alpha, xr[c]+bv)
			}
		}
	})
}

func act[T float](a tensor.Activation, alpha, v T) T {
	switch a {
	case tensor.ReLU:
		if v > 0 {
			return v
		}
		return 0
	case tensor.Sigmoid:
		return sigmoid(v)
	case tensor.ELU:
		if v > 0 {
			return v
		}
		return alpha * T(math.Expm1(float64(v)))
	}
	return v
}

func sigmoid[T float](v T) T {
	if v >= 0 {
		return T(1 / (1 + math.Exp(-float64(v))))
	}
	e := math.Exp(float64(v))
	return T(e / (1 + e))
}

// Act: y = act(x).
func (be *Backend) Act(a tensor.Activation, alpha float64, y, x tensor.Tensor) {
	dt, ok := be.floats("act", y, x)
	if !ok || !be.check(tensor.CheckSameLen("act", y, x)) {
		return
	}
	if dt == tensor.Float32 {
		actAll(be, a, float32(alpha), data[float32](y), data[float32](x))
	} else {
		actAll(be, a, alpha, data[float64](y), data[float64](x))
	}
}

func actAll[T float](be *Backend, a tensor.Activation, alpha T, y, x []T) {
	be.par(len(x), elemGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y[i] = act(a, alpha, x[i])
		}
	})
}

// ActGrad: dx = dy·act'(x).
func (be *Backend) ActGrad(a tensor.Activation, alpha float64, dx, dy, x, y tensor.Tensor) {
	dt, ok := be.floats("act_grad", dx, dy, x, y)
	if !ok || !be.check(tensor.CheckActGrad("act_grad", a, dx, dy, x, y)) {
		return
	}
	if dt == tensor.Float32 {
		actGrad(be, a, float32(alpha), data[float32](dx), data[float32](dy), opt[float32](x), opt[float32](y))
	} else {
		actGrad(be, a, alpha, data[float64](dx), data[float64](dy), opt[float64](x), opt[float64](y))
	}
}

func opt[T any](t tensor.Tensor) []T {
	if t.IsZero() {
		return nil
	}
	return data[T](t)
}

func actGrad[T float](be *Backend, a tensor.Activation, alpha T, dx, dy, x, y []T) {
	be.par(len(dx), elemGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := dy[i]
			switch a {
			case tensor.ReLU:
				if y[i] <= 0 {
					g = 0
				}
			case tensor.Sigmoid:
				g *= y[i] * (1 - y[i])
			case tensor.ELU:
				if x[i] <= 0 {
					g *= alpha * T(math.Exp(float64(x[i])))
				}
			}
			dx[i] = g
		}
	})
}

// Axpby: dst = a·x + b·y.
func (be *Backend) Axpby(dst tensor.Tensor, a float64, x tensor.Tensor, b float64, y tensor.Tensor) {
	dt, ok := be.floats("axpby", dst, x, y)
	if !ok || !be.check(tensor.CheckSameLen("axpby", dst, x, y)) {
		return
	}
	if dt == tensor.Float32 {
		axpby(be, data[float32](dst), float32(a), data[float32](x), float32(b), opt[float32](y))
	} else {
		axpby(be, data[float64](dst), a, data[float64](x), b, opt[float64](y))
	}
}

func axpby[T float](be *Backend, d []T, a T, x []T, b T, y []T) {
	be.par(len(d), elemGrain, func(lo, hi int) {
		if y == nil {
			for i := lo; i < hi; i++ {
				d[i] = a * x[i]
			}
			return
		}
		for i := lo; i < hi; i++ {
			d[i] = a*x[i] + b*y[i]
		}
	})
}

// Mul: dst = beta·dst + x⊙y.
func (be *Backend) Mul(dst tensor.Tensor, beta float64, x, y tensor.Tensor) {
	dt, ok := be.floats("mul", dst, x, y)
	if !ok || !be.check(tensor.CheckSameLen("mul", dst, x, y)) {
		return
	}
	if dt == tensor.Float32 {
		mul(be, data[float32](dst), float32(beta), data[float32](x), data[float32](y))
	} else {
		mul(be, data[float64](dst), beta, data[float64](x), data[float64](y))
	}
}

func mul[T float](be *Backend, d []T, beta T, x, y []T) {
	be.par(len(d), elemGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := x[i] * y[i]
			if beta != 0 {
				v += beta * d[i]
			}
			d[i] = v
		}
	})
}

// RowScale: dst[r,c] = beta·dst[r,c] + x[r,c]·s[r].
func (be *Backend) RowScale(dst tensor.Tensor, beta float64, x, s tensor.Tensor) {
	dt, ok := be.floats("row_scale", dst, x, s)
	if !ok || !be.check(tensor.CheckRowScale("row_scale", dst, x, s)) {
		return
	}
	if dt == tensor.Float32 {
		rowScale(be, data[float32](dst), float32(beta), data[float32](x), data[float32](s))
	} else {
		rowScale(be, data[float64](dst), beta, data[float64](x), data[float64](s))
	}
}

func rowScale[T float](be *Backend, d []T, beta T, x, s []T) {
	rows := len(s)
	if rows == 0 {
		return
	}
	n := len(x) / rows
	be.par(rows, max(1, elemGrain/max(n, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			sv := s[r]
			for i := r * n; i < r*n+n; i++ {
				v := x[i] * sv
				if beta != 0 {
					v += beta * d[i]
				}
				d[i] = v
			}
		}
	})
}

// RowDot: dst[r] = Σ_c x[r,c]·y[r,c].
func (be *Backend) RowDot(dst, x, y tensor.Tensor) {
	dt, ok := be.floats("row_dot", dst, x, y)
	if !ok || !be.check(tensor.CheckRowDot("row_dot", dst, x, y)) {
		return
	}
	if dt == tensor.Float32 {
		rowDot(be, data[float32](dst), data[float32](x), data[float32](y))
	} else {
		rowDot(be, data[float64](dst), data[float64](x), data[float64](y))
	}
}

func rowDot[T float](be *Backend, d, x, y []T) {
	rows := len(d)
	if rows == 0 {
		return
	}
	n := len(x) / rows
	be.par(rows, max(1, elemGrain/max(n, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			var s float64
			for i := r * n; i < r*n+n; i++ {
				s += float64(x[i]) * float64(y[i])
			}
			d[r] = T(s)
		}
	})
}

// ColSum: dst[c] = beta·dst[c] + Σ_r x[r,c].
func (be *Backend) ColSum(dst tensor.Tensor, beta float64, x tensor.Tensor) {
	if !be.sameCols("col_sum", dst, x) {
		return
	}
	be.Reduce2(dst, beta, x, 1, x.Rows(), x.Cols(), 1)
}

func (be *Backend) sameCols(op string, dst, x tensor.Tensor) bool {
	_, ok := be.floats(op, dst, x)
	return ok && be.check(tensor.CheckColSum(op, dst, x))
}

// Reduce: dst[o,i] = scale·Σ_k src[o,k,i].
func (be *Backend) Reduce(dst, src tensor.Tensor, outer, n, inner int, scale float64) {
	be.Reduce2(dst, 0, src, outer, n, inner, scale)
}

// Reduce2 is Reduce with dst = beta·dst + scale·Σ.
func (be *Backend) Reduce2(dst tensor.Tensor, beta float64, src tensor.Tensor, outer, n, inner int, scale float64) {
	dt, ok := be.floats("reduce", dst, src)
	if !ok || !be.check(tensor.CheckReduce("reduce", dst, src, outer, n, inner)) {
		return
	}
	if dt == tensor.Float32 {
		reduce(be, data[float32](dst), beta, data[float32](src), outer, n, inner, scale)
	} else {
		reduce(be, data[float64](dst), beta, data[float64](src), outer, n, inner, scale)
	}
}

func reduce[T float](be *Backend, d []T, beta float64, s []T, outer, n, inner int, scale float64) {
	// One task per output column block (o, i range): each sums over k in
	// order into float64 accumulators.
	const colBlock = 256
	nb := (inner + colBlock - 1) / colBlock
	be.par(outer*nb, max(1, elemGrain/max(1, n*colBlock)), func(lo, hi int) {
		var acc [colBlock]float64
		for t := lo; t < hi; t++ {
			o, ib := t/nb, t%nb
			i0, i1 := ib*colBlock, min((ib+1)*colBlock, inner)
			a := acc[:i1-i0]
			clear(a)
			for k := 0; k < n; k++ {
				row := s[(o*n+k)*inner+i0 : (o*n+k)*inner+i1]
				for j, v := range row {
					a[j] += float64(v)
				}
			}
			out := d[o*inner+i0 : o*inner+i1]
			for j := range out {
				v := scale * a[j]
				if beta != 0 {
					v += beta * float64(out[j])
				}
				out[j] = T(v)
			}
		}
	})
}

// Broadcast: dst[o,k,i] = beta·dst[o,k,i] + scale·src[o,i].
func (be *Backend) Broadcast(dst tensor.Tensor, beta float64, src tensor.Tensor, outer, n, inner int, scale float64) {
	dt, ok := be.floats("broadcast", dst, src)
	if !ok || !be.check(tensor.CheckBroadcast("broadcast", dst, src, outer, n, inner)) {
		return
	}
	if dt == tensor.Float32 {
		broadcast(be, data[float32](dst), float32(beta), data[float32](src), outer, n, inner, float32(scale))
	} else {
		broadcast(be, data[float64](dst), beta, data[float64](src), outer, n, inner, scale)
	}
}

func broadcast[T float](be *Backend, d []T, beta T, s []T, outer, n, inner int, scale T) {
	be.par(outer*n, max(1, elemGrain/max(inner, 1)), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			o := t / n
			src := s[o*inner : o*inner+inner]
			out := d[t*inner : t*inner+inner]
			for i, v := range src {
				w := scale * v
				if beta != 0 {
					w += beta * out[i]
				}
				out[i] = w
			}
		}
	})
}

// CopyCols: dst[r, dc+j] = beta·dst[r, dc+j] + src[r, sc+j].
func (be *Backend) CopyCols(dst tensor.Tensor, dstCol int, src tensor.Tensor, srcCol, width int, beta float64) {
	dt, ok := be.floats("copy_cols", dst, src)
	if !ok || !be.check(tensor.CheckCopyCols("copy_cols", dst, dstCol, src, srcCol, width)) {
		return
	}
	if dt == tensor.Float32 {
		copyCols(be, data[float32](dst), dst.Cols(), dstCol, data[float32](src), src.Cols(), srcCol, width, dst.Rows(), float32(beta))
	} else {
		copyCols(be, data[float64](dst), dst.Cols(), dstCol, data[float64](src), src.Cols(), srcCol, width, dst.Rows(), beta)
	}
}

func copyCols[T float](be *Backend, d []T, dn, dc int, s []T, sn, sc, w, rows int, beta T) {
	be.par(rows, max(1, elemGrain/max(w, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			out := d[r*dn+dc : r*dn+dc+w]
			in := s[r*sn+sc : r*sn+sc+w]
			if beta == 0 {
				copy(out, in)
				continue
			}
			for j, v := range in {
				out[j] = beta*out[j] + v
			}
		}
	})
}

// SumSquares: out[0] += scale·Σ x².
func (be *Backend) SumSquares(out, x tensor.Tensor, scale float64) {
	be.sumFn("sum_squares", out, x, scale, func(v float64) float64 { return v * v })
}

// SumAbs: out[0] += scale·Σ|x|.
func (be *Backend) SumAbs(out, x tensor.Tensor, scale float64) {
	be.sumFn("sum_abs", out, x, scale, math.Abs)
}

func (be *Backend) sumFn(op string, out, x tensor.Tensor, scale float64, f func(float64) float64) {
	dt, ok := be.floats(op, out, x)
	if !ok || out.Len() < 1 {
		return
	}
	var s float64
	if dt == tensor.Float32 {
		for _, v := range data[float32](x) {
			s += f(float64(v))
		}
		o := data[float32](out)
		o[0] = float32(float64(o[0]) + scale*s)
	} else {
		for _, v := range data[float64](x) {
			s += f(v)
		}
		data[float64](out)[0] += scale * s
	}
}

// SignAxpy: dst += a·sign(x).
func (be *Backend) SignAxpy(dst tensor.Tensor, a float64, x tensor.Tensor) {
	dt, ok := be.floats("sign_axpy", dst, x)
	if !ok || !be.check(tensor.CheckSameLen("sign_axpy", dst, x)) {
		return
	}
	if dt == tensor.Float32 {
		signAxpy(data[float32](dst), float32(a), data[float32](x))
	} else {
		signAxpy(data[float64](dst), a, data[float64](x))
	}
}

func signAxpy[T float](d []T, a T, x []T) {
	for i, v := range x {
		switch {
		case v > 0:
			d[i] += a
		case v < 0:
			d[i] -= a
		}
	}
}
