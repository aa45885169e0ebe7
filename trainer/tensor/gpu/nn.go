package gpu

import (
	"fmt"
	"os"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The nn operations (kernels/nn.cu); shapes and errors mirror cpu/nn.go.

// interSharedMax is the most dynamic shared memory the fused interaction
// kernels may use per block; larger samples take the global-memory kernels.
// A variable so tests can force the fallback.
var interSharedMax = 96 << 10

// CTRKIT_INTERACTION picks the interaction kernels, an A/B switch and a kill
// switch: tc (the default) takes the tensor-core kernels where they apply
// (interHMMA for half operands, then interTC) and the warp-per-sample fp32
// kernels elsewhere; tf32 the same without the native half mma kernels
// (half operands take the TF32 ones); hmma64 the default with the
// 64-column native half mma forward (interaction_fwd_hmma64) in place of
// the 128-column one; warp takes the warp-per-sample kernels in every math
// mode; old the one-block-per-sample kernels for every shape. Variables so
// tests can cover each.
var (
	interOld    = strings.EqualFold(os.Getenv("CTRKIT_INTERACTION"), "old")
	interNoTC   = strings.EqualFold(os.Getenv("CTRKIT_INTERACTION"), "warp")
	interNoHMMA = strings.EqualFold(os.Getenv("CTRKIT_INTERACTION"), "tf32")
	interHMMA64 = strings.EqualFold(os.Getenv("CTRKIT_INTERACTION"), "hmma64")
)

// interEnvCheck refuses a CTRKIT_INTERACTION that names no kernel choice.
func interEnvCheck() error {
	switch v := os.Getenv("CTRKIT_INTERACTION"); strings.ToLower(v) {
	case "", "tc", "tf32", "hmma64", "warp", "old":
		return nil
	default:
		return fmt.Errorf("CTRKIT_INTERACTION=%q: want tc (the default), tf32, hmma64, warp or old", v)
	}
}

// interTC says whether the tensor-core interaction kernels apply
// (interaction_fwd_tc/bwd_tc, TF32 mma.sync): GEMM math TF32 or BF16 (they
// round F and the pair gradients to TF32 as a TF32 GEMM does — HugeCTR's
// fp32 Interaction is cuBLAS batched GEMMs; FP32 math keeps the exact fp32
// FMA kernels; interMath gives half operands TF32), compute capability 8.0
// or later, N = n+1 ≤ 32 vectors, d a multiple of 4, quad-aligned operands
// (interQuads), and CTRKIT_INTERACTION neither warp nor old.
func interTC(math cuda.Math, major, n, d int, quads ...tensor.Tensor) bool {
	if interOld || interNoTC || math == cuda.FP32 || major < 8 || n+1 > 32 || d%4 != 0 {
		return false
	}
	return interQuads(quads...)
}

// interHMMA says whether the native half mma interaction kernels apply
// (interaction_fwd_hmma/bwd_hmma, mma.sync m16n8k16 on float16 or
// bfloat16 with float32 accumulation): half operands, compute capability
// 8.0 or later, N = n+1 ≤ 32 vectors, d a multiple of 8, every operand
// given 16-byte aligned (their 8-element loads and stores; out and dOut
// need not be: the kernels check those themselves), and CTRKIT_INTERACTION
// none of tf32, warp and old. Half shapes they refuse take interTC's.
func interHMMA(dt tensor.DType, major, n, d int, aligned ...tensor.Tensor) bool {
	if !dt.IsHalf() || interOld || interNoTC || interNoHMMA || major < 8 || n+1 > 32 || d%8 != 0 {
		return false
	}
	for _, t := range aligned {
		if t.DType != dt || uintptr(p(t))%16 != 0 {
			return false
		}
	}
	return true
}

// interMath is the math mode interTC sees for operands of dtype dt: the
// backend's for float32, TF32 for Float16 and BFloat16, whose values TF32
// holds exactly (10 mantissa and 8 exponent bits), so that the tensor-core
// kernels' products are exact there in every mode, as an fp16/bf16 GEMM's
// with float32 accumulation are.
func interMath(math cuda.Math, dt tensor.DType) cuda.Math {
	if dt.IsHalf() {
		return cuda.TF32
	}
	return math
}

// interQuads says whether every operand's quads (4 elements: 16 bytes of
// float32, 8 of a half dtype) are aligned, as the vector loads and stores
// of the warp and tensor-core kernels need.
func interQuads(ts ...tensor.Tensor) bool {
	for _, t := range ts {
		if sz := uintptr(4 * t.DType.Size()); sz == 0 || uintptr(p(t))%sz != 0 {
			return false
		}
	}
	return true
}

// interKernel is the name of interaction kernel name for operands of dtype
// dt: the float32 kernel, or its _f16 / _bf16 instantiation (kernels/nn.cu's
// NN_STAMP).
func interKernel(name string, dt tensor.DType) string {
	switch dt {
	case tensor.Float16:
		return name + "_f16"
	case tensor.BFloat16:
		return name + "_bf16"
	}
	return name
}

// interTCBlocks is the grid of a tensor-core interaction kernel: one sample
// a warp, or on batches of more than 16 blocks an SM up to four a warp
// (each warp prefetching its next sample) while keeping 16 blocks an SM.
func (be *Backend) interTCBlocks(b, wpb int) int {
	blocks := (b + wpb - 1) / wpb
	if blocks > 16*be.sms {
		blocks = max(16*be.sms, (blocks+3)/4)
	}
	return blocks
}

// interTCWarps is the warps (samples in flight) per block of the tensor-core
// kernels, fewer when a warp's per floats of shared memory do not fit 8 in
// 48 KiB; 0 when one warp's do not fit in interSharedMax.
func interTCWarps(per int) int {
	if 4*per > interSharedMax {
		return 0
	}
	wpb := 8
	for wpb > 1 && wpb*4*per > 48<<10 {
		wpb /= 2
	}
	return wpb
}

// interWarps picks the warp-per-sample kernels (interaction_fwd4/bwd4):
// d a multiple of 4, quad-aligned operands (interQuads), per float4s of
// shared memory per warp within interSharedMax. wpb warps (samples) per
// block, as many as fit in 48 KiB (up to 4), so no opt-in is needed for
// DLRM's shape.
func interWarps(d, per int, quads ...tensor.Tensor) (wpb int, ok bool) {
	if interOld || d%4 != 0 || 16*per > interSharedMax || !interQuads(quads...) {
		return 0, false
	}
	wpb = 4
	for wpb > 1 && wpb*16*per > 48<<10 {
		wpb /= 2
	}
	return wpb, true
}

// nnLossParts bounds the blocks of the loss kernels (their double partials).
const nnLossParts = 1024

// nnAlign256 rounds a workspace offset up to 256 bytes.
func nnAlign256(n int) int { return (n + 255) &^ 255 }

// nnPresent fails with ErrShape when a required operand is absent.
func (be *Backend) nnPresent(op string, ts ...tensor.Tensor) bool {
	for _, t := range ts {
		if t.IsZero() {
			be.fail(op, tensor.ErrShape, "missing operand in %v", ts)
			return false
		}
	}
	return true
}

// Interaction is the DLRM dot interaction (SPEC §8). out, x0 and emb are
// all Float32, all Float16 or all BFloat16 (a half out is the float32
// result rounded once; x0's columns pass through exactly).
func (be *Backend) Interaction(out, x0, emb tensor.Tensor) {
	n, d, ok := be.interShape("interaction", out, x0, emb)
	if !ok || x0.Rows() == 0 {
		return
	}
	b, w, dt := x0.Rows(), out.Cols(), x0.DType
	k := func(name string) string { return interKernel(name, dt) }
	be.do("interaction", func(c *cuda.Ctx) error {
		// Native half mma: per warp the staged output row of T, ⌈W/8⌉
		// 16-byte groups (4 floats each).
		if interHMMA(dt, be.dev.Major, n, d, x0, emb) {
			if wpb := interTCWarps(4 * ((w + 7) / 8)); wpb > 0 {
				name := "interaction_fwd_hmma"
				if interHMMA64 {
					name = "interaction_fwd_hmma64"
				}
				return be.interLaunchN(c, k(name), be.interTCBlocks(b, wpb), 32*wpb, 16*wpb*((w+7)/8),
					p(out), p(x0), p(emb), b, n, d)
			}
		}
		// Tensor cores: per warp the staged output row, ⌈W/4⌉ float4s.
		if interTC(interMath(be.opts.Math, dt), be.dev.Major, n, d, x0, emb) {
			if wpb := interTCWarps((w + 3) &^ 3); wpb > 0 {
				return be.interLaunchN(c, k("interaction_fwd_tc"), be.interTCBlocks(b, wpb), 32*wpb, 4*wpb*((w+3)&^3),
					p(out), p(x0), p(emb), b, n, d)
			}
		}
		// Per warp: F as ⌈N/4⌉ groups of 4 rows (d+1 float4s each), then o.
		per4 := (n+4)/4*(d+1) + (w+3)/4
		if wpb, ok := interWarps(d, per4, x0, emb); ok {
			return be.interLaunch(c, k("interaction_fwd4"), (b+wpb-1)/wpb, 32*wpb, 16*wpb*per4, p(out), p(x0), p(emb), b, n, d)
		}
		T := (n + 2) / 2
		shm := 4 * ((n+1)*(d|1) + w)
		if shm > interSharedMax {
			return be.launch1(c, k("interaction_fwd_g"), b*w, p(out), p(x0), p(emb), n, d, int64(b)*int64(w))
		}
		threads := min(256, max(64, (T*(T+1)/2+31)&^31))
		return be.interLaunch(c, k("interaction_fwd"), b, threads, shm, p(out), p(x0), p(emb), b, n, d)
	})
}

// interShape checks the operands of Interaction (out, x0, emb) or
// InteractionGrad (dOut, x0, emb, then dx0, demb): present, one dtype among
// Float32, Float16 and BFloat16, and the shapes of tensor.InteractionShape.
func (be *Backend) interShape(op string, out, x0, emb tensor.Tensor, grads ...tensor.Tensor) (n, d int, ok bool) {
	ts := append([]tensor.Tensor{out, x0, emb}, grads...)
	if !be.halves(op, ts...) || !be.nnPresent(op, ts...) {
		return 0, 0, false
	}
	for _, t := range ts {
		if t.DType != x0.DType {
			be.fail(op, tensor.ErrDType, "operands %v: one dtype for all (float32, float16 or bfloat16)", ts)
			return 0, 0, false
		}
	}
	n, d, err := tensor.InteractionShape(op, out, x0, emb)
	return n, d, be.check(err)
}

// interLaunch runs a per-sample interaction kernel: a grid-stride over b
// samples, shm bytes of dynamic shared memory.
func (be *Backend) interLaunch(c *cuda.Ctx, name string, b, threads, shm int, args ...any) error {
	return be.interLaunchN(c, name, min(b, be.sms*16), threads, shm, args...)
}

// interLaunchN runs an interaction kernel on blocks blocks.
func (be *Backend) interLaunchN(c *cuda.Ctx, name string, blocks, threads, shm int, args ...any) error {
	if shm > 48<<10 {
		f, err := be.fn(c, name)
		if err != nil {
			return err
		}
		if err := c.SetMaxDynamicShared(f, shm); err != nil {
			return err
		}
	}
	return be.launch(c, name, cuda.D1(blocks), cuda.D1(threads), shm, args...)
}

// InteractionGrad writes dx0 and demb; its five operands are of one dtype
// (float32, float16 or bfloat16), as Interaction's.
func (be *Backend) InteractionGrad(dx0, demb, dOut, x0, emb tensor.Tensor) {
	const op = "interaction_grad"
	n, d, ok := be.interShape(op, dOut, x0, emb, dx0, demb)
	if !ok || !be.check(tensor.CheckSameLen(op, dx0, x0)) ||
		!be.check(tensor.CheckSameLen(op, demb, emb)) || x0.Rows() == 0 {
		return
	}
	b, dt := x0.Rows(), x0.DType
	k := func(name string) string { return interKernel(name, dt) }
	be.do(op, func(c *cuda.Ctx) error {
		// Native half mma: per warp the pair gradients of T, ⌈P/8⌉ 16-byte
		// groups (4 floats each).
		if interHMMA(dt, be.dev.Major, n, d, dx0, demb, x0, emb) {
			p8 := (n*(n+1)/2 + 7) / 8
			if wpb := interTCWarps(4 * p8); wpb > 0 {
				return be.interLaunchN(c, k("interaction_bwd_hmma"), be.interTCBlocks(b, wpb), 32*wpb, 16*wpb*p8,
					p(dx0), p(demb), p(dOut), p(x0), p(emb), b, n, d)
			}
		}
		// Tensor cores: per warp the pair gradients, rounded up to 4 floats.
		if interTC(interMath(be.opts.Math, dt), be.dev.Major, n, d, dx0, demb, x0, emb) {
			pairs := (n*(n+1)/2 + 3) &^ 3
			if wpb := interTCWarps(pairs); wpb > 0 {
				return be.interLaunchN(c, k("interaction_bwd_tc"), be.interTCBlocks(b, wpb), 32*wpb, 4*wpb*pairs,
					p(dx0), p(demb), p(dOut), p(x0), p(emb), b, n, d)
			}
		}
		nn, n4 := n+1, (n+4)&^3
		per4 := (nn*n4 + nn*d) / 4 // per warp: G [N][N4] floats, then F [N][d]
		if wpb, ok := interWarps(d, per4, dx0, demb, x0, emb); ok {
			return be.interLaunch(c, k("interaction_bwd4"), (b+wpb-1)/wpb, 32*wpb, 16*wpb*per4, p(dx0), p(demb), p(dOut), p(x0), p(emb), b, n, d)
		}
		shm := 4 * (nn*n4 + nn*d)
		if shm > interSharedMax {
			total := int64(b) * int64(nn) * int64(d)
			return be.launch1(c, k("interaction_bwd_g"), int(total), p(dx0), p(demb), p(dOut), p(x0), p(emb), n, d, total)
		}
		threads := min(256, max(64, ((n4/4)*d+31)&^31))
		return be.interLaunch(c, k("interaction_bwd"), b, threads, shm, p(dx0), p(demb), p(dOut), p(x0), p(emb), b, n, d)
	})
}

// FmOrder2: out[b,j] = ½((Σ_i v_ij)² − Σ_i v_ij²).
func (be *Backend) FmOrder2(out, in tensor.Tensor) {
	const op = "fm_order2"
	if !be.floats(op, out, in) || !be.nnPresent(op, out, in) || !be.check(tensor.CheckFmOrder2(op, out, in)) {
		return
	}
	k := out.Cols()
	total := out.Len()
	if total == 0 {
		return
	}
	f := in.Cols() / k
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "fm_order2", total, p(out), p(in), f, k, int64(total))
	})
}

