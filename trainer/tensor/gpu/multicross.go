package gpu

import (
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The fused cross-layer operations (tensor.CrossOps, kernels/multicross.cu):
// one pass over the [B, d] operands per call. Shape checks and op names
// follow the CPU backend (trainer/tensor/cpu cross.go).
//
// Precision: the activations (CrossForward's y, x0, z or s, x;
// CrossBackward's dz, dx0, gcopy, g, x0, z) are each Float32, Float16 or
// BFloat16, of its own dtype; bias and db are Float32. The arithmetic is
// float32 on the stored values, a half output the float32 result rounded
// once, and db the sum (in double) of the float32 products g·x0.

var _ tensor.CrossOps = (*Backend)(nil)

// crossVec is the vector width of the kernels: 4 elements when d is a
// multiple of 4 and every operand is aligned to 4 of its elements (16 bytes
// of float32, 8 of a half dtype), else 1.
func crossVec(cols int, ts ...tensor.Tensor) int {
	if cols%4 != 0 {
		return 1
	}
	for _, t := range ts {
		if t.Buf != nil && Ptr(t)%cuda.Ptr(4*t.DType.Size()) != 0 {
			return 1
		}
	}
	return 4
}

// crossDTypes checks the dtypes of a cross op: every operand Float32 or
// half, the per-column ones (bias, db) Float32. half reports whether an
// activation is half, so the call takes the _h kernels (dtype codes).
func (be *Backend) crossDTypes(op string, acts []tensor.Tensor, cols ...tensor.Tensor) (half, ok bool) {
	if !be.halves(op, append(acts, cols...)...) {
		return false, false
	}
	for _, t := range cols {
		if t.Buf != nil && t.DType != tensor.Float32 {
			be.fail(op, tensor.ErrDType, "%v: bias and db are float32 (the activations may be float16 or bfloat16)", t)
			return false, false
		}
	}
	for _, t := range acts {
		half = half || (t.Buf != nil && t.DType.IsHalf())
	}
	return half, true
}

// CrossForward: y = x0 ⊙ (z + bias) + x.
func (be *Backend) CrossForward(y, x0, z, bias, x tensor.Tensor) {
	be.crossForward("cross_forward", false, y, x0, z, bias, x)
}

// CrossForwardV1: y[r,c] = x0[r,c]·s[r] + bias[c] + x[r,c].
func (be *Backend) CrossForwardV1(y, x0, s, bias, x tensor.Tensor) {
	be.crossForward("cross_forward_v1", true, y, x0, s, bias, x)
}

func (be *Backend) crossForward(op string, v1 bool, y, x0, z, bias, x tensor.Tensor) {
	half, ok := be.crossDTypes(op, []tensor.Tensor{y, x0, z, x}, bias)
	if !ok || !be.check(tensor.CheckCrossForward(op, v1, y, x0, z, bias, x)) {
		return
	}
	n, cols := x0.Len(), x0.Cols()
	if n == 0 || cols == 0 {
		return
	}
	vec := crossVec(cols, y, x0, bias, x)
	if !v1 && crossVec(cols, z) == 1 {
		vec = 1
	}
	name, flag := "mc_fwd4", 0
	if vec == 1 {
		name = "mc_fwd1"
	}
	if v1 {
		flag = 1
	}
	nv := n / vec
	args := []any{p(y), p(x0), p(z), p(bias), p(x), int64(nv), int64(cols / vec), denseSmall(nv), flag}
	if half {
		name += "h"
		args = append(args, dt(y), dt(x0), dt(z), dt(x))
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, name, nv, args...)
	})
}

// crossPlan cuts the rows of CrossBackward into chunks, one block of 256
// threads per (column tile, chunk), so that the grid fits in one wave at 4
// blocks per SM (50% occupancy, which keeps enough 16-byte loads in flight
// to saturate HBM) and each chunk has at least 64 rows. The floor matters:
// a grid a few blocks over the resident count would run those few as a
// second wave, nearly doubling the time.
func (be *Backend) crossPlan(rows, colTiles int) (chunks, rowsPer int) {
	const minRows = 64
	target := be.sms * 4
	chunks = max(1, min(target/colTiles, (rows+minRows-1)/minRows, 65535))
	rowsPer = (rows + chunks - 1) / chunks
	return (rows + rowsPer - 1) / rowsPer, rowsPer
}

// CrossBackward: dz = g ⊙ x0 and db = Σ_rows dz; dx0 = beta·dx0 + g ⊙ (z +
// bias) + res·g when dx0 is present; gcopy = g when present.
func (be *Backend) CrossBackward(dz, db, dx0 tensor.Tensor, beta, res float64, gcopy, g, x0, z, bias tensor.Tensor) {
	const op = "cross_backward"
	half, ok := be.crossDTypes(op, []tensor.Tensor{dz, dx0, gcopy, g, x0, z}, db, bias)
	if !ok || !be.check(tensor.CheckCrossBackward(op, dz, db, dx0, gcopy, g, x0, z, bias)) {
		return
	}
	rows, cols := x0.Rows(), x0.Cols()
	if cols == 0 {
		return
	}
	if rows == 0 || x0.Len() == 0 {
		be.Fill(db, 0) // a sum over no rows
		return
	}
	vec := crossVec(cols, dz, dx0, gcopy, g, x0, z, bias)
	name := "mc_bwd4"
	if vec == 1 {
		name = "mc_bwd1"
	}
	colsv := cols / vec
	tiles := (colsv + 31) / 32
	chunks, rowsPer := be.crossPlan(rows, tiles)
	var codes []any
	if half {
		name += "h"
		codes = []any{dt(dz), dt(dx0), dt(gcopy), dt(g), dt(x0), dt(z)}
	}
	be.do(op, func(c *cuda.Ctx) error {
		var part cuda.Ptr
		if chunks > 1 {
			var err error
			if part, err = be.workspace(c, chunks*cols*8); err != nil {
				return err
			}
		}
		args := append([]any{p(dz), part, p(db), p(dx0), float32(beta), float32(res), p(gcopy), p(g), p(x0), p(z), p(bias),
			int64(rows), int64(colsv), int64(rowsPer)}, codes...)
		err := be.launch(c, name, cuda.Dim3{X: tiles, Y: chunks, Z: 1}, cuda.D1(256), 0, args...)
		if err != nil || chunks == 1 {
			return err
		}
		return be.launch1(c, "dense_reduce_final", cols, p(db), part, int64(cols), chunks, 1.0, 0.0)
	})
}
