package gpu

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The fused InnerProduct (tensor.FusedDense) in cuBLASLt epilogues.
//
// A row-major [r, c] matrix is column-major [c, r], so each row-major GEMM
// runs as its transpose (see Gemm): y = x·W is D = Wᵀ-view·xᵀ-view with D
// column-major [out, B]. In those terms:
//
//	forward    y = ReLU(x·W + b)   D[out,B] = W[out,in]·x[in,B]      RELU_AUX_BIAS: bias per row of D,
//	                                                                  bit-mask of D > 0 (ld AuxLD(out) bits)
//	input grad dz = (dy·Wᵀ)⊙mask   D[in,B] = Wᵀ(T of [out,in])·dy     DRELU_BGRAD: the mask of the layer
//	           db = Σ_B dz                                            before (its D had this shape), its
//	                                                                  bias gradient = Σ over D's columns
//	weight grad dW = xᵀ·dy         D[out,in] = dy[out,B]·xᵀ(T)       BGRADA: Σ over k = B of A = dy,
//	           db = Σ_B dy                                            one per row of D (A not transposed)
//
// (cuBLASLt's BGRADB would sum B = x: the wrong operand in this mapping.)
// The ReLU mask of a [B, n] activation is Uint32 [B, AuxLD(n)/32]: column b
// of the bit matrix (sample b) holds n bits padded to a multiple of 128.
//
// Weight-gradient GEMMs issued with side run on a stream of their own, with
// their own cuBLASLt workspace: the side stream waits for an event recorded
// on the compute stream when the GEMM is issued (its operands are ready),
// and JoinGrads makes the compute stream wait for an event recorded on the
// side stream. Sync and Download join first, so the host never sees a
// gradient still being written.

var _ tensor.FusedDense = (*Backend)(nil)

// sideStream is the weight-gradient stream and what it needs.
type sideStream struct {
	s       cuda.Stream
	issued  cuda.Event // compute stream → side stream: operands ready
	done    cuda.Event // side stream → compute stream: JoinGrads
	ws      cuda.Ptr   // the side stream's cuBLASLt workspace
	pending bool       // side GEMMs issued since the last join
}

// FusesDense implements tensor.FusedDense: on with Options.Fused.
func (be *Backend) FusesDense() bool { return be.opts.Fused }

// SetUnfused turns the fused kernels off (true) or on (Options.Fused).
// Safe at any time: a model built while they were on runs the plain
// operations of each fused call from then on (its values are the same).
func (be *Backend) SetUnfused(off bool) { be.opts.Fused = !off }

// ReLUMask implements tensor.FusedDense: the bit-mask of a [rows, cols]
// activation, Uint32 [rows, AuxLD(cols)/32].
func (be *Backend) ReLUMask(_ tensor.DType, rows, cols int) tensor.Tensor {
	return be.Alloc(tensor.Uint32, rows, cuda.AuxLD(cols)/32)
}

// checkMask checks a ReLU mask for a [rows, cols] activation.
func (be *Backend) checkMask(op string, mask tensor.Tensor, rows, cols int) bool {
	if !be.owned(op, mask) {
		return false
	}
	if want := rows * cuda.AuxLD(cols) / 32; mask.DType != tensor.Uint32 || mask.Len() != want {
		be.fail(op, tensor.ErrShape, "ReLU mask %v for a [%d, %d] activation (want Uint32 of %d words: ReLUMask)", mask, rows, cols, want)
		return false
	}
	return true
}

// aligned reports whether every pointer is 256-byte aligned (what the
// cuBLASLt heuristic assumes of operands by default; allocations are).
func aligned(ps ...cuda.Ptr) bool {
	for _, p := range ps {
		if p%256 != 0 {
			return false
		}
	}
	return true
}