// FmOrder2Grad: din[b,i,j] = dOut[b,j]·(Σ_i' v_i'j − v_ij).
func (be *Backend) FmOrder2Grad(din, dOut, in tensor.Tensor) {
	const op = "fm_order2_grad"
	if !be.floats(op, din, dOut, in) || !be.nnPresent(op, din, dOut, in) ||
		!be.check(tensor.CheckFmOrder2Grad(op, din, dOut, in)) {
		return
	}
	k := dOut.Cols()
	total := dOut.Len()
	if total == 0 {
		return
	}
	f := in.Cols() / k
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "fm_order2_grad", total, p(din), p(dOut), p(in), f, k, int64(total))
	})
}

// bnChunks splits rows into row chunks for bn_partial so that the (column
// tiles × chunks) grid fills the device: it returns the chunk count and
// the rows per chunk.
func (be *Backend) bnChunks(rows, cols int) (chunks, per int) {
	tiles := (cols + 31) / 32
	chunks = max(1, min((rows+63)/64, be.sms*8/tiles))
	per = (rows + chunks - 1) / chunks
	return (rows + per - 1) / per, per
}

// BatchNorm normalizes each column over the batch.
func (be *Backend) BatchNorm(p tensor.BNParams, training bool, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd tensor.Tensor) {
	const op = "batch_norm"
	if !be.floats(op, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd) ||
		!be.check(tensor.CheckBatchNorm(op, training, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)) {
		return
	}
	if !be.nnPresent(op, y, x, gamma, beta, runMean, runVar) || (training && !be.nnPresent(op, saveMean, saveInvStd)) {
		return
	}
	cols, total := gamma.Len(), x.Len()
	if cols == 0 || total == 0 {
		return
	}
	rows := total / cols
	be.do(op, func(c *cuda.Ctx) error {
		var m, iv cuda.Ptr
		if training {
			chunks, per := be.bnChunks(rows, cols)
			ws, err := be.workspace(c, chunks*2*cols*8)
			if err != nil {
				return err
			}
			grid := cuda.Dim3{X: (cols + 31) / 32, Y: chunks, Z: 1}
			if err := be.launch(c, "bn_partial", grid, cuda.Dim3{X: 32, Y: 8, Z: 1}, 0,
				ws, Ptr(x), cuda.Ptr(0), cuda.Ptr(0), cuda.Ptr(0), int64(rows), cols, int64(per)); err != nil {
				return err
			}
			if err := be.launch1(c, "bn_stats", cols, Ptr(saveMean), Ptr(saveInvStd), Ptr(runMean), Ptr(runVar),
				ws, Ptr(x), chunks, cols, int64(rows), p.Factor, p.Eps); err != nil {
				return err
			}
			m, iv = Ptr(saveMean), Ptr(saveInvStd)
		} else {
			ws, err := be.workspace(c, 2*nnAlign256(4*cols))
			if err != nil {
				return err
			}
			m, iv = ws, ws.Add(nnAlign256(4*cols))
			if err := be.launch1(c, "bn_infer_stats", cols, m, iv, Ptr(runMean), Ptr(runVar), cols, p.Eps); err != nil {
				return err
			}
		}
		return be.launch1(c, "bn_apply", total, Ptr(y), Ptr(x), Ptr(gamma), Ptr(beta), m, iv, cols, int64(total))
	})
}

