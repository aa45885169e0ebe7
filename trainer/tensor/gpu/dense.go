package gpu

import (
	"math/bits"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The dense operations (kernels/dense.cu): shape checks and error
// sentinels follow the CPU backend (trainer/tensor/cpu ops.go, nn.go), op
// names included.
//
// Half precision: the activation-side operands of BiasAct, Act, ActGrad,
// AddBias, Axpby, Mul, RowScale, RowDot, ColSum, Reduce, Broadcast,
// CopyCols, Dropout and DropoutGrad may be Float32, Float16 or BFloat16,
// each operand its own dtype (a half output is the float32 result rounded
// once; reductions accumulate in double whatever the dtype). Parameters
// the ops read for arithmetic (BiasAct's bias) must be Float32. When every
// operand is Float32 the float32 kernels run, unchanged; otherwise their
// _h variants, which take each operand's dtype code. SumSquares, SumAbs and
// SignAxpy (regularizers of float32 weights) stay float32-only.

// denseSmall is 1 when every index below n fits in 32 bits, letting the
// kernels divide in 32-bit arithmetic.
func denseSmall(n int) int {
	if uint64(n) <= 1<<32-1 {
		return 1
	}
	return 0
}

// denseF32 reports whether every present operand is Float32 (the float32
// kernels); otherwise the _h kernels run.
func denseF32(ts ...tensor.Tensor) bool {
	for _, t := range ts {
		if t.Buf != nil && t.DType != tensor.Float32 {
			return false
		}
	}
	return true
}

// denseParam fails op unless the parameter operand t (absent allowed) is
// Float32: parameters stay float32 masters in half-precision training.
func (be *Backend) denseParam(op, what string, t tensor.Tensor) bool {
	if t.Buf != nil && t.DType != tensor.Float32 {
		be.fail(op, tensor.ErrDType, "%s %v must be float32 (half precision stores activations, not parameters)", what, t)
		return false
	}
	return true
}

// densePresent fails op when a required operand is absent although the
// operation has elements to touch (the CPU backend would panic).
func (be *Backend) densePresent(op string, n int, ts ...tensor.Tensor) bool {
	if n == 0 {
		return true
	}
	for _, t := range ts {
		if t.IsZero() {
			be.fail(op, tensor.ErrShape, "absent operand in %v", ts)
			return false
		}
	}
	return true
}

// AddBias: y[r,c] += bias[c].
func (be *Backend) AddBias(y, bias tensor.Tensor) {
	be.BiasAct(tensor.Identity, 0, y, y, bias)
}

// BiasAct: y = act(x + bias) per row; y may alias x.
func (be *Backend) BiasAct(a tensor.Activation, alpha float64, y, x, bias tensor.Tensor) {
	const op = "bias_act"
	if !be.halves(op, y, x, bias) || !be.denseParam(op, "bias", bias) || !be.check(tensor.CheckBiasAct(op, y, x, bias)) {
		return
	}
	n, cols := x.Len(), bias.Len()
	if cols == 0 || n == 0 || !be.densePresent(op, n, y, x) {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(y, x) {
			return be.launch1(c, "dense_bias_act", n, p(y), p(x), p(bias), int(a), float32(alpha),
				int64(n), int64(cols), denseSmall(n))
		}
		return be.launch1(c, "dense_bias_act_h", (n+1)/2, p(y), dt(y), p(x), dt(x), p(bias), int(a), float32(alpha),
			int64(n), int64(cols), denseSmall(n))
	})
}

// Act: y = act(x); y may alias x.
func (be *Backend) Act(a tensor.Activation, alpha float64, y, x tensor.Tensor) {
	const op = "act"
	if !be.halves(op, y, x) || !be.check(tensor.CheckSameLen(op, y, x)) {
		return
	}
	n := x.Len()
	if n == 0 || !be.densePresent(op, n, y, x) {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(y, x) {
			return be.launch1(c, "dense_act_fwd", n, p(y), p(x), int(a), float32(alpha), int64(n))
		}
		return be.launch1(c, "dense_act_fwd_h", (n+1)/2, p(y), dt(y), p(x), dt(x), int(a), float32(alpha), int64(n))
	})
}

// ActGrad: dx = dy·act'(x), reading y for ReLU and Sigmoid, x for ELU; dx
// may alias dy.
func (be *Backend) ActGrad(a tensor.Activation, alpha float64, dx, dy, x, y tensor.Tensor) {
	const op = "act_grad"
	if !be.halves(op, dx, dy, x, y) || !be.check(tensor.CheckActGrad(op, a, dx, dy, x, y)) {
		return
	}
	n := dx.Len()
	if n == 0 || !be.densePresent(op, n, dx, dy) {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(dx, dy, x, y) {
			return be.launch1(c, "dense_act_grad", n, p(dx), p(dy), p(x), p(y), int(a), float32(alpha), int64(n))
		}
		return be.launch1(c, "dense_act_grad_h", (n+1)/2, p(dx), dt(dx), p(dy), dt(dy), p(x), dt(x), p(y), dt(y),
			int(a), float32(alpha), int64(n))
	})
}

