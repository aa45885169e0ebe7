package gpu

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

func testInteraction(t *testing.T, h *harness, b, d, n int) {
	t.Helper()
	testInteractionTol(t, h, b, d, n, 0, tolFP32)
}

// testInteractionTol checks Interaction and InteractionGrad on b samples
// against the CPU reference at tolerance tol and returns the largest of the
// three relative errors. With extra > 0 the operands are the first b rows of
// buffers holding b+extra (a short batch in a full-batch buffer), and the
// rows past b of out, dx0 and demb must stay unwritten.
func testInteractionTol(t *testing.T, h *harness, b, d, n, extra int, tol float64) float64 {
	t.Helper()
	w := d + n*(n+1)/2 + 1
	name := fmt.Sprintf("B%d d%d n%d", b, d, n)
	if extra > 0 {
		name += fmt.Sprintf(" of %d", b+extra)
	}
	bb := b + extra
	view := func(q pair, shape ...int) pair {
		m := tensor.NumElems(shape...)
		return pair{q.G.Prefix(m).Reshape(shape...), q.C.Prefix(m).Reshape(shape...)}
	}
	x0f, embf := h.Rand(-1, 1, bb, d), h.Rand(-1, 1, bb, n, d)
	outf, dOutf := h.Out(tensor.Float32, bb, w), h.Rand(-1, 1, bb, w)
	dx0f, dembf := h.Out(tensor.Float32, bb, d), h.Out(tensor.Float32, bb, n, d)
	defer h.Free(x0f, embf, outf, dOutf, dx0f, dembf)
	x0, emb, out, dOut := view(x0f, b, d), view(embf, b, n, d), view(outf, b, w), view(dOutf, b, w)
	dx0, demb := view(dx0f, b, d), view(dembf, b, n, d)

	h.g.Interaction(out.G, x0.G, emb.G)
	h.c.Interaction(out.C, x0.C, emb.C)
	e := h.Check("interaction "+name, out, tol)

	h.g.InteractionGrad(dx0.G, demb.G, dOut.G, x0.G, emb.G)
	h.c.InteractionGrad(dx0.C, demb.C, dOut.C, x0.C, emb.C)
	e = max(e, h.Check("interaction_grad dx0 "+name, dx0, tol))
	e = max(e, h.Check("interaction_grad demb "+name, demb, tol))
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

var interShapes = [][3]int{ // B, d, n
	{1, 1, 1}, {1, 4, 1}, {3, 5, 2}, {7, 13, 3}, {5, 16, 4}, {33, 17, 26}, {9, 64, 31}, {4096, 128, 26},
}

func TestInteraction(t *testing.T) {
	h := newHarness(t)
	for _, s := range interShapes {
		testInteraction(t, h, s[0], s[1], s[2])
	}
	// A sample too large for shared memory takes the global kernels.
	testInteraction(t, h, 3, 1000, 30)
	// Between 48 KiB and interSharedMax: the opt-in shared-memory path.
	testInteraction(t, h, 70, 500, 26)

	// Wrong output width.
	x0, emb := h.Rand(-1, 1, 4, 8), h.Rand(-1, 1, 4, 16)
	bad := h.Out(tensor.Float32, 4, 8+3)
	h.g.Interaction(bad.G, x0.G, emb.G)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrShape) {
		t.Fatalf("bad width: %v", err)
	}
	h.g.Reset()
}

func TestInteractionGlobal(t *testing.T) {
	h := newHarness(t)
	defer func(v int) { interSharedMax = v }(interSharedMax)
	interSharedMax = 0
	for _, s := range interShapes[:7] {
		testInteraction(t, h, s[0], s[1], s[2])
	}
	testInteraction(t, h, 300, 128, 26)
}

// TestInteractionWarp covers the warp-per-sample kernels (d a multiple of
// 4): DLRM's shape with an odd batch that leaves a block's last warps
// idle, one vector, shapes with more than 32 tiles (n = 40) and d = 4, then
// the same shapes through the old kernels (CTRKIT_INTERACTION=old).
func TestInteractionWarp(t *testing.T) {
	h := newHarness(t)
	shapes := [][3]int{ // B, d, n
		{1001, 128, 26}, {3, 128, 26}, {1, 4, 1}, {37, 4, 1}, {65, 16, 8}, {7, 4, 3}, {130, 12, 4}, {9, 64, 31}, {5, 8, 40},
	}
	for _, s := range shapes {
		testInteraction(t, h, s[0], s[1], s[2])
	}
	defer func(v bool) { interOld = v }(interOld)
	interOld = true
	for _, s := range shapes {
		testInteraction(t, h, s[0], s[1], s[2])
	}
}

