package gpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// The parity harness: every GPU operation runs on fresh random inputs next
// to the CPU backend in float64 (the reference), outputs poisoned first on
// the GPU, and is compared by relative error ‖gpu−ref‖/‖ref‖ (NaN fails).

const (
	tolFP32 = 1e-5
	tolTF32 = 1e-3
	tolBF16 = 1e-2
)

var (
	sharedOnce sync.Once
	sharedBE   *Backend
	sharedErr  error
)

// gpuBackend returns the package's shared FP32 backend, skipping the test
// when there is no CUDA driver (CI, laptops). CTRKIT_REQUIRE_GPU=1 turns
// the skip into a failure (the GPU machine's runs set it).
func gpuBackend(t testing.TB) *Backend {
	t.Helper()
	sharedOnce.Do(func() { sharedBE, sharedErr = New(Options{}) })
	if sharedErr != nil {
		if errors.Is(sharedErr, cuda.ErrNoDriver) && os.Getenv("CTRKIT_REQUIRE_GPU") == "" {
			t.Skipf("GPU test skipped: %v", sharedErr)
		}
		t.Fatalf("GPU backend: %v", sharedErr)
	}
	sharedBE.Reset()
	return sharedBE
}

type harness struct {
	t   *testing.T
	g   *Backend
	c   *cpu.Backend
	rng *rand.Rand
}

// pair is one operand on both backends: G float32/int on the GPU, C the
// float64/int reference on the CPU.
type pair struct{ G, C tensor.Tensor }

func newHarness(t *testing.T) *harness {
	t.Helper()
	g := gpuBackend(t)
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, g: g, c: c, rng: rand.New(rand.NewPCG(uint64(len(t.Name())), 7))}
}

// Floats uploads values (rounded to float32 for both backends, so both see
// the same inputs).
func (h *harness) Floats(vals []float64, shape ...int) pair {
	h.t.Helper()
	f32 := make([]float32, len(vals))
	f64 := make([]float64, len(vals))
	for i, v := range vals {
		f32[i] = float32(v)
		f64[i] = float64(f32[i])
	}
	p := pair{h.g.Alloc(tensor.Float32, shape...), h.c.Alloc(tensor.Float64, shape...)}
	h.g.Upload(p.G, f32)
	h.c.Upload(p.C, f64)
	return p
}

// Rand is a float operand uniform in [lo, hi).
func (h *harness) Rand(lo, hi float64, shape ...int) pair {
	v := make([]float64, tensor.NumElems(shape...))
	for i := range v {
		v[i] = lo + (hi-lo)*h.rng.Float64()
	}
	return h.Floats(v, shape...)
}

// Ints uploads integers of dtype dt (Int32, Int64, Uint32) to both.
func (h *harness) Ints(dt tensor.DType, vals []int64, shape ...int) pair {
	h.t.Helper()
	p := pair{h.g.Alloc(dt, shape...), h.c.Alloc(dt, shape...)}
	switch dt {
	case tensor.Int32:
		s := make([]int32, len(vals))
		for i, v := range vals {
			s[i] = int32(v)
		}
		h.g.Upload(p.G, s)
		h.c.Upload(p.C, s)
	case tensor.Uint32:
		s := make([]uint32, len(vals))
		for i, v := range vals {
			s[i] = uint32(v)
		}
		h.g.Upload(p.G, s)
		h.c.Upload(p.C, s)
	case tensor.Int64:
		h.g.Upload(p.G, append([]int64(nil), vals...))
		h.c.Upload(p.C, append([]int64(nil), vals...))
	default:
		h.t.Fatalf("Ints: dtype %v", dt)
	}
	return p
}

// Out is an output operand: poisoned on the GPU (NaN for floats, a
// sentinel for integers), zero on the CPU.
func (h *harness) Out(dt tensor.DType, shape ...int) pair {
	h.t.Helper()
	if dt == tensor.Float32 || dt == tensor.Float64 {
		p := pair{h.g.Alloc(tensor.Float32, shape...), h.c.Alloc(tensor.Float64, shape...)}
		h.g.Fill(p.G, math.NaN())
		return p
	}
	p := pair{h.g.Alloc(dt, shape...), h.c.Alloc(dt, shape...)}
	h.g.Fill(p.G, -123456789)
	return p
}

// Zero is the absent operand on both backends.
func (h *harness) Zero() pair { return pair{} }

// Free releases both sides.
func (h *harness) Free(ps ...pair) {
	for _, p := range ps {
		h.g.Free(p.G)
		h.c.Free(p.C)
	}
}

// Sync fails the test on either backend's error.
func (h *harness) Sync() {
	h.t.Helper()
	if err := h.c.Err(); err != nil {
		h.t.Fatalf("cpu: %v", err)
	}
	if err := h.g.Sync(); err != nil {
		h.t.Fatalf("gpu: %v", err)
	}
}

// Check compares p's GPU side with its CPU reference: relative L2 error
// below tol for floats (NaN fails), equality for integers. It returns the
// relative error.
func (h *harness) Check(name string, p pair, tol float64) float64 {
	h.t.Helper()
	h.Sync()
	n := p.C.Len()
	if p.G.Len() != n {
		h.t.Fatalf("%s: GPU %v vs CPU %v", name, p.G, p.C)
	}
	switch p.C.DType {
	case tensor.Float64:
		g := make([]float64, n)
		if err := h.g.Download(g, p.G); err != nil {
			h.t.Fatalf("%s: %v", name, err)
		}
		ref := cpu.Data[float64](p.C)
		e := RelErr(g, ref)
		if !(e <= tol) {
			i := worst(g, ref)
			h.t.Errorf("%s: relative error %.3g ≥ %.0e (worst [%d]: gpu %v, ref %v)", name, e, tol, i, g[i], ref[i])
		}
		return e
	default:
		g := make([]int64, n)
		c := make([]int64, n)
		h.ints(g, p.G, h.g)
		h.ints(c, p.C, h.c)
		for i := range g {
			if g[i] != c[i] {
				h.t.Errorf("%s: [%d] gpu %d, ref %d", name, i, g[i], c[i])
				return 1
			}
		}
		return 0
	}
}

func (h *harness) ints(dst []int64, t tensor.Tensor, be tensor.Backend) {
	h.t.Helper()
	var err error
	switch t.DType {
	case tensor.Int32:
		s := make([]int32, len(dst))
		err = be.Download(s, t)
		for i, v := range s {
			dst[i] = int64(v)
		}
	case tensor.Uint32:
		s := make([]uint32, len(dst))
		err = be.Download(s, t)
		for i, v := range s {
			dst[i] = int64(v)
		}
	case tensor.Int64:
		err = be.Download(dst, t)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// RelErr is ‖a−b‖₂/‖b‖₂ (‖a−b‖₂ when b is zero); NaN anywhere gives +Inf.
func RelErr(a, b []float64) float64 {
	var d, r float64
	for i := range a {
		if math.IsNaN(a[i]) || math.IsNaN(b[i]) {
			return math.Inf(1)
		}
		d += (a[i] - b[i]) * (a[i] - b[i])
		r += b[i] * b[i]
	}
	if r == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / r)
}

func worst(a, b []float64) int {
	w, wi := -1.0, 0
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(a[i]) {
			return i
		}
		if d > w {
			w, wi = d, i
		}
	}
	return wi
}

func TestNoDriverSkips(t *testing.T) {
	// Documented behaviour without a GPU: New wraps cuda.ErrNoDriver.
	if _, err := New(Options{Device: 1 << 20}); err == nil {
		t.Fatal("device 1<<20 opened")
	}
}
