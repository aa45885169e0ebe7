package cpu

import (
	"math"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The sequence and attention operations (tensor.SeqOps); the GPU kernels
// (gpu/kernels/seq.cu) follow these loops.

// BatchedGemm: C_i = alpha·op(A_i)·op(B_i) + beta·C_i for each of batch
// matrices; every output element sums over k sequentially in the dtype.
func (be *Backend) BatchedGemm(transA, transB bool, batch, m, n, k int, alpha float64, a, b tensor.Tensor, beta float64, c tensor.Tensor) {
	const op = "batched_gemm"
	dt, ok := be.floats(op, a, b, c)
	if !ok || !be.check(tensor.CheckBatchedGemm(op, batch, m, n, k, a, b, c)) {
		return
	}
	if dt == tensor.Float32 {
		batchedGemm(be, transA, transB, batch, m, n, k, float32(alpha), data[float32](a), data[float32](b), float32(beta), data[float32](c))
	} else {
		batchedGemm(be, transA, transB, batch, m, n, k, alpha, data[float64](a), data[float64](b), beta, data[float64](c))
	}
}

func batchedGemm[T float](be *Backend, ta, tb bool, batch, m, n, k int, alpha T, A, B []T, beta T, C []T) {
	if batch == 0 || m == 0 || n == 0 {
		return
	}
	be.par(batch*m, max(1, elemGrain/max(1, n*k)), func(lo, hi int) {
		for row := lo; row < hi; row++ {
			i, r := row/m, row%m
			a, b, c := A[i*m*k:(i+1)*m*k], B[i*k*n:(i+1)*k*n], C[i*m*n:(i+1)*m*n]
			for j := 0; j < n; j++ {
				var s T
				for p := 0; p < k; p++ {
					av := a[r*k+p]
					if ta {
						av = a[p*m+r]
					}
					bv := b[p*n+j]
					if tb {
						bv = b[j*k+p]
					}
					s += av * bv
				}
				if beta == 0 {
					c[r*n+j] = alpha * s
				} else {
					c[r*n+j] = alpha*s + beta*c[r*n+j]
				}
			}
		}
	})
}

// Permute0213: dst[a,c,b,d] = src[a,b,c,d].
func (be *Backend) Permute0213(dst, src tensor.Tensor, d0, d1, d2, d3 int) {
	const op = "permute0213"
	dt, ok := be.floats(op, dst, src)
	if !ok || !be.check(tensor.CheckPermute0213(op, dst, src, d0, d1, d2, d3)) {
		return
	}
	if dt == tensor.Float32 {
		permute0213(be, data[float32](dst), data[float32](src), d0, d1, d2, d3)
	} else {
		permute0213(be, data[float64](dst), data[float64](src), d0, d1, d2, d3)
	}
}

func permute0213[T float](be *Backend, d, s []T, d0, d1, d2, d3 int) {
	be.par(d0*d1, max(1, elemGrain/max(1, d2*d3)), func(lo, hi int) {
		for ab := lo; ab < hi; ab++ {
			a, b := ab/d1, ab%d1
			for c := 0; c < d2; c++ {
				copy(d[((a*d2+c)*d1+b)*d3:][:d3], s[((a*d1+b)*d2+c)*d3:][:d3])
			}
		}
	})
}

// MaskedSoftmax: y = softmax(scale·x − 10000·(1 − mask)), sum + 1e-6.
func (be *Backend) MaskedSoftmax(y, x, mask tensor.Tensor, heads int, scale float64) {
	const op = "masked_softmax"
	dt, ok := be.floats(op, y, x, mask)
	if !ok {
		return
	}
	b, m, n, err := tensor.CheckMaskedSoftmax(op, y, x, mask, heads)
	if !be.check(err) {
		return
	}
	if dt == tensor.Float32 {
		maskedSoftmax(be, data[float32](y), data[float32](x), data[float32](mask), b, heads, m, n, scale)
	} else {
		maskedSoftmax(be, data[float64](y), data[float64](x), data[float64](mask), b, heads, m, n, scale)
	}
}

func maskedSoftmax[T float](be *Backend, y, x, mask []T, b, heads, m, n int, scale float64) {
	be.par(b*heads*m, max(1, elemGrain/n), func(lo, hi int) {
		for row := lo; row < hi; row++ {
			s, i := row/(heads*m), row%m
			xr, yr, mr := x[row*n:][:n], y[row*n:][:n], mask[(s*m+i)*n:][:n]
			mx := math.Inf(-1)
			for j, v := range xr {
				mx = max(mx, scale*float64(v)-10000*(1-float64(mr[j])))
			}
			var sum float64
			for j, v := range xr {
				e := math.Exp(scale*float64(v) - 10000*(1-float64(mr[j])) - mx)
				yr[j] = T(e)
				sum += e
			}
			inv := 1 / (sum + 1e-6)
			for j := range yr {
				yr[j] = T(float64(yr[j]) * inv)
			}
		}
	})
}

// LayerNorm normalizes rows of gamma.Len() elements.
func (be *Backend) LayerNorm(y, x, gamma, beta, mean, rstd tensor.Tensor, eps float64) {
	const op = "layer_norm"
	dt, ok := be.floats(op, y, x, gamma, beta, mean, rstd)
	if !ok {
		return
	}
	rows, err := tensor.CheckLayerNorm(op, y, x, gamma, beta, mean, rstd)
	if !be.check(err) {
		return
	}
	if dt == tensor.Float32 {
		layerNorm(be, data[float32](y), data[float32](x), data[float32](gamma), data[float32](beta), data[float32](mean), data[float32](rstd), rows, eps)
	} else {
		layerNorm(be, data[float64](y), data[float64](x), data[float64](gamma), data[float64](beta), data[float64](mean), data[float64](rstd), rows, eps)
	}
}

func layerNorm[T float](be *Backend, y, x, g, bt, mean, rstd []T, rows int, eps float64) {
	n := len(g)
	be.par(rows, max(1, elemGrain/n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*n:][:n], y[r*n:][:n]
			var s float64
			for _, v := range xr {
				s += float64(v)
			}
			mu := s / float64(n)
			var q float64
			for _, v := range xr {
				q += (float64(v) - mu) * (float64(v) - mu)
			}
			inv := 1 / math.Sqrt(q/float64(n)+eps)
			mean[r], rstd[r] = T(mu), T(inv)
			for j, v := range xr {
				yr[j] = T((float64(v)-mu)*inv*float64(g[j]) + float64(bt[j]))
			}
		}
	})
}

