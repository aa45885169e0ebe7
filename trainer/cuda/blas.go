package cuda

import (
	"fmt"
	"unsafe"
)

// cublasAPI holds cuBLAS's entry points.
type cublasAPI struct {
	cublasCreate, cublasDestroy, cublasSetStream, cublasSetMathMode uintptr
	cublasSgemm, cublasGemmEx, cublasSetWorkspace                   uintptr
	cublasSgemmStridedBatched                                       uintptr
}

func (b *cublasAPI) bind(l *library) error {
	return l.bind(map[*uintptr][]string{
		&b.cublasCreate:       {"cublasCreate_v2"},
		&b.cublasDestroy:      {"cublasDestroy_v2"},
		&b.cublasSetStream:    {"cublasSetStream_v2"},
		&b.cublasSetMathMode:  {"cublasSetMathMode"},
		&b.cublasSgemm:        {"cublasSgemm_v2"},
		&b.cublasGemmEx:       {"cublasGemmEx"},
		&b.cublasSetWorkspace: {"cublasSetWorkspace_v2"},
		// Strided batched GEMM (attention, MatrixMultiply).
		&b.cublasSgemmStridedBatched: {"cublasSgemmStridedBatched"},
	})
}

// cublasLtAPI holds cuBLASLt's entry points.
type cublasLtAPI struct {
	create, destroy, descCreate, descDestroy, descSet    uintptr
	layoutCreate, layoutDestroy, prefCreate, prefDestroy uintptr
	prefSet, heuristic, matmul                           uintptr
}

func (b *cublasLtAPI) bind(l *library) error {
	return l.bind(map[*uintptr][]string{
		&b.create:        {"cublasLtCreate"},
		&b.destroy:       {"cublasLtDestroy"},
		&b.descCreate:    {"cublasLtMatmulDescCreate"},
		&b.descDestroy:   {"cublasLtMatmulDescDestroy"},
		&b.descSet:       {"cublasLtMatmulDescSetAttribute"},
		&b.layoutCreate:  {"cublasLtMatrixLayoutCreate"},
		&b.layoutDestroy: {"cublasLtMatrixLayoutDestroy"},
		&b.prefCreate:    {"cublasLtMatmulPreferenceCreate"},
		&b.prefDestroy:   {"cublasLtMatmulPreferenceDestroy"},
		&b.prefSet:       {"cublasLtMatmulPreferenceSetAttribute"},
		&b.heuristic:     {"cublasLtMatmulAlgoGetHeuristic"},
		&b.matmul:        {"cublasLtMatmul"},
	})
}