// TestInteractionPick checks which shapes take the warp-per-sample kernels.
func TestInteractionPick(t *testing.T) {
	defer func(v bool) { interOld = v }(interOld)
	interOld = false
	for _, c := range []struct{ d, per, wpb int }{
		{128, 7*129 + 480/4, 2}, // DLRM forward (n 26): 16368 bytes a warp
		{16, 100, 4},
		{4, 3, 4},
		{128, interSharedMax / 16, 1},
		{128, interSharedMax/16 + 1, 0}, // too large: the old kernels
		{6, 10, 0},                      // d not a multiple of 4
	} {
		wpb, ok := interWarps(c.d, c.per)
		if ok != (c.wpb > 0) || wpb != c.wpb {
			t.Errorf("d %d per %d: %d warps, %v; want %d", c.d, c.per, wpb, ok, c.wpb)
		}
	}
	interOld = true
	if _, ok := interWarps(128, 1000); ok {
		t.Error("CTRKIT_INTERACTION=old took the warp kernels")
	}
}

// interShapesTC are the shapes of the tensor-core kernels' tests (B, d, n):
// DLRM's 27×128 with large, odd and tiny batches; 27×64, 14×16 (HugeCTR's
// DLRM variants); N = 32, the most they take, with d not a multiple of 16
// or 32; the tile boundaries N = 8, 9, 16, 17, 24, 25; d = 4; then shapes
// they do not take (N > 32, d not a multiple of 4), which fall back.
var interShapesTC = [][3]int{
	{4096, 128, 26}, {1001, 128, 26}, {3, 128, 26}, {257, 64, 26}, {513, 16, 13}, {31, 132, 31}, {9, 64, 31},
	{65, 16, 7}, {40, 36, 8}, {33, 8, 15}, {21, 52, 16}, {19, 24, 23}, {17, 20, 24}, {1, 4, 1}, {37, 4, 1},
	{7, 4, 3}, {130, 12, 4},
	{5, 8, 40}, {9, 16, 32}, {33, 17, 26}, {7, 13, 3},
}

// TestInteractionTC covers the tensor-core kernels on TF32 and BF16
// backends at the TF32 tolerance, short batches in full-size buffers, and
// that they ran: where interTC takes a shape (d ≥ 16) the error shows TF32
// rounding (an exact fp32 kernel would be ~1e-7). Then the same shapes with
// CTRKIT_INTERACTION=warp and =old, exact fp32, on the TF32 backend.
func TestInteractionTC(t *testing.T) {
	gpuBackend(t)
	for _, m := range []cuda.Math{cuda.TF32, cuda.BF16} {
		be, err := NewOnDevice(sharedBE.Device(), Options{Math: m})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		t.Run(fmt.Sprint(m), func(t *testing.T) {
			h := newHarness(t)
			h.g = be
			for _, s := range interShapesTC {
				e := testInteractionTol(t, h, s[0], s[1], s[2], 0, tolTF32)
				tc := interTC(m, be.dev.Major, s[2], s[1])
				if tc && s[1] >= 16 && e < 1e-6 {
					t.Errorf("B%d d%d n%d: relative error %.2g, no TF32 rounding: the tensor-core kernels did not run", s[0], s[1], s[2], e)
				}
				if !tc && s[2]+1 <= 32 && s[1]%4 == 0 && be.dev.Major >= 8 {
					t.Errorf("B%d d%d n%d: interTC refused", s[0], s[1], s[2])
				}
			}
			testInteractionTol(t, h, 1000, 128, 26, 3, tolTF32)
			testInteractionTol(t, h, 5, 16, 13, 8, tolTF32)
			testInteractionTol(t, h, 3, 12, 31, 1, tolTF32)
		})
		if m != cuda.TF32 {
			continue
		}
		for _, v := range []*bool{&interNoTC, &interOld} {
			t.Run(fmt.Sprintf("%v/noTC %v old %v", m, v == &interNoTC, v == &interOld), func(t *testing.T) {
				defer func(old bool) { *v = old }(*v)
				*v = true
				h := newHarness(t)
				h.g = be
				for _, s := range interShapesTC {
					testInteractionTol(t, h, s[0], s[1], s[2], 0, tolFP32)
				}
				testInteractionTol(t, h, 1000, 128, 26, 3, tolFP32)
			})
		}
	}
}