// lt runs one cuBLASLt matmul on stream s, reporting false (and leaving no
// error) when cuBLASLt has no kernel for it. With a wide bias gradient
// (not the zero Tensor; x.BiasType is then C's half type), cuBLASLt writes
// the bias gradient into a half scratch vector of m elements in the
// backend's workspace, and a convert kernel widens it into wide (Float32,
// overwritten) after the matmul.
//
// Inside a CUDA graph step (graph.go) the matmul is deferred: a shape
// cuBLASLt refused in an eager step is refused again without asking;
// another refusal (a shape first met inside a graph step) is an error,
// since the caller could no longer take its unfused path.
func (be *Backend) lt(op string, s cuda.Stream, transA, transB bool, m, n, k int, a cuda.Ptr, lda int, b cuda.Ptr, ldb int, c cuda.Ptr, ldc int, x cuda.LtArgs, wide tensor.Tensor) bool {
	sig := ltSigOf(s, transA, transB, m, n, k, lda, ldb, ldc, x)
	deferred := be.deferring()
	if deferred && be.ltNo[sig] {
		return false
	}
	ran := true
	be.do(op, func(cx *cuda.Ctx) error {
		x := x
		// A graph step runs the eager step's plan, searched or not (the
		// search is part of the descriptor).
		x.Search = be.srch
		if !wide.IsZero() {
			ws, err := be.workspace(cx, m*x.Types.C.Size())
			if err != nil {
				return err
			}
			x.Bias = ws
		}
		err := cx.LtMatmulEx(s, be.opts.Math, transA, transB, m, n, k, 1, a, lda, b, ldb, 0, c, ldc, x)
		if errors.Is(err, cuda.ErrNoAlgorithm) {
			if deferred {
				return fmt.Errorf("cuBLASLt has no kernel for a GEMM first met inside a CUDA graph step (%d×%d×%d): %w", m, n, k, err)
			}
			ran = false
			return nil
		}
		if err != nil {
			return err
		}
		if !wide.IsZero() {
			if err := be.launch1(cx, "convert", m, p(wide), dt(wide), x.Bias, int(halfOf(x.Types.C)), int64(m)); err != nil {
				return err
			}
		}
		if be.opts.Debug && s != be.s {
			return cx.StreamSync(s)
		}
		return nil
	})
	if !ran {
		be.ltRefused(sig)
	}
	return ran
}

// halfOf is the tensor dtype of a half cuBLAS element type.
func halfOf(t cuda.DataType) tensor.DType {
	if t == cuda.R16BF {
		return tensor.BFloat16
	}
	return tensor.Float16
}

// FusedStats counts the backend's fused InnerProduct calls (GemmBiasAct
// and tensor.FusedDense's GEMMs) by operation: gemm_bias_act,
// gemm_bias_relu_mask, gemm_drelu_bgrad, gemm_bgrad. Ran are those that
// ran fused; Fallback those that reported false (cuBLASLt had no kernel
// for the shape, dtypes and epilogue, or an operand was unaligned), after
// which the layer ran the plain kernels. The FusedDense methods count
// nothing while the fused kernels are off (they report false at once);
// GemmBiasAct, which runs either way, is always counted. Plain counts the
// calls the backend chose to run with the plain kernels itself, reporting
// true: gemm_bgrad on half operands without Options.HalfBgradEpilogue.
// HalfBiasGrad counts the gemm_drelu_bgrad calls that ran with the bias
// gradient in the output's half type, widened into the float32 db by a
// convert kernel (cuBLASLt refused a float32 one with a half output).
type FusedStats struct {
	Ran, Fallback, Plain map[string]int
	HalfBiasGrad         int
}

// String is a one-line summary for logs, operations in name order:
// "gemm_bgrad 8 ran, gemm_bias_act 1 ran 1 fell back, …; 6 half bias
// gradients" ("no fused calls" when there were none).
func (st FusedStats) String() string {
	seen := map[string]bool{}
	var ops []string
	for _, m := range []map[string]int{st.Ran, st.Fallback, st.Plain} {
		for op := range m {
			if !seen[op] {
				seen[op] = true
				ops = append(ops, op)
			}
		}
	}
	if len(ops) == 0 {
		return "no fused calls"
	}
	sort.Strings(ops)
	var b strings.Builder
	for i, op := range ops {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d ran", op, st.Ran[op])
		if n := st.Fallback[op]; n > 0 {
			fmt.Fprintf(&b, " %d fell back", n)
		}
		if n := st.Plain[op]; n > 0 {
			fmt.Fprintf(&b, " %d plain", n)
		}
	}
	if st.HalfBiasGrad > 0 {
		fmt.Fprintf(&b, "; %d half bias gradients", st.HalfBiasGrad)
	}
	return b.String()
}

// fusedCounts are FusedStats' counters.
type fusedCounts struct {
	ran, fallback, plain map[string]int
	halfBgrad            int
}

// FusedStats returns the counts of the fused calls since the backend was
// made (copies).
func (be *Backend) FusedStats() FusedStats {
	st := FusedStats{Ran: map[string]int{}, Fallback: map[string]int{}, Plain: map[string]int{}, HalfBiasGrad: be.fstats.halfBgrad}
	for k, v := range be.fstats.ran {
		st.Ran[k] = v
	}
	for k, v := range be.fstats.fallback {
		st.Fallback[k] = v
	}
	for k, v := range be.fstats.plain {
		st.Plain[k] = v
	}
	return st
}

