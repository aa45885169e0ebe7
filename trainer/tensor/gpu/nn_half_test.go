package gpu

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The interaction kernels on Float16 and BFloat16 operands (nn.go's
// interKernel: the _f16 / _bf16 instantiations of kernels/nn.cu) against
// the CPU float64 reference computed from the same rounded inputs, its
// outputs rounded once to the dtype (harness RoundC).

// testInteractionDT checks Interaction and InteractionGrad on b samples of
// dtype dt at tolBF16 and returns the largest relative error; as
// testInteractionTol, extra > 0 puts the batch in the first rows of larger
// buffers whose rows past b must stay unwritten. x0's columns of out pass
// through exactly.
func testInteractionDT(t *testing.T, h *harness, dt tensor.DType, b, d, n, extra int) float64 {
	t.Helper()
	w := d + n*(n+1)/2 + 1
	name := fmt.Sprintf("%v B%d d%d n%d", dt, b, d, n)
	if extra > 0 {
		name += fmt.Sprintf(" of %d", b+extra)
	}
	bb := b + extra
	view := func(q pair, shape ...int) pair {
		m := tensor.NumElems(shape...)
		return pair{q.G.Prefix(m).Reshape(shape...), q.C.Prefix(m).Reshape(shape...)}
	}
	x0f, embf := h.RandDT(dt, -1, 1, bb, d), h.RandDT(dt, -1, 1, bb, n, d)
	outf, dOutf := h.OutDT(dt, bb, w), h.RandDT(dt, -1, 1, bb, w)
	dx0f, dembf := h.OutDT(dt, bb, d), h.OutDT(dt, bb, n, d)
	defer h.Free(x0f, embf, outf, dOutf, dx0f, dembf)
	x0, emb, out, dOut := view(x0f, b, d), view(embf, b, n, d), view(outf, b, w), view(dOutf, b, w)
	dx0, demb := view(dx0f, b, d), view(dembf, b, n, d)

	h.g.Interaction(out.G, x0.G, emb.G)
	h.c.Interaction(out.C, x0.C, emb.C)
	h.RoundC(dt, out)
	e := h.Check("interaction "+name, out, tolBF16)
	got := make([]float64, b*w)
	if err := h.g.Download(got, out.G); err != nil {
		t.Fatal(err)
	}
	x0v := make([]float64, b*d)
	if err := h.g.Download(x0v, x0.G); err != nil {
		t.Fatal(err)
	}
	for s := 0; s < b; s++ {
		for c := 0; c < d; c++ {
			if got[s*w+c] != x0v[s*d+c] {
				t.Fatalf("interaction %s: out[%d][%d] = %v, x0 %v: the passthrough is not exact", name, s, c, got[s*w+c], x0v[s*d+c])
			}
		}
		if got[s*w+w-1] != 0 {
			t.Fatalf("interaction %s: pad of sample %d = %v", name, s, got[s*w+w-1])
		}
	}

	h.g.InteractionGrad(dx0.G, demb.G, dOut.G, x0.G, emb.G)
	h.c.InteractionGrad(dx0.C, demb.C, dOut.C, x0.C, emb.C)
	h.RoundC(dt, dx0)
	h.RoundC(dt, demb)
	e = max(e, h.Check("interaction_grad dx0 "+name, dx0, tolBF16))
	e = max(e, h.Check("interaction_grad demb "+name, demb, tolBF16))
	if extra > 0 {
		for _, q := range []struct {
			what string
			full pair
			used int
		}{{"out", outf, b * w}, {"dx0", dx0f, b * d}, {"demb", dembf, b * n * d}} {
			all := make([]float64, q.full.G.Len())
			if err := h.g.Download(all, q.full.G); err != nil {
				t.Fatal(err)
			}
			for i, v := range all[q.used:] {
				if !math.IsNaN(v) {
					t.Fatalf("%s %s: element %d past the batch written (%v)", name, q.what, q.used+i, v)
				}
			}
		}
	}
	return e
}

// interShapesHalf: DLRM's 27 vectors of 128 (out 480 = 479 and the pad)
// with large, odd and tiny batches (not multiples of 8 warps a block); the
// tensor-core kernels' tile boundaries N = 8, 9, 17, 25, 27 and N = 32 at
// d = 16, 64, 128, 132 (d a multiple of 8: the native half mma kernels,
// one or two 128-column forward items, partial 64-column backward chunks;
// else the TF32 ones), W a multiple of 8, of 4 only, or odd (the half mma
// kernels' 16-byte, 8-byte and element row stores); d not a multiple of 4
// (the block kernels), N > 32 (the warp kernels), one column.
var interShapesHalf = [][3]int{ // B, d, n
	{4096, 128, 26}, {1001, 128, 26}, {3, 128, 26}, {257, 64, 26}, {513, 16, 13}, {31, 132, 31}, {65, 16, 7},
	{40, 36, 8}, {21, 52, 16}, {17, 20, 24}, {1, 4, 1}, {7, 4, 3},
	{19, 16, 8}, {13, 64, 16}, {11, 128, 31}, {9, 16, 31}, {6, 200, 26}, {5, 136, 8}, {3, 132, 26}, {37, 8, 24}, {10, 24, 1},
	{5, 8, 40}, {33, 17, 26}, {7, 13, 3}, {1, 1, 1}, {3, 5, 2},
}

// TestInteractionHalf runs the shapes on every kernel family in half
// precision, each on a fresh FP32 backend whose launched kernels are then
// checked: the default choice (the native half mma kernels where they
// apply, the TF32 tensor-core kernels for the other d multiple of 4, on
// the FP32 backend too: half values are exact in TF32), then
// CTRKIT_INTERACTION=tf32 (the TF32 kernels for the half mma shapes too),
// =hmma64 (the 64-column half mma forward), =warp and =old, then the global-memory kernels (interSharedMax 0); short
// batches in full-size buffers.
func TestInteractionHalf(t *testing.T) {
	families := map[string][]string{ // mode: the kernels it must launch
		"default": {"interaction_fwd_hmma", "interaction_bwd_hmma", "interaction_fwd_tc", "interaction_bwd_tc",
			"interaction_fwd4", "interaction_bwd4", "interaction_fwd", "interaction_bwd", "interaction_fwd_g", "interaction_bwd_g"},
		"tf32": {"interaction_fwd_tc", "interaction_bwd_tc", "interaction_fwd4", "interaction_bwd4",
			"interaction_fwd", "interaction_bwd"},
		"hmma64": {"interaction_fwd_hmma64", "interaction_bwd_hmma", "interaction_fwd_tc", "interaction_bwd_tc",
			"interaction_fwd4", "interaction_bwd4", "interaction_fwd", "interaction_bwd"},
		"warp":   {"interaction_fwd4", "interaction_bwd4", "interaction_fwd", "interaction_bwd"},
		"old":    {"interaction_fwd", "interaction_bwd"},
		"global": {"interaction_fwd_g", "interaction_bwd_g"},
	}
	all := append(families["default"], "interaction_fwd_hmma64")
	for _, dt := range halfDTypes {
		for _, mode := range []string{"default", "tf32", "hmma64", "warp", "old", "global"} {
			t.Run(fmt.Sprintf("%v/%s", dt, mode), func(t *testing.T) {
				h := newHarness(t)
				be, err := NewOnDevice(sharedBE.Device(), Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer be.Close()
				h.g = be
				defer func() {
					used := kernelsLookedUp(t, be)
					for _, k := range all {
						want := slices.Contains(families[mode], k)
						if used[interKernel(k, dt)] != want {
							t.Errorf("%s: launched %v, want %v", interKernel(k, dt), !want, want)
						}
					}
				}()
				switch mode {
				case "tf32":
					defer func(v bool) { interNoHMMA = v }(interNoHMMA)
					interNoHMMA = true
				case "hmma64":
					defer func(v bool) { interHMMA64 = v }(interHMMA64)
					interHMMA64 = true
				case "warp":
					defer func(v bool) { interNoTC = v }(interNoTC)
					interNoTC = true
				case "old":
					defer func(v bool) { interOld = v }(interOld)
					interOld = true
				case "global":
					defer func(v int) { interSharedMax = v }(interSharedMax)
					interSharedMax = 0
				}
				shapes := interShapesHalf
				if mode != "default" {
					shapes = shapes[2:] // the fallbacks: no 4096 and 1001 batches (CPU reference time)
				}
				for _, s := range shapes {
					testInteractionDT(t, h, dt, s[0], s[1], s[2], 0)
				}
				testInteractionDT(t, h, dt, 1000, 128, 26, 3)
				testInteractionDT(t, h, dt, 5, 16, 13, 8)
				testInteractionDT(t, h, dt, 3, 12, 31, 1)
				if mode == "default" {
					// d = 1000 (N = 31): the tensor-core kernels, which stage
					// no F; N = 41 as well: too large for shared memory, the
					// global kernels.
					testInteractionDT(t, h, dt, 3, 1000, 30, 0)
					testInteractionDT(t, h, dt, 2, 1000, 40, 0)
				}
			})
		}
	}
}

// TestInteractionHalfTC: on TF32 and BF16 backends half operands take the
// same kernels (the backend's math does not round them further): the
// native half mma ones for d a multiple of 8, the TF32 ones for the rest.
func TestInteractionHalfTC(t *testing.T) {
	gpuBackend(t)
	for _, m := range []cuda.Math{cuda.TF32, cuda.BF16} {
		be, err := NewOnDevice(sharedBE.Device(), Options{Math: m})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		for _, dt := range halfDTypes {
			t.Run(fmt.Sprintf("%v/%v", m, dt), func(t *testing.T) {
				h := newHarness(t)
				h.g = be
				for _, s := range interShapesHalf[:9] {
					testInteractionDT(t, h, dt, s[0], s[1], s[2], 0)
				}
				// Every shape above takes the tensor-core kernels: the
				// backend looked up those of dt and no other family's.
				used := kernelsLookedUp(t, be)
				for _, k := range []string{"interaction_fwd_hmma", "interaction_bwd_hmma", "interaction_fwd_tc", "interaction_bwd_tc"} {
					if !used[interKernel(k, dt)] {
						t.Errorf("%s not launched (looked up: %v)", interKernel(k, dt), used)
					}
				}
				for _, k := range []string{"interaction_fwd4", "interaction_bwd4", "interaction_fwd", "interaction_bwd", "interaction_fwd_g", "interaction_bwd_g"} {
					if used[interKernel(k, dt)] {
						t.Errorf("%s launched for a tensor-core shape", interKernel(k, dt))
					}
				}
			})
		}
	}
}

// kernelsLookedUp is the set of kernel names be has looked up (launched).
func kernelsLookedUp(t *testing.T, be *Backend) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := be.dev.Do(func(*cuda.Ctx) error {
		for k := range be.fns {
			used[k] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return used
}

// TestInteractionDTypes: the operands of one call share one dtype; an
// integer or mixed call fails with ErrDType and writes nothing.
func TestInteractionDTypes(t *testing.T) {
	h := newHarness(t)
	const b, d, n = 4, 8, 2
	w := d + n*(n+1)/2 + 1
	f32x0, f16x0 := h.Rand(-1, 1, b, d), h.RandDT(tensor.Float16, -1, 1, b, d)
	f16emb, bf16emb := h.RandDT(tensor.Float16, -1, 1, b, n, d), h.RandDT(tensor.BFloat16, -1, 1, b, n, d)
	f16out, f32out := h.OutDT(tensor.Float16, b, w), h.Out(tensor.Float32, b, w)
	f16dx0, f16demb, f32dx0 := h.OutDT(tensor.Float16, b, d), h.OutDT(tensor.Float16, b, n, d), h.Out(tensor.Float32, b, d)
	ints := h.Ints(tensor.Int32, make([]int64, b*d), b, d)
	defer h.Free(f32x0, f16x0, f16emb, bf16emb, f16out, f32out, f16dx0, f16demb, f32dx0, ints)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"fwd x0 float32", func() { h.g.Interaction(f16out.G, f32x0.G, f16emb.G) }},
		{"fwd emb bfloat16", func() { h.g.Interaction(f16out.G, f16x0.G, bf16emb.G) }},
		{"fwd out float32", func() { h.g.Interaction(f32out.G, f16x0.G, f16emb.G) }},
		{"fwd int32", func() { h.g.Interaction(f16out.G, ints.G, f16emb.G) }},
		{"bwd dx0 float32", func() { h.g.InteractionGrad(f32dx0.G, f16demb.G, f16out.G, f16x0.G, f16emb.G) }},
		{"bwd dOut float32", func() { h.g.InteractionGrad(f16dx0.G, f16demb.G, f32out.G, f16x0.G, f16emb.G) }},
	} {
		c.f()
		if err := h.g.Sync(); !errors.Is(err, tensor.ErrDType) {
			t.Errorf("%s: %v, want ErrDType", c.name, err)
		}
		h.g.Reset()
	}
	for _, q := range []pair{f16out, f32out, f16dx0, f16demb, f32dx0} {
		all := make([]float64, q.G.Len())
		if err := h.g.Download(all, q.G); err != nil {
			t.Fatal(err)
		}
		for i, v := range all {
			if !math.IsNaN(v) {
				t.Fatalf("%v: element %d written (%v) by a refused call", q.G, i, v)
			}
		}
	}
}

// TestInteractionHalfPick (no GPU): half operands see TF32 math (the
// tensor-core kernels in every mode), take the _f16 / _bf16 kernels, and
// need their quads aligned to 8 bytes, float32 ones to 16; the cross
// kernels' vector width follows the same rule.
func TestInteractionHalfPick(t *testing.T) {
	for _, c := range []struct {
		math cuda.Math
		dt   tensor.DType
		want cuda.Math
	}{
		{cuda.FP32, tensor.Float32, cuda.FP32}, {cuda.TF32, tensor.Float32, cuda.TF32}, {cuda.BF16, tensor.Float32, cuda.BF16},
		{cuda.FP32, tensor.Float16, cuda.TF32}, {cuda.FP32, tensor.BFloat16, cuda.TF32}, {cuda.BF16, tensor.Float16, cuda.TF32},
	} {
		if got := interMath(c.math, c.dt); got != c.want {
			t.Errorf("interMath(%v, %v) = %v, want %v", c.math, c.dt, got, c.want)
		}
	}
	for _, c := range []struct {
		dt   tensor.DType
		want string
	}{{tensor.Float32, "interaction_fwd_tc"}, {tensor.Float16, "interaction_fwd_tc_f16"}, {tensor.BFloat16, "interaction_fwd_tc_bf16"}} {
		if got := interKernel("interaction_fwd_tc", c.dt); got != c.want {
			t.Errorf("interKernel(%v) = %q, want %q", c.dt, got, c.want)
		}
	}
	at := func(dt tensor.DType, addr cuda.Ptr) tensor.Tensor {
		return tensor.Tensor{DType: dt, Shape: []int{64}, Buf: &store{p: addr, n: 64}}
	}
	for _, c := range []struct {
		t    tensor.Tensor
		want bool
	}{
		{at(tensor.Float32, 1<<20), true}, {at(tensor.Float32, 1<<20+8), false},
		{at(tensor.Float16, 1<<20+8), true}, {at(tensor.BFloat16, 1<<20+8), true}, {at(tensor.Float16, 1<<20+4), false},
		{at(tensor.Int32, 1<<20), true}, {tensor.Tensor{}, false},
	} {
		if got := interQuads(c.t); got != c.want {
			t.Errorf("interQuads(%v at %#x) = %v, want %v", c.t.DType, Ptr(c.t), got, c.want)
		}
	}
	if !interTC(interMath(cuda.FP32, tensor.Float16), 9, 26, 128, at(tensor.Float16, 1<<20+8)) {
		t.Error("half operands on an FP32 backend refused the tensor-core kernels")
	}
	if interTC(cuda.FP32, 9, 26, 128, at(tensor.Float32, 1<<20)) {
		t.Error("float32 operands on an FP32 backend took the tensor-core kernels")
	}
	// The native half mma kernels: half operands only, cc 8.0+, N ≤ 32, d a
	// multiple of 8, every operand given 16-byte aligned, the operands of
	// dt, CTRKIT_INTERACTION neither tf32, warp nor old.
	defer func(o, w, h bool) { interOld, interNoTC, interNoHMMA = o, w, h }(interOld, interNoTC, interNoHMMA)
	interOld, interNoTC, interNoHMMA = false, false, false
	f16at, bf16at := at(tensor.Float16, 1<<20), at(tensor.BFloat16, 1<<20+16)
	for _, c := range []struct {
		name        string
		dt          tensor.DType
		major, n, d int
		ops         []tensor.Tensor
		want        bool
	}{
		{"DLRM float16", tensor.Float16, 9, 26, 128, []tensor.Tensor{f16at, f16at}, true},
		{"DLRM bfloat16", tensor.BFloat16, 8, 26, 128, []tensor.Tensor{bf16at, bf16at}, true},
		{"N = 32", tensor.BFloat16, 9, 31, 8, []tensor.Tensor{bf16at}, true},
		{"float32", tensor.Float32, 9, 26, 128, []tensor.Tensor{at(tensor.Float32, 1<<20)}, false},
		{"cc 7.5", tensor.Float16, 7, 26, 128, []tensor.Tensor{f16at}, false},
		{"N = 33", tensor.Float16, 9, 32, 128, []tensor.Tensor{f16at}, false},
		{"d 132", tensor.Float16, 9, 26, 132, []tensor.Tensor{f16at}, false},
		{"d 4", tensor.Float16, 9, 26, 4, []tensor.Tensor{f16at}, false},
		{"8-byte aligned", tensor.Float16, 9, 26, 128, []tensor.Tensor{f16at, at(tensor.Float16, 1<<20+8)}, false},
		{"mixed dtype", tensor.Float16, 9, 26, 128, []tensor.Tensor{f16at, bf16at}, false},
	} {
		if got := interHMMA(c.dt, c.major, c.n, c.d, c.ops...); got != c.want {
			t.Errorf("interHMMA %s: %v, want %v", c.name, got, c.want)
		}
	}
	for _, v := range []*bool{&interNoHMMA, &interNoTC, &interOld} {
		*v = true
		if interHMMA(tensor.Float16, 9, 26, 128, f16at) {
			t.Error("CTRKIT_INTERACTION=tf32/warp/old took the native half mma kernels")
		}
		*v = false
	}
	if v := crossVec(8, at(tensor.Float16, 1<<20+8), at(tensor.Float32, 1<<20), tensor.Tensor{}); v != 4 {
		t.Errorf("crossVec of aligned half and float32 operands = %d, want 4", v)
	}
	if v := crossVec(8, at(tensor.Float16, 1<<20+4)); v != 1 {
		t.Errorf("crossVec of a half operand at 4 bytes past 8 = %d, want 1", v)
	}
}

// BenchmarkInteraction times DLRM's interaction (batch 65536, 26
// embeddings and the bottom output of 128) forward and backward on
// float32 operands (FP32 math: the warp kernels; TF32: the tensor-core
// ones) and on float16 and bfloat16 operands (the native half mma kernels;
// _fwd64: CTRKIT_INTERACTION=hmma64, the 64-column forward; _tf32:
// CTRKIT_INTERACTION=tf32, the TF32 tensor-core kernels reading half; for
// A/B in one run), the bytes each call moves as SetBytes:
//
//	gpu.test -test.run '^$' -test.bench 'Interaction/' -test.benchtime 200x
func BenchmarkInteraction(b *testing.B) {
	gpuBackend(b)
	const batch, n, d = 65536, 26, 128
	const w = d + n*(n+1)/2 + 1
	for _, c := range []struct {
		name          string
		math          cuda.Math
		dt            tensor.DType
		noHMMA, fwd64 bool
	}{{"f32_fp32", cuda.FP32, tensor.Float32, false, false}, {"f32_tf32", cuda.TF32, tensor.Float32, false, false},
		{"f16", cuda.FP32, tensor.Float16, false, false}, {"bf16", cuda.FP32, tensor.BFloat16, false, false},
		{"f16_fwd64", cuda.FP32, tensor.Float16, false, true}, {"bf16_fwd64", cuda.FP32, tensor.BFloat16, false, true},
		{"f16_tf32", cuda.FP32, tensor.Float16, true, false}, {"bf16_tf32", cuda.FP32, tensor.BFloat16, true, false}} {
		defer func(v, w bool) { interNoHMMA, interHMMA64 = v, w }(interNoHMMA, interHMMA64)
		interNoHMMA, interHMMA64 = c.noHMMA, c.fwd64
		be, err := NewOnDevice(sharedBE.Device(), Options{Math: c.math})
		if err != nil {
			b.Fatal(err)
		}
		x0, emb, out := be.Alloc(c.dt, batch, d), be.Alloc(c.dt, batch, n, d), be.Alloc(c.dt, batch, w)
		dOut, dx0, demb := be.Alloc(c.dt, batch, w), be.Alloc(c.dt, batch, d), be.Alloc(c.dt, batch, n, d)
		for _, t := range []tensor.Tensor{x0, emb, dOut} {
			be.Fill(t, 0.25)
		}
		size := int64(c.dt.Size())
		for _, dir := range []string{"fwd", "bwd"} {
			b.Run(c.name+"/"+dir, func(b *testing.B) {
				run := func() { be.Interaction(out, x0, emb) }
				bytes := size * batch * ((n+1)*d + w) // read F, write the row
				if dir == "bwd" {
					run = func() { be.InteractionGrad(dx0, demb, dOut, x0, emb) }
					bytes = size * batch * (2*(n+1)*d + w) // read F and dOut, write dF
				}
				run() // warm-up: kernels compiled and loaded
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(bytes)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					run()
				}
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
			})
		}
		be.Close()
	}
}

// TestHalfOperandChecks (no GPU): the operand checks of Interaction,
// InteractionGrad and the cross ops on a device-less backend: every
// interaction operand (out and dOut included) of x0's dtype; cross bias and
// db float32; the cross activations each of its own dtype.
func TestHalfOperandChecks(t *testing.T) {
	const b, d, n = 4, 8, 2
	w := d + n*(n+1)/2 + 1
	be := &Backend{}
	mk := func(dt tensor.DType, shape ...int) tensor.Tensor {
		m := tensor.NumElems(shape...)
		return tensor.Tensor{DType: dt, Shape: shape, Buf: &store{be: be, p: 1 << 20, n: m}}
	}
	f16, f32, bf16 := tensor.Float16, tensor.Float32, tensor.BFloat16
	for _, c := range []struct {
		name                 string
		out, x0, emb, dx, de tensor.DType
		ok                   bool
	}{
		{"all float16", f16, f16, f16, f16, f16, true},
		{"all bfloat16", bf16, bf16, bf16, bf16, bf16, true},
		{"all float32", f32, f32, f32, f32, f32, true},
		{"out float32", f32, f16, f16, f16, f16, false},
		{"emb bfloat16", f16, f16, bf16, f16, f16, false},
		{"dx0 float32", f16, f16, f16, f32, f16, false},
		{"demb bfloat16", f16, f16, f16, f16, bf16, false},
		{"int32", tensor.Int32, tensor.Int32, tensor.Int32, tensor.Int32, tensor.Int32, false},
	} {
		be.err = nil
		_, _, ok := be.interShape("interaction_grad", mk(c.out, b, w), mk(c.x0, b, d), mk(c.emb, b, n*d), mk(c.dx, b, d), mk(c.de, b, n*d))
		if ok != c.ok || (!ok && !errors.Is(be.err, tensor.ErrDType)) {
			t.Errorf("interaction %s: ok %v, err %v", c.name, ok, be.err)
		}
	}
	for _, c := range []struct {
		name       string
		acts       []tensor.DType
		bias       tensor.DType
		half, okay bool
	}{
		{"float32", []tensor.DType{f32, f32, f32, f32}, f32, false, true},
		{"float16", []tensor.DType{f16, f16, f16, f16}, f32, true, true},
		{"mixed", []tensor.DType{bf16, f32, f16, f32}, f32, true, true},
		{"half bias", []tensor.DType{f16, f16, f16, f16}, f16, false, false},
		{"int32 activation", []tensor.DType{f16, tensor.Int32, f16, f16}, f32, false, false},
	} {
		be.err = nil
		var acts []tensor.Tensor
		for _, dt := range c.acts {
			acts = append(acts, mk(dt, b, d))
		}
		half, ok := be.crossDTypes("cross_forward", append(acts, tensor.Tensor{}), mk(c.bias, d))
		if ok != c.okay || half != c.half || (!ok && !errors.Is(be.err, tensor.ErrDType)) {
			t.Errorf("cross %s: half %v ok %v, err %v", c.name, half, ok, be.err)
		}
	}
}
