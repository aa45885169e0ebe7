package gpu

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// denseShapes are the [rows, cols] matrices the dense tests sweep: single
// element, odd, wider than a warp, and a DLRM batch with a narrow row.
var denseShapes = [][2]int{{1, 1}, {3, 5}, {1000, 37}, {65536, 13}}

var denseActs = []tensor.Activation{tensor.Identity, tensor.ReLU, tensor.Sigmoid, tensor.ELU}

// denseBoth runs f on the GPU and on the CPU, each seeing its side of the
// pairs through s.
func denseBoth(h *harness, f func(be tensor.Backend, s func(pair) tensor.Tensor)) {
	f(h.g, func(p pair) tensor.Tensor { return p.G })
	f(h.c, func(p pair) tensor.Tensor { return p.C })
}

// denseWantErr runs f on both backends and requires sentinel from both,
// then clears the errors.
func denseWantErr(h *harness, name string, sentinel error, f func(be tensor.Backend, s func(pair) tensor.Tensor)) {
	h.t.Helper()
	denseBoth(h, f)
	if err := h.g.Sync(); !errors.Is(err, sentinel) {
		h.t.Errorf("%s: gpu error %v, want %v", name, err, sentinel)
	}
	if err := h.c.Err(); !errors.Is(err, sentinel) {
		h.t.Errorf("%s: cpu error %v, want %v", name, err, sentinel)
	}
	h.g.Reset()
	h.c.Reset()
}

// denseRandZeros is Rand with every k-th element exactly zero (ReLU and
// sign ties).
func denseRandZeros(h *harness, lo, hi float64, k int, shape ...int) pair {
	v := make([]float64, tensor.NumElems(shape...))
	for i := range v {
		if i%k == 0 {
			continue
		}
		v[i] = lo + (hi-lo)*h.rng.Float64()
	}
	return h.Floats(v, shape...)
}

func TestBiasAct(t *testing.T) {
	h := newHarness(t)
	for _, sh := range denseShapes {
		r, c := sh[0], sh[1]
		for _, a := range denseActs {
			name := fmt.Sprintf("bias_act %dx%d act %d", r, c, a)
			x, b, y := h.Rand(-3, 3, r, c), h.Rand(-1, 1, c), h.Out(tensor.Float32, r, c)
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.BiasAct(a, 0.7, s(y), s(x), s(b)) })
			h.Check(name, y, tolFP32)
			// In place: y aliases x.
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.BiasAct(a, 0.7, s(x), s(x), s(b)) })
			h.Check(name+" in place", x, tolFP32)
			h.Free(x, b, y)
		}
		y, b := h.Rand(-1, 1, r, c), h.Rand(-1, 1, c)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.AddBias(s(y), s(b)) })
		h.Check(fmt.Sprintf("add_bias %dx%d", r, c), y, tolFP32)
		h.Free(y, b)
	}
	x, b := h.Rand(-1, 1, 4, 6), h.Rand(-1, 1, 5)
	denseWantErr(h, "bias length", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.BiasAct(tensor.ReLU, 0, s(x), s(x), s(b))
	})
	y := h.Rand(-1, 1, 4, 5)
	denseWantErr(h, "y length", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.BiasAct(tensor.ReLU, 0, s(y), s(x), s(b))
	})
	ib := h.Ints(tensor.Int32, make([]int64, 6), 6)
	denseWantErr(h, "int bias", tensor.ErrDType, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.AddBias(s(x), s(ib))
	})
}

