package tensor

// Operand checks shared by the backends. Each checks shapes, lengths and
// fixed dtypes only (ownership and the float dtype are the backend's own
// checks, done first) and returns nil or an *OpError for op wrapping
// ErrShape, which a backend records as its sticky error. They allocate
// only on failure: the backends call them on every operation.

// CheckSameLen reports a present tensor of ts[1:] whose length differs from
// ts[0]'s (absent tensors are skipped).
func CheckSameLen(op string, ts ...Tensor) error {
	for _, t := range ts[1:] {
		if t.Buf != nil && t.Len() != ts[0].Len() {
			return Errorf(op, ErrShape, "lengths differ: %v", ts)
		}
	}
	return nil
}

// CheckWant reports t unless it has dtype dt and at least n elements.
func CheckWant(op string, t Tensor, dt DType, n int) error {
	if t.DType != dt || t.Len() < n {
		return Errorf(op, ErrShape, "%v: want %v with ≥%d elements", t, dt, n)
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckCopy checks Copy's operands: same dtype and length.
func CheckCopy(op string, dst, src Tensor) error {
	if dst.DType != src.DType || dst.Len() != src.Len() {
		return Errorf(op, ErrShape, "%v ← %v", dst, src)
	}
	return nil
}

// CheckConvert checks Convert's operands: both present, same length.
func CheckConvert(op string, dst, src Tensor) error {
	if dst.IsZero() || src.IsZero() || dst.Len() != src.Len() {
		return Errorf(op, ErrShape, "%v ← %v", dst, src)
	}
	return nil
}

// GemmShape checks C = op(A)·op(B) and returns op(A)'s m×k and op(B)'s
// width n.
func GemmShape(op string, transA, transB bool, a, b, c Tensor) (m, k, n int, err error) {
	m, k = a.Rows(), a.Cols()
	if transA {
		m, k = k, m
	}
	kb, n := b.Rows(), b.Cols()
	if transB {
		kb, n = n, kb
	}
	if kb != k || c.Rows() != m || c.Cols() != n {
		return 0, 0, 0, Errorf(op, ErrShape, "%v × %v → %v (transA %v, transB %v): op(A) %dx%d · op(B) %dx%d",
			a, b, c, transA, transB, m, k, kb, n)
	}
	return m, k, n, nil
}

// CheckBiasAct checks y = act(x + bias): y and x of one length, bias one
// element per column of x.
func CheckBiasAct(op string, y, x, bias Tensor) error {
	if err := CheckSameLen(op, y, x); err != nil {
		return err
	}
	if bias.Len() != x.Cols() {
		return Errorf(op, ErrShape, "bias %v for %v", bias, x)
	}
	return nil
}

// CheckActGrad checks ActGrad's operands: one length, and x present for
// ELU, y for ReLU and Sigmoid.
func CheckActGrad(op string, a Activation, dx, dy, x, y Tensor) error {
	if err := CheckSameLen(op, dx, dy, x, y); err != nil {
		return err
	}
	if (a == ELU && x.IsZero()) || ((a == ReLU || a == Sigmoid) && y.IsZero()) {
		return Errorf(op, ErrShape, "missing x (ELU) or y (ReLU, Sigmoid)")
	}
	return nil
}

// CheckRowScale checks dst = beta·dst + x·s[row]: dst and x of one length,
// s one element per row of x.
func CheckRowScale(op string, dst, x, s Tensor) error {
	if err := CheckSameLen(op, dst, x); err != nil {
		return err
	}
	if s.Len() != x.Rows() {
		return Errorf(op, ErrShape, "scale %v for %v", s, x)
	}
	return nil
}

// CheckRowDot checks dst[r] = Σ_c x[r,c]·y[r,c]: x and y of one length, dst
// one element per row.
func CheckRowDot(op string, dst, x, y Tensor) error {
	if err := CheckSameLen(op, x, y); err != nil {
		return err
	}
	if dst.Len() != x.Rows() {
		return Errorf(op, ErrShape, "%v for %v", dst, x)
	}
	return nil
}

// CheckColSum checks that dst has one element per column of x.
func CheckColSum(op string, dst, x Tensor) error {
	if dst.Len() != x.Cols() {
		return Errorf(op, ErrShape, "%v for columns of %v", dst, x)
	}
	return nil
}

// CheckReduce checks src as [outer, n, inner] and dst as [outer, inner].
func CheckReduce(op string, dst, src Tensor, outer, n, inner int) error {
	if src.Len() != outer*n*inner || dst.Len() != outer*inner {
		return Errorf(op, ErrShape, "%v → %v as [%d,%d,%d]", src, dst, outer, n, inner)
	}
	return nil
}

// CheckBroadcast checks dst as [outer, n, inner] and src as [outer, inner].
func CheckBroadcast(op string, dst, src Tensor, outer, n, inner int) error {
	if dst.Len() != outer*n*inner || src.Len() != outer*inner {
		return Errorf(op, ErrShape, "%v → %v as [%d,%d,%d]", src, dst, outer, n, inner)
	}
	return nil
}

// CheckCopyCols checks that both column ranges of CopyCols lie inside their
// matrices, which have the same rows.
func CheckCopyCols(op string, dst Tensor, dstCol int, src Tensor, srcCol, width int) error {
	if dst.Rows() != src.Rows() || dstCol < 0 || srcCol < 0 || width < 0 || dstCol+width > dst.Cols() || srcCol+width > src.Cols() {
		return Errorf(op, ErrShape, "%v[:, %d:+%d] ← %v[:, %d:+%d]", dst, dstCol, width, src, srcCol, width)
	}
	return nil
}

// CheckDropout checks Dropout's operands (one length) and rate ∈ [0, 1).
func CheckDropout(op string, y, x Tensor, rate float64) error {
	if err := CheckSameLen(op, y, x); err != nil {
		return err
	}
	if !(rate >= 0 && rate < 1) {
		return Errorf(op, ErrShape, "rate %v outside [0,1)", rate)
	}
	return nil
}

// InteractionShape checks x0 [B,d], emb [B, n·d] and out [B, d +
// n(n+1)/2 + 1] and returns n and d.
func InteractionShape(op string, out, x0, emb Tensor) (n, d int, err error) {
	b, d := x0.Rows(), x0.Cols()
	if d == 0 || emb.Rows() != b || out.Rows() != b || emb.Cols()%d != 0 {
		return 0, 0, Errorf(op, ErrShape, "x0 %v emb %v out %v", x0, emb, out)
	}
	n = emb.Cols() / d
	if w := d + n*(n+1)/2 + 1; out.Cols() != w {
		return 0, 0, Errorf(op, ErrShape, "out %v, want width %d", out, w)
	}
	return n, d, nil
}

// CheckFmOrder2 checks in [B, f·k] against out [B, k] (k > 0).
func CheckFmOrder2(op string, out, in Tensor) error {
	if k := out.Cols(); in.Rows() != out.Rows() || k == 0 || in.Cols()%k != 0 {
		return Errorf(op, ErrShape, "%v → %v", in, out)
	}
	return nil
}

// CheckFmOrder2Grad checks din against in (one length), then in against
// dOut as CheckFmOrder2 does.
func CheckFmOrder2Grad(op string, din, dOut, in Tensor) error {
	return firstErr(CheckSameLen(op, din, in), CheckFmOrder2(op, dOut, in))
}

// CheckBatchNorm checks BatchNorm's lengths: y as x, the six per-column
// tensors one element per column of x; training needs two rows.
func CheckBatchNorm(op string, training bool, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd Tensor) error {
	if err := firstErr(CheckSameLen(op, y, x), CheckSameLen(op, gamma, beta, runMean, runVar, saveMean, saveInvStd)); err != nil {
		return err
	}
	if gamma.Len() != x.Cols() || (training && x.Rows() < 2) {
		return Errorf(op, ErrShape, "gamma %v for %v (training needs ≥2 rows)", gamma, x)
	}
	return nil
}

// CheckBatchNormGrad checks BatchNormGrad's lengths: dx and dy as x, the
// per-column tensors one element per column of x.
func CheckBatchNormGrad(op string, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd Tensor) error {
	if err := firstErr(CheckSameLen(op, dx, dy, x), CheckSameLen(op, gamma, dgamma, dbeta, saveMean, saveInvStd)); err != nil {
		return err
	}
	if gamma.Len() != x.Cols() {
		return Errorf(op, ErrShape, "gamma %v for %v", gamma, x)
	}
	return nil
}

// CheckBCE checks BCE's operands: x, dx and y of one length, loss with an
// element, weights (when present) one per column of x.
func CheckBCE(op string, loss, dx, x, y, w Tensor) error {
	if err := CheckSameLen(op, x, dx, y); err != nil {
		return err
	}
	if loss.Len() < 1 || (!w.IsZero() && w.Len() != x.Cols()) {
		return Errorf(op, ErrShape, "loss %v weights %v for %v", loss, w, x)
	}
	return nil
}

// CheckSoftmaxCE checks SoftmaxCE's operands: dx as x, one label per row,
// loss with an element, at least one class.
func CheckSoftmaxCE(op string, loss, dx, x, labels Tensor) error {
	if err := CheckSameLen(op, x, dx); err != nil {
		return err
	}
	if labels.Len() != x.Rows() || loss.Len() < 1 || x.Cols() == 0 {
		return Errorf(op, ErrShape, "labels %v for %v", labels, x)
	}
	return nil
}

// CheckHashTable checks a HashTable (int64 Keys and int32 Rows of one
// power-of-two capacity, int32 Count) and HashLookup's keys and rows.
func CheckHashTable(op string, h HashTable, keys, rows Tensor) error {
	capy := h.Keys.Len()
	if capy == 0 || capy&(capy-1) != 0 || h.Rows.Len() != capy || h.Keys.DType != Int64 {
		return Errorf(op, ErrShape, "bad table: keys %v, rows %v (want int64 keys, as many rows, a power of two)", h.Keys, h.Rows)
	}
	if !h.RowKeys.IsZero() && (h.RowKeys.DType != Int64 || h.RowKeys.Len() < h.MaxRows) {
		return Errorf(op, ErrShape, "row keys %v for %d rows (want int64)", h.RowKeys, h.MaxRows)
	}
	return firstErr(CheckWant(op, h.Rows, Int32, capy), CheckWant(op, h.Count, Int32, 1),
		CheckWant(op, keys, Int64, 0), CheckWant(op, rows, Int32, keys.Len()))
}

// CheckSlotRows checks SlotRows' dtypes and lengths and that the bags
// (offsets.Len()−1) are a whole number of samples of slotOffsets.Len()
// slots. The CSR offsets' values are not read.
func CheckSlotRows(op string, rows, keys, offsets, slotOffsets, slotSizes Tensor) error {
	ns := slotOffsets.Len()
	err := firstErr(CheckWant(op, keys, Int64, 0), CheckWant(op, rows, Int32, keys.Len()),
		CheckWant(op, offsets, Int32, 1), CheckWant(op, slotOffsets, Int64, 1), CheckWant(op, slotSizes, Int64, ns))
	if err != nil {
		return err
	}
	if bags := offsets.Len() - 1; bags%ns != 0 {
		return Errorf(op, ErrShape, "%d bags for %d slots", bags, ns)
	}
	return nil
}

// CheckRecordSlots checks RecordSlots' int32 operands and that the CSR
// offsets hold whole samples of numSlots bags.
func CheckRecordSlots(op string, rowSlots, rows, offsets Tensor, numSlots int) error {
	err := firstErr(CheckWant(op, rowSlots, Int32, 0), CheckWant(op, rows, Int32, 0), CheckWant(op, offsets, Int32, 1))
	if err != nil {
		return err
	}
	if numSlots <= 0 || (offsets.Len()-1)%numSlots != 0 {
		return Errorf(op, ErrShape, "%d bags for %d slots", offsets.Len()-1, numSlots)
	}
	return nil
}

// CheckEmbeddingBag checks EmbeddingBag's int32 rows and offsets and that
// out holds one table row per bag. The CSR offsets' values are not read.
func CheckEmbeddingBag(op string, out, table, rows, offsets Tensor) error {
	err := firstErr(CheckWant(op, rows, Int32, 0), CheckWant(op, offsets, Int32, 1))
	if err != nil {
		return err
	}
	if bags := offsets.Len() - 1; out.Len() != bags*table.Cols() {
		return Errorf(op, ErrShape, "out %v for %d bags of table %v", out, bags, table)
	}
	return nil
}

// CheckEmbeddingBagGrad checks EmbeddingBagGrad's int32 operands and that
// dOut holds one gradient row per bag and uniqRows, uniqGrad room for every
// key. The CSR offsets' values are not read.
func CheckEmbeddingBagGrad(op string, uniqRows, uniqGrad, numUniq, dOut, rows, offsets Tensor) error {
	err := firstErr(CheckWant(op, rows, Int32, 0), CheckWant(op, offsets, Int32, 1), CheckWant(op, numUniq, Int32, 1))
	if err != nil {
		return err
	}
	bags, nnz := offsets.Len()-1, rows.Len()
	if dOut.Len() != bags*uniqGrad.Cols() {
		return Errorf(op, ErrShape, "dOut %v, %d bags, %d keys, uniq %v %v", dOut, bags, nnz, uniqRows, uniqGrad)
	}
	if err := CheckWant(op, uniqRows, Int32, nnz); err != nil {
		return err
	}
	if uniqGrad.Rows() < nnz {
		return Errorf(op, ErrShape, "dOut %v, %d bags, %d keys, uniq %v %v", dOut, bags, nnz, uniqRows, uniqGrad)
	}
	return nil
}

// CheckOptStates checks the optimizer states p.Kind uses (s1 unless SGD, s2
// for Adam) for n weights.
func CheckOptStates(op string, p OptParams, n int, s1, s2 Tensor) error {
	if (p.Kind != SGD && s1.Len() != n) || (p.Kind == Adam && s2.Len() != n) {
		return Errorf(op, ErrShape, "optimizer state %v %v for %d weights", s1, s2, n)
	}
	return nil
}

// CheckSparseUpdate checks SparseUpdate's states for table and its int32
// uniqRows and numUniq [≥1].
func CheckSparseUpdate(op string, p OptParams, table, s1, s2, uniqRows, numUniq Tensor) error {
	return firstErr(CheckOptStates(op, p, table.Len(), s1, s2),
		CheckWant(op, numUniq, Int32, 1), CheckWant(op, uniqRows, Int32, 0))
}

// SparseMode is the update SparseUpdate runs for p: Local for SGD and
// AdaGrad, Global for LazyGlobal momentum optimizers, else p.Update; for
// LazyGlobal it checks lastStep (int32, one per table row).
func SparseMode(op string, p OptParams, lastStep Tensor, rows int) (UpdateType, error) {
	mode := p.Update
	if p.Kind == SGD || p.Kind == AdaGrad {
		mode = Local
	} else if mode == LazyGlobal && p.Kind != Adam {
		mode = Global
	}
	if mode == LazyGlobal {
		return mode, CheckWant(op, lastStep, Int32, rows)
	}
	return mode, nil
}
