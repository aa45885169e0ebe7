package cpu

import (
	"math"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Interaction is the DLRM dot interaction (SPEC §8). Each sample's dot
// products are summed over d sequentially in the dtype, as a batched GEMM
// F·Fᵀ would.
func (be *Backend) Interaction(out, x0, emb tensor.Tensor) {
	dt, n, d, ok := be.interShape("interaction", out, x0, emb)
	if !ok {
		return
	}
	if dt == tensor.Float32 {
		interaction(be, data[float32](out), data[float32](x0), data[float32](emb), n, d)
	} else {
		interaction(be, data[float64](out), data[float64](x0), data[float64](emb), n, d)
	}
}

func (be *Backend) interShape(op string, out, x0, emb tensor.Tensor) (tensor.DType, int, int, bool) {
	dt, ok := be.floats(op, out, x0, emb)
	if !ok {
		return 0, 0, 0, false
	}
	n, d, err := tensor.InteractionShape(op, out, x0, emb)
	return dt, n, d, be.check(err)
}

func interaction[T float](be *Backend, out, x0, emb []T, n, d int) {
	w := d + n*(n+1)/2 + 1
	b := len(x0) / d
	be.par(b, max(1, 256/(n+1)), func(lo, hi int) {
		for s := lo; s < hi; s++ {
			f := func(i int) []T {
				if i == 0 {
					return x0[s*d : s*d+d]
				}
				return emb[s*n*d+(i-1)*d : s*n*d+i*d]
			}
			o := out[s*w : s*w+w]
			copy(o, f(0))
			k := d
			for j := 1; j <= n; j++ {
				fj := f(j)
				for i := 0; i < j; i++ {
					var acc T
					for c, v := range f(i) {
						acc += v * fj[c]
					}
					o[k] = acc
					k++
				}
			}
			o[k] = 0
		}
	})
}

// InteractionGrad writes dx0 and demb.
func (be *Backend) InteractionGrad(dx0, demb, dOut, x0, emb tensor.Tensor) {
	dt, n, d, ok := be.interShape("interaction_grad", dOut, x0, emb)
	if !ok || !be.check(tensor.CheckSameLen("interaction_grad", dx0, x0)) ||
		!be.check(tensor.CheckSameLen("interaction_grad", demb, emb)) {
		return
	}
	if _, ok := be.floats("interaction_grad", dx0, demb, x0); !ok {
		return
	}
	if dt == tensor.Float32 {
		interactionGrad(be, data[float32](dx0), data[float32](demb), data[float32](dOut), data[float32](x0), data[float32](emb), n, d)
	} else {
		interactionGrad(be, data[float64](dx0), data[float64](demb), data[float64](dOut), data[float64](x0), data[float64](emb), n, d)
	}
}

func interactionGrad[T float](be *Backend, dx0, demb, dOut, x0, emb []T, n, d int) {
	w := d + n*(n+1)/2 + 1
	b := len(x0) / d
	be.par(b, max(1, 256/(n+1)), func(lo, hi int) {
		for s := lo; s < hi; s++ {
			f := func(v0, ve []T, i int) []T {
				if i == 0 {
					return v0[s*d : s*d+d]
				}
				return ve[s*n*d+(i-1)*d : s*n*d+i*d]
			}
			o := dOut[s*w : s*w+w]
			copy(f(dx0, demb, 0), o[:d])
			for i := 1; i <= n; i++ {
				clear(f(dx0, demb, i))
			}
			k := d
			for j := 1; j <= n; j++ {
				fj, gj := f(x0, emb, j), f(dx0, demb, j)
				for i := 0; i < j; i++ {
					g := o[k]
					k++
					fi, gi := f(x0, emb, i), f(dx0, demb, i)
					for c := range gi {
						gi[c] += g * fj[c]
						gj[c] += g * fi[c]
					}
				}
			}
		}
	})
}

// FmOrder2: out[b,j] = ½((Σ_i v_ij)² − Σ_i v_ij²).
func (be *Backend) FmOrder2(out, in tensor.Tensor) {
	dt, ok := be.floats("fm_order2", out, in)
	if !ok || !be.check(tensor.CheckFmOrder2("fm_order2", out, in)) {
		return
	}
	k := out.Cols()
	if dt == tensor.Float32 {
		fm2(be, data[float32](out), data[float32](in), nil, k, false)
	} else {
		fm2(be, data[float64](out), data[float64](in), nil, k, false)
	}
}

// FmOrder2Grad: din[b,i,j] = dOut[b,j]·(Σ_i' v_i'j − v_ij).
func (be *Backend) FmOrder2Grad(din, dOut, in tensor.Tensor) {
	dt, ok := be.floats("fm_order2_grad", din, dOut, in)
	if !ok || !be.check(tensor.CheckFmOrder2Grad("fm_order2_grad", din, dOut, in)) {
		return
	}
	k := dOut.Cols()
	if dt == tensor.Float32 {
		fm2(be, data[float32](dOut), data[float32](in), data[float32](din), k, true)
	} else {
		fm2(be, data[float64](dOut), data[float64](in), data[float64](din), k, true)
	}
}

func fm2[T float](be *Backend, out, in, din []T, k int, grad bool) {
	b := len(out) / k
	f := len(in) / max(b*k, 1)
	be.par(b, max(1, elemGrain/max(f*k, 1)), func(lo, hi int) {
		for s := lo; s < hi; s++ {
			v := in[s*f*k : (s+1)*f*k]
			for j := 0; j < k; j++ {
				var sum, sq float64
				for i := 0; i < f; i++ {
					x := float64(v[i*k+j])
					sum += x
					sq += x * x
				}
				if !grad {
					out[s*k+j] = T(0.5 * (sum*sum - sq))
					continue
				}
				g := out[s*k+j]
				dv := din[s*f*k : (s+1)*f*k]
				for i := 0; i < f; i++ {
					dv[i*k+j] = g * (T(sum) - v[i*k+j])
				}
			}
		}
	})
}

// BatchNorm normalizes each column over the batch.
func (be *Backend) BatchNorm(p tensor.BNParams, training bool, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd tensor.Tensor) {
	dt, ok := be.floats("batch_norm", y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)
	if !ok || !be.check(tensor.CheckBatchNorm("batch_norm", training, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)) {
		return
	}
	if dt == tensor.Float32 {
		bn(be, p, training, data[float32](y), data[float32](x), data[float32](gamma), data[float32](beta), data[float32](runMean), data[float32](runVar), data[float32](saveMean), data[float32](saveInvStd))
	} else {
		bn(be, p, training, data[float64](y), data[float64](x), data[float64](gamma), data[float64](beta), data[float64](runMean), data[float64](runVar), data[float64](saveMean), data[float64](saveInvStd))
	}
}

func bn[T float](be *Backend, p tensor.BNParams, training bool, y, x, g, bt, rm, rv, sm, si []T) {
	c := len(g)
	rows := len(x) / c
	be.par(c, max(1, elemGrain/max(rows, 1)), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			var mean, inv float64
			if training {
				var s float64
				for r := 0; r < rows; r++ {
					s += float64(x[r*c+j])
				}
				mean = s / float64(rows)
				var q float64
				for r := 0; r < rows; r++ {
					d := float64(x[r*c+j]) - mean
					q += d * d
				}
				vr := q / float64(rows)
				inv = 1 / math.Sqrt(vr+p.Eps)
				sm[j], si[j] = T(mean), T(inv)
				rm[j] = T((1-p.Factor)*float64(rm[j]) + p.Factor*mean)
				rv[j] = T((1-p.Factor)*float64(rv[j]) + p.Factor*q/float64(rows-1))
			} else {
				mean = float64(rm[j])
				inv = 1 / math.Sqrt(float64(rv[j])+p.Eps)
			}
			m, iv := T(mean), T(inv)
			for r := 0; r < rows; r++ {
				y[r*c+j] = g[j]*(x[r*c+j]-m)*iv + bt[j]
			}
		}
	})
}

