package gpu

import (
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The sequence and attention operations (kernels/seq.cu, cuBLAS strided
// batched GEMM); shapes and errors mirror cpu/seq.go.

// BatchedGemm: row-major C_i = alpha·op(A_i)·op(B_i) + beta·C_i through
// cublasSgemmStridedBatched (operands swapped, as Gemm).
func (be *Backend) BatchedGemm(transA, transB bool, batch, m, n, k int, alpha float64, a, b tensor.Tensor, beta float64, c tensor.Tensor) {
	const op = "batched_gemm"
	if !be.floats(op, a, b, c) || !be.nnPresent(op, a, b, c) || !be.check(tensor.CheckBatchedGemm(op, batch, m, n, k, a, b, c)) {
		return
	}
	if Ptr(c) == Ptr(a) || Ptr(c) == Ptr(b) {
		be.fail(op, tensor.ErrShape, "C aliases an operand")
		return
	}
	if batch == 0 || m == 0 || n == 0 {
		return
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	be.do(op, func(x *cuda.Ctx) error {
		return x.GemmStridedBatched(be.s, transB, transA, n, m, k, float32(alpha),
			Ptr(b), ldb, int64(k)*int64(n), Ptr(a), lda, int64(m)*int64(k),
			float32(beta), Ptr(c), n, int64(m)*int64(n), batch)
	})
}

// Permute0213: dst[a,c,b,d] = src[a,b,c,d].
func (be *Backend) Permute0213(dst, src tensor.Tensor, d0, d1, d2, d3 int) {
	const op = "permute0213"
	if !be.floats(op, dst, src) || !be.nnPresent(op, dst, src) || !be.check(tensor.CheckPermute0213(op, dst, src, d0, d1, d2, d3)) {
		return
	}
	if Ptr(dst) == Ptr(src) {
		be.fail(op, tensor.ErrShape, "dst aliases src")
		return
	}
	total := src.Len()
	if total == 0 {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "seq_permute0213", total, p(dst), p(src), d1, d2, d3, int64(total))
	})
}

// MaskedSoftmax: y = softmax(scale·x − 10000·(1 − mask)), sum + 1e-6.
func (be *Backend) MaskedSoftmax(y, x, mask tensor.Tensor, heads int, scale float64) {
	const op = "masked_softmax"
	if !be.floats(op, y, x, mask) || !be.nnPresent(op, y, x, mask) {
		return
	}
	b, m, n, err := tensor.CheckMaskedSoftmax(op, y, x, mask, heads)
	if !be.check(err) {
		return
	}
	rows := b * heads * m
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch(c, "seq_masked_softmax", cuda.D1(be.nnRowBlocks(rows, be.sms*32)), cuda.D1(256), 0,
			p(y), p(x), p(mask), int64(rows), heads, m, n, float32(scale))
	})
}

// LayerNorm normalizes rows of gamma.Len() elements.
func (be *Backend) LayerNorm(y, x, gamma, beta, mean, rstd tensor.Tensor, eps float64) {
	const op = "layer_norm"
	if !be.floats(op, y, x, gamma, beta, mean, rstd) || !be.nnPresent(op, y, x, gamma, beta, mean, rstd) {
		return
	}
	rows, err := tensor.CheckLayerNorm(op, y, x, gamma, beta, mean, rstd)
	if !be.check(err) || rows == 0 {
		return
	}
	n := gamma.Len()
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch(c, "seq_layer_norm", cuda.D1(be.nnRowBlocks(rows, be.sms*32)), cuda.D1(256), 0,
			p(y), p(x), p(gamma), p(beta), p(mean), p(rstd), int64(rows), n, float32(eps))
	})
}

// LayerNormGrad writes dx (when present), dgamma and dbeta.
func (be *Backend) LayerNormGrad(dx, dgamma, dbeta, dy, x, gamma, mean, rstd tensor.Tensor) {
	const op = "layer_norm_grad"
	if !be.floats(op, dx, dgamma, dbeta, dy, x, gamma, mean, rstd) || !be.nnPresent(op, dgamma, dbeta, dy, x, gamma, mean, rstd) ||
		!be.check(tensor.CheckSameLen(op, x, dy, dx)) || !be.check(tensor.CheckSameLen(op, gamma, dgamma, dbeta)) {
		return
	}
	rows, err := tensor.CheckLayerNorm(op, dy, x, gamma, dgamma, mean, rstd)
	if !be.check(err) {
		return
	}
	n := gamma.Len()
	be.do(op, func(c *cuda.Ctx) error {
		if err := be.launch(c, "seq_layer_norm_dparam", cuda.D1(min(n, be.sms*16)), cuda.D1(256), 0,
			p(dgamma), p(dbeta), p(dy), p(x), p(mean), p(rstd), int64(rows), n); err != nil {
			return err
		}
		if dx.IsZero() || rows == 0 {
			return nil
		}
		return be.launch(c, "seq_layer_norm_dx", cuda.D1(be.nnRowBlocks(rows, be.sms*32)), cuda.D1(256), 0,
			p(dx), p(dy), p(x), p(gamma), p(mean), p(rstd), int64(rows), n)
	})
}

// SequenceMask: out[b,i,j] = (i < lenFrom[b] && j < lenTo[b]).
func (be *Backend) SequenceMask(out, lenFrom, lenTo tensor.Tensor, from, to int) {
	const op = "sequence_mask"
	if !be.floats(op, out, lenFrom, lenTo) || !be.nnPresent(op, out, lenFrom, lenTo) ||
		!be.check(tensor.CheckSequenceMask(op, out, lenFrom, lenTo, from, to)) {
		return
	}
	total := out.Len()
	if total == 0 {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "seq_sequence_mask", total, p(out), p(lenFrom), p(lenTo), from, to, int64(total))
	})
}

// GRUCell is one cuDNN GRU step (tensor.SeqOps).
func (be *Backend) GRUCell(h, save, xw, hw, hPrev tensor.Tensor) {
	const op = "gru_cell"
	if !be.floats(op, h, save, xw, hw, hPrev) || !be.nnPresent(op, h, save, xw, hw) {
		return
	}
	b, hid, err := tensor.CheckGRUCell(op, h, save, xw, hw, hPrev)
	if !be.check(err) || b*hid == 0 {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "seq_gru_cell", b*hid, p(h), p(save), p(xw), p(hw), p(hPrev), hid, int64(b*hid))
	})
}

// GRUCellGrad is GRUCell's backward (tensor.SeqOps).
func (be *Backend) GRUCellGrad(dxw, dhw, dhPrev, dh, save, hPrev tensor.Tensor) {
	const op = "gru_cell_grad"
	if !be.floats(op, dxw, dhw, dhPrev, dh, save, hPrev) || !be.nnPresent(op, dxw, dhw, dh, save) {
		return
	}
	b, hid, err := tensor.CheckGRUCell(op, dh, save, dxw, dhw, hPrev)
	if !be.check(err) || !be.check(tensor.CheckSameLen(op, dh, dhPrev)) || b*hid == 0 {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "seq_gru_cell_grad", b*hid, p(dxw), p(dhw), p(dhPrev), p(dh), p(save), p(hPrev), hid, int64(b*hid))
	})
}