// Axpby: dst = a·x + b·y; y may be the zero Tensor; dst may alias x or y.
func (be *Backend) Axpby(dst tensor.Tensor, a float64, x tensor.Tensor, b float64, y tensor.Tensor) {
	const op = "axpby"
	if !be.halves(op, dst, x, y) || !be.check(tensor.CheckSameLen(op, dst, x, y)) {
		return
	}
	n := dst.Len()
	if n == 0 || !be.densePresent(op, n, dst, x) {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(dst, x, y) {
			return be.launch1(c, "dense_axpby", n, p(dst), float32(a), p(x), float32(b), p(y), int64(n))
		}
		return be.launch1(c, "dense_axpby_h", (n+1)/2, p(dst), dt(dst), float32(a), p(x), dt(x), float32(b), p(y), dt(y),
			int64(n))
	})
}

// Mul: dst = beta·dst + x⊙y.
func (be *Backend) Mul(dst tensor.Tensor, beta float64, x, y tensor.Tensor) {
	const op = "mul"
	if !be.halves(op, dst, x, y) || !be.check(tensor.CheckSameLen(op, dst, x, y)) {
		return
	}
	n := dst.Len()
	if n == 0 || !be.densePresent(op, n, dst, x, y) {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(dst, x, y) {
			return be.launch1(c, "dense_mul", n, p(dst), float32(beta), p(x), p(y), int64(n))
		}
		return be.launch1(c, "dense_mul_h", (n+1)/2, p(dst), dt(dst), float32(beta), p(x), dt(x), p(y), dt(y), int64(n))
	})
}

// RowScale: dst[r,c] = beta·dst[r,c] + x[r,c]·s[r]. s may be half as well
// (MultiCross's v1 scales x0 by an activation, x_l·w).
func (be *Backend) RowScale(dst tensor.Tensor, beta float64, x, s tensor.Tensor) {
	const op = "row_scale"
	if !be.halves(op, dst, x, s) || !be.check(tensor.CheckRowScale(op, dst, x, s)) {
		return
	}
	rows, n := s.Len(), x.Len()
	if rows == 0 || n == 0 || !be.densePresent(op, n, dst, x) {
		return
	}
	cols := n / rows
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(dst, x, s) {
			return be.launch1(c, "dense_row_scale", n, p(dst), float32(beta), p(x), p(s), int64(n), int64(cols), denseSmall(n))
		}
		return be.launch1(c, "dense_row_scale_h", (n+1)/2, p(dst), dt(dst), float32(beta), p(x), dt(x), p(s), dt(s),
			int64(n), int64(cols), denseSmall(n))
	})
}

// RowDot: dst[r] = Σ_c x[r,c]·y[r,c].
func (be *Backend) RowDot(dst, x, y tensor.Tensor) {
	const op = "row_dot"
	if !be.halves(op, dst, x, y) || !be.check(tensor.CheckRowDot(op, dst, x, y)) {
		return
	}
	rows := dst.Len()
	if rows == 0 || !be.densePresent(op, rows, dst, x, y) {
		return
	}
	cols := x.Len() / rows
	// One warp per row, 8 rows per 256-thread block.
	blocks := min((rows+7)/8, be.sms*32)
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(dst, x, y) {
			return be.launch(c, "dense_row_dot", cuda.D1(blocks), cuda.D1(256), 0, p(dst), p(x), p(y), int64(rows), int64(cols))
		}
		return be.launch(c, "dense_row_dot_h", cuda.D1(blocks), cuda.D1(256), 0, p(dst), dt(dst), p(x), dt(x), p(y), dt(y),
			int64(rows), int64(cols))
	})
}

// ColSum: dst[c] = beta·dst[c] + Σ_r x[r,c] (a bias gradient: a half dy
// is summed in double into a float32 dst).
func (be *Backend) ColSum(dst tensor.Tensor, beta float64, x tensor.Tensor) {
	const op = "col_sum"
	if !be.halves(op, dst, x) || !be.check(tensor.CheckColSum(op, dst, x)) {
		return
	}
	be.reduce(dst, beta, x, 1, x.Rows(), x.Cols(), 1)
}