var blasStatus = map[int]string{
	1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
	8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

func blasCheck(name string, r int) error {
	if r == 0 {
		return nil
	}
	s, ok := blasStatus[r]
	if !ok {
		s = fmt.Sprintf("cublasStatus_t(%d)", r)
	}
	return &Error{Call: name, Code: r, Name: s}
}

// Math is the arithmetic of a float32 GEMM.
type Math uint8

// GEMM arithmetic: FP32 (IEEE), TF32 tensor cores, BF16 tensor cores
// (operands rounded to bfloat16, fp32 accumulation and output).
const (
	FP32 Math = iota
	TF32
	BF16
)

func (m Math) String() string { return [...]string{"fp32", "tf32", "bf16"}[m] }

// cublasComputeType_t.
func (m Math) computeType() uintptr {
	switch m {
	case TF32:
		return 77 // CUBLAS_COMPUTE_32F_FAST_TF32
	case BF16:
		return 75 // CUBLAS_COMPUTE_32F_FAST_16BF
	}
	return 68 // CUBLAS_COMPUTE_32F
}

const cudaR32F = 0

func (c *Ctx) blasInit() error {
	if err := blasCheck("cublasCreate_v2", call(blas.cublasCreate, uintptr(unsafe.Pointer(&c.blasH)))); err != nil {
		return err
	}
	var lt uintptr
	if err := blasCheck("cublasLtCreate", call(blasLt.create, uintptr(unsafe.Pointer(&lt)))); err != nil {
		return err
	}
	c.lt = &ltState{h: lt, plans: map[ltKey]*ltPlan{}}
	ws, err := c.Malloc(32 << 20)
	if err != nil {
		return err
	}
	c.lt.ws, c.lt.wsSize = ws, 32<<20
	return nil
}

func (c *Ctx) blasClose() {
	if c.lt != nil {
		for _, p := range c.lt.plans {
			p.destroy()
		}
		call(blasLt.destroy, c.lt.h)
	}
	if c.blasH != 0 {
		call(blas.cublasDestroy, c.blasH)
	}
}

// Gemm is column-major C[m,n] = alpha·op(A)·op(B) + beta·C on stream s in
// the given arithmetic (cublasGemmEx; cublasSgemm for FP32).
func (c *Ctx) Gemm(s Stream, math Math, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int) error {
	if err := blasCheck("cublasSetStream_v2", call(blas.cublasSetStream, c.blasH, uintptr(s))); err != nil {
		return err
	}
	sc := (*[2]float32)(unsafe.Pointer(&c.scal[0]))
	sc[0], sc[1] = alpha, beta
	ta, tb := op(transA), op(transB)
	if math == FP32 {
		return blasCheck("cublasSgemm_v2", call(blas.cublasSgemm, c.blasH, ta, tb, uintptr(m), uintptr(n), uintptr(k),
			uintptr(unsafe.Pointer(&sc[0])), uintptr(a), uintptr(lda), uintptr(b), uintptr(ldb),
			uintptr(unsafe.Pointer(&sc[1])), uintptr(cc), uintptr(ldc)))
	}
	const algoDefault = ^uintptr(0) // CUBLAS_GEMM_DEFAULT = -1
	return blasCheck("cublasGemmEx", call(blas.cublasGemmEx, c.blasH, ta, tb, uintptr(m), uintptr(n), uintptr(k),
		uintptr(unsafe.Pointer(&sc[0])), uintptr(a), cudaR32F, uintptr(lda), uintptr(b), cudaR32F, uintptr(ldb),
		uintptr(unsafe.Pointer(&sc[1])), uintptr(cc), cudaR32F, uintptr(ldc), math.computeType(), algoDefault))
}

// GemmBF16 is Gemm with bfloat16 A and B (cudaR16BF), float32 C, FP32
// accumulation (CUBLAS_COMPUTE_32F): the mixed-precision GEMM.
func (c *Ctx) GemmBF16(s Stream, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int) error {
	if err := blasCheck("cublasSetStream_v2", call(blas.cublasSetStream, c.blasH, uintptr(s))); err != nil {
		return err
	}
	sc := (*[2]float32)(unsafe.Pointer(&c.scal[0]))
	sc[0], sc[1] = alpha, beta
	const cudaR16BF, compute32F, algoDefault = 14, 68, ^uintptr(0)
	return blasCheck("cublasGemmEx", call(blas.cublasGemmEx, c.blasH, op(transA), op(transB), uintptr(m), uintptr(n), uintptr(k),
		uintptr(unsafe.Pointer(&sc[0])), uintptr(a), cudaR16BF, uintptr(lda), uintptr(b), cudaR16BF, uintptr(ldb),
		uintptr(unsafe.Pointer(&sc[1])), uintptr(cc), cudaR32F, uintptr(ldc), compute32F, algoDefault))
}

// GemmStridedBatched is column-major C_i = alpha·op(A_i)·op(B_i) + beta·C_i
// for i < batch, A_i at a + i·strideA elements (likewise B, C), FP32
// (cublasSgemmStridedBatched; the handle's math mode applies).
func (c *Ctx) GemmStridedBatched(s Stream, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, strideA int64,
	b Ptr, ldb int, strideB int64, beta float32, cc Ptr, ldc int, strideC int64, batch int) error {
	if err := blasCheck("cublasSetStream_v2", call(blas.cublasSetStream, c.blasH, uintptr(s))); err != nil {
		return err
	}
	sc := (*[2]float32)(unsafe.Pointer(&c.scal[0]))
	sc[0], sc[1] = alpha, beta
	return blasCheck("cublasSgemmStridedBatched", call(blas.cublasSgemmStridedBatched, c.blasH, op(transA), op(transB),
		uintptr(m), uintptr(n), uintptr(k), uintptr(unsafe.Pointer(&sc[0])), uintptr(a), uintptr(lda), uintptr(strideA),
		uintptr(b), uintptr(ldb), uintptr(strideB), uintptr(unsafe.Pointer(&sc[1])), uintptr(cc), uintptr(ldc), uintptr(strideC),
		uintptr(batch)))
}

func op(t bool) uintptr {
	if t {
		return 1
	}
	return 0
}

// Epilogue is what cuBLASLt applies to a GEMM's result.
type Epilogue uint32

// Epilogues (cublasLtEpilogue_t).
const (
	EpilogueNone     Epilogue = 1
	EpilogueReLU     Epilogue = 2
	EpilogueBias     Epilogue = 4
	EpilogueReLUBias Epilogue = 6
)

type ltState struct {
	h      uintptr
	ws     Ptr
	wsSize int
	plans  map[ltKey]*ltPlan
}

type ltKey struct {
	math          Math
	ta, tb        bool
	m, n, k       int
	lda, ldb, ldc int
	epi           Epilogue
}

// ltPlan is a matmul descriptor, its layouts and the heuristic's algorithm
// for one shape, built once and reused.
type ltPlan struct {
	desc, la, lb, lc uintptr
	algo             [96]byte // cublasLtMatmulHeuristicResult_t; algo is its first 64 bytes
}

func (p *ltPlan) destroy() {
	call(blasLt.descDestroy, p.desc)
	call(blasLt.layoutDestroy, p.la)
	call(blasLt.layoutDestroy, p.lb)
	call(blasLt.layoutDestroy, p.lc)
}

// cuBLASLt attribute numbers.
const (
	ltDescTransA   = 3
	ltDescTransB   = 4
	ltDescEpilogue = 7
	ltDescBias     = 8
	ltPrefMaxWS    = 1
)

func (c *Ctx) ltPlan(k ltKey) (*ltPlan, error) {
	if p, ok := c.lt.plans[k]; ok {
		return p, nil
	}
	p := &ltPlan{}
	if err := blasCheck("cublasLtMatmulDescCreate", call(blasLt.descCreate, uintptr(unsafe.Pointer(&p.desc)), k.math.computeType(), cudaR32F)); err != nil {
		return nil, err
	}
	set := func(attr uintptr, v uint32) error {
		x := []uint32{v}
		return blasCheck("cublasLtMatmulDescSetAttribute", call(blasLt.descSet, p.desc, attr, uintptr(unsafe.Pointer(&x[0])), 4))
	}
	if err := set(ltDescTransA, uint32(op(k.ta))); err != nil {
		return nil, err
	}
	if err := set(ltDescTransB, uint32(op(k.tb))); err != nil {
		return nil, err
	}
	if err := set(ltDescEpilogue, uint32(k.epi)); err != nil {
		return nil, err
	}
	layout := func(dst *uintptr, rows, cols, ld int) error {
		return blasCheck("cublasLtMatrixLayoutCreate", call(blasLt.layoutCreate, uintptr(unsafe.Pointer(dst)), cudaR32F, uintptr(rows), uintptr(cols), uintptr(ld)))
	}
	ar, ac := k.m, k.k
	if k.ta {
		ar, ac = k.k, k.m
	}
	br, bc := k.k, k.n
	if k.tb {
		br, bc = k.n, k.k
	}
	if err := layout(&p.la, ar, ac, k.lda); err != nil {
		return nil, err
	}
	if err := layout(&p.lb, br, bc, k.ldb); err != nil {
		return nil, err
	}
	if err := layout(&p.lc, k.m, k.n, k.ldc); err != nil {
		return nil, err
	}
	var pref uintptr
	if err := blasCheck("cublasLtMatmulPreferenceCreate", call(blasLt.prefCreate, uintptr(unsafe.Pointer(&pref)))); err != nil {
		return nil, err
	}
	defer call(blasLt.prefDestroy, pref)
	ws := []uint64{uint64(c.lt.wsSize)}
	if err := blasCheck("cublasLtMatmulPreferenceSetAttribute", call(blasLt.prefSet, pref, ltPrefMaxWS, uintptr(unsafe.Pointer(&ws[0])), 8)); err != nil {
		return nil, err
	}
	var got int32
	if err := blasCheck("cublasLtMatmulAlgoGetHeuristic", call(blasLt.heuristic, c.lt.h, p.desc, p.la, p.lb, p.lc, p.lc, pref, 1,
		uintptr(unsafe.Pointer(&p.algo[0])), uintptr(unsafe.Pointer(&got)))); err != nil {
		return nil, err
	}
	if got == 0 {
		p.destroy()
		return nil, &Error{Call: "cublasLtMatmulAlgoGetHeuristic", Code: 15, Name: "no algorithm for this shape"}
	}
	c.lt.plans[k] = p
	return p, nil
}

// LtMatmul is column-major C[m,n] = epilogue(alpha·op(A)·op(B) + beta·C +
// bias) through cuBLASLt; bias has m elements (one per row of C) and is
// used by the Bias epilogues.
func (c *Ctx) LtMatmul(s Stream, math Math, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int, epi Epilogue, bias Ptr) error {
	p, err := c.ltPlan(ltKey{math, transA, transB, m, n, k, lda, ldb, ldc, epi})
	if err != nil {
		return err
	}
	if epi&EpilogueBias != 0 {
		x := []uint64{uint64(bias)}
		if err := blasCheck("cublasLtMatmulDescSetAttribute", call(blasLt.descSet, p.desc, ltDescBias, uintptr(unsafe.Pointer(&x[0])), 8)); err != nil {
			return err
		}
	}
	sc := (*[2]float32)(unsafe.Pointer(&c.scal[0]))
	sc[0], sc[1] = alpha, beta
	return blasCheck("cublasLtMatmul", call(blasLt.matmul, c.lt.h, p.desc, uintptr(unsafe.Pointer(&sc[0])),
		uintptr(a), p.la, uintptr(b), p.lb, uintptr(unsafe.Pointer(&sc[1])), uintptr(cc), p.lc, uintptr(cc), p.lc,
		uintptr(unsafe.Pointer(&p.algo[0])), uintptr(c.lt.ws), uintptr(c.lt.wsSize), uintptr(s)))
}
