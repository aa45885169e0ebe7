package gpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The fused cross-layer kernels (multicross.go) against the CPU backend's
// float64 CrossOps, and the MultiCross layer built on the GPU against the
// same layer on the CPU in float64.

// crossShapes: vectorized (d % 4 == 0) and scalar, one row-chunk and many
// (the DCNv2 width 3456), and a single row.
var crossShapes = [][2]int{{1, 5}, {37, 12}, {29, 7}, {64, 3456}, {2500, 3456}, {3001, 429}}

func TestMultiCrossForward(t *testing.T) {
	h := newHarness(t)
	for _, sh := range crossShapes {
		rows, cols := sh[0], sh[1]
		x0, x, bias := h.Rand(-1, 1, rows, cols), h.Rand(-1, 1, rows, cols), h.Rand(-0.5, 0.5, cols)
		z, s := h.Rand(-1, 1, rows, cols), h.Rand(-1, 1, rows, 1)
		y, y1 := h.Out(tensor.Float32, rows, cols), h.Out(tensor.Float32, rows, cols)
		denseBoth(h, func(be tensor.Backend, p func(pair) tensor.Tensor) {
			cx := be.(tensor.CrossOps)
			cx.CrossForward(p(y), p(x0), p(z), p(bias), p(x))
			cx.CrossForwardV1(p(y1), p(x0), p(s), p(bias), p(x))
		})
		h.Check(fmt.Sprintf("CrossForward %dx%d", rows, cols), y, tolFP32)
		h.Check(fmt.Sprintf("CrossForwardV1 %dx%d", rows, cols), y1, tolFP32)
		h.Free(x0, x, bias, z, s, y, y1)
	}
}

func TestMultiCrossBackward(t *testing.T) {
	h := newHarness(t)
	for _, sh := range crossShapes {
		for _, mode := range []struct {
			dx0, gcopy bool
			beta, res  float64
		}{{true, true, 0, 0}, {true, false, 1, 0}, {true, false, 1, 1}, {true, true, 0, 1}, {false, false, 0, 0}, {false, true, 1, 1}} {
			rows, cols := sh[0], sh[1]
			name := fmt.Sprintf("%dx%d dx0 %v gcopy %v beta %v res %v", rows, cols, mode.dx0, mode.gcopy, mode.beta, mode.res)
			g, x0, z, bias := h.Rand(-1, 1, rows, cols), h.Rand(-1, 1, rows, cols), h.Rand(-1, 1, rows, cols), h.Rand(-0.5, 0.5, cols)
			dz, db := h.Out(tensor.Float32, rows, cols), h.Out(tensor.Float32, cols)
			dx0, gc := h.Zero(), h.Zero()
			if mode.dx0 {
				if mode.beta != 0 {
					dx0 = h.Rand(-1, 1, rows, cols)
				} else {
					dx0 = h.Out(tensor.Float32, rows, cols) // NaN: must not be read
				}
			}
			if mode.gcopy {
				gc = h.Out(tensor.Float32, rows, cols)
			}
			denseBoth(h, func(be tensor.Backend, p func(pair) tensor.Tensor) {
				be.(tensor.CrossOps).CrossBackward(p(dz), p(db), p(dx0), mode.beta, mode.res, p(gc), p(g), p(x0), p(z), p(bias))
			})
			h.Check("dz "+name, dz, tolFP32)
			h.Check("db "+name, db, tolFP32)
			if mode.dx0 {
				h.Check("dx0 "+name, dx0, tolFP32)
			}
			if mode.gcopy {
				h.Check("gcopy "+name, gc, 0)
			}
			h.Free(g, x0, z, bias, dz, db, dx0, gc)
		}
	}
}