// fusedCounts returns the counters, made on first use.
func (be *Backend) fusedCounts() *fusedCounts {
	f := &be.fstats
	if f.ran == nil {
		f.ran, f.fallback, f.plain = map[string]int{}, map[string]int{}, map[string]int{}
	}
	return f
}

// fusedRan counts a fused call of op and returns ran.
func (be *Backend) fusedRan(op string, ran bool) bool {
	f := be.fusedCounts()
	if ran {
		f.ran[op]++
	} else {
		f.fallback[op]++
	}
	return ran
}

// halfMaskRefused: the ReLU-mask chain (GemmBiasReLUMask's RELU_AUX_BIAS
// forward, GemmDReLUBgrad's DRELU_BGRAD backward) reports false with half
// outputs, so the layers run the RELU_BIAS forward epilogue (GemmBiasAct)
// and the plain ReLU gradient from y. Measured on the H200 (2026-12-02):
// with bf16 and fp16 outputs, the chained dz and db differed from both the
// float64 reference and the plain kernels by 0.3–2.7% (relative) on
// aligned shapes — elements the mask kept that the stored y drops, not
// explained by rounding — and the fused half DLRM step was slower than the
// plain one (13.42 against 13.86 M samples/s). Not settled; refused until
// it is.

// GemmBiasReLUMask implements tensor.FusedDense (RELU_AUX_BIAS). bias is
// Float32, or of y's dtype when y is half (see GemmBiasAct).
func (be *Backend) GemmBiasReLUMask(x, w, bias, y, mask tensor.Tensor) bool {
	const op = "gemm_bias_relu_mask"
	if !be.FusesDense() || be.err != nil {
		return false
	}
	m, k, n, ty, ok := be.gemmShape(op, false, false, x, w, y)
	if !ok || !be.biasOf(op, bias, y, n) || !be.checkMask(op, mask, m, n) {
		return true // the error is sticky; nothing more to run
	}
	if y.DType.IsHalf() {
		// Refused with a half output (halfMaskRefused).
		return be.fusedRan(op, false)
	}
	if m == 0 || n == 0 || k == 0 || !aligned(Ptr(x), Ptr(w), Ptr(y), Ptr(bias), Ptr(mask)) {
		return be.fusedRan(op, false)
	}
	return be.fusedRan(op, be.lt(op, be.s, false, false, n, m, k, Ptr(w), n, Ptr(x), k, Ptr(y), n,
		cuda.LtArgs{Epilogue: cuda.EpilogueReLUAuxBias, Bias: Ptr(bias), BiasType: cudaType(bias.DType), Aux: Ptr(mask), AuxLD: cuda.AuxLD(n), Types: ty}, tensor.Tensor{}))
}

// GemmDReLUBgrad implements tensor.FusedDense (DRELU_BGRAD). db is Float32.
// With a half dx the bias gradient is first asked of cuBLASLt in float32;
// where it refuses that, in dx's half type into a scratch vector widened
// into db (FusedStats.HalfBiasGrad): rounded once to half, summed in
// float32 by cuBLASLt.
func (be *Backend) GemmDReLUBgrad(dy, w, mask, dx, db tensor.Tensor) bool {
	const op = "gemm_drelu_bgrad"
	if !be.FusesDense() || be.err != nil {
		return false
	}
	m, k, n, ty, ok := be.gemmShape(op, false, true, dy, w, dx) // dx [m=B, n=in], k = out
	if !ok || !be.f32Bias(op, db) || !be.check(tensor.CheckWant(op, db, tensor.Float32, n)) || !be.checkMask(op, mask, m, n) {
		return true
	}
	if dx.DType.IsHalf() {
		// Refused with a half dx (halfMaskRefused).
		return be.fusedRan(op, false)
	}
	if m == 0 || n == 0 || k == 0 || !aligned(Ptr(dy), Ptr(w), Ptr(dx), Ptr(db), Ptr(mask)) {
		return be.fusedRan(op, false)
	}
	x := cuda.LtArgs{Epilogue: cuda.EpilogueDReLUBGrad, Bias: Ptr(db), Aux: Ptr(mask), AuxLD: cuda.AuxLD(n), Types: ty}
	if be.lt(op, be.s, true, false, n, m, k, Ptr(w), w.Cols(), Ptr(dy), dy.Cols(), Ptr(dx), n, x, tensor.Tensor{}) {
		return be.fusedRan(op, true)
	}
	if !dx.DType.IsHalf() {
		return be.fusedRan(op, false)
	}
	x.Bias, x.BiasType = 0, ty.C
	if !be.lt(op, be.s, true, false, n, m, k, Ptr(w), w.Cols(), Ptr(dy), dy.Cols(), Ptr(dx), n, x, db) {
		return be.fusedRan(op, false)
	}
	be.fstats.halfBgrad++
	return be.fusedRan(op, true)
}