// Reduce: dst[o,i] = scale·Σ_k src[o,k,i].
func (be *Backend) Reduce(dst, src tensor.Tensor, outer, n, inner int, scale float64) {
	be.reduce(dst, 0, src, outer, n, inner, scale)
}

// reducePlan shapes dense_reduce_part for [outer, n, inner]: TX = 2^txLog
// columns per tile (32, or the power of two covering a narrower inner),
// the k range cut into chunks of nPer when there are too few tiles to fill
// the GPU (then dense_reduce_final adds the chunks' partials), TY = 2^tyLog
// lanes per tile over k, and the number of blocks along x.
func (be *Backend) reducePlan(outer, n, inner int) (txLog, tyLog, nPer, chunks, blocks int) {
	const (
		minChunk = 256 // rows per chunk, at least
		maxTiles = 1 << 20
	)
	txLog = 5
	if inner < 32 {
		txLog = bits.Len(uint(inner - 1)) // ⌈log₂ inner⌉, 0 for inner = 1
	}
	tiles := outer * ((inner + 1<<txLog - 1) >> txLog)
	target := be.sms * 8 // resident 256-thread blocks
	chunks = 1
	if tiles < target && n > minChunk {
		chunks = min((target+tiles-1)/tiles, (n+minChunk-1)/minChunk, 65535)
	}
	nPer = max(1, (n+chunks-1)/chunks)
	if n > 0 {
		chunks = (n + nPer - 1) / nPer
	}
	// About four rows per lane, at most 256/TX lanes.
	tyLog = min(bits.Len(uint((nPer+3)/4-1)), 8-txLog)
	g := 256 >> (txLog + tyLog)
	blocks = min((tiles+g-1)/g, maxTiles)
	return txLog, tyLog, nPer, chunks, blocks
}

// reduce is Reduce with dst = beta·dst + scale·Σ (ColSum is outer 1).
func (be *Backend) reduce(dst tensor.Tensor, beta float64, src tensor.Tensor, outer, n, inner int, scale float64) {
	const op = "reduce"
	if !be.halves(op, dst, src) || !be.check(tensor.CheckReduce(op, dst, src, outer, n, inner)) {
		return
	}
	m := outer * inner
	if outer <= 0 || inner <= 0 || !be.densePresent(op, m, dst) || !be.densePresent(op, src.Len(), src) {
		return
	}
	txLog, tyLog, nPer, chunks, blocks := be.reducePlan(outer, n, inner)
	be.do(op, func(c *cuda.Ctx) error {
		var part cuda.Ptr
		if chunks > 1 {
			var err error
			if part, err = be.workspace(c, chunks*m*8); err != nil {
				return err
			}
		}
		grid := cuda.Dim3{X: blocks, Y: chunks, Z: 1}
		var err error
		if denseF32(dst, src) {
			err = be.launch(c, "dense_reduce_part", grid, cuda.D1(256), 0,
				p(dst), p(src), part, int64(outer), int64(n), int64(inner), txLog, tyLog, int64(nPer), scale, beta)
		} else {
			err = be.launch(c, "dense_reduce_part_h", grid, cuda.D1(256), 0,
				p(dst), dt(dst), p(src), dt(src), part, int64(outer), int64(n), int64(inner), txLog, tyLog, int64(nPer), scale, beta)
		}
		if err != nil || chunks == 1 {
			return err
		}
		if dst.DType == tensor.Float32 {
			return be.launch1(c, "dense_reduce_final", m, p(dst), part, int64(m), chunks, scale, beta)
		}
		return be.launch1(c, "dense_reduce_final_h", m, p(dst), dt(dst), part, int64(m), chunks, scale, beta)
	})
}

// Broadcast: dst[o,k,i] = beta·dst[o,k,i] + scale·src[o,i].
func (be *Backend) Broadcast(dst tensor.Tensor, beta float64, src tensor.Tensor, outer, n, inner int, scale float64) {
	const op = "broadcast"
	if !be.halves(op, dst, src) || !be.check(tensor.CheckBroadcast(op, dst, src, outer, n, inner)) {
		return
	}
	total := dst.Len()
	if total == 0 || outer <= 0 || n <= 0 || inner <= 0 || !be.densePresent(op, total, dst, src) {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(dst, src) {
			return be.launch1(c, "dense_broadcast", total, p(dst), float32(beta), p(src), int64(total), int64(n),
				int64(inner), float32(scale), denseSmall(total))
		}
		return be.launch1(c, "dense_broadcast_h", total, p(dst), dt(dst), float32(beta), p(src), dt(src), int64(total),
			int64(n), int64(inner), float32(scale), denseSmall(total))
	})
}