func TestMultiCrossBadShapes(t *testing.T) {
	h := newHarness(t)
	a, b, col, short := h.Rand(-1, 1, 4, 8), h.Rand(-1, 1, 4, 8), h.Rand(-1, 1, 8), h.Rand(-1, 1, 4, 7)
	row := h.Rand(-1, 1, 4)
	defer h.Free(a, b, col, short, row)
	denseWantErr(h, "forward z short", tensor.ErrShape, func(be tensor.Backend, p func(pair) tensor.Tensor) {
		be.(tensor.CrossOps).CrossForward(p(b), p(a), p(short), p(col), p(a))
	})
	denseWantErr(h, "forward bias per row", tensor.ErrShape, func(be tensor.Backend, p func(pair) tensor.Tensor) {
		be.(tensor.CrossOps).CrossForward(p(b), p(a), p(a), p(row), p(a))
	})
	denseWantErr(h, "v1 s per column", tensor.ErrShape, func(be tensor.Backend, p func(pair) tensor.Tensor) {
		be.(tensor.CrossOps).CrossForwardV1(p(b), p(a), p(col), p(col), p(a))
	})
	denseWantErr(h, "backward dx0 short", tensor.ErrShape, func(be tensor.Backend, p func(pair) tensor.Tensor) {
		be.(tensor.CrossOps).CrossBackward(p(b), p(col), p(short), 0, 0, tensor.Tensor{}, p(a), p(a), p(a), p(col))
	})
	denseWantErr(h, "backward db absent", tensor.ErrShape, func(be tensor.Backend, p func(pair) tensor.Tensor) {
		be.(tensor.CrossOps).CrossBackward(p(b), tensor.Tensor{}, tensor.Tensor{}, 0, 0, tensor.Tensor{}, p(a), p(a), p(a), p(col))
	})
}

// crossLayerCase is a MultiCross: batch b, width d, rank p (0 = DCN v1),
// num layers.
type crossLayerCase struct{ b, d, p, num int }

// TestMultiCrossLayer: the layer's forward output, input gradient and every
// parameter gradient on the GPU (FP32 and TF32 GEMMs; TF32 with the fused
// kernels on, so v2's weight gradients run on the side stream, each layer
// with its own dz and dh) against the layer on
// the CPU in float64 from the same weights and data. The TF32 bound is
// looser than one TF32 GEMM's 1e-3: each gradient is a chain of up to
// three layers of four TF32 GEMMs (the CPU layer with its GEMM operands
// rounded to TF32 is off by up to 8.3e-4 on these cases).
func TestMultiCrossLayer(t *testing.T) {
	gpuBackend(t)
	cases := []crossLayerCase{{300, 64, 16, 3}, {257, 36, 0, 2}, {129, 429, 0, 3}, {97, 30, 5, 1}, {600, 3456, 64, 3}}
	for _, m := range []struct {
		name  string
		math  cuda.Math
		fused bool // weight gradients on the side stream
		tol   float64
	}{{"fp32", cuda.FP32, false, tolFP32}, {"tf32", cuda.TF32, false, 3e-3}, {"tf32_side_stream", cuda.TF32, true, 3e-3}} {
		t.Run(m.name, func(t *testing.T) {
			be, err := NewOnDevice(sharedBE.Device(), Options{Math: m.math, Fused: m.fused})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			for _, c := range cases {
				for _, noGrad := range []bool{false, true} {
					t.Run(fmt.Sprintf("b%d_d%d_p%d_n%d_nograd%v", c.b, c.d, c.p, c.num, noGrad), func(t *testing.T) {
						h := newHarness(t)
						h.g = be
						testCrossLayer(t, h, c, noGrad, m.tol)
					})
				}
			}
		})
	}
}

