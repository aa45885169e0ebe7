package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
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
	// streamIsCapturing is the driver's cuStreamIsCapturing (found among
	// the loaded libraries; 0 when absent): the search never runs inside a
	// capture.
	streamIsCapturing uintptr
}

func (b *cublasLtAPI) bind(l *library) error {
	if err := l.bind(map[*uintptr][]string{
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
	}); err != nil {
		return err
	}
	// libcuda is loaded (RTLD_GLOBAL) before cuBLASLt; reopening it only
	// takes another reference.
	if p, err := purego.Dlsym(purego.RTLD_DEFAULT, "cuStreamIsCapturing"); err == nil && p != 0 {
		b.streamIsCapturing = p
	} else if l, err := load("CTRKIT_LIBCUDA", "libcuda.so.1", "libcuda.so"); err == nil {
		b.streamIsCapturing, _ = l.sym("cuStreamIsCapturing")
	}
	return nil
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

// Math is the arithmetic of a GEMM on float32 operands. GEMMs on half
// operands (Types) always compute in float32 on the tensor cores and
// ignore it.
type Math uint8

// GEMM arithmetic of float32 operands: FP32 (IEEE), TF32 tensor cores, and
// BF16: CUBLAS_COMPUTE_32F_FAST_16BF, which lets cuBLAS round the float32
// operands to bfloat16 inside the GEMM — or run TF32 kernels, which on the
// H200 it did (docs/PERFORMANCE.md). BF16 is not the bf16 precision mode,
// whose GEMMs take BFloat16 tensors (Types{AB: R16BF}) and convert nothing.
const (
	FP32 Math = iota
	TF32
	BF16
)

func (m Math) String() string {
	if int(m) < 3 {
		return [...]string{"fp32", "tf32", "bf16"}[m]
	}
	return fmt.Sprintf("Math(%d)", uint8(m))
}

// cublasComputeType_t.
func (m Math) computeType() uintptr {
	switch m {
	case TF32:
		return 77 // CUBLAS_COMPUTE_32F_FAST_TF32
	case BF16:
		return 75 // CUBLAS_COMPUTE_32F_FAST_16BF
	}
	return compute32F
}

// compute32F is CUBLAS_COMPUTE_32F: float32 arithmetic (for half operands,
// on the tensor cores with float32 accumulation).
const compute32F = 68

// DataType is the element type of a GEMM operand (cudaDataType_t).
type DataType int32

// GEMM element types.
const (
	R32F  DataType = 0  // CUDA_R_32F: float32
	R16F  DataType = 2  // CUDA_R_16F: IEEE binary16
	R16BF DataType = 14 // CUDA_R_16BF: bfloat16
)

func (t DataType) String() string {
	switch t {
	case R32F:
		return "float32"
	case R16F:
		return "float16"
	case R16BF:
		return "bfloat16"
	}
	return fmt.Sprintf("cudaDataType(%d)", int32(t))
}

// Size is the size of one element in bytes.
func (t DataType) Size() int {
	if t == R32F {
		return 4
	}
	return 2
}

// Types are a GEMM's element types: A and B are AB, C and D are C. The
// zero value is float32 throughout. Float32 A and B take a float32 C and
// compute in the call's Math; half A and B (R16F, R16BF) take a float32 C
// or one of their own type and compute in float32 on the tensor cores
// (CUBLAS_COMPUTE_32F: products of half values are exact in float32, the
// sums are float32; a half D is the float32 result rounded once), whatever
// the Math. alpha and beta are float32 in every case (scale type 32F).
type Types struct{ AB, C DataType }

// ErrTypes is returned for a combination of GEMM element types that Types
// does not allow.
var ErrTypes = errors.New("cuBLAS: unsupported GEMM element types")

func (t Types) check() error {
	switch {
	case t.AB == R32F && t.C == R32F,
		(t.AB == R16F || t.AB == R16BF) && (t.C == R32F || t.C == t.AB):
		return nil
	}
	return fmt.Errorf("%w: A and B %v, C %v (float32 A and B take a float32 C; float16 or bfloat16 ones a float32 C or one of their type)", ErrTypes, t.AB, t.C)
}

// half reports whether A and B are half precision.
func (t Types) half() bool { return t.AB != R32F }

// compute is the cublasComputeType_t of a GEMM of these types in math.
func (t Types) compute(m Math) uintptr {
	if t.half() {
		return compute32F
	}
	return m.computeType()
}

// cudaR32F is CUDA_R_32F, the scale type (alpha, beta) of every GEMM.
const cudaR32F = uintptr(R32F)

func (c *Ctx) blasInit() error {
	if err := blasCheck("cublasCreate_v2", call(blas.cublasCreate, uintptr(unsafe.Pointer(&c.blasH)))); err != nil {
		return err
	}
	var lt uintptr
	if err := blasCheck("cublasLtCreate", call(blasLt.create, uintptr(unsafe.Pointer(&lt)))); err != nil {
		return err
	}
	c.lt = &ltState{h: lt, wsSize: 32 << 20, ws: map[Stream]Ptr{}, plans: map[ltKey]*ltPlan{}}
	ws, err := c.Malloc(c.lt.wsSize)
	if err != nil {
		return err
	}
	c.lt.def = ws
	return nil
}

func (c *Ctx) blasClose() {
	if c.lt != nil {
		for _, p := range c.lt.plans {
			if p != nil {
				p.destroy()
			}
		}
		for _, e := range c.lt.events {
			c.DestroyEvent(e)
		}
		call(blasLt.destroy, c.lt.h)
	}
	if c.blasH != 0 {
		call(blas.cublasDestroy, c.blasH)
	}
}

// Gemm is column-major C[m,n] = alpha·op(A)·op(B) + beta·C on stream s in
// the given arithmetic, all operands float32 (cublasSgemm for FP32,
// cublasGemmEx otherwise): GemmEx with the zero Types.
func (c *Ctx) Gemm(s Stream, math Math, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int) error {
	return c.GemmEx(s, math, Types{}, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
}

// GemmEx is Gemm on operands of the element types ty (leading dimensions
// in elements): cublasSgemm for float32 operands in FP32, cublasGemmEx
// with ty's types and compute type otherwise (see Types).
func (c *Ctx) GemmEx(s Stream, math Math, ty Types, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int) error {
	if err := ty.check(); err != nil {
		return err
	}
	if c.tape != nil && c.tapeArgs("cublasGemm", s, math, ty, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc) {
		return nil
	}
	if err := blasCheck("cublasSetStream_v2", call(blas.cublasSetStream, c.blasH, uintptr(s))); err != nil {
		return err
	}
	sc := (*[2]float32)(unsafe.Pointer(&c.scal[0]))
	sc[0], sc[1] = alpha, beta
	ta, tb := op(transA), op(transB)
	if math == FP32 && !ty.half() {
		return blasCheck("cublasSgemm_v2", call(blas.cublasSgemm, c.blasH, ta, tb, uintptr(m), uintptr(n), uintptr(k),
			uintptr(unsafe.Pointer(&sc[0])), uintptr(a), uintptr(lda), uintptr(b), uintptr(ldb),
			uintptr(unsafe.Pointer(&sc[1])), uintptr(cc), uintptr(ldc)))
	}
	const algoDefault = ^uintptr(0) // CUBLAS_GEMM_DEFAULT = -1
	ab, ct := uintptr(ty.AB), uintptr(ty.C)
	return blasCheck("cublasGemmEx", call(blas.cublasGemmEx, c.blasH, ta, tb, uintptr(m), uintptr(n), uintptr(k),
		uintptr(unsafe.Pointer(&sc[0])), uintptr(a), ab, uintptr(lda), uintptr(b), ab, uintptr(ldb),
		uintptr(unsafe.Pointer(&sc[1])), uintptr(cc), ct, uintptr(ldc), ty.compute(math), algoDefault))
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
	wsSize int
	ws     map[Stream]Ptr    // each stream's workspace (GEMMs on different streams run at once)
	def    Ptr               // the workspace of a stream first seen inside a capture (no allocation there)
	plans  map[ltKey]*ltPlan // nil value: no algorithm (cached refusal)
	events []Event           // the search's timing events, made on first use
}

// ltKey is a matmul descriptor: everything the heuristic's choice and an
// algorithm's validity depend on. Plans of the search (search) and of the
// heuristic's first choice are kept apart, and a plain GEMM's plan
// (legacy: cuBLAS's own Gemm is one of its candidates) apart from an
// epilogue call's.
type ltKey struct {
	math          Math
	ta, tb        bool
	m, n, k       int
	lda, ldb, ldc int
	epi           Epilogue
	auxLD         int
	// alA, alB, alC are the operands' alignments in bytes (256 at most;
	// the heuristic only offers algorithms these allow).
	alA, alB, alC  uint16
	search, legacy bool
	// ty are the element types (the same shape in float16 and float32 is
	// another descriptor); math is FP32 for half ones (they ignore it).
	ty Types
	// biasTy is the bias's element type (LtArgs.BiasType) of an epilogue
	// that uses one; R32F otherwise.
	biasTy DataType
}

// ltPlan is a matmul descriptor, its layouts and its algorithm, built once
// and reused.
type ltPlan struct {
	desc, la, lb, lc uintptr
	algo             [ltResultSize]byte // cublasLtMatmulHeuristicResult_t; algo is its first 64 bytes
	// legacy: cuBLAS's Gemm won the search (or cuBLASLt had no candidate).
	legacy bool
	// cands are the heuristic's candidates while the search is still to
	// run (searched false: the plan was made during a stream capture).
	cands    [][ltResultSize]byte
	searched bool
	deferred bool // counted in AlgoSearchStats.Deferred
}

// ltResultSize is sizeof(cublasLtMatmulHeuristicResult_t): the 64-byte
// algorithm, size_t workspaceSize, cublasStatus_t state, float wavesCount,
// int reserved[4].
const ltResultSize = 96

// ltResult reads a heuristic result's workspace size and state.
func ltResult(r *[ltResultSize]byte) (ws uint64, state int32) {
	return *(*uint64)(unsafe.Pointer(&r[64])), *(*int32)(unsafe.Pointer(&r[72]))
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
	ltDescBiasType = 26 // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE (int32 cudaDataType_t)
	ltDescAux      = 11 // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
	ltDescAuxLD    = 12 // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD (int64, bits)
	ltPrefMaxWS    = 1
	ltPrefAlignA   = 5 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES (uint32); B, C, D follow
)

func (p *ltPlan) setPtr(attr uintptr, v Ptr) error {
	x := []uint64{uint64(v)}
	return blasCheck("cublasLtMatmulDescSetAttribute", call(blasLt.descSet, p.desc, attr, uintptr(unsafe.Pointer(&x[0])), 8))
}

// alignOf is the largest power of two up to 256 dividing p's address.
func alignOf(p Ptr) uint16 {
	a := uint16(256)
	for a > 1 && uintptr(p)%uintptr(a) != 0 {
		a /= 2
	}
	return a
}

// newLtPlan builds k's descriptor and layouts and asks the heuristic for up
// to n algorithms, keeping those that report success and fit the
// workspace. The epilogue's pointers are set before the heuristic runs (it
// infers their alignment from them).
func (c *Ctx) newLtPlan(k ltKey, bias, aux Ptr, n int) (*ltPlan, [][ltResultSize]byte, error) {
	p := &ltPlan{}
	abType, cType := uintptr(k.ty.AB), uintptr(k.ty.C)
	if err := blasCheck("cublasLtMatmulDescCreate", call(blasLt.descCreate, uintptr(unsafe.Pointer(&p.desc)), k.ty.compute(k.math), cudaR32F)); err != nil {
		return nil, nil, err
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
		return nil, nil, err
	}
	if err := set(ltDescTransB, uint32(op(k.tb))); err != nil {
		return nil, nil, err
	}
	if err := set(ltDescEpilogue, uint32(k.epi)); err != nil {
		return nil, nil, err
	}
	if k.epi.usesBias() {
		if err := p.setPtr(ltDescBias, bias); err != nil {
			return nil, nil, err
		}
		// cuBLASLt's default bias (and bias gradient) type is D's; a
		// float32 one with a half D is set explicitly, and a cuBLASLt that
		// refuses it refuses the descriptor (ErrNoAlgorithm: the caller
		// falls back, or retries with a bias of D's type).
		if k.biasTy != k.ty.C {
			x := []int32{int32(k.biasTy)}
			r := call(blasLt.descSet, p.desc, ltDescBiasType, uintptr(unsafe.Pointer(&x[0])), 4)
			if r == 15 || r == 7 {
				return nil, nil, ErrNoAlgorithm
			}
			if err := blasCheck("cublasLtMatmulDescSetAttribute", r); err != nil {
				return nil, nil, err
			}
		}
	}
	if k.epi.aux() {
		ld := []int64{int64(k.auxLD)}
		if err := blasCheck("cublasLtMatmulDescSetAttribute", call(blasLt.descSet, p.desc, ltDescAuxLD, uintptr(unsafe.Pointer(&ld[0])), 8)); err != nil {
			return nil, nil, err
		}
		if err := p.setPtr(ltDescAux, aux); err != nil {
			return nil, nil, err
		}
	}
	layout := func(dst *uintptr, typ uintptr, rows, cols, ld int) error {
		return blasCheck("cublasLtMatrixLayoutCreate", call(blasLt.layoutCreate, uintptr(unsafe.Pointer(dst)), typ, uintptr(rows), uintptr(cols), uintptr(ld)))
	}
	ar, ac := k.m, k.k
	if k.ta {
		ar, ac = k.k, k.m
	}
	br, bc := k.k, k.n
	if k.tb {
		br, bc = k.n, k.k
	}
	if err := layout(&p.la, abType, ar, ac, k.lda); err != nil {
		return nil, nil, err
	}
	if err := layout(&p.lb, abType, br, bc, k.ldb); err != nil {
		return nil, nil, err
	}
	if err := layout(&p.lc, cType, k.m, k.n, k.ldc); err != nil {
		return nil, nil, err
	}
	var pref uintptr
	if err := blasCheck("cublasLtMatmulPreferenceCreate", call(blasLt.prefCreate, uintptr(unsafe.Pointer(&pref)))); err != nil {
		return nil, nil, err
	}
	defer call(blasLt.prefDestroy, pref)
	ws := []uint64{uint64(c.lt.wsSize)}
	if err := blasCheck("cublasLtMatmulPreferenceSetAttribute", call(blasLt.prefSet, pref, ltPrefMaxWS, uintptr(unsafe.Pointer(&ws[0])), 8)); err != nil {
		return nil, nil, err
	}
	for i, al := range []uint16{k.alA, k.alB, k.alC, k.alC} { // D is C
		if al == 0 || al == 256 {
			continue // cuBLASLt's default
		}
		x := []uint32{uint32(al)}
		if err := blasCheck("cublasLtMatmulPreferenceSetAttribute", call(blasLt.prefSet, pref, uintptr(ltPrefAlignA+i), uintptr(unsafe.Pointer(&x[0])), 4)); err != nil {
			return nil, nil, err
		}
	}
	res := make([][ltResultSize]byte, max(n, 1))
	var got int32
	r := call(blasLt.heuristic, c.lt.h, p.desc, p.la, p.lb, p.lc, p.lc, pref, uintptr(len(res)),
		uintptr(unsafe.Pointer(&res[0])), uintptr(unsafe.Pointer(&got)))
	// CUBLAS_STATUS_NOT_SUPPORTED, INVALID_VALUE (a combination of
	// epilogue, layout and arithmetic this cuBLASLt rejects), or no result.
	if r != 15 && r != 7 {
		if err := blasCheck("cublasLtMatmulAlgoGetHeuristic", r); err != nil {
			return nil, nil, err
		}
	} else {
		got = 0
	}
	var cands [][ltResultSize]byte
	for i := range res[:min(int(got), len(res))] {
		if w, st := ltResult(&res[i]); st == 0 && w <= uint64(c.lt.wsSize) {
			cands = append(cands, res[i])
		}
	}
	ok = true
	return p, cands, nil
}

// ltCall is one matmul's operands.
type ltCall struct {
	s           Stream
	alpha, beta float32
	a, b, cc    Ptr
	m, n, ldc   int // C's extent (saved around the search's runs when beta ≠ 0)
	x           LtArgs
	// legacy is the plain GEMM through cuBLAS (Gemm), a candidate of its
	// own; nil for epilogue matmuls.
	legacy func() error
}

// workspace is the cuBLASLt workspace of cl's stream: LtArgs.Workspace, or
// the context's own for that stream, made on its first GEMM (one first
// seen inside a capture, where nothing may be allocated, shares the
// default one).
func (c *Ctx) workspace(cl *ltCall) (Ptr, error) {
	if cl.x.Workspace != 0 {
		return cl.x.Workspace, nil
	}
	if w, ok := c.lt.ws[cl.s]; ok {
		return w, nil
	}
	if c.capturing(cl.s) {
		return c.lt.def, nil
	}
	w, err := c.Malloc(c.lt.wsSize)
	if err != nil {
		return 0, err
	}
	c.lt.ws[cl.s] = w
	return w, nil
}

// ltRelease frees s's workspace (s is being destroyed).
func (c *Ctx) ltRelease(s Stream) {
	if c.lt == nil {
		return
	}
	if w, ok := c.lt.ws[s]; ok {
		delete(c.lt.ws, s)
		c.StreamSync(s) // its GEMMs may still be reading it
		c.Free(w)
	}
}

// ltRun launches cl with algorithm algo (a heuristic result), returning
// cuBLASLt's status.
func (c *Ctx) ltRun(p *ltPlan, algo *[ltResultSize]byte, cl *ltCall, ws Ptr) int {
	sc := (*[2]float32)(unsafe.Pointer(&c.scal[0]))
	sc[0], sc[1] = cl.alpha, cl.beta
	return call(blasLt.matmul, c.lt.h, p.desc, uintptr(unsafe.Pointer(&sc[0])),
		uintptr(cl.a), p.la, uintptr(cl.b), p.lb, uintptr(unsafe.Pointer(&sc[1])), uintptr(cl.cc), p.lc, uintptr(cl.cc), p.lc,
		uintptr(unsafe.Pointer(&algo[0])), uintptr(ws), uintptr(c.lt.wsSize), uintptr(cl.s))
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
	// Workspace, when not 0, replaces the context's cuBLASLt workspace of
	// the stream (LtWorkspaceSize bytes).
	Workspace Ptr
	// Search, when not nil, picks the algorithm of a descriptor seen for
	// the first time by timing the heuristic's candidates (AlgoSearch);
	// nil takes the heuristic's first choice.
	Search *AlgoSearch
	// Types are the element types of A, B and C (zero: float32).
	Types Types
	// BiasType is the element type of the bias or bias gradient: R32F
	// (the zero value) whatever C is, or C's own half type (cuBLASLt's
	// documented type for a half D; a cuBLASLt may refuse a float32 bias
	// with a half D: ErrNoAlgorithm).
	BiasType DataType
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
	if x.Epilogue == 0 {
		x.Epilogue = EpilogueNone
	}
	key, err := ltKeyOf(math, transA, transB, m, n, k, a, lda, b, ldb, cc, ldc, x, false)
	if err != nil {
		return err
	}
	return c.ltMatmul(key, &ltCall{s: s, alpha: alpha, beta: beta, a: a, b: b, cc: cc, m: m, n: n, ldc: ldc, x: x})
}

// ltKeyOf is the descriptor of a matmul: its plan's key. The operands'
// addresses enter only through their alignment, the epilogue's pointers
// not at all (they are set on the plan per call).
func ltKeyOf(math Math, transA, transB bool, m, n, k int, a Ptr, lda int, b Ptr, ldb int, cc Ptr, ldc int, x LtArgs, legacy bool) (ltKey, error) {
	if err := x.Types.check(); err != nil {
		return ltKey{}, err
	}
	if x.Types.half() {
		math = FP32 // half operands compute in float32 whatever the Math
	}
	if x.BiasType != R32F && (x.BiasType != x.Types.C || !x.Epilogue.usesBias()) {
		return ltKey{}, fmt.Errorf("%w: a %v bias with a %v C and epilogue %d (the bias is float32 or C's half type)", ErrTypes, x.BiasType, x.Types.C, x.Epilogue)
	}
	key := ltKey{math: math, ta: transA, tb: transB, m: m, n: n, k: k, lda: lda, ldb: ldb, ldc: ldc, epi: x.Epilogue,
		alA: alignOf(a), alB: alignOf(b), alC: alignOf(cc), search: x.Search != nil, legacy: legacy, ty: x.Types, biasTy: x.BiasType}
	if x.Epilogue.aux() {
		if x.AuxLD < m || x.AuxLD%128 != 0 || x.Aux == 0 {
			return ltKey{}, fmt.Errorf("cublasLt: ReLU mask leading dimension %d for %d rows (want a multiple of 128, at least the rows)", x.AuxLD, m)
		}
		key.auxLD = x.AuxLD
	}
	return key, nil
}

// GemmSearch is Gemm with the algorithm search as: the first call of each
// descriptor times cuBLASLt's candidates and cuBLAS's own choice (Gemm) on
// the call's operands and keeps the fastest for the calls after it. A nil
// as is Gemm.
func (c *Ctx) GemmSearch(s Stream, math Math, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int, as *AlgoSearch) error {
	return c.GemmExSearch(s, math, Types{}, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc, as)
}

// GemmExSearch is GemmEx with the algorithm search as (see GemmSearch):
// the element types are part of the descriptor, so the same shape in
// float16, bfloat16 and float32 are searched (and planned) apart. A nil as
// is GemmEx.
func (c *Ctx) GemmExSearch(s Stream, math Math, ty Types, transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, cc Ptr, ldc int, as *AlgoSearch) error {
	legacy := func() error {
		return c.GemmEx(s, math, ty, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
	}
	if as == nil || m == 0 || n == 0 || k == 0 {
		return legacy()
	}
	x := LtArgs{Epilogue: EpilogueNone, Search: as, Types: ty}
	key, err := ltKeyOf(math, transA, transB, m, n, k, a, lda, b, ldb, cc, ldc, x, true)
	if err != nil {
		return err
	}
	err = c.ltMatmul(key, &ltCall{s: s, alpha: alpha, beta: beta, a: a, b: b, cc: cc, m: m, n: n, ldc: ldc, x: x, legacy: legacy})
	if errors.Is(err, ErrNoAlgorithm) {
		return legacy()
	}
	return err
}

// ltMatmul runs cl with the plan of key, making it (and searching it, when
// cl asks and s is not being captured) on first use.
func (c *Ctx) ltMatmul(key ltKey, cl *ltCall) error {
	p, ok := c.lt.plans[key]
	if ok && p == nil {
		return ErrNoAlgorithm
	}
	as := cl.x.Search
	if !ok {
		n := 1
		if as != nil {
			n = as.candidates()
		}
		var cands [][ltResultSize]byte
		var err error
		if p, cands, err = c.newLtPlan(key, cl.x.Bias, cl.x.Aux, n); err != nil {
			if errors.Is(err, ErrNoAlgorithm) {
				c.lt.plans[key] = nil // cached refusal
			}
			return err
		}
		if len(cands) > 0 {
			p.algo = cands[0]
		}
		switch {
		case cl.legacy != nil:
			p.legacy = true // cuBLAS's own GEMM until a search says otherwise
		case len(cands) == 0:
			p.destroy()
			c.lt.plans[key] = nil
			return ErrNoAlgorithm
		}
		p.searched = as == nil
		if !p.searched {
			p.cands = cands
		}
		c.lt.plans[key] = p
	}
	if key.epi.usesBias() {
		if err := p.setPtr(ltDescBias, cl.x.Bias); err != nil {
			return err
		}
	}
	if key.epi.aux() {
		if err := p.setPtr(ltDescAux, cl.x.Aux); err != nil {
			return err
		}
	}
	ws, err := c.workspace(cl)
	if err != nil {
		return err
	}
	if !p.searched && as != nil {
		if c.capturing(cl.s) || c.tape != nil {
			// No timing or synchronisation inside a capture or a recorded
			// graph step: this call takes the heuristic's choice; the next
			// eager call searches.
			if !p.deferred {
				p.deferred = true
				as.Stats.Deferred++
			}
		} else if err := c.searchPlan(key, p, cl, ws); err != nil {
			return err
		}
	}
	if p.legacy {
		return cl.legacy() // Gemm records itself on a tape
	}
	if c.tape != nil && c.tapeArgs("cublasLtMatmul", cl.s, key.math, key.ta, key.tb, key.m, key.n, key.k, cl.alpha, cl.a, key.lda, cl.b, key.ldb, cl.beta, cl.cc, key.ldc, cl.x, key.ty, Ptr(unsafe.Pointer(p)), ws, algoWord(&p.algo)) {
		return nil
	}
	r := c.ltRun(p, &p.algo, cl, ws)
	// NOT_SUPPORTED or INVALID_VALUE (the algorithm rejects these
	// operands): nothing ran. A plain GEMM falls back to cuBLAS from now
	// on; an epilogue call refuses the shape.
	if r == 15 || r == 7 {
		if cl.legacy != nil {
			p.legacy = true
			return cl.legacy()
		}
		p.destroy()
		c.lt.plans[key] = nil
		return ErrNoAlgorithm
	}
	return blasCheck("cublasLtMatmul", r)
}
