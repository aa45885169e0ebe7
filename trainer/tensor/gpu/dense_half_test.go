package gpu

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// The dense operations and the BCE loss on Float16 and BFloat16 operands
// (dense.go, kernels/dense.cu's _h kernels, nn.cu's bce_partial_h),
// against the CPU float64 reference computed from the same rounded inputs.
// Every operand dtype is swept independently (float32 with half included:
// the casts at the boundaries of a half network), over odd sizes so the
// kernels' pair loops end on a single element.

var halfDTs = []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16}

// halfShapes: single element, odd totals (15, 231, 2193) and a DLRM-like
// block.
var halfShapes = [][2]int{{1, 1}, {3, 5}, {7, 33}, {129, 17}, {1000, 37}}

// halfTol is the tolerance of an output stored in dt: the GPU rounds its
// float32 result and the reference its float64 one to dt, so they differ
// only where the two straddle a rounding boundary (one unit in the last
// place of dt there).
func halfTol(dt tensor.DType) float64 {
	switch dt {
	case tensor.Float16:
		return 1e-3
	case tensor.BFloat16:
		return tolBF16
	}
	return tolFP32
}

// checkDT rounds p's reference to dt, the output's dtype, and compares.
func (h *harness) checkDT(name string, dt tensor.DType, p pair) {
	h.t.Helper()
	h.RoundC(dt, p)
	h.Check(name, p, halfTol(dt))
}

// halfRandZeros is RandDT with every k-th element exactly zero.
func halfRandZeros(h *harness, dt tensor.DType, lo, hi float64, k int, shape ...int) pair {
	v := make([]float64, tensor.NumElems(shape...))
	for i := range v {
		if i%k != 0 {
			v[i] = lo + (hi-lo)*h.rng.Float64()
		}
	}
	return h.FloatsDT(dt, v, shape...)
}

func dtName(dts ...tensor.DType) string {
	s := ""
	for i, d := range dts {
		if i > 0 {
			s += "←"
		}
		s += d.String()
	}
	return s
}

func TestHalfBiasAct(t *testing.T) {
	h := newHarness(t)
	for _, sh := range halfShapes {
		r, c := sh[0], sh[1]
		for _, to := range halfDTs {
			for _, ti := range halfDTs {
				for _, a := range denseActs {
					name := fmt.Sprintf("bias_act %dx%d act %d %s", r, c, a, dtName(to, ti))
					x, b, y := h.RandDT(ti, -3, 3, r, c), h.Rand(-1, 1, c), h.OutDT(to, r, c)
					denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.BiasAct(a, 0.7, s(y), s(x), s(b)) })
					h.checkDT(name, to, y)
					if to == ti { // in place
						denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.BiasAct(a, 0.7, s(x), s(x), s(b)) })
						h.checkDT(name+" in place", ti, x)
					}
					h.Free(x, b, y)
				}
			}
			y, b := h.RandDT(to, -1, 1, r, c), h.Rand(-1, 1, c)
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.AddBias(s(y), s(b)) })
			h.checkDT(fmt.Sprintf("add_bias %dx%d %v", r, c, to), to, y)
			h.Free(y, b)
		}
	}
}