// LayerNormGrad: dgamma = Σ dy·x̂, dbeta = Σ dy, dx = rstd·(g − mean(g) −
// x̂·mean(g·x̂)) with g = dy·γ.
func (be *Backend) LayerNormGrad(dx, dgamma, dbeta, dy, x, gamma, mean, rstd tensor.Tensor) {
	const op = "layer_norm_grad"
	dt, ok := be.floats(op, dx, dgamma, dbeta, dy, x, gamma, mean, rstd)
	if !ok || !be.check(tensor.CheckSameLen(op, x, dy, dx)) || !be.check(tensor.CheckSameLen(op, gamma, dgamma, dbeta)) {
		return
	}
	rows, err := tensor.CheckLayerNorm(op, dy, x, gamma, dgamma, mean, rstd)
	if !be.check(err) {
		return
	}
	if dt == tensor.Float32 {
		layerNormGrad(be, opt[float32](dx), data[float32](dgamma), data[float32](dbeta), data[float32](dy), data[float32](x), data[float32](gamma), data[float32](mean), data[float32](rstd), rows)
	} else {
		layerNormGrad(be, opt[float64](dx), data[float64](dgamma), data[float64](dbeta), data[float64](dy), data[float64](x), data[float64](gamma), data[float64](mean), data[float64](rstd), rows)
	}
}

func layerNormGrad[T float](be *Backend, dx, dg, db, dy, x, g, mean, rstd []T, rows int) {
	n := len(g)
	for j := 0; j < n; j++ {
		var sg, sb float64
		for r := 0; r < rows; r++ {
			d := float64(dy[r*n+j])
			sg += d * (float64(x[r*n+j]) - float64(mean[r])) * float64(rstd[r])
			sb += d
		}
		dg[j], db[j] = T(sg), T(sb)
	}
	if dx == nil {
		return
	}
	be.par(rows, max(1, elemGrain/n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			mu, inv := float64(mean[r]), float64(rstd[r])
			var s1, s2 float64
			for j := 0; j < n; j++ {
				gj := float64(dy[r*n+j]) * float64(g[j])
				s1 += gj
				s2 += gj * (float64(x[r*n+j]) - mu) * inv
			}
			s1 /= float64(n)
			s2 /= float64(n)
			for j := 0; j < n; j++ {
				gj := float64(dy[r*n+j]) * float64(g[j])
				xh := (float64(x[r*n+j]) - mu) * inv
				dx[r*n+j] = T(inv * (gj - s1 - xh*s2))
			}
		}
	})
}