// GemmBgrad implements tensor.FusedDense (BGRADA, or no epilogue without
// db), on the side stream when side. dw and db are Float32 (so is cuBLASLt's
// bias gradient: D's type). On half x and dy, unless
// Options.HalfBgradEpilogue, it runs the plain kernels on the compute
// stream instead — Gemm (searched, cuBLAS's split-K kernels among the
// candidates) and ColSum — and reports true (FusedStats.Plain).
func (be *Backend) GemmBgrad(x, dy, dw, db tensor.Tensor, side bool) bool {
	const op = "gemm_bgrad"
	if !be.FusesDense() || be.err != nil {
		return false
	}
	m, k, n, ty, ok := be.gemmShape(op, true, false, x, dy, dw) // dw [m=in, n=out], k = B
	if !ok {
		return true
	}
	args := cuda.LtArgs{Epilogue: cuda.EpilogueNone, Types: ty}
	if !db.IsZero() {
		if !be.f32Bias(op, db) || !be.check(tensor.CheckWant(op, db, tensor.Float32, n)) {
			return true
		}
		args = cuda.LtArgs{Epilogue: cuda.EpilogueBGradA, Bias: Ptr(db), Types: ty}
	}
	if x.DType.IsHalf() && !be.opts.HalfBgradEpilogue {
		be.Gemm(true, false, 1, x, dy, 0, dw)
		if !db.IsZero() {
			be.ColSum(db, 0, dy)
		}
		be.fusedCounts().plain[op]++
		return true
	}
	if m == 0 || n == 0 || k == 0 || !aligned(Ptr(x), Ptr(dy), Ptr(dw), Ptr(db)) {
		return be.fusedRan(op, false)
	}
	s := be.s
	if side {
		ss := be.sideStream()
		if ss == nil {
			return true // its creation failed: the error is sticky
		}
		be.do(op, func(c *cuda.Ctx) error {
			if err := c.Record(ss.issued, be.s); err != nil {
				return err
			}
			return c.Wait(ss.s, ss.issued)
		})
		s, args.Workspace = ss.s, ss.ws
	}
	ran := be.lt(op, s, false, true, n, m, k, Ptr(dy), dy.Cols(), Ptr(x), x.Cols(), Ptr(dw), n, args, tensor.Tensor{})
	if ran && side {
		be.side.pending = true
	}
	return be.fusedRan(op, ran)
}

// sideStream returns the side stream, creating it on first use (nil after
// an error, which is sticky).
func (be *Backend) sideStream() *sideStream {
	if be.side != nil {
		return be.side
	}
	be.graphBreak("the side stream's creation") // its handle is needed now (graph.go)
	ss := &sideStream{}
	be.do("side_stream", func(c *cuda.Ctx) error {
		var err error
		if ss.s, err = c.NewStream(); err != nil {
			return err
		}
		for _, e := range []*cuda.Event{&ss.issued, &ss.done} {
			if *e, err = c.NewEvent(false); err != nil {
				return err
			}
		}
		ss.ws, err = c.Malloc(c.LtWorkspaceSize())
		return err
	})
	if be.err != nil {
		return nil
	}
	be.side = ss
	return ss
}

// JoinGrads implements tensor.FusedDense.
func (be *Backend) JoinGrads() {
	ss := be.side
	if ss == nil || !ss.pending {
		return
	}
	ss.pending = false
	be.do("join_grads", func(c *cuda.Ctx) error {
		if err := c.Record(ss.done, ss.s); err != nil {
			return err
		}
		return c.Wait(be.s, ss.done)
	})
}

// closeSide releases the side stream (on the device goroutine, after the
// compute stream has been synchronised).
func (be *Backend) closeSide(c *cuda.Ctx) {
	ss := be.side
	if ss == nil {
		return
	}
	be.side = nil
	c.StreamSync(ss.s)
	c.DestroyEvent(ss.issued)
	c.DestroyEvent(ss.done)
	c.Free(ss.ws)
	c.DestroyStream(ss.s)
}