// TestInteractionPickTC checks which backends and shapes take the
// tensor-core kernels, their warps per block, and CTRKIT_INTERACTION.
func TestInteractionPickTC(t *testing.T) {
	defer func(o, w bool) { interOld, interNoTC = o, w }(interOld, interNoTC)
	interOld, interNoTC = false, false
	for _, c := range []struct {
		math        cuda.Math
		major, n, d int
		want        bool
	}{
		{cuda.TF32, 9, 26, 128, true}, // DLRM on the H200
		{cuda.BF16, 8, 26, 128, true},
		{cuda.FP32, 9, 26, 128, false}, // FP32 stays exact fp32 FMA
		{cuda.TF32, 7, 26, 128, false}, // no TF32 mma before Ampere
		{cuda.TF32, 9, 31, 4, true},    // N = 32
		{cuda.TF32, 9, 32, 64, false},  // N = 33
		{cuda.TF32, 9, 26, 130, false}, // d not a multiple of 4
		{cuda.TF32, 9, 0, 8, true},
	} {
		if got := interTC(c.math, c.major, c.n, c.d); got != c.want {
			t.Errorf("math %v cc %d n %d d %d: %v, want %v", c.math, c.major, c.n, c.d, got, c.want)
		}
	}
	for _, c := range [][2]int{{480, 8}, {352, 8}, {2000, 4}, {interSharedMax / 4, 1}, {interSharedMax/4 + 1, 0}} {
		if got := interTCWarps(c[0]); got != c[1] {
			t.Errorf("interTCWarps(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	for _, v := range []*bool{&interNoTC, &interOld} {
		*v = true
		if interTC(cuda.TF32, 9, 26, 128) {
			t.Error("CTRKIT_INTERACTION=warp/old took the tensor-core kernels")
		}
		*v = false
	}
	for _, v := range []string{"", "tc", "TC", "tf32", "hmma64", "warp", "old"} {
		t.Setenv("CTRKIT_INTERACTION", v)
		if err := interEnvCheck(); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	t.Setenv("CTRKIT_INTERACTION", "tensor")
	if err := interEnvCheck(); err == nil || !strings.Contains(err.Error(), "CTRKIT_INTERACTION") {
		t.Errorf("bad value: %v", err)
	}
}

func TestFmOrder2(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][3]int{{1, 1, 1}, {1, 3, 1}, {5, 3, 7}, {33, 26, 10}, {1000, 26, 16}, {3000, 39, 33}} {
		b, f, k := s[0], s[1], s[2]
		name := fmt.Sprintf("B%d f%d k%d", b, f, k)
		in := h.Rand(-1, 1, b, f, k)
		out := h.Out(tensor.Float32, b, k)
		h.g.FmOrder2(out.G, in.G)
		h.c.FmOrder2(out.C, in.C)
		h.Check("fm_order2 "+name, out, tolFP32)

		dOut := h.Rand(-1, 1, b, k)
		din := h.Out(tensor.Float32, b, f, k)
		h.g.FmOrder2Grad(din.G, dOut.G, in.G)
		h.c.FmOrder2Grad(din.C, dOut.C, in.C)
		h.Check("fm_order2_grad "+name, din, tolFP32)
		h.Free(in, out, dOut, din)
	}
}

func TestBatchNorm(t *testing.T) {
	h := newHarness(t)
	p := tensor.BNParams{Factor: 0.1, Eps: 1e-5}
	for _, s := range [][2]int{{2, 1}, {7, 33}, {65, 5}, {4097, 100}, {20000, 37}} {
		rows, cols := s[0], s[1]
		name := fmt.Sprintf("%dx%d", rows, cols)
		x := h.Rand(4, 7, rows, cols) // mean far from 0: exercises the shifted sums
		gamma, beta := h.Rand(0.5, 1.5, cols), h.Rand(-1, 1, cols)
		runMean, runVar := h.Rand(-1, 1, cols), h.Rand(0.5, 2, cols)
		saveMean, saveInv := h.Out(tensor.Float32, cols), h.Out(tensor.Float32, cols)
		y := h.Out(tensor.Float32, rows, cols)
		h.g.BatchNorm(p, true, y.G, x.G, gamma.G, beta.G, runMean.G, runVar.G, saveMean.G, saveInv.G)
		h.c.BatchNorm(p, true, y.C, x.C, gamma.C, beta.C, runMean.C, runVar.C, saveMean.C, saveInv.C)
		h.Check("bn y "+name, y, tolFP32)
		h.Check("bn saveMean "+name, saveMean, tolFP32)
		h.Check("bn saveInvStd "+name, saveInv, tolFP32)
		h.Check("bn runMean "+name, runMean, tolFP32)
		h.Check("bn runVar "+name, runVar, tolFP32)

		yi := h.Out(tensor.Float32, rows, cols)
		h.g.BatchNorm(p, false, yi.G, x.G, gamma.G, beta.G, runMean.G, runVar.G, saveMean.G, saveInv.G)
		h.c.BatchNorm(p, false, yi.C, x.C, gamma.C, beta.C, runMean.C, runVar.C, saveMean.C, saveInv.C)
		h.Check("bn inference "+name, yi, tolFP32)

		// The gradient from independent saved statistics.
		dy := h.Rand(-1, 1, rows, cols)
		mean, inv := h.Rand(4, 7, cols), h.Rand(0.5, 2, cols)
		dx, dg, db := h.Out(tensor.Float32, rows, cols), h.Out(tensor.Float32, cols), h.Out(tensor.Float32, cols)
		h.g.BatchNormGrad(dx.G, dg.G, db.G, dy.G, x.G, gamma.G, mean.G, inv.G)
		h.c.BatchNormGrad(dx.C, dg.C, db.C, dy.C, x.C, gamma.C, mean.C, inv.C)
		h.Check("bn_grad dx "+name, dx, tolFP32)
		h.Check("bn_grad dgamma "+name, dg, tolFP32)
		h.Check("bn_grad dbeta "+name, db, tolFP32)
		h.Free(x, gamma, beta, runMean, runVar, saveMean, saveInv, y, yi, dy, mean, inv, dx, dg, db)
	}

	// Training needs two rows.
	x, g := h.Rand(0, 1, 1, 4), h.Rand(0, 1, 4)
	h.g.BatchNorm(p, true, x.G, x.G, g.G, g.G, g.G, g.G, g.G, g.G)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrShape) {
		t.Fatalf("one-row training: %v", err)
	}
	h.g.Reset()
}

func TestSoftmax(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][2]int{{1, 1}, {1, 2}, {3, 7}, {1000, 33}, {50, 1000}, {9000, 2}} {
		rows, n := s[0], s[1]
		name := fmt.Sprintf("%dx%d", rows, n)
		x := h.Rand(-8, 8, rows, n)
		y := h.Out(tensor.Float32, rows, n)
		h.g.Softmax(y.G, x.G)
		h.c.Softmax(y.C, x.C)
		h.Check("softmax "+name, y, tolFP32)

		dy, yy := h.Rand(-1, 1, rows, n), h.Rand(0, 1, rows, n)
		dx := h.Out(tensor.Float32, rows, n)
		h.g.SoftmaxGrad(dx.G, dy.G, yy.G)
		h.c.SoftmaxGrad(dx.C, dy.C, yy.C)
		h.Check("softmax_grad "+name, dx, tolFP32)
		h.Free(x, y, dy, yy, dx)
	}
}