// BatchNormGrad writes dx, dgamma and dbeta.
func (be *Backend) BatchNormGrad(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd tensor.Tensor) {
	dt, ok := be.floats("batch_norm_grad", dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd)
	if !ok || !be.check(tensor.CheckBatchNormGrad("batch_norm_grad", dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd)) {
		return
	}
	if dt == tensor.Float32 {
		bnGrad(be, data[float32](dx), data[float32](dgamma), data[float32](dbeta), data[float32](dy), data[float32](x), data[float32](gamma), data[float32](saveMean), data[float32](saveInvStd))
	} else {
		bnGrad(be, data[float64](dx), data[float64](dgamma), data[float64](dbeta), data[float64](dy), data[float64](x), data[float64](gamma), data[float64](saveMean), data[float64](saveInvStd))
	}
}

func bnGrad[T float](be *Backend, dx, dg, db, dy, x, g, sm, si []T) {
	c := len(g)
	rows := len(x) / c
	be.par(c, max(1, elemGrain/max(rows, 1)), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			m, iv := float64(sm[j]), float64(si[j])
			var sb, sg float64
			for r := 0; r < rows; r++ {
				d := float64(dy[r*c+j])
				sb += d
				sg += d * (float64(x[r*c+j]) - m) * iv
			}
			db[j], dg[j] = T(sb), T(sg)
			k := float64(g[j]) * iv / float64(rows)
			for r := 0; r < rows; r++ {
				xh := (float64(x[r*c+j]) - m) * iv
				dx[r*c+j] = T(k * (float64(rows)*float64(dy[r*c+j]) - sb - xh*sg))
			}
		}
	})
}