func TestHalfActAndGrad(t *testing.T) {
	h := newHarness(t)
	for _, sh := range halfShapes {
		r, c := sh[0], sh[1]
		for _, to := range halfDTs {
			for _, ti := range halfDTs {
				for _, a := range denseActs {
					name := fmt.Sprintf("%dx%d act %d %s", r, c, a, dtName(to, ti))
					x, y := halfRandZeros(h, ti, -4, 4, 7, r, c), h.OutDT(to, r, c)
					denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Act(a, 1.3, s(y), s(x)) })
					h.checkDT("act "+name, to, y)

					// dx of dtype to from dy, x and y of ti; ties y = 0, x = 0.
					yin := halfRandZeros(h, ti, -0.5, 1, 5, r, c)
					if a == tensor.Sigmoid {
						yin = h.RandDT(ti, 0, 1, r, c)
					}
					dy, dx := h.RandDT(ti, -2, 2, r, c), h.OutDT(to, r, c)
					denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
						be.ActGrad(a, 1.3, s(dx), s(dy), s(x), s(yin))
					})
					h.checkDT("act_grad "+name, to, dx)
					if to == ti {
						// dx aliases dy, with only the operand the activation needs.
						xo, yo := x, yin
						switch a {
						case tensor.ReLU, tensor.Sigmoid:
							xo = h.Zero()
						case tensor.ELU:
							yo = h.Zero()
						}
						denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
							be.ActGrad(a, 1.3, s(dy), s(dy), s(xo), s(yo))
						})
						h.checkDT("act_grad in place "+name, ti, dy)
						denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Act(a, 1.3, s(x), s(x)) })
						h.checkDT("act in place "+name, ti, x)
					}
					h.Free(x, y, yin, dy, dx)
				}
			}
		}
	}
	// A half gradient with a float32 activation (and the reverse).
	for _, mix := range [][2]tensor.DType{{tensor.Float16, tensor.Float32}, {tensor.Float32, tensor.BFloat16}} {
		dy, x, yin, dx := h.RandDT(mix[0], -2, 2, 9, 7), h.RandDT(mix[1], -3, 3, 9, 7), h.RandDT(mix[1], 0, 1, 9, 7),
			h.OutDT(mix[0], 9, 7)
		for _, a := range denseActs {
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.ActGrad(a, 0.5, s(dx), s(dy), s(x), s(yin)) })
			h.checkDT(fmt.Sprintf("act_grad %d dy %v x,y %v", a, mix[0], mix[1]), mix[0], dx)
		}
		h.Free(dy, x, yin, dx)
	}
}

func TestHalfElementwise(t *testing.T) {
	h := newHarness(t)
	for _, sh := range halfShapes {
		r, c := sh[0], sh[1]
		for _, to := range halfDTs {
			for _, ti := range halfDTs {
				name := fmt.Sprintf("%dx%d %s", r, c, dtName(to, ti))
				x, y, d := h.RandDT(ti, -2, 2, r, c), h.RandDT(ti, -2, 2, r, c), h.OutDT(to, r, c)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Axpby(s(d), 0.75, s(x), -1.5, s(y)) })
				h.checkDT("axpby "+name, to, d)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Axpby(s(d), -2, s(x), 3, tensor.Tensor{}) })
				h.checkDT("axpby no y "+name, to, d)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Axpby(s(d), 0.5, s(d), 2, s(y)) })
				h.checkDT("axpby dst=x "+name, to, d)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Axpby(s(d), 0.25, s(x), -1, s(d)) })
				h.checkDT("axpby dst=y "+name, to, d)

				m := h.OutDT(to, r, c)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Mul(s(m), 0, s(x), s(y)) })
				h.checkDT("mul beta 0 "+name, to, m)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Mul(s(m), 0.5, s(x), s(y)) })
				h.checkDT("mul beta 0.5 "+name, to, m)

				// The row scale in ti (MultiCross's activation) and in float32.
				for _, ts := range []tensor.DType{ti, tensor.Float32} {
					sc, rs := h.RandDT(ts, -3, 3, r), h.OutDT(to, r, c)
					denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.RowScale(s(rs), 0, s(x), s(sc)) })
					h.checkDT(fmt.Sprintf("row_scale beta 0 s %v %s", ts, name), to, rs)
					denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.RowScale(s(rs), 1, s(y), s(sc)) })
					h.checkDT(fmt.Sprintf("row_scale beta 1 s %v %s", ts, name), to, rs)
					h.Free(sc, rs)
				}

				rd := h.OutDT(to, r)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.RowDot(s(rd), s(x), s(y)) })
				h.checkDT("row_dot "+name, to, rd)
				h.Free(x, y, d, m, rd)
			}
		}
	}
}

