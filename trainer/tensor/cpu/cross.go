package cpu

import "github.com/ctrkit/ctrkit/trainer/tensor"

// The fused cross-layer operations (tensor.CrossOps): the arithmetic of the
// GPU's kernels/multicross.cu in the tensor's dtype, the bias gradient
// accumulated in float64 per column like ColSum.

var _ tensor.CrossOps = (*Backend)(nil)

// CrossForward: y = x0 ⊙ (z + bias) + x.
func (be *Backend) CrossForward(y, x0, z, bias, x tensor.Tensor) {
	be.crossForward("cross_forward", false, y, x0, z, bias, x)
}

// CrossForwardV1: y[r,c] = x0[r,c]·s[r] + bias[c] + x[r,c].
func (be *Backend) CrossForwardV1(y, x0, s, bias, x tensor.Tensor) {
	be.crossForward("cross_forward_v1", true, y, x0, s, bias, x)
}

func (be *Backend) crossForward(op string, v1 bool, y, x0, z, bias, x tensor.Tensor) {
	dt, ok := be.floats(op, y, x0, z, bias, x)
	if !ok || !be.check(tensor.CheckCrossForward(op, v1, y, x0, z, bias, x)) {
		return
	}
	if dt == tensor.Float32 {
		crossFwd(be, v1, data[float32](y), data[float32](x0), data[float32](z), data[float32](bias), data[float32](x))
	} else {
		crossFwd(be, v1, data[float64](y), data[float64](x0), data[float64](z), data[float64](bias), data[float64](x))
	}
}

func crossFwd[T float](be *Backend, v1 bool, y, x0, z, b, x []T) {
	d := len(b)
	if d == 0 {
		return
	}
	rows := len(x0) / d
	be.par(rows, max(1, elemGrain/d), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o := r * d
			yr, x0r, xr := y[o:o+d], x0[o:o+d], x[o:o+d]
			if v1 {
				s := z[r]
				for c, bv := range b {
					yr[c] = x0r[c]*s + bv + xr[c]
				}
				continue
			}
			zr := z[o : o+d]
			for c, bv := range b {
				yr[c] = x0r[c]*(zr[c]+bv) + xr[c]
			}
		}
	})
}

// CrossBackward: dz = g ⊙ x0, db = Σ_rows dz, dx0 = beta·dx0 + g ⊙ (z +
// bias) + res·g (when present), gcopy = g (when present).
func (be *Backend) CrossBackward(dz, db, dx0 tensor.Tensor, beta, res float64, gcopy, g, x0, z, bias tensor.Tensor) {
	const op = "cross_backward"
	dt, ok := be.floats(op, dz, db, dx0, gcopy, g, x0, z, bias)
	if !ok || !be.check(tensor.CheckCrossBackward(op, dz, db, dx0, gcopy, g, x0, z, bias)) {
		return
	}
	if dt == tensor.Float32 {
		crossBwd(be, data[float32](dz), data[float32](db), opt[float32](dx0), float32(beta), float32(res),
			opt[float32](gcopy), data[float32](g), data[float32](x0), data[float32](z), data[float32](bias))
	} else {
		crossBwd(be, data[float64](dz), data[float64](db), opt[float64](dx0), beta, res,
			opt[float64](gcopy), data[float64](g), data[float64](x0), data[float64](z), data[float64](bias))
	}
}

func crossBwd[T float](be *Backend, dz, db, dx0 []T, beta, res T, gc, g, x0, z, b []T) {
	d := len(b)
	if d == 0 {
		return
	}
	rows := len(g) / d
	// One task per block of columns, over every row, so each column's sum
	// is one float64 accumulation in row order.
	const colBlock = 256
	nb := (d + colBlock - 1) / colBlock
	be.par(nb, max(1, elemGrain/max(1, rows*colBlock)), func(lo, hi int) {
		var acc [colBlock]float64
		for t := lo; t < hi; t++ {
			c0, c1 := t*colBlock, min((t+1)*colBlock, d)
			a := acc[:c1-c0]
			clear(a)
			for r := 0; r < rows; r++ {
				o := r * d
				for c := c0; c < c1; c++ {
					i := o + c
					gv := g[i]
					v := gv * x0[i]
					dz[i] = v
					a[c-c0] += float64(v)
					if dx0 != nil {
						w := gv*(z[i]+b[c]) + res*gv
						if beta != 0 {
							w += beta * dx0[i]
						}
						dx0[i] = w
					}
					if gc != nil {
						gc[i] = gv
					}
				}
			}
			for c := c0; c < c1; c++ {
				db[c] = T(a[c-c0])
			}
		}
	})
}