func TestBCE(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][2]int{{1, 1}, {7, 1}, {1000, 1}, {4097, 3}, {70000, 1}} {
		rows, cols := s[0], s[1]
		x := h.Rand(-20, 20, rows, cols)
		yv := make([]float64, rows*cols)
		for i := range yv {
			if i%3 == 0 {
				yv[i] = h.rng.Float64() // soft labels too
			} else {
				yv[i] = float64(h.rng.IntN(2))
			}
		}
		y := h.Floats(yv, rows, cols)
		for _, weighted := range []bool{false, true} {
			name := fmt.Sprintf("%dx%d weighted %v", rows, cols, weighted)
			w := h.Zero()
			if weighted {
				w = h.Rand(0.5, 2, cols)
			}
			loss, dx := h.Out(tensor.Float32, 1), h.Out(tensor.Float32, rows, cols)
			gs := 1 / float64(rows)
			h.g.BCE(loss.G, dx.G, x.G, y.G, w.G, gs)
			h.c.BCE(loss.C, dx.C, x.C, y.C, w.C, gs)
			h.Check("bce loss "+name, loss, tolFP32)
			h.Check("bce dx "+name, dx, tolFP32)

			// Without dx, loss only.
			loss2 := h.Out(tensor.Float32, 1)
			h.g.BCE(loss2.G, tensor.Tensor{}, x.G, y.G, w.G, gs)
			h.c.BCE(loss2.C, tensor.Tensor{}, x.C, y.C, w.C, gs)
			h.Check("bce loss only "+name, loss2, tolFP32)
			h.Free(w, loss, dx, loss2)
		}
		h.Free(x, y)
	}

	// Weights of the wrong length.
	x := h.Rand(-1, 1, 4, 2)
	w, loss := h.Rand(0, 1, 3), h.Out(tensor.Float32, 1)
	h.g.BCE(loss.G, x.G, x.G, x.G, w.G, 1)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrShape) {
		t.Fatalf("bad weights: %v", err)
	}
	h.g.Reset()
}

