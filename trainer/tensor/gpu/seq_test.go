package gpu

import (
	"fmt"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// GPU parity of the sequence and attention operations (tensor.SeqOps)
// against the CPU float64 reference.

func TestBatchedGemm(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][4]int{{1, 1, 1, 1}, {3, 2, 5, 7}, {512, 10, 10, 8}, {64, 33, 17, 65}, {1, 300, 200, 100}} {
		batch, m, n, k := s[0], s[1], s[2], s[3]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			name := fmt.Sprintf("%v %v ta=%v tb=%v", batch, s[1:], tr[0], tr[1])
			a, b := h.Rand(-1, 1, batch*m*k), h.Rand(-1, 1, batch*k*n)
			c := h.Rand(-1, 1, batch*m*n)
			h.g.BatchedGemm(tr[0], tr[1], batch, m, n, k, 0.7, a.G, b.G, 0.5, c.G)
			h.c.BatchedGemm(tr[0], tr[1], batch, m, n, k, 0.7, a.C, b.C, 0.5, c.C)
			h.Check("batched_gemm "+name, c, tolFP32)
			h.Free(a, b, c)
		}
	}
}

func TestPermute0213(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][4]int{{1, 1, 1, 1}, {2, 3, 4, 5}, {256, 20, 4, 16}} {
		x := h.Rand(-1, 1, tensor.NumElems(s[:]...))
		y := h.Out(tensor.Float32, x.G.Len())
		h.g.Permute0213(y.G, x.G, s[0], s[1], s[2], s[3])
		h.c.Permute0213(y.C, x.C, s[0], s[1], s[2], s[3])
		h.Check(fmt.Sprintf("permute0213 %v", s), y, 0)
		h.Free(x, y)
	}
}

// lengths returns B random lengths in [0, max] on both backends.
func (h *harness) lengths(b, max int) pair {
	v := make([]float64, b)
	for i := range v {
		v[i] = float64(h.rng.IntN(max + 1))
	}
	return h.Floats(v, b, 1)
}

func TestSequenceMaskAndMaskedSoftmax(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][4]int{{1, 1, 1, 1}, {3, 2, 4, 5}, {128, 4, 20, 20}, {2, 1, 3, 1500}} {
		b, heads, m, n := s[0], s[1], s[2], s[3]
		name := fmt.Sprint(s)
		lf, lt := h.lengths(b, m), h.lengths(b, n)
		mask := h.Out(tensor.Float32, b, m*n)
		h.g.SequenceMask(mask.G, lf.G, lt.G, m, n)
		h.c.SequenceMask(mask.C, lf.C, lt.C, m, n)
		h.Check("sequence_mask "+name, mask, 0)

		x := h.Rand(-4, 4, b, heads, m, n)
		y := h.Out(tensor.Float32, b, heads, m, n)
		h.g.MaskedSoftmax(y.G, x.G, mask.G, heads, 0.8)
		h.c.MaskedSoftmax(y.C, x.C, mask.C, heads, 0.8)
		h.Check("masked_softmax "+name, y, tolFP32)
		h.Free(lf, lt, mask, x, y)
	}
}

func TestLayerNorm(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][2]int{{1, 1}, {3, 7}, {2000, 64}, {5, 1000}} {
		rows, n := s[0], s[1]
		name := fmt.Sprint(s)
		x := h.Rand(-3, 5, rows, n)
		gm, bt := h.Rand(0.5, 1.5, n), h.Rand(-1, 1, n)
		y := h.Out(tensor.Float32, rows, n)
		mean, rstd := h.Out(tensor.Float32, rows), h.Out(tensor.Float32, rows)
		h.g.LayerNorm(y.G, x.G, gm.G, bt.G, mean.G, rstd.G, 1e-5)
		h.c.LayerNorm(y.C, x.C, gm.C, bt.C, mean.C, rstd.C, 1e-5)
		h.Check("layer_norm y "+name, y, tolFP32)
		h.Check("layer_norm mean "+name, mean, tolFP32)
		h.Check("layer_norm rstd "+name, rstd, tolFP32)

		dy := h.Rand(-1, 1, rows, n)
		dx, dg, db := h.Out(tensor.Float32, rows, n), h.Out(tensor.Float32, n), h.Out(tensor.Float32, n)
		h.g.LayerNormGrad(dx.G, dg.G, db.G, dy.G, x.G, gm.G, mean.G, rstd.G)
		h.c.LayerNormGrad(dx.C, dg.C, db.C, dy.C, x.C, gm.C, mean.C, rstd.C)
		h.Check("layer_norm dx "+name, dx, tolFP32)
		h.Check("layer_norm dgamma "+name, dg, tolFP32)
		h.Check("layer_norm dbeta "+name, db, tolFP32)
		// Without dx (an input that needs no gradient).
		h.g.LayerNormGrad(tensor.Tensor{}, dg.G, db.G, dy.G, x.G, gm.G, mean.G, rstd.G)
		h.c.LayerNormGrad(tensor.Tensor{}, dg.C, db.C, dy.C, x.C, gm.C, mean.C, rstd.C)
		h.Check("layer_norm dgamma (no dx) "+name, dg, tolFP32)
		h.Free(x, gm, bt, y, mean, rstd, dy, dx, dg, db)
	}
}

func TestGRUCell(t *testing.T) {
	h := newHarness(t)
	for _, s := range [][2]int{{1, 1}, {7, 5}, {1024, 64}} {
		b, hid := s[0], s[1]
		for _, first := range []bool{true, false} {
			name := fmt.Sprintf("%v first=%v", s, first)
			xw, hw := h.Rand(-2, 2, b, 3*hid), h.Rand(-2, 2, b, 3*hid)
			var hp pair
			if !first {
				hp = h.Rand(-1, 1, b, hid)
			}
			out, save := h.Out(tensor.Float32, b, hid), h.Out(tensor.Float32, b, 4*hid)
			h.g.GRUCell(out.G, save.G, xw.G, hw.G, hp.G)
			h.c.GRUCell(out.C, save.C, xw.C, hw.C, hp.C)
			h.Check("gru_cell h "+name, out, tolFP32)
			h.Check("gru_cell save "+name, save, tolFP32)

			dh := h.Rand(-1, 1, b, hid)
			dxw, dhw := h.Out(tensor.Float32, b, 3*hid), h.Out(tensor.Float32, b, 3*hid)
			dhp := h.Out(tensor.Float32, b, hid)
			h.g.GRUCellGrad(dxw.G, dhw.G, dhp.G, dh.G, save.G, hp.G)
			h.c.GRUCellGrad(dxw.C, dhw.C, dhp.C, dh.C, save.C, hp.C)
			h.Check("gru_cell dxw "+name, dxw, tolFP32)
			h.Check("gru_cell dhw "+name, dhw, tolFP32)
			h.Check("gru_cell dh_prev "+name, dhp, tolFP32)
			h.Free(xw, hw, out, save, dh, dxw, dhw, dhp)
			if !first {
				h.Free(hp)
			}
		}
	}
}