func TestHalfColSumReduce(t *testing.T) {
	h := newHarness(t)
	// {65536, 13} and {70000, 33} cut the rows into chunks (dense_reduce_final).
	for _, sh := range [][2]int{{1, 1}, {3, 5}, {2, 1000}, {5000, 3}, {65536, 13}, {70000, 33}} {
		r, c := sh[0], sh[1]
		for _, to := range halfDTs {
			for _, ti := range halfDTs {
				name := fmt.Sprintf("col_sum %dx%d %s", r, c, dtName(to, ti))
				x, d := h.RandDT(ti, -1, 1, r, c), h.OutDT(to, c)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.ColSum(s(d), 0, s(x)) })
				h.checkDT(name, to, d)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.ColSum(s(d), 0.5, s(x)) })
				h.checkDT(name+" beta 0.5", to, d)
				h.Free(x, d)
			}
		}
	}
	for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 7}, {2, 0, 3}, {1, 70000, 1}, {7, 1000, 37}, {64, 13, 16}} {
		o, n, in := sh[0], sh[1], sh[2]
		for _, to := range halfDTs {
			for _, ti := range halfDTs {
				name := fmt.Sprintf("[%d,%d,%d] %s", o, n, in, dtName(to, ti))
				src, dst := h.RandDT(ti, -1, 1, o, n, in), h.OutDT(to, o, in)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Reduce(s(dst), s(src), o, n, in, 0.25) })
				h.checkDT("reduce "+name, to, dst)

				// Broadcast back from dst (dtype to) into ti.
				b := h.OutDT(ti, o, n, in)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
					be.Broadcast(s(b), 0, s(dst), o, n, in, 1.5)
				})
				h.checkDT("broadcast "+name, ti, b)
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
					be.Broadcast(s(src), -0.5, s(dst), o, n, in, 2)
				})
				h.checkDT("broadcast beta "+name, ti, src)
				h.Free(src, dst, b)
			}
		}
	}
}

// TestHalfCopyCols: Concat/Slice's column blocks in half, at odd column
// offsets (a block starting mid-word of a 16-bit row) and widths.
func TestHalfCopyCols(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ rows, dn, dc, sn, sc, w int }{
		{1, 1, 0, 1, 0, 1}, {3, 5, 1, 4, 2, 2}, {1000, 50, 7, 37, 3, 30}, {513, 26 * 16, 5 * 16, 16, 0, 16},
		{777, 41, 0, 41, 0, 41}, {10, 8, 3, 9, 9, 0}, {33, 9, 1, 11, 3, 7}, {65, 13, 6, 13, 5, 7},
	} {
		for _, to := range halfDTs {
			for _, ti := range halfDTs {
				name := fmt.Sprintf("copy_cols %+v %s", tc, dtName(to, ti))
				src, dst := h.RandDT(ti, -1, 1, tc.rows, tc.sn), h.OutDT(to, tc.rows, tc.dn)
				// Fill dst on both so columns outside the block compare too.
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Fill(s(dst), 0.5) })
				denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
					be.CopyCols(s(dst), tc.dc, s(src), tc.sc, tc.w, 0)
				})
				h.checkDT(name, to, dst)
				if to == ti { // a copy of one dtype is exact
					h.Check(name+" exact", dst, 0)
				}
				for _, beta := range []float64{1, -0.5} {
					denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
						be.CopyCols(s(dst), tc.dc, s(src), tc.sc, tc.w, beta)
					})
					h.checkDT(fmt.Sprintf("%s beta %v", name, beta), to, dst)
				}
				h.Free(src, dst)
			}
		}
	}
	src, dst := h.RandDT(tensor.Float16, -1, 1, 4, 6), h.OutDT(tensor.Float16, 4, 5)
	denseWantErr(h, "copy_cols half range", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.CopyCols(s(dst), 2, s(src), 0, 4, 0)
	})
	h.Free(src, dst)
}

