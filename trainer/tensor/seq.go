package tensor

// SeqOps are the operations behind HugeCTR's sequence and attention layers
// (GRU, MultiHeadAttention, LayerNorm, MatrixMultiply, SequenceMask, masked
// Softmax; docs/LAYERS.md). Backend embeds it. Shapes are passed explicitly;
// tensors are checked for their element counts only.
type SeqOps interface {
	// BatchedGemm: for i < batch, C_i = alpha·op(A_i)·op(B_i) + beta·C_i,
	// where A, B and C hold batch consecutive row-major matrices: op(A_i)
	// m×k (A_i stored k×m when transA), op(B_i) k×n (stored n×k when
	// transB), C_i m×n. C must not alias A or B.
	BatchedGemm(transA, transB bool, batch, m, n, k int, alpha float64, a, b Tensor, beta float64, c Tensor)
	// Permute0213 sees src as [d0, d1, d2, d3] and writes dst[a, c, b, d]
	// = src[a, b, c, d] (dst is [d0, d2, d1, d3]): the head split and merge
	// of attention.
	Permute0213(dst, src Tensor, d0, d1, d2, d3 int)
	// MaskedSoftmax sees x and y as [B, heads, m, n] and mask as [B, m, n]
	// (one mask for every head): y = softmax_n(scale·x − 10000·(1 − mask))
	// with the row sum increased by 1e-6 (HugeCTR's MaskedSoftmaxLayer).
	// Its gradient is scale·SoftmaxGrad.
	MaskedSoftmax(y, x, mask Tensor, heads int, scale float64)
	// LayerNorm normalizes each row of n = gamma.Len() elements: y =
	// γ(x−μ)/√(σ²+eps) + β with the biased row variance; mean and rstd
	// (one per row) receive μ and 1/√(σ²+eps).
	LayerNorm(y, x, gamma, beta, mean, rstd Tensor, eps float64)
	// LayerNormGrad writes dx and dgamma, dbeta (overwritten) from dy.
	LayerNormGrad(dx, dgamma, dbeta, dy, x, gamma, mean, rstd Tensor)
	// SequenceMask: out [B, from, to], out[b,i,j] = 1 if i < lenFrom[b] and
	// j < lenTo[b], else 0; lenFrom and lenTo hold B lengths (float).
	SequenceMask(out, lenFrom, lenTo Tensor, from, to int)
	// GRUCell is one step of cuDNN's GRU (gate order r, z, n; one input
	// bias): xw [B, 3H] = x·Wᵀ + b, hw [B, 3H] = h_prev·Rᵀ; r = σ(xw_r +
	// hw_r), z = σ(xw_z + hw_z), n = tanh(xw_n + r⊙hw_n), h = (1−z)⊙n +
	// z⊙h_prev. h is [B, H]; save [B, 4H] receives r, z, n, hw_n for
	// GRUCellGrad. hPrev may be the zero Tensor (h_prev = 0).
	GRUCell(h, save, xw, hw, hPrev Tensor)
	// GRUCellGrad: from dh [B, H] (the total gradient of h) writes dxw and
	// dhw [B, 3H] (the gradients of the two pre-activations) and, when
	// dhPrev is present, dhPrev [B, H] = dh⊙z (the direct path; the caller
	// adds dhw·R).
	GRUCellGrad(dxw, dhw, dhPrev, dh, save, hPrev Tensor)
}

// CheckBatchedGemm checks BatchedGemm's operand lengths.
func CheckBatchedGemm(op string, batch, m, n, k int, a, b, c Tensor) error {
	if batch < 0 || m < 0 || n < 0 || k < 0 || a.Len() != batch*m*k || b.Len() != batch*k*n || c.Len() != batch*m*n {
		return Errorf(op, ErrShape, "%d × (%dx%d · %dx%d): %v, %v → %v", batch, m, k, k, n, a, b, c)
	}
	return nil
}

// CheckPermute0213 checks Permute0213's operand lengths.
func CheckPermute0213(op string, dst, src Tensor, d0, d1, d2, d3 int) error {
	n := d0 * d1 * d2 * d3
	if d0 < 0 || d1 < 0 || d2 < 0 || d3 < 0 || src.Len() != n || dst.Len() != n {
		return Errorf(op, ErrShape, "[%d,%d,%d,%d]: %v → %v", d0, d1, d2, d3, src, dst)
	}
	return nil
}

// CheckMaskedSoftmax checks MaskedSoftmax's operands and returns B, m, n
// (n is x's last dimension).
func CheckMaskedSoftmax(op string, y, x, mask Tensor, heads int) (b, m, n int, err error) {
	if err := CheckSameLen(op, y, x); err != nil {
		return 0, 0, 0, err
	}
	b = x.Rows()
	if heads <= 0 || len(x.Shape) == 0 || b == 0 || mask.Rows() != b || x.Cols()%heads != 0 {
		return 0, 0, 0, Errorf(op, ErrShape, "x %v, mask %v, %d heads", x, mask, heads)
	}
	n = x.Shape[len(x.Shape)-1]
	if n == 0 || x.Cols()/heads%n != 0 {
		return 0, 0, 0, Errorf(op, ErrShape, "x %v, mask %v, %d heads", x, mask, heads)
	}
	m = x.Cols() / heads / n
	if mask.Len() != b*m*n {
		return 0, 0, 0, Errorf(op, ErrShape, "mask %v for x %v (%d heads): want %d×%d×%d", mask, x, heads, b, m, n)
	}
	return b, m, n, nil
}

// CheckLayerNorm checks LayerNorm's operands and returns the row count.
func CheckLayerNorm(op string, y, x, gamma, beta, mean, rstd Tensor) (int, error) {
	if err := firstErr(CheckSameLen(op, y, x), CheckSameLen(op, gamma, beta), CheckSameLen(op, mean, rstd)); err != nil {
		return 0, err
	}
	n := gamma.Len()
	if n == 0 || x.Len()%n != 0 || mean.Len() != x.Len()/n {
		return 0, Errorf(op, ErrShape, "x %v, gamma %v, mean %v", x, gamma, mean)
	}
	return x.Len() / n, nil
}

// CheckSequenceMask checks SequenceMask's operands.
func CheckSequenceMask(op string, out, lenFrom, lenTo Tensor, from, to int) error {
	b := lenFrom.Len()
	if from <= 0 || to <= 0 || lenTo.Len() != b || out.Len() != b*from*to {
		return Errorf(op, ErrShape, "lengths %v, %v → %v (%d×%d)", lenFrom, lenTo, out, from, to)
	}
	return nil
}

// CheckGRUCell checks GRUCell's and GRUCellGrad's operands and returns B, H.
func CheckGRUCell(op string, h, save, xw, hw, hPrev Tensor) (b, hid int, err error) {
	b, hid = h.Rows(), h.Cols()
	if err := CheckSameLen(op, xw, hw); err != nil {
		return 0, 0, err
	}
	if xw.Len() != 3*b*hid || save.Len() != 4*b*hid || (!hPrev.IsZero() && hPrev.Len() != b*hid) {
		return 0, 0, Errorf(op, ErrShape, "h %v, save %v, xw %v, hw %v, h_prev %v", h, save, xw, hw, hPrev)
	}
	return b, hid, nil
}
