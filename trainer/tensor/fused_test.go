package tensor_test

import (
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// TestFusedReference: the reference fused operations compute what
// FusedDense documents (hand-worked values), and side GEMMs land only at
// JoinGrads or a host read.
func TestFusedReference(t *testing.T) {
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := tensor.NewFusedReference(c)
	var _ tensor.FusedDense = f
	up := func(v []float64, shape ...int) tensor.Tensor {
		x := c.Alloc(tensor.Float64, shape...)
		c.Upload(x, v)
		return x
	}
	get := func(x tensor.Tensor) []float64 { return slices.Clone(cpu.Data[float64](x)) }

	// y = ReLU([1 2]·[[1 −1] [1 −1]] + [0.5 0.5]) = ReLU([3.5 −2.5]).
	x, w, b := up([]float64{1, 2}, 1, 2), up([]float64{1, -1, 1, -1}, 2, 2), up([]float64{0.5, 0.5}, 2)
	y, mask := c.Alloc(tensor.Float64, 1, 2), f.ReLUMask(tensor.Float64, 1, 2)
	if !f.GemmBiasReLUMask(x, w, b, y, mask) || !slices.Equal(get(y), []float64{3.5, 0}) || !slices.Equal(get(mask), []float64{3.5, 0}) {
		t.Fatalf("GemmBiasReLUMask: y %v, mask %v", get(y), get(mask))
	}

	// dx = ([1; 2]·[3 −1]) ⊙ [mask > 0], mask [[0.5 0] [0 2]]; db = Σ rows.
	dy, w2, m2 := up([]float64{1, 2}, 2, 1), up([]float64{3, -1}, 2, 1), up([]float64{0.5, 0, 0, 2}, 2, 2)
	dx, db := c.Alloc(tensor.Float64, 2, 2), c.Alloc(tensor.Float64, 2)
	if !f.GemmDReLUBgrad(dy, w2, m2, dx, db) || !slices.Equal(get(dx), []float64{3, 0, 0, -2}) || !slices.Equal(get(db), []float64{3, -2}) {
		t.Fatalf("GemmDReLUBgrad: dx %v, db %v", get(dx), get(db))
	}

	// dw = xᵀ·dy with x [2,2] = dx above, dy [2,1]: [3·1+0·2, 0·1−2·2].
	dw, dbw := c.Alloc(tensor.Float64, 2, 1), c.Alloc(tensor.Float64, 1)
	if !f.GemmBgrad(dx, dy, dw, dbw, true) {
		t.Fatal("GemmBgrad did not run")
	}
	if !slices.Equal(get(dw), []float64{0, 0}) {
		t.Fatalf("side GEMM ran before the join: %v", get(dw))
	}
	f.JoinGrads()
	if !slices.Equal(get(dw), []float64{3, -4}) || !slices.Equal(get(dbw), []float64{3}) {
		t.Fatalf("GemmBgrad: dw %v, db %v", get(dw), get(dbw))
	}
	// A host read joins.
	dw2 := c.Alloc(tensor.Float64, 2, 1)
	f.GemmBgrad(dx, dy, dw2, tensor.Tensor{}, true)
	h := make([]float64, 2)
	if err := f.Download(h, dw2); err != nil || !slices.Equal(h, []float64{3, -4}) {
		t.Fatalf("Download after a side GEMM: %v %v", h, err)
	}
	if f.Calls["GemmBgrad"] != 2 || f.Calls["GemmDReLUBgrad"] != 1 || f.Calls["GemmBiasReLUMask"] != 1 {
		t.Fatalf("calls %v", f.Calls)
	}
}