// SequenceMask: out[b,i,j] = (i < lenFrom[b] && j < lenTo[b]).
func (be *Backend) SequenceMask(out, lenFrom, lenTo tensor.Tensor, from, to int) {
	const op = "sequence_mask"
	dt, ok := be.floats(op, out, lenFrom, lenTo)
	if !ok || !be.check(tensor.CheckSequenceMask(op, out, lenFrom, lenTo, from, to)) {
		return
	}
	if dt == tensor.Float32 {
		sequenceMask(data[float32](out), data[float32](lenFrom), data[float32](lenTo), from, to)
	} else {
		sequenceMask(data[float64](out), data[float64](lenFrom), data[float64](lenTo), from, to)
	}
}

func sequenceMask[T float](out, lf, lt []T, from, to int) {
	for b := range lf {
		for i := 0; i < from; i++ {
			for j := 0; j < to; j++ {
				v := T(0)
				if T(i) < lf[b] && T(j) < lt[b] {
					v = 1
				}
				out[(b*from+i)*to+j] = v
			}
		}
	}
}

// GRUCell is one cuDNN GRU step (tensor.SeqOps).
func (be *Backend) GRUCell(h, save, xw, hw, hPrev tensor.Tensor) {
	const op = "gru_cell"
	dt, ok := be.floats(op, h, save, xw, hw, hPrev)
	if !ok {
		return
	}
	b, hid, err := tensor.CheckGRUCell(op, h, save, xw, hw, hPrev)
	if !be.check(err) {
		return
	}
	if dt == tensor.Float32 {
		gruCell(data[float32](h), data[float32](save), data[float32](xw), data[float32](hw), opt[float32](hPrev), b, hid)
	} else {
		gruCell(data[float64](h), data[float64](save), data[float64](xw), data[float64](hw), opt[float64](hPrev), b, hid)
	}
}

func gruCell[T float](h, save, xw, hw, hp []T, b, hid int) {
	for s := 0; s < b; s++ {
		x, w, sv := xw[s*3*hid:][:3*hid], hw[s*3*hid:][:3*hid], save[s*4*hid:][:4*hid]
		for j := 0; j < hid; j++ {
			r := 1 / (1 + math.Exp(-float64(x[j]+w[j])))
			z := 1 / (1 + math.Exp(-float64(x[hid+j]+w[hid+j])))
			hn := float64(w[2*hid+j])
			n := math.Tanh(float64(x[2*hid+j]) + r*hn)
			var p float64
			if hp != nil {
				p = float64(hp[s*hid+j])
			}
			h[s*hid+j] = T((1-z)*n + z*p)
			sv[j], sv[hid+j], sv[2*hid+j], sv[3*hid+j] = T(r), T(z), T(n), T(hn)
		}
	}
}

// GRUCellGrad is GRUCell's backward (tensor.SeqOps).
func (be *Backend) GRUCellGrad(dxw, dhw, dhPrev, dh, save, hPrev tensor.Tensor) {
	const op = "gru_cell_grad"
	dt, ok := be.floats(op, dxw, dhw, dhPrev, dh, save, hPrev)
	if !ok {
		return
	}
	b, hid, err := tensor.CheckGRUCell(op, dh, save, dxw, dhw, hPrev)
	if !be.check(err) || !be.check(tensor.CheckSameLen(op, dh, dhPrev)) {
		return
	}
	if dt == tensor.Float32 {
		gruCellGrad(data[float32](dxw), data[float32](dhw), opt[float32](dhPrev), data[float32](dh), data[float32](save), opt[float32](hPrev), b, hid)
	} else {
		gruCellGrad(data[float64](dxw), data[float64](dhw), opt[float64](dhPrev), data[float64](dh), data[float64](save), opt[float64](hPrev), b, hid)
	}
}

func gruCellGrad[T float](dxw, dhw, dhp, dh, save, hp []T, b, hid int) {
	for s := 0; s < b; s++ {
		sv := save[s*4*hid:][:4*hid]
		dx, dw := dxw[s*3*hid:][:3*hid], dhw[s*3*hid:][:3*hid]
		for j := 0; j < hid; j++ {
			r, z, n, hn := float64(sv[j]), float64(sv[hid+j]), float64(sv[2*hid+j]), float64(sv[3*hid+j])
			var p float64
			if hp != nil {
				p = float64(hp[s*hid+j])
			}
			g := float64(dh[s*hid+j])
			dan := g * (1 - z) * (1 - n*n)
			daz := g * (p - n) * z * (1 - z)
			dar := dan * hn * r * (1 - r)
			dx[j], dx[hid+j], dx[2*hid+j] = T(dar), T(daz), T(dan)
			dw[j], dw[hid+j], dw[2*hid+j] = T(dar), T(daz), T(dan*r)
			if dhp != nil {
				dhp[s*hid+j] = T(g * z)
			}
		}
	}
}