func TestActAndGrad(t *testing.T) {
	h := newHarness(t)
	for _, sh := range denseShapes {
		r, c := sh[0], sh[1]
		for _, a := range denseActs {
			name := fmt.Sprintf("%dx%d act %d", r, c, a)
			x, y := denseRandZeros(h, -4, 4, 7, r, c), h.Out(tensor.Float32, r, c)
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Act(a, 1.3, s(y), s(x)) })
			h.Check("act "+name, y, tolFP32)

			// The gradient reads y (ReLU, Sigmoid) or x (ELU); use
			// independent inputs so ties y = 0 and x = 0 are exercised.
			yin := denseRandZeros(h, -0.5, 1, 5, r, c)
			if a == tensor.Sigmoid {
				yin = h.Rand(0, 1, r, c)
			}
			dy, dx := h.Rand(-2, 2, r, c), h.Out(tensor.Float32, r, c)
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
				be.ActGrad(a, 1.3, s(dx), s(dy), s(x), s(yin))
			})
			h.Check("act_grad "+name, dx, tolFP32)
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
			h.Check("act_grad in place "+name, dy, tolFP32)
			// y aliases x.
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Act(a, 1.3, s(x), s(x)) })
			h.Check("act in place "+name, x, tolFP32)
			h.Free(x, y, yin, dy, dx)
		}
	}
	dy, x := h.Rand(-1, 1, 8), h.Rand(-1, 1, 8)
	denseWantErr(h, "relu without y", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.ActGrad(tensor.ReLU, 0, s(dy), s(dy), s(x), tensor.Tensor{})
	})
	denseWantErr(h, "elu without x", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.ActGrad(tensor.ELU, 1, s(dy), s(dy), tensor.Tensor{}, s(x))
	})
	short := h.Rand(-1, 1, 7)
	denseWantErr(h, "act lengths", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.Act(tensor.Sigmoid, 0, s(short), s(x))
	})
}

func TestElementwise(t *testing.T) {
	h := newHarness(t)
	for _, sh := range denseShapes {
		r, c := sh[0], sh[1]
		name := fmt.Sprintf("%dx%d", r, c)
		x, y, d := h.Rand(-2, 2, r, c), h.Rand(-2, 2, r, c), h.Out(tensor.Float32, r, c)

		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Axpby(s(d), 0.75, s(x), -1.5, s(y)) })
		h.Check("axpby "+name, d, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Axpby(s(d), -2, s(x), 3, tensor.Tensor{}) })
		h.Check("axpby no y "+name, d, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Axpby(s(d), 0.5, s(d), 2, s(y)) })
		h.Check("axpby dst=x "+name, d, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Axpby(s(d), 0.25, s(x), -1, s(d)) })
		h.Check("axpby dst=y "+name, d, tolFP32)

		m := h.Out(tensor.Float32, r, c)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Mul(s(m), 0, s(x), s(y)) })
		h.Check("mul beta 0 "+name, m, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Mul(s(m), 0.5, s(x), s(y)) })
		h.Check("mul beta 0.5 "+name, m, tolFP32)

		sc := h.Rand(-3, 3, r)
		rs := h.Out(tensor.Float32, r, c)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.RowScale(s(rs), 0, s(x), s(sc)) })
		h.Check("row_scale beta 0 "+name, rs, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.RowScale(s(rs), 1, s(y), s(sc)) })
		h.Check("row_scale beta 1 "+name, rs, tolFP32)

		rd := h.Out(tensor.Float32, r)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.RowDot(s(rd), s(x), s(y)) })
		h.Check("row_dot "+name, rd, tolFP32)

		z := denseRandZeros(h, -1, 1, 3, r, c)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.SignAxpy(s(d), 0.125, s(z)) })
		h.Check("sign_axpy "+name, d, tolFP32)
		h.Free(x, y, d, m, sc, rs, rd, z)
	}
	// Wide rows for RowDot (lanes striding many columns).
	x, y, rd := h.Rand(-1, 1, 300, 4099), h.Rand(-1, 1, 300, 4099), h.Out(tensor.Float32, 300)
	denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.RowDot(s(rd), s(x), s(y)) })
	h.Check("row_dot 300x4099", rd, tolFP32)

	a, b := h.Rand(-1, 1, 4, 5), h.Rand(-1, 1, 4, 6)
	denseWantErr(h, "axpby lengths", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.Axpby(s(a), 1, s(a), 1, s(b))
	})
	denseWantErr(h, "mul lengths", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.Mul(s(a), 0, s(a), s(b))
	})
	s5 := h.Rand(-1, 1, 5)
	denseWantErr(h, "row_scale scale", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.RowScale(s(a), 0, s(a), s(s5))
	})
	denseWantErr(h, "row_dot dst", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.RowDot(s(s5), s(a), s(a))
	})
	denseWantErr(h, "sign_axpy lengths", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.SignAxpy(s(a), 1, s(b))
	})
}