// BatchNormGrad writes dx, dgamma and dbeta.
func (be *Backend) BatchNormGrad(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd tensor.Tensor) {
	const op = "batch_norm_grad"
	if !be.floats(op, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd) ||
		!be.check(tensor.CheckBatchNormGrad(op, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd)) ||
		!be.nnPresent(op, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd) {
		return
	}
	cols, total := gamma.Len(), x.Len()
	if cols == 0 {
		return
	}
	rows := total / cols
	be.do(op, func(c *cuda.Ctx) error {
		if rows == 0 { // CPU: dgamma = dbeta = 0
			if err := c.Memset32(Ptr(dgamma), 0, cols, be.s); err != nil {
				return err
			}
			return c.Memset32(Ptr(dbeta), 0, cols, be.s)
		}
		chunks, per := be.bnChunks(rows, cols)
		partBytes := nnAlign256(chunks * 2 * cols * 8)
		ws, err := be.workspace(c, partBytes+3*cols*8)
		if err != nil {
			return err
		}
		coef := ws.Add(partBytes)
		grid := cuda.Dim3{X: (cols + 31) / 32, Y: chunks, Z: 1}
		if err := be.launch(c, "bn_partial", grid, cuda.Dim3{X: 32, Y: 8, Z: 1}, 0,
			ws, Ptr(x), Ptr(dy), Ptr(saveMean), Ptr(saveInvStd), int64(rows), cols, int64(per)); err != nil {
			return err
		}
		if err := be.launch1(c, "bn_grad_stats", cols, Ptr(dgamma), Ptr(dbeta), coef, ws, Ptr(gamma), Ptr(saveInvStd),
			chunks, cols, int64(rows)); err != nil {
			return err
		}
		return be.launch1(c, "bn_grad_apply", total, Ptr(dx), Ptr(dy), Ptr(x), Ptr(saveMean), Ptr(saveInvStd), coef,
			cols, int64(rows), int64(total))
	})
}