// TestHalfDropout: the mask of a seed and counter is the same whatever the
// dtypes (tensor.PhiloxUniform), kept values x·scale rounded once.
func TestHalfDropout(t *testing.T) {
	h := newHarness(t)
	const seed = 0x0123456789abcdef
	for _, n := range []int{1, 3, 4, 5, 6, 4097, 1000 * 37} {
		for _, to := range halfDTs {
			for _, ti := range halfDTs {
				for _, rate := range []float64{0, 0.1, 0.5} {
					counter := uint64(1<<32 - 3)
					name := fmt.Sprintf("n %d rate %v %s", n, rate, dtName(to, ti))
					x, y := h.RandDT(ti, -2, 2, n), h.OutDT(to, n)
					denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Dropout(s(y), s(x), rate, seed, counter) })
					h.checkDT("dropout "+name, to, y)
					denseCheckMask(h, "dropout "+name, y.G, rate, seed, counter)

					dy, dx := h.RandDT(ti, -2, 2, n), h.OutDT(to, n)
					denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
						be.DropoutGrad(s(dx), s(dy), rate, seed, counter)
					})
					h.checkDT("dropout_grad "+name, to, dx)
					denseCheckMask(h, "dropout_grad "+name, dx.G, rate, seed, counter)
					if to == ti {
						denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Dropout(s(x), s(x), rate, seed+1, 12345) })
						h.checkDT("dropout in place "+name, ti, x)
					}
					h.Free(x, y, dy, dx)
				}
			}
		}
	}
}

// halfLabels are BCE labels: hard, soft every third, and (masked) −1 every
// fourth.
func halfLabels(h *harness, n int, masked bool) []float64 {
	yv := make([]float64, n)
	for i := range yv {
		switch {
		case masked && i%4 == 0:
			yv[i] = -1
		case i%3 == 0:
			yv[i] = h.rng.Float64()
		default:
			yv[i] = float64(h.rng.IntN(2))
		}
	}
	return yv
}

// TestHalfBCE: half logits and gradients; the loss (float32) from the same
// rounded logits matches to float32, dx to its dtype.
func TestHalfBCE(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][2]int{{1, 1}, {7, 1}, {1001, 1}, {4097, 3}} {
		rows, cols := s[0], s[1]
		for _, masked := range []bool{false, true} {
			y := h.Floats(halfLabels(h, rows*cols, masked), rows, cols)
			for _, tx := range halfDTs {
				for _, tdx := range halfDTs {
					x := h.RandDT(tx, -20, 20, rows, cols)
					for _, weighted := range []bool{false, true} {
						name := fmt.Sprintf("%dx%d masked %v weighted %v %s", rows, cols, masked, weighted, dtName(tdx, tx))
						w := h.Zero()
						if weighted {
							w = h.Rand(0.5, 2, cols)
						}
						loss, dx := h.Out(tensor.Float32, 1), h.OutDT(tdx, rows, cols)
						gs := 1024 / float64(rows) // fp16's loss scale × 1/batch
						if masked {
							h.g.MaskedBCE(loss.G, dx.G, x.G, y.G, w.G, gs)
							h.c.MaskedBCE(loss.C, dx.C, x.C, y.C, w.C, gs)
						} else {
							h.g.BCE(loss.G, dx.G, x.G, y.G, w.G, gs)
							h.c.BCE(loss.C, dx.C, x.C, y.C, w.C, gs)
						}
						h.Check("bce loss "+name, loss, tolFP32)
						h.checkDT("bce dx "+name, tdx, dx)
						loss2 := h.Out(tensor.Float32, 1)
						h.g.BCE(loss2.G, tensor.Tensor{}, x.G, y.G, w.G, gs)
						h.c.BCE(loss2.C, tensor.Tensor{}, x.C, y.C, w.C, gs)
						h.Check("bce loss only "+name, loss2, tolFP32)
						h.Free(w, loss, dx, loss2)
					}
					h.Free(x)
				}
			}
			h.Free(y)
		}
	}
}

