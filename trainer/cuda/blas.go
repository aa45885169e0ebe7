package cuda

import (
	"errors"
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
			if p != nil {
				p.destroy()
			}
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
	if c.tape != nil && c.tapeArgs("cublasGemm", s, math, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc) {
		return nil
	}
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
	if c.tape != nil && c.tapeArgs("cublasGemmBF16", s, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc) {
		return nil
	}
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
	if c.tape != nil && c.tapeArgs("cublasGemmStridedBatched", s, transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, cc, ldc, strideC, batch) {
		return nil
	}
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

// Epilogues (cublasLtEpilogue_t), in cuBLASLt's column-major terms: D is
// [m, n], the bias and the bias gradients of the DReLU and BGradA
// epilogues have m elements (one per row of D: broadcast over, or summed
// over, its n columns), BGradB's has n (summed over the GEMM's k).
//
// The ReLU bit-mask (ReLUAuxBias writes it, DReLU and DReLUBGrad read it) is
// a column-major bit matrix of D's shape: one bit per element, its leading
// dimension (AuxLD) counted in bits, a multiple of 128 and at least m, so
// it takes AuxLD/8·n bytes. Its bit order inside a word is cuBLASLt's own:
// only cuBLASLt reads it.
const (
	EpilogueNone        Epilogue = 1
	EpilogueReLU        Epilogue = 2
	EpilogueBias        Epilogue = 4
	EpilogueReLUBias    Epilogue = 6
	EpilogueReLUAuxBias Epilogue = 2 | 128 | 4 // D = ReLU(A·B + bias), mask of D > 0
	EpilogueDReLU       Epilogue = 8 | 128     // D = (A·B)⊙mask
	EpilogueDReLUBGrad  Epilogue = 8 | 128 | 16
	EpilogueBGradA      Epilogue = 256 // bias gradient = Σ over k of A (m elements)
	EpilogueBGradB      Epilogue = 512 // bias gradient = Σ over k of B (n elements)
)

// aux reports whether e reads or writes the ReLU bit-mask.
func (e Epilogue) aux() bool { return e&128 != 0 }

// usesBias reports whether e reads a bias or writes a bias gradient.
func (e Epilogue) usesBias() bool {
	return e&EpilogueBias != 0 || e == EpilogueDReLUBGrad || e == EpilogueBGradA || e == EpilogueBGradB
}

// AuxLD is the smallest leading dimension (in bits) of a ReLU bit-mask
// for a D of m rows: m rounded up to a multiple of 128.
func AuxLD(m int) int { return (m + 127) &^ 127 }

// ErrNoAlgorithm is returned by LtMatmulEx when cuBLASLt has no kernel for
// a shape and epilogue (its heuristic finds none, or the matmul reports
// CUBLAS_STATUS_NOT_SUPPORTED): callers fall back to unfused operations.
var ErrNoAlgorithm = errors.New("cublasLt: no algorithm for this shape and epilogue")

type ltState struct {
	h      uintptr
	ws     Ptr
	wsSize int
	plans  map[ltKey]*ltPlan // nil value: no algorithm (cached refusal)
}

type ltKey struct {
	math          Math
	ta, tb        bool
	m, n, k       int
	lda, ldb, ldc int
	epi           Epilogue
	auxLD         int
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

// cuBLASLt attribute numbers (cublasLtMatmulDescAttributes_t,
// cublasLtMatmulPreferenceAttributes_t).
const (
	ltDescTransA   = 3
	ltDescTransB   = 4
	ltDescEpilogue = 7
	ltDescBias     = 8  // CUBLASLT_MATMUL_DESC_BIAS_POINTER
	ltDescAux      = 11 // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
	ltDescAuxLD    = 12 // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD (int64, bits)
	ltPrefMaxWS    = 1
)

func (p *ltPlan) setPtr(attr uintptr, v Ptr) error {
	x := []uint64{uint64(v)}
	return blasCheck("cublasLtMatmulDescSetAttribute", call(blasLt.descSet, p.desc, attr, uintptr(unsafe.Pointer(&x[0])), 8))
}

// ltPlan returns the plan of k, building it on first use. The epilogue's
// pointers are set before the heuristic runs (it infers their alignment
// from them). A shape without an algorithm is remembered and refused with
// ErrNoAlgorithm.
func (c *Ctx) ltPlan(k ltKey, bias, aux Ptr) (*ltPlan, error) {
	if p, ok := c.lt.plans[k]; ok {
		if p == nil {
			return nil, ErrNoAlgorithm
		}
		return p, nil
	}
	p := &ltPlan{}
	if err := blasCheck("cublasLtMatmulDescCreate", call(blasLt.descCreate, uintptr(unsafe.Pointer(&p.desc)), k.math.computeType(), cudaR32F)); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			p.destroy()
		}
	}()
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
	if k.epi.usesBias() {
		if err := p.setPtr(ltDescBias, bias); err != nil {
			return nil, err
		}
	}
	if k.epi.aux() {
		ld := []int64{int64(k.auxLD)}
		if err := blasCheck("cublasLtMatmulDescSetAttribute", call(blasLt.descSet, p.desc, ltDescAuxLD, uintptr(unsafe.Pointer(&ld[0])), 8)); err != nil {
			return nil, err
		}
		if err := p.setPtr(ltDescAux, aux); err != nil {
			return nil, err
		}
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
	r := call(blasLt.heuristic, c.lt.h, p.desc, p.la, p.lb, p.lc, p.lc, pref, 1,
		uintptr(unsafe.Pointer(&p.algo[0])), uintptr(unsafe.Pointer(&got)))
	// CUBLAS_STATUS_NOT_SUPPORTED, INVALID_VALUE (a combination of
	// epilogue, layout and arithmetic this cuBLASLt rejects), or no result.
	if r == 15 || r == 7 || (r == 0 && got == 0) {
		c.lt.plans[k] = nil
		return nil, ErrNoAlgorithm
	}
	if err := blasCheck("cublasLtMatmulAlgoGetHeuristic", r); err != nil {
		return nil, err
	}
	ok = true
	c.lt.plans[k] = p
	return p, nil
}

// LtWorkspaceSize is the size a workspace passed to LtMatmulEx must have.
func (c *Ctx) LtWorkspaceSize() int { return c.lt.wsSize }

// LtArgs are what an LtMatmulEx call passes beyond the GEMM's operands.
type LtArgs struct {
	Epilogue Epilogue
	// Bias is the bias (Bias epilogues, read) or the bias gradient
	// (DReLUBGrad, BGradA, BGradB: written, not accumulated).
	Bias Ptr
	// Aux is the ReLU bit-mask (written by ReLUAuxBias, read by DReLU and
	// DReLUBGrad) and AuxLD its leading dimension in bits (AuxLD(m)).
	Aux   Ptr
	AuxLD int
	// Workspace, when not 0, replaces the context's cuBLASLt workspace
	// (LtWorkspaceSize bytes): GEMMs running at once on different streams
	// each need their own.
	Workspace Ptr
}

// LtMatmul is column-major C[m,n] = epilogue(alpha·op(A)·op(B) + beta·C +
// bias) through cuBLASLt; bias has m elements (one per row of C) and is
// used by the Bias epilogues.
func (c *Ctx) LtMatmul(s Stream, math Math, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int, epi Epilogue, bias Ptr) error {
	return c.LtMatmulEx(s, math, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc, LtArgs{Epilogue: epi, Bias: bias})
}

// LtMatmulEx is column-major C[m,n] = epilogue(alpha·op(A)·op(B) + beta·C)
// through cuBLASLt with the epilogue's bias, bias gradient and ReLU mask in
// x (see Epilogue). It returns ErrNoAlgorithm, having launched nothing, when
// cuBLASLt cannot run the combination.
func (c *Ctx) LtMatmulEx(s Stream, math Math, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int, x LtArgs) error {
	epi := x.Epilogue
	if epi == 0 {
		epi = EpilogueNone
	}
	key := ltKey{math, transA, transB, m, n, k, lda, ldb, ldc, epi, 0}
	if epi.aux() {
		if x.AuxLD < m || x.AuxLD%128 != 0 || x.Aux == 0 {
			return fmt.Errorf("cublasLt: ReLU mask leading dimension %d for %d rows (want a multiple of 128, at least the rows)", x.AuxLD, m)
		}
		key.auxLD = x.AuxLD
	}
	p, err := c.ltPlan(key, x.Bias, x.Aux)
	if err != nil {
		return err
	}
	if epi.usesBias() {
		if err := p.setPtr(ltDescBias, x.Bias); err != nil {
			return err
		}
	}
	if epi.aux() {
		if err := p.setPtr(ltDescAux, x.Aux); err != nil {
			return err
		}
	}
	ws := c.lt.ws
	if x.Workspace != 0 {
		ws = x.Workspace
	}
	sc := (*[2]float32)(unsafe.Pointer(&c.scal[0]))
	sc[0], sc[1] = alpha, beta
	if c.tape != nil && c.tapeArgs("cublasLtMatmul", s, math, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc, x, Ptr(unsafe.Pointer(p)), ws) {
		return nil
	}
	r := call(blasLt.matmul, c.lt.h, p.desc, uintptr(unsafe.Pointer(&sc[0])),
		uintptr(a), p.la, uintptr(b), p.lb, uintptr(unsafe.Pointer(&sc[1])), uintptr(cc), p.lc, uintptr(cc), p.lc,
		uintptr(unsafe.Pointer(&p.algo[0])), uintptr(ws), uintptr(c.lt.wsSize), uintptr(s))
	// NOT_SUPPORTED or INVALID_VALUE (the algorithm rejects these
	// operands): nothing ran; refuse the shape from now on.
	if r == 15 || r == 7 {
		p.destroy()
		c.lt.plans[key] = nil
		return ErrNoAlgorithm
	}
	return blasCheck("cublasLtMatmul", r)
}