// nnRowBlocks is the grid of a warp-per-row kernel (8 warps per block).
func (be *Backend) nnRowBlocks(rows, limit int) int {
	return max(1, min((rows+7)/8, limit))
}

// Softmax over each row.
func (be *Backend) Softmax(y, x tensor.Tensor) {
	const op = "softmax"
	if !be.floats(op, y, x) || !be.nnPresent(op, y, x) || !be.check(tensor.CheckSameLen(op, y, x)) {
		return
	}
	n := x.Cols()
	if n == 0 || x.Len() == 0 {
		return
	}
	rows := x.Len() / n
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch(c, "softmax_rows", cuda.D1(be.nnRowBlocks(rows, be.sms*32)), cuda.D1(256), 0,
			p(y), p(x), int64(rows), n)
	})
}

// SoftmaxGrad: dx = y⊙(dy − Σ dy⊙y).
func (be *Backend) SoftmaxGrad(dx, dy, y tensor.Tensor) {
	const op = "softmax_grad"
	if !be.floats(op, dx, dy, y) || !be.nnPresent(op, dx, dy, y) || !be.check(tensor.CheckSameLen(op, dx, dy, y)) {
		return
	}
	n := y.Cols()
	if n == 0 || y.Len() == 0 {
		return
	}
	rows := y.Len() / n
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch(c, "softmax_grad_rows", cuda.D1(be.nnRowBlocks(rows, be.sms*32)), cuda.D1(256), 0,
			p(dx), p(dy), p(y), int64(rows), n)
	})
}