// CopyCols: dst[r, dc+j] = beta·dst[r, dc+j] + src[r, sc+j] for j < width.
// dst and src may be half (when their dtypes differ, the copy rounds to
// dst's).
func (be *Backend) CopyCols(dst tensor.Tensor, dstCol int, src tensor.Tensor, srcCol, width int, beta float64) {
	const op = "copy_cols"
	if !be.halves(op, dst, src) || !be.check(tensor.CheckCopyCols(op, dst, dstCol, src, srcCol, width)) {
		return
	}
	total := dst.Rows() * width
	if total == 0 || !be.densePresent(op, total, dst, src) {
		return
	}
	d, s := p(dst).Add(dst.DType.Size()*dstCol), p(src).Add(src.DType.Size()*srcCol)
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(dst, src) {
			return be.launch1(c, "dense_copy_cols", total, d, int64(dst.Cols()), s, int64(src.Cols()), int64(width),
				int64(total), float32(beta), denseSmall(total))
		}
		return be.launch1(c, "dense_copy_cols_h", total, d, dt(dst), int64(dst.Cols()), s, dt(src), int64(src.Cols()),
			int64(width), int64(total), float32(beta), denseSmall(total))
	})
}

// SumSquares: out[0] += scale·Σ x².
func (be *Backend) SumSquares(out tensor.Tensor, x tensor.Tensor, scale float64) {
	be.sumFn("sum_squares", out, x, scale, 0)
}

// SumAbs: out[0] += scale·Σ|x|.
func (be *Backend) SumAbs(out tensor.Tensor, x tensor.Tensor, scale float64) {
	be.sumFn("sum_abs", out, x, scale, 1)
}

// sumFn reduces x in two launches: one double partial per block of
// dense_sum_part (at most 1024 blocks), then one block adding them in
// order into out[0], so the result is deterministic and free of atomics.
func (be *Backend) sumFn(op string, out, x tensor.Tensor, scale float64, absval int) {
	if !be.floats(op, out, x) || out.Len() < 1 {
		return
	}
	n := x.Len()
	if !be.densePresent(op, n, x) {
		return
	}
	parts := max(1, min((n+255)/256, 1024, be.sms*4))
	be.do(op, func(c *cuda.Ctx) error {
		part, err := be.workspace(c, parts*8)
		if err != nil {
			return err
		}
		if err := be.launch(c, "dense_sum_part", cuda.D1(parts), cuda.D1(256), 0, part, p(x), int64(n), absval); err != nil {
			return err
		}
		return be.launch(c, "dense_sum_final", cuda.D1(1), cuda.D1(256), 0, p(out), part, parts, scale)
	})
}

// SignAxpy: dst += a·sign(x).
func (be *Backend) SignAxpy(dst tensor.Tensor, a float64, x tensor.Tensor) {
	const op = "sign_axpy"
	if !be.floats(op, dst, x) || !be.check(tensor.CheckSameLen(op, dst, x)) {
		return
	}
	n := dst.Len()
	if n == 0 || !be.densePresent(op, n, dst, x) {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "dense_sign_axpy", n, p(dst), float32(a), p(x), int64(n))
	})
}

// Dropout: y = x·keep/(1−rate), keep from tensor.PhiloxUniform ≥ rate
// (the same mask whatever the dtypes of y and x).
func (be *Backend) Dropout(y, x tensor.Tensor, rate float64, seed, counter uint64) {
	be.dropout("dropout", y, x, rate, seed, counter)
}

// DropoutGrad: dx = dy·keep/(1−rate) with Dropout's mask.
func (be *Backend) DropoutGrad(dx, dy tensor.Tensor, rate float64, seed, counter uint64) {
	be.dropout("dropout_grad", dx, dy, rate, seed, counter)
}

func (be *Backend) dropout(op string, y, x tensor.Tensor, rate float64, seed, counter uint64) {
	if !be.halves(op, y, x) || !be.check(tensor.CheckDropout(op, y, x, rate)) {
		return
	}
	n := x.Len()
	if n == 0 || !be.densePresent(op, n, y, x) {
		return
	}
	r := float32(rate)
	scale := 1 / (1 - r) // in float32, as the CPU's float32 path
	// A CUDA graph step's counter goes to its scalar block (graph.go).
	dyn := be.stepScalars(counter, 0)
	if dyn != 0 {
		counter = 0
	}
	be.do(op, func(c *cuda.Ctx) error {
		if denseF32(y, x) {
			return be.launch1(c, "dense_dropout", (n+3)/4, p(y), p(x), int64(n), r, scale, seed, counter, dyn)
		}
		return be.launch1(c, "dense_dropout_h", (n+3)/4, p(y), dt(y), p(x), dt(x), int64(n), r, scale, seed, counter, dyn)
	})
}