// TestMaskedBCE: MultiCrossEntropyLoss's BCE, where a label below −0.5
// gives loss 0 and dx 0 (HugeCTR loss.cu), matches the CPU.
func TestMaskedBCE(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][2]int{{1, 1}, {7, 2}, {4097, 3}, {70000, 2}} {
		rows, cols := s[0], s[1]
		x := h.Rand(-20, 20, rows, cols)
		yv := make([]float64, rows*cols)
		for i := range yv {
			switch i % 4 {
			case 0:
				yv[i] = -1
			case 1:
				yv[i] = -0.5 // not masked: −0.5 is not below −0.5
			default:
				yv[i] = float64(h.rng.IntN(2))
			}
		}
		y := h.Floats(yv, rows, cols)
		for _, weighted := range []bool{false, true} {
			name := fmt.Sprintf("%dx%d weighted %v", rows, cols, weighted)
			w := h.Zero()
			if weighted {
				w = h.Rand(0.5, 2, cols)
			}
			loss, dx := h.Out(tensor.Float32, 1), h.Out(tensor.Float32, rows, cols)
			gs := 1 / float64(rows*cols)
			h.g.MaskedBCE(loss.G, dx.G, x.G, y.G, w.G, gs)
			h.c.MaskedBCE(loss.C, dx.C, x.C, y.C, w.C, gs)
			h.Check("masked bce loss "+name, loss, tolFP32)
			h.Check("masked bce dx "+name, dx, tolFP32)
			h.Free(w, loss, dx)
		}
		h.Free(x, y)
	}
}

func TestSoftmaxCE(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][2]int{{1, 1}, {1, 5}, {13, 3}, {1000, 10}, {4097, 65}, {20, 1000}} {
		rows, c := s[0], s[1]
		name := fmt.Sprintf("%dx%d", rows, c)
		x := h.Rand(-6, 6, rows, c)
		lv := make([]float64, rows)
		for i := range lv {
			lv[i] = float64(h.rng.IntN(c))
		}
		labels := h.Floats(lv, rows, 1)
		loss, dx := h.Out(tensor.Float32, 1), h.Out(tensor.Float32, rows, c)
		gs := 0.5 / float64(rows)
		h.g.SoftmaxCE(loss.G, dx.G, x.G, labels.G, gs)
		h.c.SoftmaxCE(loss.C, dx.C, x.C, labels.C, gs)
		h.Check("softmax_ce loss "+name, loss, tolFP32)
		h.Check("softmax_ce dx "+name, dx, tolFP32)

		loss2 := h.Out(tensor.Float32, 1)
		h.g.SoftmaxCE(loss2.G, tensor.Tensor{}, x.G, labels.G, gs)
		h.c.SoftmaxCE(loss2.C, tensor.Tensor{}, x.C, labels.C, gs)
		h.Check("softmax_ce loss only "+name, loss2, tolFP32)
		h.Free(x, labels, loss, dx, loss2)
	}

	// Labels that are not classes: ErrRange at Sync, as on the CPU.
	for _, bad := range []float64{5, -1, 1.5, 1e10} {
		x := h.Rand(-1, 1, 300, 5)
		lv := make([]float64, 300)
		lv[177] = bad
		labels := h.Floats(lv, 300, 1)
		loss, dx := h.Out(tensor.Float32, 1), h.Out(tensor.Float32, 300, 5)
		h.g.SoftmaxCE(loss.G, dx.G, x.G, labels.G, 1)
		if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) {
			t.Fatalf("label %v: %v", bad, err)
		}
		h.g.Reset()
		h.c.SoftmaxCE(loss.C, dx.C, x.C, labels.C, 1)
		if err := h.c.Err(); !errors.Is(err, tensor.ErrRange) {
			t.Fatalf("cpu label %v: %v", bad, err)
		}
		h.c.Reset()
		h.Free(x, labels, loss, dx)
	}
}