// BCE is the fused sigmoid binary cross-entropy of SPEC §8: loss[0] is
// overwritten with the batch mean (block partials in double, then one
// block), dx (optional) = gradScale·w·(σ(x)−y). The logits x and dx may
// be Float16 or BFloat16 (dx is rounded after gradScale, fp16's loss
// scale, multiplies); loss, the labels y and the weights w are Float32.
func (be *Backend) BCE(loss, dx, x, y, w tensor.Tensor, gradScale float64) {
	be.bce("bce", loss, dx, x, y, w, gradScale, false)
}

// MaskedBCE is BCE where labels below −0.5 mask their entry (see
// tensor.Backend): loss 0 and dx 0, still counted in the mean.
func (be *Backend) MaskedBCE(loss, dx, x, y, w tensor.Tensor, gradScale float64) {
	be.bce("masked_bce", loss, dx, x, y, w, gradScale, true)
}

func (be *Backend) bce(op string, loss, dx, x, y, w tensor.Tensor, gradScale float64, mask bool) {
	if !be.halves(op, dx, x) || !be.floats(op, loss, y, w) || !be.nnPresent(op, loss, x, y) ||
		!be.check(tensor.CheckBCE(op, loss, dx, x, y, w)) {
		return
	}
	t := x.Cols()
	total := x.Len()
	m := int32(0)
	if mask {
		m = 1
	}
	be.do(op, func(c *cuda.Ctx) error {
		if total == 0 {
			return c.Memset32(Ptr(loss), 0, 1, be.s)
		}
		rows := total / max(t, 1)
		blocks := max(1, min((total+255)/256, nnLossParts))
		ws, err := be.workspace(c, blocks*8)
		if err != nil {
			return err
		}
		if x.DType == tensor.Float32 && (dx.IsZero() || dx.DType == tensor.Float32) {
			err = be.launch(c, "bce_partial", cuda.D1(blocks), cuda.D1(256), 0,
				ws, p(dx), p(x), p(y), p(w), t, m, float32(gradScale), int64(total))
		} else {
			err = be.launch(c, "bce_partial_h", cuda.D1(blocks), cuda.D1(256), 0,
				ws, p(dx), dt(dx), p(x), dt(x), p(y), p(w), t, m, float32(gradScale), int64(total))
		}
		if err != nil {
			return err
		}
		return be.launch(c, "nn_loss_final", cuda.D1(1), cuda.D1(256), 0, p(loss), ws, blocks, int64(rows))
	})
}

