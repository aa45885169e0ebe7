package gpu

import (
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Gemm: C = alpha·op(A)·op(B) + beta·C in row-major. cuBLAS is
// column-major, and a row-major matrix is its transpose in column-major, so
// the call computes Cᵀ = op(B)ᵀ·op(A)ᵀ: operands swapped, same transposes.
// With the algorithm search (Options.NoAlgorithmSearch false) the first
// call of each shape times cuBLASLt's candidates against cuBLAS's own
// GEMM and keeps the fastest (cuda.GemmSearch; for BF16, over the
// operands' bfloat16 copies, cuda.GemmBF16Search).
func (be *Backend) Gemm(transA, transB bool, alpha float64, a, b tensor.Tensor, beta float64, c tensor.Tensor) {
	m, k, n, ok := be.gemmShape("gemm", transA, transB, a, b, c)
	if !ok || m == 0 || n == 0 {
		return
	}
	if be.opts.Math == cuda.BF16 {
		be.gemmBF16(transA, transB, alpha, a, b, beta, c, m, n, k)
		return
	}
	be.do("gemm", func(x *cuda.Ctx) error {
		return x.GemmSearch(be.s, be.opts.Math, transB, transA, n, m, k, float32(alpha),
			Ptr(b), b.Cols(), Ptr(a), a.Cols(), float32(beta), Ptr(c), n, be.srch)
	})
}

// gemmBF16 rounds A and B to bfloat16 copies in the workspace and
// multiplies them with fp32 accumulation (what autocast does for a matmul;
// activations, weights and gradients stay fp32).
func (be *Backend) gemmBF16(transA, transB bool, alpha float64, a, b tensor.Tensor, beta float64, c tensor.Tensor, m, n, k int) {
	na, nb := a.Len(), b.Len()
	offB := (2*na + 255) &^ 255
	be.do("gemm", func(x *cuda.Ctx) error {
		ws, err := be.workspace(x, offB+2*nb)
		if err != nil {
			return err
		}
		if err := be.launch1(x, "f32_to_bf16", na, ws, p(a), int64(na)); err != nil {
			return err
		}
		if err := be.launch1(x, "f32_to_bf16", nb, ws.Add(offB), p(b), int64(nb)); err != nil {
			return err
		}
		return x.GemmBF16Search(be.s, transB, transA, n, m, k, float32(alpha), ws.Add(offB), b.Cols(), ws, a.Cols(), float32(beta), Ptr(c), n, be.srch)
	})
}

// GemmBiasAct: y = act(x·W + bias) in one cuBLASLt call (the fused
// InnerProduct forward) for Identity and ReLU; other activations fall back
// to Gemm then BiasAct, as do shapes cuBLASLt has no kernel for. It
// reports whether the fused path ran.
func (be *Backend) GemmBiasAct(a tensor.Activation, x, w, bias, y tensor.Tensor) bool {
	if (a != tensor.Identity && a != tensor.ReLU) || be.opts.Math == cuda.BF16 {
		return false
	}
	m, k, n, ok := be.gemmShape("gemm_bias_act", false, false, x, w, y)
	if !ok || !be.floats("gemm_bias_act", bias) ||
		!be.check(tensor.CheckWant("gemm_bias_act", bias, tensor.Float32, n)) {
		return true
	}
	if m == 0 || n == 0 {
		return true
	}
	epi := cuda.EpilogueBias
	if a == tensor.ReLU {
		epi = cuda.EpilogueReLUBias
	}
	if k == 0 || !aligned(Ptr(x), Ptr(w), Ptr(y), Ptr(bias)) {
		return false
	}
	return be.lt("gemm_bias_act", be.s, false, false, n, m, k, Ptr(w), n, Ptr(x), k, Ptr(y), n, cuda.LtArgs{Epilogue: epi, Bias: Ptr(bias)})
}

// gemmShape checks Gemm's operands: float32, shapes (tensor.GemmShape) and
// C aliasing neither A nor B.
func (be *Backend) gemmShape(op string, transA, transB bool, a, b, c tensor.Tensor) (m, k, n int, ok bool) {
	if !be.floats(op, a, b, c) {
		return 0, 0, 0, false
	}
	m, k, n, err := tensor.GemmShape(op, transA, transB, a, b, c)
	if !be.check(err) {
		return 0, 0, 0, false
	}
	if Ptr(c) == Ptr(a) || Ptr(c) == Ptr(b) {
		be.fail(op, tensor.ErrShape, "C aliases an operand")
		return 0, 0, 0, false
	}
	return m, k, n, true
}

// AlgoSearch is what the backend's cuBLASLt algorithm search has done (the
// zero value without one). Every GEMM descriptor is searched on its first
// call outside a stream capture, so after one eager training step (and a
// Sync) the step's descriptors are all searched: a CUDA graph captured
// after it replays the chosen algorithms and times nothing. A descriptor
// first met inside a capture runs the heuristic's choice there (counted in
// Deferred) and is searched at its next eager call.
func (be *Backend) AlgoSearch() cuda.AlgoSearchStats {
	if be.srch == nil {
		return cuda.AlgoSearchStats{}
	}
	var st cuda.AlgoSearchStats
	be.dev.Do(func(*cuda.Ctx) error { st = be.srch.Stats; return nil })
	return st
}

// AlgorithmSearch reports whether the backend searches (Options).
func (be *Backend) AlgorithmSearch() bool { return be.srch != nil }
