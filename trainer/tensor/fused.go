package tensor

// FusedDense is implemented by backends with fused InnerProduct kernels (the
// GPU: cuBLASLt GEMM epilogues). A layer discovers it by type assertion and
// uses it only while FusesDense reports true; the CPU backend has none and
// runs the plain operations.
//
// Each GEMM method reports whether it ran. On false it has done nothing
// (the backend cannot fuse that shape, dtype or arithmetic) and the caller
// runs the plain operations its comment names, which compute the same
// values. Shapes follow an InnerProduct y = x·w + bias: x [B, in], w [in,
// out], y and dy [B, out], bias and db [out], dx [B, in].
//
// For a chain of InnerProducts with ReLU (y₁ = ReLU(x·w₁ + b₁), y₂ = y₁·w₂ +
// b₂, …) the training step becomes:
//
//	forward   GemmBiasReLUMask(x, w₁, b₁, y₁, mask₁)        y₁ and its mask
//	backward  GemmBgrad(y₁, dy₂, dw₂, db₂, side)             dw₂ and db₂ at once
//	          GemmDReLUBgrad(dy₂, w₂, mask₁, dz₁, db₁)       dz₁ = dy₁⊙ReLU', db₁
//	          GemmBgrad(x, dz₁, dw₁, zero, side)             dw₁ (db₁ is done)
//	          JoinGrads()                                    before reading any dw
type FusedDense interface {
	// FusesDense reports whether the fused kernels are on (a backend may be
	// opened with them off, for A/B runs). When false, layers use none of
	// the methods below.
	FusesDense() bool
	// ReLUMask allocates the ReLU mask of a [rows, cols] activation of
	// float dtype dt, for GemmBiasReLUMask and GemmDReLUBgrad. Its contents
	// are the backend's own (one bit per element on the GPU); release it
	// with Free.
	ReLUMask(dt DType, rows, cols int) Tensor
	// GemmBiasReLUMask: y = ReLU(x·w + bias), and mask records which
	// elements of y are positive (the training forward). bias is Float32
	// or, with a half y, of y's dtype (the layer's half copy of its
	// float32 bias, which the plain operations read instead). Plain:
	// Gemm(false, false, 1, x, w, 0, y), BiasAct(ReLU, 0, y, y, bias).
	GemmBiasReLUMask(x, w, bias, y, mask Tensor) bool
	// GemmDReLUBgrad: dx = (dy·wᵀ)⊙[mask > 0] and db = Σ_rows dx — the input
	// gradient of an InnerProduct taken through the ReLU of the layer that
	// produced its input (mask is that layer's, db its bias gradient,
	// overwritten). Plain: Gemm(false, true, 1, dy, w, 0, dx), ActGrad(ReLU,
	// 0, dx, dx, zero, y) with y the activation the mask was taken of,
	// ColSum(db, 0, dx).
	GemmDReLUBgrad(dy, w, mask, dx, db Tensor) bool
	// GemmBgrad: dw = xᵀ·dy and, unless db is the zero Tensor, db = Σ_rows
	// dy (both overwritten), in one GEMM. With side it may run on a side
	// stream, concurrently with the operations issued after it, until
	// JoinGrads: the caller must not write x or dy, nor read dw or db (on
	// the device), before JoinGrads. Host reads (Download, Sync) wait for
	// it. Plain: Gemm(true, false, 1, x, dy, 0, dw), ColSum(db, 0, dy).
	GemmBgrad(x, dy, dw, db Tensor, side bool) bool
	// JoinGrads makes every operation issued after it wait for the side
	// GEMMs issued before it; a no-op when there are none.
	JoinGrads()
}

// FusedReference implements FusedDense with its Backend's plain operations:
// the fused semantics in runnable form (on the CPU in float64 it is the
// reference the GPU's fused kernels are tested against, and it lets the
// layers' fused paths be tested without a GPU). Its mask is a copy of the
// activation. Side GEMMs are deferred until JoinGrads, Sync or Download —
// the latest a side stream may finish — so a caller that reads a gradient
// before JoinGrads, or overwrites a side GEMM's operand, sees wrong values.
type FusedReference struct {
	Backend
	// Off makes FusesDense report false.
	Off bool
	// Refuse makes the named methods report false and do nothing, as a
	// backend does for shapes it cannot fuse (tests of the fallbacks).
	Refuse map[string]bool

	pending []func()
	// Calls counts the fused calls that ran, by method name.
	Calls map[string]int
}

// NewFusedReference wraps be.
func NewFusedReference(be Backend) *FusedReference {
	return &FusedReference{Backend: be, Calls: map[string]int{}}
}

// FusesDense implements FusedDense.
func (f *FusedReference) FusesDense() bool { return !f.Off }

// ReLUMask implements FusedDense: a [rows, cols] tensor of dt.
func (f *FusedReference) ReLUMask(dt DType, rows, cols int) Tensor { return f.Alloc(dt, rows, cols) }

// GemmBiasReLUMask implements FusedDense.
func (f *FusedReference) GemmBiasReLUMask(x, w, bias, y, mask Tensor) bool {
	if f.Refuse["GemmBiasReLUMask"] {
		return false
	}
	f.Calls["GemmBiasReLUMask"]++
	f.Gemm(false, false, 1, x, w, 0, y)
	f.BiasAct(ReLU, 0, y, y, bias)
	f.Copy(mask, y)
	return true
}

// GemmDReLUBgrad implements FusedDense.
func (f *FusedReference) GemmDReLUBgrad(dy, w, mask, dx, db Tensor) bool {
	if f.Refuse["GemmDReLUBgrad"] {
		return false
	}
	f.Calls["GemmDReLUBgrad"]++
	f.Gemm(false, true, 1, dy, w, 0, dx)
	f.ActGrad(ReLU, 0, dx, dx, Tensor{}, mask)
	f.ColSum(db, 0, dx)
	return true
}

// GemmBgrad implements FusedDense.
func (f *FusedReference) GemmBgrad(x, dy, dw, db Tensor, side bool) bool {
	if f.Refuse["GemmBgrad"] {
		return false
	}
	f.Calls["GemmBgrad"]++
	run := func() {
		f.Gemm(true, false, 1, x, dy, 0, dw)
		if !db.IsZero() {
			f.ColSum(db, 0, dy)
		}
	}
	if side {
		f.pending = append(f.pending, run)
	} else {
		run()
	}
	return true
}

// JoinGrads implements FusedDense: it runs the deferred side GEMMs.
func (f *FusedReference) JoinGrads() {
	for _, run := range f.pending {
		run()
	}
	f.pending = f.pending[:0]
}

// Sync joins the side GEMMs, then syncs.
func (f *FusedReference) Sync() error {
	f.JoinGrads()
	return f.Backend.Sync()
}

// Download joins the side GEMMs, then downloads.
func (f *FusedReference) Download(dst any, src Tensor) error {
	f.JoinGrads()
	return f.Backend.Download(dst, src)
}
