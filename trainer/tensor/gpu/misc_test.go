package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// TestDice: PReLU_Dice forward (batch statistics and output) and HugeCTR's
// backward against the CPU float64 reference, including more rows than one
// stats block covers and columns beyond a 32-column tile.
func TestDice(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][2]int{{1, 1}, {2, 3}, {7, 33}, {1000, 200}, {4097, 80}, {64, 1025}} {
		rows, n := s[0], s[1]
		name := fmt.Sprintf("%dx%d", rows, n)
		x := h.Rand(-3, 5, rows, n)
		y := h.Out(tensor.Float32, rows, n)
		mean, vr := h.Out(tensor.Float32, n), h.Out(tensor.Float32, n)
		h.g.Dice(y.G, x.G, mean.G, vr.G, 0.2, 1e-8)
		h.c.Dice(y.C, x.C, mean.C, vr.C, 0.2, 1e-8)
		h.Check("dice mean "+name, mean, tolFP32)
		h.Check("dice var "+name, vr, tolFP32)
		h.Check("dice "+name, y, tolFP32)

		// The backward from the same (CPU) statistics on both sides.
		st := func(p pair) pair {
			v := make([]float64, n)
			copy(v, cpu.Data[float64](p.C))
			return h.Floats(v, n)
		}
		m2, v2 := st(mean), st(vr)
		dy := h.Rand(-1, 1, rows, n)
		dx := h.Out(tensor.Float32, rows, n)
		h.g.DiceGrad(dx.G, dy.G, x.G, m2.G, v2.G, 0.2, 1e-8)
		h.c.DiceGrad(dx.C, dy.C, x.C, m2.C, v2.C, 0.2, 1e-8)
		h.Check("dice_grad "+name, dx, tolFP32)
		h.Free(x, y, mean, vr, m2, v2, dy, dx)
	}
}

// TestRoundHalf: binary16 rounding equals the CPU's bit for bit (normal,
// subnormal and near-overflow ranges; ±Inf beyond 65520 checked apart).
func TestRoundHalf(t *testing.T) {
	h := newHarness(t)
	var v []float64
	for i := 0; i < 3000; i++ {
		switch i % 3 {
		case 0:
			v = append(v, -65510+131020*h.rng.Float64())
		case 1:
			v = append(v, (h.rng.Float64()-0.5)*2e-4)
		default:
			v = append(v, (h.rng.Float64()-0.5)*8)
		}
	}
	v = append(v, 0, math.Copysign(0, -1), 65504, 65519.99, 6.1035156e-05, 5.9604645e-08, 2.9802322e-08, 1+1.0/2048)
	x := h.Floats(v, len(v))
	y := h.Out(tensor.Float32, len(v))
	h.g.RoundHalf(y.G, x.G)
	h.c.RoundHalf(y.C, x.C)
	h.Check("round_half", y, 0)
	big := h.Floats([]float64{65520, -70000, 1e30}, 3)
	out := make([]float32, 3)
	h.g.RoundHalf(big.G, big.G) // in place
	if err := h.g.Download(out, big.G); err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(float64(out[0]), 1) || !math.IsInf(float64(out[1]), -1) || !math.IsInf(float64(out[2]), 1) {
		t.Errorf("round_half beyond the half range: %v, want +Inf, -Inf, +Inf", out)
	}
	h.Free(x, y, big)
}