func testCrossLayer(t *testing.T, h *harness, c crossLayerCase, noGrad bool, tol float64) {
	gc, cc := layers.NewCtx(h.g, tensor.Float32, 3), layers.NewCtx(h.c, tensor.Float64, 3)
	in := h.Rand(-1, 1, c.b, c.d)
	gin, cin := &layers.Blob{Value: in.G}, &layers.Blob{Value: in.C}
	if !noGrad {
		gin.Grad, cin.Grad = h.g.Alloc(tensor.Float32, c.b, c.d), h.c.Alloc(tensor.Float64, c.b, c.d)
		h.g.Fill(gin.Grad, 7) // overwritten, never accumulated into
	}
	gl, err := layers.NewMultiCross(gc, gin, c.num, c.p)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := layers.NewMultiCross(cc, cin, c.num, c.p)
	if err != nil {
		t.Fatal(err)
	}
	gps, cps := gl.Params(), cl.Params()
	for i := range gps {
		// Random weights and non-zero biases, the same on both sides.
		w := h.Rand(-0.5, 0.5, gps[i].Value.Shape...)
		h.g.Copy(gps[i].Value, w.G)
		h.c.Copy(cps[i].Value, w.C)
		h.g.Fill(gps[i].Grad, 7)
		h.Free(w)
	}
	gl.Forward(layers.Pass{Training: true})
	cl.Forward(layers.Pass{Training: true})
	out := pair{gl.Outputs()[0].Value, cl.Outputs()[0].Value}
	h.Check("forward", out, tol)
	dy := h.Rand(-1, 1, c.b, c.d)
	h.g.Copy(gl.Outputs()[0].Grad, dy.G)
	h.c.Copy(cl.Outputs()[0].Grad, dy.C)
	gl.Backward(layers.Pass{Training: true})
	cl.Backward(layers.Pass{Training: true})
	if !noGrad {
		h.Check("input gradient", pair{gin.Grad, cin.Grad}, tol)
	}
	for i := range gps {
		h.Check(fmt.Sprintf("gradient of param %d (%s)", i, gps[i].Name), pair{gps[i].Grad, cps[i].Grad}, tol)
	}
	h.Check("output gradient untouched", pair{gl.Outputs()[0].Grad, dy.C}, 0)
	h.Free(in, dy)
}

// plainBackend hides the backend's CrossOps (and FusedDense), so a layer
// built on it runs the plain operations: the "before" of the benchmark.
type plainBackend struct{ tensor.Backend }

// BenchmarkMultiCross times DCNv2's cross network (batch 65536, width
// 3456, rank 512, 3 layers; TF32 GEMMs) forward and backward on the fused
// cross operations and on the plain ones, as fwd-ms, bwd-ms and the GEMM
// rate over both (4·B·d·r FLOP a layer forward, twice that backward):
//
//	gpu.test -test.run '^$' -test.bench MultiCross -test.benchtime 10x
func BenchmarkMultiCross(b *testing.B) {
	gpuBackend(b)
	const batch, d, r, num = 65536, 3456, 512, 3
	for _, path := range []string{"fused", "plain"} {
		// One layer per path (~10 GB), built on the first of b.Run's calls
		// and kept for the next; its memory stays until the process ends.
		var (
			g *Backend
			l *layers.MultiCross
		)
		b.Run(path, func(b *testing.B) {
			if l == nil {
				var err error
				if g, err = NewOnDevice(sharedBE.Device(), Options{Math: cuda.TF32}); err != nil {
					b.Fatal(err)
				}
				var be tensor.Backend = g
				if path == "plain" {
					be = plainBackend{g}
				}
				c := layers.NewCtx(be, tensor.Float32, 1)
				in := c.Blob(batch, d)
				c.Normal(in.Value, 1)
				if l, err = layers.NewMultiCross(c, in, num, r); err != nil {
					b.Fatal(err)
				}
				c.Normal(l.Outputs()[0].Grad, 1)
			}
			step := func() (fwd, bwd float64) {
				t0 := time.Now()
				l.Forward(layers.Pass{Training: true})
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				l.Backward(layers.Pass{Training: true})
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
				return t1.Sub(t0).Seconds() * 1e3, time.Since(t1).Seconds() * 1e3
			}
			step() // warm-up: workspaces, kernels, cuBLAS
			b.ResetTimer()
			var fwd, bwd float64
			for range b.N {
				f, w := step()
				fwd, bwd = fwd+f, bwd+w
			}
			fwd, bwd = fwd/float64(b.N), bwd/float64(b.N)
			flop := 3 * 4.0 * batch * d * r * num
			b.ReportMetric(fwd, "fwd-ms")
			b.ReportMetric(bwd, "bwd-ms")
			b.ReportMetric(flop/((fwd+bwd)*1e-3)/1e12, "TFLOP/s")
		})
		if g != nil {
			g.Close()
		}
	}
}
