package gpu

import (
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Gemm: C = alpha·op(A)·op(B) + beta·C in row-major. cuBLAS is
// column-major, and a row-major matrix is its transpose in column-major, so
// the call computes Cᵀ = op(B)ᵀ·op(A)ᵀ: operands swapped, same transposes.
//
// A and B are both Float32 (C Float32, arithmetic Options.Math), both
// Float16 or both BFloat16 (C Float32 — a weight gradient xᵀ·dy — or of
// their dtype — an activation x·W or an input gradient dy·Wᵀ). Half
// operands multiply on the tensor cores in float32 (cuda.Types): their
// products are exact and the sums float32, and a half C is the float32
// result rounded once; nothing is converted per call. Other mixes fail
// with ErrDType.
//
// With the algorithm search (Options.NoAlgorithmSearch false) the first
// call of each descriptor (shape, dtypes, alignment) times cuBLASLt's
// candidates against cuBLAS's own GEMM and keeps the fastest
// (cuda.GemmExSearch).
func (be *Backend) Gemm(transA, transB bool, alpha float64, a, b tensor.Tensor, beta float64, c tensor.Tensor) {
	m, k, n, ty, ok := be.gemmShape("gemm", transA, transB, a, b, c)
	if !ok || m == 0 || n == 0 {
		return
	}
	be.do("gemm", func(x *cuda.Ctx) error {
		return x.GemmExSearch(be.s, be.opts.Math, ty, transB, transA, n, m, k, float32(alpha),
			Ptr(b), b.Cols(), Ptr(a), a.Cols(), float32(beta), Ptr(c), n, be.srch)
	})
}

// GemmBiasAct: y = act(x·W + bias) in one cuBLASLt call (the fused
// InnerProduct forward) for Identity and ReLU; other activations fall back
// to Gemm then BiasAct, as do shapes cuBLASLt has no kernel for. x, W and
// y are of Gemm's dtypes; bias is Float32, or with a half y of y's dtype
// (the layer's half copy of its float32 bias: cuBLASLt's own bias type for
// a half D, which it may refuse a float32 bias with). It reports whether
// the fused path ran (FusedStats counts both outcomes).
func (be *Backend) GemmBiasAct(a tensor.Activation, x, w, bias, y tensor.Tensor) bool {
	const op = "gemm_bias_act"
	if a != tensor.Identity && a != tensor.ReLU {
		return false
	}
	m, k, n, ty, ok := be.gemmShape(op, false, false, x, w, y)
	if !ok || !be.biasOf(op, bias, y, n) {
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
		return be.fusedRan(op, false)
	}
	return be.fusedRan(op, be.lt(op, be.s, false, false, n, m, k, Ptr(w), n, Ptr(x), k, Ptr(y), n,
		cuda.LtArgs{Epilogue: epi, Bias: Ptr(bias), BiasType: cudaType(bias.DType), Types: ty}, tensor.Tensor{}))
}

// gemmShape checks Gemm's operands: their dtypes (see Gemm), shapes
// (tensor.GemmShape) and C aliasing neither A nor B. ty are the element
// types of the cuBLAS call.
func (be *Backend) gemmShape(op string, transA, transB bool, a, b, c tensor.Tensor) (m, k, n int, ty cuda.Types, ok bool) {
	if !be.halves(op, a, b, c) {
		return 0, 0, 0, ty, false
	}
	if a.DType != b.DType || (c.DType != tensor.Float32 && c.DType != a.DType) {
		be.fail(op, tensor.ErrDType, "A %v, B %v, C %v: A and B of one dtype (float32, float16 or bfloat16), C float32 or of theirs", a, b, c)
		return 0, 0, 0, ty, false
	}
	m, k, n, err := tensor.GemmShape(op, transA, transB, a, b, c)
	if !be.check(err) {
		return 0, 0, 0, ty, false
	}
	if Ptr(c) == Ptr(a) || Ptr(c) == Ptr(b) {
		be.fail(op, tensor.ErrShape, "C aliases an operand")
		return 0, 0, 0, ty, false
	}
	return m, k, n, cuda.Types{AB: cudaType(a.DType), C: cudaType(c.DType)}, true
}

// f32Bias checks a bias gradient of a GEMM epilogue: Float32 whatever
// the GEMM's dtypes.
func (be *Backend) f32Bias(op string, bias tensor.Tensor) bool {
	if !be.owned(op, bias) {
		return false
	}
	if bias.Buf != nil && bias.DType != tensor.Float32 {
		be.fail(op, tensor.ErrDType, "bias gradient %v (bias gradients are float32)", bias)
		return false
	}
	return true
}

// biasOf checks the bias of a forward epilogue into y: n elements of
// Float32, or of y's dtype when y is half (a half operand copy).
func (be *Backend) biasOf(op string, bias, y tensor.Tensor, n int) bool {
	if !be.owned(op, bias) {
		return false
	}
	if bias.DType != tensor.Float32 && (!y.DType.IsHalf() || bias.DType != y.DType) {
		be.fail(op, tensor.ErrDType, "bias %v for a %v output (float32, or the output's half dtype)", bias, y.DType)
		return false
	}
	return be.check(tensor.CheckWant(op, bias, bias.DType, n))
}

// cudaType is the cuBLAS element type of a float dtype the GPU stores.
func cudaType(dt tensor.DType) cuda.DataType {
	switch dt {
	case tensor.Float16:
		return cuda.R16F
	case tensor.BFloat16:
		return cuda.R16BF
	}
	return cuda.R32F
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