// SoftmaxCE is softmax cross-entropy against class-index labels. A label
// that is not a class in [0, C) is recorded on the device and reported as
// ErrRange at the next Sync.
func (be *Backend) SoftmaxCE(loss, dx, x, labels tensor.Tensor, gradScale float64) {
	const op = "softmax_ce"
	if !be.floats(op, loss, dx, x, labels) || !be.nnPresent(op, loss, x, labels) ||
		!be.check(tensor.CheckSoftmaxCE(op, loss, dx, x, labels)) {
		return
	}
	c, rows := x.Cols(), x.Rows()
	if rows == 0 { // the CPU leaves loss untouched
		return
	}
	be.do(op, func(cx *cuda.Ctx) error {
		blocks := be.nnRowBlocks(rows, nnLossParts)
		ws, err := be.workspace(cx, blocks*8)
		if err != nil {
			return err
		}
		if err := be.launch(cx, "softmax_ce_rows", cuda.D1(blocks), cuda.D1(256), 0,
			ws, p(dx), p(x), p(labels), be.flag, float32(gradScale), int64(rows), c); err != nil {
			return err
		}
		return be.launch(cx, "nn_loss_final", cuda.D1(1), cuda.D1(256), 0, p(loss), ws, blocks, int64(rows))
	})
}
