package cpu

import "github.com/ctrkit/ctrkit/trainer/tensor"

// Gemm: C = alpha·op(A)·op(B) + beta·C, row-major.
//
// Both operands are packed (which also absorbs the transposes): A into
// panels of 4 rows, k-major, B into panels of up to 64 columns, k-major. A
// 4×64 tile of C accumulates over the full K in the dtype, so every output
// element is the sequential float sum over k = 0…K−1 before alpha and beta
// are applied. Tasks (64 rows of C × one B panel) are spread over the
// workers; within a task the B panel stays in cache across 16 A panels.
func (be *Backend) Gemm(transA, transB bool, alpha float64, a, b tensor.Tensor, beta float64, c tensor.Tensor) {
	dt, ok := be.floats("gemm", a, b, c)
	if !ok {
		return
	}
	m, k, n, err := tensor.GemmShape("gemm", transA, transB, a, b, c)
	if !be.check(err) {
		return
	}
	if dt == tensor.Float32 {
		be.pack32 = grow(be.pack32, packLen(m, n, k))
		gemm(be, transA, transB, float32(alpha), data[float32](a), data[float32](b), float32(beta), data[float32](c), m, n, k, be.pack32)
	} else {
		be.pack64 = grow(be.pack64, packLen(m, n, k))
		gemm(be, transA, transB, alpha, data[float64](a), data[float64](b), beta, data[float64](c), m, n, k, be.pack64)
	}
}

// Panel widths: A is packed in panels of mr rows, B in panels of up to
// nbMax columns (narrower when N is small, so a [B,1] output does not pay for
// 64 columns).
const (
	mr     = 4
	nbMax  = 64
	blockP = 16 // A panels per task: 64 rows of C
)

func panelWidth(n int) int { return min(nbMax, (n+3)/4*4) }

func packLen(m, n, k int) int {
	nb := panelWidth(n)
	return ((m+mr-1)/mr*mr + (n+nb-1)/nb*nb) * k
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func gemm[T float](be *Backend, ta, tb bool, alpha T, A, B []T, beta T, C []T, m, n, k int, pack []T) {
	if m == 0 || n == 0 {
		return
	}
	grain := max(1, 16384/max(k, 1))
	if n <= mr && !ta {
		gemmNarrow(be, tb, alpha, A, B, beta, C, m, n, k, pack, grain)
		return
	}
	nb := panelWidth(n)
	mp, np := (m+mr-1)/mr, (n+nb-1)/nb
	ap, bp := pack[:mp*mr*k], pack[mp*mr*k:]
	// Pack A: ap[(p*k + kk)*mr + r] = op(A)[mr·p+r, kk].
	be.par(mp, grain, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			dst := ap[p*mr*k : (p+1)*mr*k]
			for r := 0; r < mr; r++ {
				i := mr*p + r
				switch {
				case i >= m:
					for kk := 0; kk < k; kk++ {
						dst[kk*mr+r] = 0
					}
				case !ta:
					for kk, v := range A[i*k : i*k+k] {
						dst[kk*mr+r] = v
					}
				default:
					for kk := 0; kk < k; kk++ {
						dst[kk*mr+r] = A[kk*m+i]
					}
				}
			}
		}
	})
	// Pack B: bp[(q*k + kk)*nb + c] = op(B)[kk, nb·q+c].
	be.par(np, max(1, grain/nb), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			dst := bp[q*nb*k : (q+1)*nb*k]
			j0, j1 := q*nb, min((q+1)*nb, n)
			for kk := 0; kk < k; kk++ {
				row := dst[kk*nb : kk*nb+nb]
				if !tb {
					copy(row, B[kk*n+j0:kk*n+j1])
				} else {
					for j := j0; j < j1; j++ {
						row[j-j0] = B[j*k+kk]
					}
				}
				clear(row[j1-j0:])
			}
		}
	})
	// Tasks: (block of blockP A panels) × (one B panel).
	nblk := (mp + blockP - 1) / blockP
	be.par(nblk*np, max(1, grain/(blockP*nb)), func(lo, hi int) {
		var accBuf [mr * nbMax]T
		acc := accBuf[:mr*nb]
		for task := lo; task < hi; task++ {
			blk, q := task/np, task%np
			bq := bp[q*nb*k : (q+1)*nb*k]
			j0, j1 := q*nb, min((q+1)*nb, n)
			for p := blk * blockP; p < min((blk+1)*blockP, mp); p++ {
				clear(acc)
				kernel(ap[p*mr*k:(p+1)*mr*k], bq, acc, nb)
				for r := 0; r < mr; r++ {
					i := mr*p + r
					if i >= m {
						break
					}
					crow := C[i*n+j0 : i*n+j1]
					ar := acc[r*nb : r*nb+len(crow)]
					if beta == 0 {
						for j, v := range ar {
							crow[j] = alpha * v
						}
					} else {
						for j, v := range ar {
							crow[j] = alpha*v + beta*crow[j]
						}
					}
				}
			}
		}
	})
}

// kernel accumulates the mr×nb tile acc += a·b over k: a is an A panel
// [k][mr], b a B panel [k][nb]. Each output element is summed over k in
// order; the rows are independent axpys, which Go compiles to a loop with
// no loop-carried register dependency (faster than a register tile here).
func kernel[T float](a, b, acc []T, nb int) {
	c0, c1, c2, c3 := acc[0:nb:nb], acc[nb:2*nb:2*nb], acc[2*nb:3*nb:3*nb], acc[3*nb:4*nb:4*nb]
	k := len(a) / mr
	b = b[:k*nb]
	for kk := 0; kk < k; kk++ {
		aa := a[kk*mr : kk*mr+mr : kk*mr+mr]
		a0, a1, a2, a3 := aa[0], aa[1], aa[2], aa[3]
		bb := b[kk*nb : kk*nb+nb : kk*nb+nb]
		c0, c1, c2, c3 := c0[:len(bb)], c1[:len(bb)], c2[:len(bb)], c3[:len(bb)]
		for j, x := range bb {
			c0[j] += a0 * x
			c1[j] += a1 * x
			c2[j] += a2 * x
			c3[j] += a3 * x
		}
	}
}

// gemmNarrow handles N ≤ 4 with row-major A (the [B,1] logit layer, DCN v1's
// x·w): packing A would cost as much as the product, so each row of A is
// dotted with the (packed) columns of B directly, k in order.
func gemmNarrow[T float](be *Backend, tb bool, alpha T, A, B []T, beta T, C []T, m, n, k int, pack []T, grain int) {
	bt := pack[:n*k] // bt[j*k+kk] = op(B)[kk, j]
	for j := 0; j < n; j++ {
		for kk := 0; kk < k; kk++ {
			if tb {
				bt[j*k+kk] = B[j*k+kk]
			} else {
				bt[j*k+kk] = B[kk*n+j]
			}
		}
	}
	be.par(m, grain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a := A[i*k : i*k+k]
			for j := 0; j < n; j++ {
				b := bt[j*k : j*k+k]
				b = b[:len(a)]
				var acc T
				for kk, v := range a {
					acc += v * b[kk]
				}
				v := alpha * acc
				if beta != 0 {
					v += beta * C[i*n+j]
				}
				C[i*n+j] = v
			}
		}
	})
}