func TestColSum(t *testing.T) {
	h := newHarness(t)
	shapes := append([][2]int{{65536, 1}, {65536, 256}, {2, 1000}, {70000, 33}, {5000, 3}}, denseShapes...)
	for _, sh := range shapes {
		r, c := sh[0], sh[1]
		x := h.Rand(-1, 1, r, c)
		d := h.Out(tensor.Float32, c)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.ColSum(s(d), 0, s(x)) })
		h.Check(fmt.Sprintf("col_sum %dx%d", r, c), d, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.ColSum(s(d), 0.5, s(x)) })
		h.Check(fmt.Sprintf("col_sum beta 0.5 %dx%d", r, c), d, tolFP32)
		h.Free(x, d)
	}
	x, d := h.Rand(-1, 1, 4, 6), h.Rand(-1, 1, 5)
	denseWantErr(h, "col_sum dst", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.ColSum(s(d), 0, s(x))
	})
}

func TestReduceBroadcast(t *testing.T) {
	h := newHarness(t)
	for _, sh := range [][3]int{
		{1, 1, 1}, {3, 5, 7}, {2, 0, 3}, {1, 70000, 1}, {3000, 26, 1}, {7, 1000, 37},
		{4096, 26, 128}, {64, 13, 16}, {1, 65536, 64}, {100000, 2, 3},
	} {
		o, n, in := sh[0], sh[1], sh[2]
		name := fmt.Sprintf("[%d,%d,%d]", o, n, in)
		src, dst := h.Rand(-1, 1, o, n, in), h.Out(tensor.Float32, o, in)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Reduce(s(dst), s(src), o, n, in, 0.25) })
		h.Check("reduce "+name, dst, tolFP32)

		b := h.Out(tensor.Float32, o, n, in)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
			be.Broadcast(s(b), 0, s(dst), o, n, in, 1.5)
		})
		h.Check("broadcast "+name, b, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
			be.Broadcast(s(src), -0.5, s(dst), o, n, in, 2)
		})
		h.Check("broadcast beta "+name, src, tolFP32)
		h.Free(src, dst, b)
	}
	src, dst := h.Rand(-1, 1, 24), h.Rand(-1, 1, 6)
	denseWantErr(h, "reduce shape", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.Reduce(s(dst), s(src), 2, 3, 3, 1)
	})
	denseWantErr(h, "broadcast shape", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.Broadcast(s(src), 0, s(dst), 2, 4, 4, 1)
	})
}

func TestCopyCols(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ rows, dn, dc, sn, sc, w int }{
		{1, 1, 0, 1, 0, 1}, {3, 5, 1, 4, 2, 2}, {1000, 50, 7, 37, 3, 30}, {65536, 26 * 16, 5 * 16, 16, 0, 16},
		{777, 40, 0, 40, 0, 40}, {10, 8, 3, 9, 9, 0},
	} {
		name := fmt.Sprintf("%+v", tc)
		src := h.Rand(-1, 1, tc.rows, tc.sn)
		dst := h.Out(tensor.Float32, tc.rows, tc.dn)
		// Fill dst on both so columns outside the block compare too.
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Fill(s(dst), 0.5) })
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
			be.CopyCols(s(dst), tc.dc, s(src), tc.sc, tc.w, 0)
		})
		h.Check("copy_cols "+name, dst, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
			be.CopyCols(s(dst), tc.dc, s(src), tc.sc, tc.w, 1)
		})
		h.Check("copy_cols beta 1 "+name, dst, tolFP32)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
			be.CopyCols(s(dst), tc.dc, s(src), tc.sc, tc.w, -0.5)
		})
		h.Check("copy_cols beta -0.5 "+name, dst, tolFP32)
		h.Free(src, dst)
	}
	src, dst := h.Rand(-1, 1, 4, 6), h.Rand(-1, 1, 4, 5)
	for _, bad := range [][3]int{{0, 0, 6}, {2, 0, 4}, {0, 3, 4}, {-1, 0, 2}, {0, 0, -1}} {
		denseWantErr(h, fmt.Sprintf("copy_cols %v", bad), tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
			be.CopyCols(s(dst), bad[0], s(src), bad[1], bad[2], 0)
		})
	}
	other := h.Rand(-1, 1, 3, 6)
	denseWantErr(h, "copy_cols rows", tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.CopyCols(s(dst), 0, s(other), 0, 2, 0)
	})
}