// Dropout: y = x·keep/(1−rate).
func (be *Backend) Dropout(y, x tensor.Tensor, rate float64, seed, counter uint64) {
	be.dropout("dropout", y, x, rate, seed, counter)
}

// DropoutGrad: dx = dy·keep/(1−rate).
func (be *Backend) DropoutGrad(dx, dy tensor.Tensor, rate float64, seed, counter uint64) {
	be.dropout("dropout_grad", dx, dy, rate, seed, counter)
}

func (be *Backend) dropout(op string, y, x tensor.Tensor, rate float64, seed, counter uint64) {
	dt, ok := be.floats(op, y, x)
	if !ok || !be.check(tensor.CheckDropout(op, y, x, rate)) {
		return
	}
	if dt == tensor.Float32 {
		dropout(be, data[float32](y), data[float32](x), float32(rate), seed, counter)
	} else {
		dropout(be, data[float64](y), data[float64](x), float32(rate), seed, counter)
	}
}

func dropout[T float](be *Backend, y, x []T, rate float32, seed, counter uint64) {
	scale := 1 / (1 - T(rate))
	blocks := (len(x) + 3) / 4
	key := [2]uint32{uint32(seed), uint32(seed >> 32)}
	be.par(blocks, elemGrain/4, func(lo, hi int) {
		for blk := lo; blk < hi; blk++ {
			c := counter + uint64(blk)
			w := tensor.Philox4x32([4]uint32{uint32(c), uint32(c >> 32), 0, 0}, key)
			for e := 0; e < 4; e++ {
				i := blk*4 + e
				if i >= len(x) {
					break
				}
				u := float32(w[e]>>8) * (1.0 / (1 << 24))
				if u >= rate {
					y[i] = x[i] * scale
				} else {
					y[i] = 0
				}
			}
		}
	})
}

// Softmax over each row.
func (be *Backend) Softmax(y, x tensor.Tensor) {
	dt, ok := be.floats("softmax", y, x)
	if !ok || !be.check(tensor.CheckSameLen("softmax", y, x)) {
		return
	}
	if dt == tensor.Float32 {
		softmax(be, data[float32](y), data[float32](x), x.Cols())
	} else {
		softmax(be, data[float64](y), data[float64](x), x.Cols())
	}
}

func softmax[T float](be *Backend, y, x []T, n int) {
	if n == 0 {
		return
	}
	be.par(len(x)/n, max(1, elemGrain/n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			softmaxRow(y[r*n:r*n+n], x[r*n:r*n+n])
		}
	})
}

func softmaxRow[T float](y, x []T) {
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	var s float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		y[i] = T(e)
		s += e
	}
	inv := T(1 / s)
	for i := range y {
		y[i] *= inv
	}
}

// SoftmaxGrad: dx = y⊙(dy − Σ dy⊙y).
func (be *Backend) SoftmaxGrad(dx, dy, y tensor.Tensor) {
	dt, ok := be.floats("softmax_grad", dx, dy, y)
	if !ok || !be.check(tensor.CheckSameLen("softmax_grad", dx, dy, y)) {
		return
	}
	if dt == tensor.Float32 {
		softmaxGrad(be, data[float32](dx), data[float32](dy), data[float32](y), y.Cols())
	} else {
		softmaxGrad(be, data[float64](dx), data[float64](dy), data[float64](y), y.Cols())
	}
}

