package gpu

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// hostGraphBackend is a Backend with a graph state and no device: enough
// for the host side of the per-step scalar block.
func hostGraphBackend() *Backend {
	g := &graphState{dev: 0x100000}
	for i := range g.host {
		g.host[i] = make([]byte, graphScalarBytes)
	}
	return &Backend{graph: g}
}

// TestStepScalarsHost: outside a graph step there is no slot (0: the
// kernels take their arguments); inside, each call gets the next 16-byte
// slot of the block with its words little-endian, and a full block is
// reported (overflow) instead of overrunning.
func TestStepScalarsHost(t *testing.T) {
	be := hostGraphBackend()
	if p := be.stepScalars(1, 2); p != 0 {
		t.Fatalf("not deferring: slot %#x", p)
	}
	g := be.graph
	g.deferring = true
	p0, p1 := be.stepScalars(0x0102030405060708, 9), be.stepScalars(10, 11)
	if p0 != g.dev || p1 != g.dev+16 || g.off != 32 {
		t.Fatalf("slots %#x %#x, %d bytes used", p0, p1, g.off)
	}
	h := g.host[g.r]
	if binary.LittleEndian.Uint64(h) != 0x0102030405060708 || binary.LittleEndian.Uint64(h[8:]) != 9 ||
		binary.LittleEndian.Uint64(h[16:]) != 10 || binary.LittleEndian.Uint64(h[24:]) != 11 {
		t.Errorf("block % x", h[:32])
	}
	g.off = graphScalarBytes - 8
	if p := be.stepScalars(1, 2); p != 0 || !g.overflow {
		t.Errorf("full block: slot %#x, overflow %v", p, g.overflow)
	}
}

// TestOptCoefInGraphStep: eagerly the optimizer kernels get lr and Adam's
// bias-corrected lrT as arguments and a null OptDyn; in a graph step those
// arguments are 0 (the launch is the same every step) and the slot holds
// the same float32 values and the step.
func TestOptCoefInGraphStep(t *testing.T) {
	p := tensor.OptParams{Kind: tensor.Adam, LR: 0.001, Step: 7, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7}
	be := hostGraphBackend()
	eager := be.optCoef(p)
	if len(eager) != 12 || eager[11] != cuda.Ptr(0) {
		t.Fatalf("eager coefficients %v", eager)
	}
	lr, lrT := eager[1].(float32), eager[10].(float32)
	wantT := float32(p.LR * math.Sqrt(1-math.Pow(p.Beta2, 7)) / (1 - math.Pow(p.Beta1, 7)))
	if lr != float32(p.LR) || lrT != wantT {
		t.Fatalf("eager lr %v lrT %v, want %v %v", lr, lrT, float32(p.LR), wantT)
	}
	if s := be.optStep(p); s != 7 {
		t.Errorf("eager step argument %d", s)
	}
	be.graph.deferring = true
	dyn := be.optCoef(p)
	if dyn[1].(float32) != 0 || dyn[10].(float32) != 0 || dyn[11] != be.graph.dev {
		t.Fatalf("graph-step coefficients %v", dyn)
	}
	for i := range eager {
		if i != 1 && i != 10 && i != 11 && dyn[i] != eager[i] {
			t.Errorf("coefficient %d: %v in a graph step, %v eagerly", i, dyn[i], eager[i])
		}
	}
	h := be.graph.host[0]
	if math.Float32frombits(binary.LittleEndian.Uint32(h)) != lr || math.Float32frombits(binary.LittleEndian.Uint32(h[4:])) != lrT ||
		binary.LittleEndian.Uint64(h[8:]) != 7 {
		t.Errorf("slot % x", h[:16])
	}
	if s := be.optStep(p); s != 0 {
		t.Errorf("graph-step step argument %d", s)
	}
	// A full block: the arguments are the scalars again, the slot null.
	be.graph.off = graphScalarBytes
	full := be.optCoef(p)
	if full[1] != eager[1] || full[10] != eager[10] || full[11] != cuda.Ptr(0) || be.optStep(p) != 7 {
		t.Errorf("full block: coefficients %v, step %d", full, be.optStep(p))
	}
}