// TestHalfBCELossScale: gradScale multiplies before dx is rounded to fp16.
// A batch of 65536 well-classified examples (2 ≤ |x| < 8, labels agreeing)
// has unscaled gradients σ(−|x|)/65536 < 2^-19, in fp16's subnormal range,
// where rounding first keeps a few significant bits or none; scaled by
// 1024 they are normal, so dx/1024 matches the float64 gradient to fp16's
// precision.
func TestHalfBCELossScale(t *testing.T) {
	h := newHarness(t)
	const rows, scale = 65536, 1024.0
	xv, yv := make([]float64, rows), make([]float64, rows)
	for i := range xv {
		xv[i] = 2 + 6*h.rng.Float64()
		if i%2 == 0 {
			xv[i], yv[i] = -xv[i], 0
		} else {
			yv[i] = 1
		}
	}
	x, y := h.FloatsDT(tensor.Float16, xv, rows, 1), h.Floats(yv, rows, 1)
	loss, dx := h.Out(tensor.Float32, 1), h.OutDT(tensor.Float16, rows, 1)
	h.g.BCE(loss.G, dx.G, x.G, y.G, tensor.Tensor{}, scale/rows)
	h.c.BCE(loss.C, dx.C, x.C, y.C, tensor.Tensor{}, 1.0/rows) // the unscaled reference
	h.Sync()
	got := make([]float64, rows)
	if err := h.g.Download(got, dx.G); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] /= scale
	}
	ref := cpu.Data[float64](dx.C)
	if e := RelErr(got, ref); !(e < 1e-3) {
		i := worst(got, ref)
		t.Fatalf("loss-scaled fp16 dx: relative error %.3g (worst [%d]: %g, ref %g)", e, i, got[i], ref[i])
	}
	// The same gradient rounded to fp16 without the scale is far off:
	// the check above can tell the two orders apart.
	rounded := make([]float64, rows)
	for i, v := range ref {
		rounded[i] = float64(tensor.RoundTo(tensor.Float16, float32(v)))
	}
	if e := RelErr(rounded, ref); e < 1e-2 {
		t.Fatalf("unscaled fp16 gradients only %.3g off: the test does not separate the orders", e)
	}
	h.Free(x, y, loss, dx)
}

// TestHalfDTypeErrors: parameters and labels stay float32, regularizers
// float32-only; each is refused by name with ErrDType, never computed.
func TestHalfDTypeErrors(t *testing.T) {
	h := newHarness(t)
	x := h.RandDT(tensor.Float16, -1, 1, 4, 6)
	hb := h.RandDT(tensor.BFloat16, -1, 1, 6)
	one := h.Out(tensor.Float32, 1)
	hy := h.RandDT(tensor.Float16, 0, 1, 4, 6)
	iy := h.Ints(tensor.Int32, make([]int64, 24), 4, 6)
	fy := h.Rand(0, 1, 4, 6)
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"half bias", "bias", func() { h.g.BiasAct(tensor.ReLU, 0, x.G, x.G, hb.G) }},
		{"half add_bias", "bias", func() { h.g.AddBias(x.G, hb.G) }},
		{"half bce labels", "bce", func() { h.g.BCE(one.G, x.G, x.G, hy.G, tensor.Tensor{}, 1) }},
		{"half bce weights", "bce", func() { h.g.BCE(one.G, x.G, x.G, fy.G, hb.G, 1) }},
		{"half bce loss", "bce", func() { h.g.BCE(hb.G, x.G, x.G, fy.G, tensor.Tensor{}, 1) }},
		{"half sum_squares", "sum_squares", func() { h.g.SumSquares(one.G, x.G, 1) }},
		{"half sign_axpy", "sign_axpy", func() { h.g.SignAxpy(x.G, 1, x.G) }},
		{"int axpby", "axpby", func() { h.g.Axpby(x.G, 1, iy.G, 1, tensor.Tensor{}) }},
	} {
		tc.f()
		err := h.g.Sync()
		if !errors.Is(err, tensor.ErrDType) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrDType naming %q", tc.name, err, tc.want)
		}
		h.g.Reset()
	}
	h.Free(x, hb, one, hy, iy, fy)
}