func softmaxGrad[T float](be *Backend, dx, dy, y []T, n int) {
	if n == 0 {
		return
	}
	be.par(len(y)/n, max(1, elemGrain/n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			var s float64
			for i := r * n; i < r*n+n; i++ {
				s += float64(dy[i]) * float64(y[i])
			}
			for i := r * n; i < r*n+n; i++ {
				dx[i] = y[i] * (dy[i] - T(s))
			}
		}
	})
}

// BCE is the fused sigmoid binary cross-entropy of SPEC §8.
func (be *Backend) BCE(loss, dx, x, y, w tensor.Tensor, gradScale float64) {
	be.bce("bce", loss, dx, x, y, w, gradScale, false)
}

// MaskedBCE is BCE where labels below −0.5 mask their entry (see
// tensor.Backend).
func (be *Backend) MaskedBCE(loss, dx, x, y, w tensor.Tensor, gradScale float64) {
	be.bce("masked_bce", loss, dx, x, y, w, gradScale, true)
}

func (be *Backend) bce(op string, loss, dx, x, y, w tensor.Tensor, gradScale float64, mask bool) {
	dt, ok := be.floats(op, loss, dx, x, y, w)
	if !ok || !be.check(tensor.CheckBCE(op, loss, dx, x, y, w)) {
		return
	}
	t := x.Cols()
	if dt == tensor.Float32 {
		bce(be, data[float32](loss), opt[float32](dx), data[float32](x), data[float32](y), opt[float32](w), t, gradScale, mask)
	} else {
		bce(be, data[float64](loss), opt[float64](dx), data[float64](x), data[float64](y), opt[float64](w), t, gradScale, mask)
	}
}

func bce[T float](be *Backend, loss, dx, x, y, w []T, t int, gs float64, mask bool) {
	rows := len(x) / max(t, 1)
	if rows == 0 {
		loss[0] = 0
		return
	}
	parts := make([]float64, be.workers)
	be.parts(len(x), elemGrain, func(part, lo, hi int) {
		var s float64
		for i := lo; i < hi; i++ {
			xv, yv := float64(x[i]), float64(y[i])
			if mask && yv < -0.5 {
				if dx != nil {
					dx[i] = 0
				}
				continue
			}
			wt := 1.0
			if w != nil {
				wt = float64(w[i%t])
			}
			var l float64
			if xv >= 0 {
				l = xv*(1-yv) + math.Log1p(math.Exp(-xv))
			} else {
				l = -xv*yv + math.Log1p(math.Exp(xv))
			}
			s += wt * l
			if dx != nil {
				dx[i] = T(gs * wt * (float64(sigmoid(x[i])) - yv))
			}
		}
		parts[part] = s
	})
	var s float64
	for _, p := range parts {
		s += p
	}
	loss[0] = T(s / float64(rows))
}

// SoftmaxCE is softmax cross-entropy against class-index labels.
func (be *Backend) SoftmaxCE(loss, dx, x, labels tensor.Tensor, gradScale float64) {
	dt, ok := be.floats("softmax_ce", loss, dx, x, labels)
	if !ok || !be.check(tensor.CheckSoftmaxCE("softmax_ce", loss, dx, x, labels)) {
		return
	}
	c := x.Cols()
	var bad int = -1
	if dt == tensor.Float32 {
		bad = softmaxCE(data[float32](loss), opt[float32](dx), data[float32](x), data[float32](labels), c, gradScale)
	} else {
		bad = softmaxCE(data[float64](loss), opt[float64](dx), data[float64](x), data[float64](labels), c, gradScale)
	}
	if bad >= 0 {
		be.fail("softmax_ce", tensor.ErrRange, "label of row %d is not a class in [0,%d)", bad, c)
	}
}

func softmaxCE[T float](loss, dx, x, labels []T, c int, gs float64) int {
	rows := len(labels)
	p := make([]T, c)
	var s float64
	for r := 0; r < rows; r++ {
		l := int(labels[r])
		if l < 0 || l >= c || T(l) != labels[r] {
			return r
		}
		softmaxRow(p, x[r*c:r*c+c])
		s -= math.Log(max(float64(p[l]), 1e-300))
		if dx != nil {
			for i := range p {
				g := float64(p[i])
				if i == l {
					g--
				}
				dx[r*c+i] = T(gs * g)
			}
		}
	}
	if rows > 0 {
		loss[0] = T(s / float64(rows))
	}
	return -1
}