// graphTestBackend is a backend of its own (the graph state is per
// backend), skipped without a driver.
func graphTestBackend(t *testing.T, o Options) *Backend {
	t.Helper()
	be, err := New(o)
	if err != nil {
		if errors.Is(err, cuda.ErrNoDriver) && os.Getenv("CTRKIT_REQUIRE_GPU") == "" {
			t.Skipf("GPU test skipped: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// TestGPUGraphStepMatchesEager runs a small "step" (SGD with a learning
// rate that changes every step, Dropout with the step's counter, an
// accumulation) eagerly on one set of tensors and as a CUDA graph on
// another: captured at the second step, replayed after, bit-equal to
// eager. Then a step whose scalar argument changed (not through the scalar
// block), and a step that downloads inside: each runs eagerly, says why,
// and still computes what eager computes.
func TestGPUGraphStepMatchesEager(t *testing.T) {
	be := graphTestBackend(t, Options{})
	const n = 4099
	init := make([]float32, n)
	for i := range init {
		init[i] = float32(math.Sin(float64(i)))
	}
	type set struct{ w, g, x, y, z tensor.Tensor }
	mk := func() set {
		s := set{be.Alloc(tensor.Float32, n), be.Alloc(tensor.Float32, n), be.Alloc(tensor.Float32, n), be.Alloc(tensor.Float32, n), be.Alloc(tensor.Float32, n)}
		be.Upload(s.w, init)
		be.Upload(s.g, init)
		be.Upload(s.x, init)
		return s
	}
	step := func(s set, k int, a float64) {
		be.DenseUpdate(tensor.OptParams{Kind: tensor.SGD, LR: 0.01 * float64(k), Step: int64(k)}, s.w, s.g, tensor.Tensor{}, tensor.Tensor{})
		be.Dropout(s.y, s.x, 0.5, 42, uint64(k)*1000)
		be.Axpby(s.z, a, s.y, 1, s.z)
		be.Axpby(s.z, 1, s.w, 1, s.z)
	}
	eager, graphed := mk(), mk()
	down := func(x tensor.Tensor) []float32 {
		v := make([]float32, n)
		if err := be.Download(v, x); err != nil {
			t.Fatal(err)
		}
		return v
	}
	same := func(what string) {
		t.Helper()
		for _, p := range [][2]tensor.Tensor{{eager.w, graphed.w}, {eager.y, graphed.y}, {eager.z, graphed.z}} {
			a, b := down(p[0]), down(p[1])
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%s: element %d: graph %v, eager %v", what, i, b[i], a[i])
				}
			}
		}
	}
	k := 1
	step(eager, k, 1)
	step(graphed, k, 1) // the warm-up step, eager
	for k = 2; k <= 6; k++ {
		step(eager, k, 1)
		if err := be.BeginGraphStep(); err != nil {
			t.Fatal(err)
		}
		step(graphed, k, 1)
		r := be.EndGraphStep(false)
		if r.Why != "" || !r.Replayed || r.Captured != (k == 2) {
			t.Fatalf("step %d: %+v", k, r)
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	same("replayed steps")
	if be.GraphReplays() != 5 {
		t.Errorf("%d replays", be.GraphReplays())
	}

	// A changed kernel argument: the step runs eagerly and drops the graph.
	step(eager, k, 3)
	be.BeginGraphStep()
	step(graphed, k, 3)
	r := be.EndGraphStep(false)
	if r.Replayed || !r.Differs || !strings.Contains(r.Why, "differs from the captured one") || !strings.Contains(r.Why, "axpby") {
		t.Errorf("changed argument: %+v", r)
	}
	same("a step with a changed argument")
	k++

	// A download inside the step: the rest of the step runs eagerly.
	for i := 0; i < 2; i++ { // capture again, then break
		step(eager, k, 1)
		be.BeginGraphStep()
		step(graphed, k, 1)
		if i == 1 {
			down(graphed.y)
		}
		r = be.EndGraphStep(false)
		if i == 0 && (!r.Captured || r.Why != "") {
			t.Fatalf("recapture: %+v", r)
		}
		k++
	}
	if r.Replayed || !strings.Contains(r.Why, "Download") {
		t.Errorf("download inside the step: %+v", r)
	}
	same("a step that downloads")

	// A failed step (the caller's error) runs what it issued and captures
	// nothing.
	step(eager, k, 1)
	be.BeginGraphStep()
	step(graphed, k, 1)
	if r = be.EndGraphStep(true); r.Replayed || r.Captured {
		t.Errorf("failed step: %+v", r)
	}
	same("a failed step")
	k++

	// A host synchronisation hidden inside an operation: the capture fails
	// in the driver (and the tape names it), or, once a graph exists, the
	// dry run refuses it; either way the step runs eagerly and says why.
	sneaky := func() {
		be.do("sneaky_sync", func(c *cuda.Ctx) error { return c.StreamSync(be.s) })
	}
	step(eager, k, 1)
	be.BeginGraphStep()
	step(graphed, k, 1)
	sneaky()
	if r = be.EndGraphStep(false); r.Replayed || !strings.Contains(r.Why, "sneaky_sync") {
		t.Errorf("a sync inside the captured step: %+v", r)
	}
	k++
	for i := 0; i < 2; i++ { // capture a clean step, then replay one with the sync
		step(eager, k, 1)
		be.BeginGraphStep()
		step(graphed, k, 1)
		if i == 1 {
			sneaky()
		}
		r = be.EndGraphStep(false)
		k++
	}
	if r.Replayed || r.Differs || !strings.Contains(r.Why, "sneaky_sync") || !strings.Contains(r.Why, "cuStreamSynchronize") {
		t.Errorf("a sync inside a replayed step: %+v", r)
	}
	t.Logf("sync inside the step: %s", r.Why)
	same("steps with a hidden sync")
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestGPUGraphFused captures a fused InnerProduct backward whose weight
// gradient runs on the side stream (fork and join through events) and
// replays it bit-equal to eager.
func TestGPUGraphFused(t *testing.T) {
	be := graphTestBackend(t, Options{Fused: true})
	const m, k, nOut = 256, 64, 96
	val := func(n int, f float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Cos(f * float64(i)))
		}
		return v
	}
	type set struct{ x, dy, dw, db, w tensor.Tensor }
	mk := func() set {
		s := set{be.Alloc(tensor.Float32, m, k), be.Alloc(tensor.Float32, m, nOut), be.Alloc(tensor.Float32, k, nOut),
			be.Alloc(tensor.Float32, nOut), be.Alloc(tensor.Float32, k, nOut)}
		be.Upload(s.x, val(m*k, 0.37))
		be.Upload(s.dy, val(m*nOut, 0.11))
		return s
	}
	step := func(s set, it int) {
		if !be.GemmBgrad(s.x, s.dy, s.dw, s.db, true) {
			be.Gemm(true, false, 1, s.x, s.dy, 0, s.dw)
			be.ColSum(s.db, 0, s.dy)
		}
		be.JoinGrads()
		be.DenseUpdate(tensor.OptParams{Kind: tensor.SGD, LR: 0.001 * float64(it), Step: int64(it)}, s.w, s.dw, tensor.Tensor{}, tensor.Tensor{})
	}
	eager, graphed := mk(), mk()
	step(eager, 1)
	step(graphed, 1)
	for it := 2; it <= 5; it++ {
		step(eager, it)
		be.BeginGraphStep()
		step(graphed, it)
		if r := be.EndGraphStep(false); r.Why != "" || !r.Replayed {
			t.Fatalf("step %d: %+v", it, r)
		}
	}
	a, b := make([]float32, k*nOut), make([]float32, k*nOut)
	if err := be.Download(a, eager.w); err != nil {
		t.Fatal(err)
	}
	if err := be.Download(b, graphed.w); err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("weight %d: graph %v, eager %v", i, b[i], a[i])
		}
	}
}