// BenchmarkDenseHalf: the dense ops on a [65536, 1024] activation in each
// dtype, queued b.N times and synchronised once (ns/op is device time per
// op); bytes/op are those the op reads and writes, so MB/s is its
// achieved memory bandwidth, and the half rows should approach twice the
// float32 rows' op rate:
//
//	gpu.test -test.run '^$' -test.bench DenseHalf -test.benchtime 200x
func BenchmarkDenseHalf(b *testing.B) {
	g := gpuBackend(b)
	const rows, cols = 65536, 1024
	n := rows * cols
	for _, d := range halfDTs {
		x, y, dy := g.Alloc(d, rows, cols), g.Alloc(d, rows, cols), g.Alloc(d, rows, cols)
		bias, db := g.Alloc(tensor.Float32, cols), g.Alloc(tensor.Float32, cols)
		narrow := g.Alloc(d, rows, 13)
		logits, dlogits := g.Alloc(d, rows, 1), g.Alloc(d, rows, 1)
		labels, loss := g.Alloc(tensor.Float32, rows, 1), g.Alloc(tensor.Float32, 1)
		g.Fill(x, 0.5)
		g.Fill(dy, 0.25)
		g.Fill(logits, 0.1)
		sz := int64(d.Size())
		for _, op := range []struct {
			name  string
			bytes int64
			f     func()
		}{
			{"bias_act", 2 * sz * int64(n), func() { g.BiasAct(tensor.ReLU, 0, y, x, bias) }},
			{"act_grad", 3 * sz * int64(n), func() { g.ActGrad(tensor.ReLU, 0, y, dy, tensor.Tensor{}, x) }},
			{"axpby", 3 * sz * int64(n), func() { g.Axpby(y, 0.5, x, 2, dy) }},
			{"col_sum", sz * int64(n), func() { g.ColSum(db, 0, dy) }},
			{"dropout", 2 * sz * int64(n), func() { g.Dropout(y, x, 0.5, 1, 0) }},
			{"copy_cols", 2 * sz * int64(rows*13), func() { g.CopyCols(y, 5, narrow, 0, 13, 0) }},
			{"bce", (2*sz + 4) * int64(rows), func() { g.BCE(loss, dlogits, logits, labels, tensor.Tensor{}, 1024.0/rows) }},
		} {
			b.Run(fmt.Sprintf("%s/%v", op.name, d), func(b *testing.B) {
				op.f() // warm-up: kernels, workspaces
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(op.bytes)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					op.f()
				}
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
			})
		}
		for _, t := range []tensor.Tensor{x, y, dy, bias, db, narrow, logits, dlogits, labels, loss} {
			g.Free(t)
		}
	}
}

// TestHalfDropoutGraphStep: in a CUDA graph step the half dropout reads
// the step's Philox counter from the scalar block (as the float32 kernel
// does), so replayed steps draw each step's own mask, bit-equal to eager.
func TestHalfDropoutGraphStep(t *testing.T) {
	const n = 4099
	init := make([]float32, n)
	for i := range init {
		init[i] = float32(1.5 + math.Sin(float64(i))) // never 0: a dropped element is told by its 0
	}
	for _, d := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		// A backend of its own for each dtype: the graph captured with
		// the first dtype's tensors would not match the second's.
		be := graphTestBackend(t, Options{})
		mk := func() (x, y tensor.Tensor) {
			x, y = be.Alloc(d, n), be.Alloc(d, n)
			be.Upload(x, init)
			return x, y
		}
		ex, ey := mk()
		gx, gy := mk()
		step := func(x, y tensor.Tensor, k int) { be.Dropout(y, x, 0.5, 42, uint64(k)*1000) }
		step(ex, ey, 1)
		step(gx, gy, 1) // warm-up, eager
		for k := 2; k <= 4; k++ {
			step(ex, ey, k)
			if err := be.BeginGraphStep(); err != nil {
				t.Fatal(err)
			}
			step(gx, gy, k)
			if r := be.EndGraphStep(false); r.Why != "" || !r.Replayed {
				t.Fatalf("%v step %d: %+v", d, k, r)
			}
			a, b := make([]float32, n), make([]float32, n)
			if err := be.Download(a, ey); err != nil {
				t.Fatal(err)
			}
			if err := be.Download(b, gy); err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%v step %d element %d: graph %v, eager %v", d, k, i, b[i], a[i])
				}
			}
			for i := range a {
				if keep := tensor.PhiloxUniform(42, uint64(k)*1000, i) >= 0.5; keep != (a[i] != 0) {
					t.Fatalf("%v step %d element %d: kept %v, Philox says %v", d, k, i, a[i] != 0, keep)
				}
			}
		}
		for _, x := range []tensor.Tensor{ex, ey, gx, gy} {
			be.Free(x)
		}
	}
}