func TestSumSquaresAbs(t *testing.T) {
	h := newHarness(t)
	for _, n := range []int{0, 1, 3, 1000, 65536 * 13, 3_000_001} {
		x := h.Rand(-2, 2, n)
		sq, ab := h.Floats([]float64{1.5}, 1), h.Floats([]float64{-0.25}, 1)
		denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
			be.SumSquares(s(sq), s(x), 0.3)
			be.SumSquares(s(sq), s(x), 1e-4) // accumulates
			be.SumAbs(s(ab), s(x), 0.7)
		})
		h.Check(fmt.Sprintf("sum_squares %d", n), sq, tolFP32)
		h.Check(fmt.Sprintf("sum_abs %d", n), ab, tolFP32)
		h.Free(x, sq, ab)
	}
	// A 2-D out adds into its first element only.
	x, out := h.Rand(-1, 1, 37, 5), h.Rand(-1, 1, 2, 2)
	denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.SumAbs(s(out), s(x), 1) })
	h.Check("sum_abs into [2,2]", out, tolFP32)
	ix := h.Ints(tensor.Int32, []int64{1, 2}, 2)
	denseWantErr(h, "sum_squares int", tensor.ErrDType, func(be tensor.Backend, s func(pair) tensor.Tensor) {
		be.SumSquares(s(out), s(ix), 1)
	})
}

func TestDropout(t *testing.T) {
	h := newHarness(t)
	const seed = 0x0123456789abcdef
	for _, n := range []int{1, 3, 4, 5, 4097, 1000 * 37, 65536 * 13} {
		for _, rate := range []float64{0, 0.1, 0.5, 0.9} {
			// The counter crosses 2³² inside the tensor: the carry into
			// the high counter word must match.
			counter := uint64(1<<32 - 3)
			name := fmt.Sprintf("n %d rate %v", n, rate)
			x, y := h.Rand(-2, 2, n), h.Out(tensor.Float32, n)
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Dropout(s(y), s(x), rate, seed, counter) })
			h.Check("dropout "+name, y, tolFP32)
			denseCheckMask(h, "dropout "+name, y.G, rate, seed, counter)

			dy, dx := h.Rand(-2, 2, n), h.Out(tensor.Float32, n)
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) {
				be.DropoutGrad(s(dx), s(dy), rate, seed, counter)
			})
			h.Check("dropout_grad "+name, dx, tolFP32)
			// In place, another stream position.
			denseBoth(h, func(be tensor.Backend, s func(pair) tensor.Tensor) { be.Dropout(s(x), s(x), rate, seed+1, 12345) })
			h.Check("dropout in place "+name, x, tolFP32)
			h.Free(x, y, dy, dx)
		}
	}
	x := h.Rand(-1, 1, 10)
	for _, rate := range []float64{1, -0.1, math.NaN()} {
		denseWantErr(h, fmt.Sprintf("dropout rate %v", rate), tensor.ErrShape, func(be tensor.Backend, s func(pair) tensor.Tensor) {
			be.Dropout(s(x), s(x), rate, 1, 0)
		})
	}
}

// denseCheckMask requires the kept elements of a dropout output (inputs
// drawn nonzero) to be exactly those with PhiloxUniform ≥ rate.
func denseCheckMask(h *harness, name string, y tensor.Tensor, rate float64, seed, counter uint64) {
	h.t.Helper()
	got := make([]float32, y.Len())
	if err := h.g.Download(got, y); err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	for i, v := range got {
		keep := tensor.PhiloxUniform(seed, counter, i) >= float32(rate)
		if keep != (v != 0) {
			h.t.Fatalf("%s: element %d kept %v on the GPU (y %v), %v on the CPU", name, i, v != 0, v, keep)
		}
	}
}
