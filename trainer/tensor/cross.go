package tensor

// CrossOps is implemented by backends with fused elementwise kernels for
// DCN's cross layer (MultiCross, SPEC §8): the CPU backend (so the float64
// reference computes what the GPU computes) and the GPU. A layer discovers
// it by type assertion; without it the layer runs the plain operations each
// comment names, which compute the same values. Operands must not alias.
//
// One v2 cross layer x' = x0 ⊙ (x·U·V + b) + x then costs two GEMMs and one
// CrossForward, and its backward one CrossBackward and four GEMMs:
//
//	forward   h = x·U, z = h·V                 Gemm, Gemm (z without the bias)
//	          x' = x0 ⊙ (z + b) + x            CrossForward
//	backward  dz = g ⊙ x0, db = Σ_rows dz,      CrossBackward (g = dL/dx')
//	          dx0 += g ⊙ (z + b)
//	          dV = hᵀ·dz, dh = dz·Vᵀ, dU = xᵀ·dh Gemm ×3
//	          dL/dx = g + dh·Uᵀ                 Gemm with beta 1 into a copy of g
type CrossOps interface {
	// CrossForward (DCN v2): y = x0 ⊙ (z + bias) + x for x0, z, x and y
	// [B, d] and bias [d]. Plain: AddBias(z, bias) (in place), Mul(y, 0,
	// x0, z), Axpby(y, 1, y, 1, x).
	CrossForward(y, x0, z, bias, x Tensor)
	// CrossForwardV1 (DCN v1): y[r,c] = x0[r,c]·s[r] + bias[c] + x[r,c] for
	// s [B] (or [B, 1]). Plain: RowScale(y, 0, x0, s), AddBias(y, bias),
	// Axpby(y, 1, y, 1, x).
	CrossForwardV1(y, x0, s, bias, x Tensor)
	// CrossBackward is the elementwise part of the v2 backward for g =
	// dL/dy of CrossForward (all [B, d] but db and bias [d]):
	//   dz = g ⊙ x0 and db = Σ_rows dz (both overwritten);
	//   unless dx0 is the zero Tensor, dx0 = beta·dx0 + g ⊙ (z + bias) + res·g
	//   (res 1 where x is x0 itself, so the residual path lands in dx0 too;
	//   dx0 is not read when beta is 0);
	//   unless gcopy is the zero Tensor, gcopy = g (the buffer the next
	//   GEMM accumulates dL/dx into).
	// Plain, with z holding z + bias (the plain forward's AddBias): Mul(dz,
	// 0, g, x0), ColSum(db, 0, dz), Mul(dx0, beta, g, z), Axpby(dx0, 1, dx0,
	// res, g), Copy(gcopy, g).
	CrossBackward(dz, db, dx0 Tensor, beta, res float64, gcopy, g, x0, z, bias Tensor)
}

// CheckCrossForward checks CrossForward's operands (v1 false: y, x0, z
// and x [B, d] of one length) and CrossForwardV1's (v1 true: z is s, one
// element per row of x0); bias has one element per column of x0.
func CheckCrossForward(op string, v1 bool, y, x0, z, bias, x Tensor) error {
	if y.IsZero() || x0.IsZero() || z.IsZero() || bias.IsZero() || x.IsZero() {
		return Errorf(op, ErrShape, "absent operand: y %v, x0 %v, z %v, bias %v, x %v", y, x0, z, bias, x)
	}
	if err := CheckSameLen(op, x0, y, x); err != nil {
		return err
	}
	rows, cols := x0.Rows(), x0.Cols()
	want := x0.Len()
	if v1 {
		want = rows
	}
	if bias.Len() != cols || z.Len() != want {
		return Errorf(op, ErrShape, "x0 %v with %v (want %d elements) and bias %v (want %d)", x0, z, want, bias, cols)
	}
	return nil
}

// CheckCrossBackward checks CrossBackward's operands: dz, g, x0, z and the
// present dx0, gcopy of one length, db and bias one element per column of
// x0.
func CheckCrossBackward(op string, dz, db, dx0, gcopy, g, x0, z, bias Tensor) error {
	if dz.IsZero() || db.IsZero() || g.IsZero() || x0.IsZero() || z.IsZero() || bias.IsZero() {
		return Errorf(op, ErrShape, "absent operand: dz %v, db %v, g %v, x0 %v, z %v, bias %v", dz, db, g, x0, z, bias)
	}
	if err := CheckSameLen(op, x0, dz, dx0, gcopy, g, z); err != nil {
		return err
	}
	if cols := x0.Cols(); db.Len() != cols || bias.Len() != cols {
		return Errorf(op, ErrShape, "db %v and bias %v for the columns of %v", db, bias, x0)
	}
	return nil
}
