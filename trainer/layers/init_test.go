package layers

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

func moments(v []float64) (mean, std, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range v {
		mean += x
		lo, hi = min(lo, x), max(hi, x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v))), lo, hi
}

// TestInitializers checks SPEC §8's initializers statistically.
func TestInitializers(t *testing.T) {
	c := newCtx(t, 21)
	in := c.Blob(2, 300)
	fc, _ := NewInnerProduct(c, in, 200, tensor.Identity)
	if _, s, _, _ := moments(f64(fc.W.Value)); math.Abs(s/InnerProductSigma(300, 200)-1) > 0.02 {
		t.Errorf("W std %v, want %v", s, InnerProductSigma(300, 200))
	}
	if want := math.Sqrt(1/250.0) / 0.8796; math.Abs(InnerProductSigma(300, 200)-want) > 1e-15 {
		t.Errorf("sigma formula")
	}
	if _, s, _, _ := moments(f64(fc.B.Value)); math.Abs(s/math.Sqrt(1/200.0)-1) > 0.15 {
		t.Errorf("bias std %v, want %v", s, math.Sqrt(1/200.0))
	}
	keys := &SparseInput{Keys: c.BE.Alloc(tensor.Int64, 1), Offsets: c.BE.Alloc(tensor.Int32, 2)}
	h, _ := NewSparseEmbedding(c, EmbeddingConfig{Kind: DistributedHash, VecSize: 8, Slots: 1, WorkspaceMB: 0.1, MaxNNZ: 1}, keys, 1)
	if m, _, lo, hi := moments(f64(h.Table)); lo < -0.05 || hi > 0.05 || hi < 0.049 || lo > -0.049 || math.Abs(m) > 0.002 {
		t.Errorf("hash embedding init range [%v, %v]", lo, hi)
	}
	sizes := []int64{4, 400}
	oh, _ := NewSparseEmbedding(c, EmbeddingConfig{Kind: LocalizedOneHot, VecSize: 8, Slots: 2, SlotSizes: sizes, MaxNNZ: 1}, &SparseInput{Keys: keys.Keys, Offsets: c.BE.Alloc(tensor.Int32, 3)}, 1)
	tab := f64(oh.Table)
	for s, rng := range [][2]int{{0, 4 * 8}, {4 * 8, 404 * 8}} {
		a := math.Sqrt(1 / float64(sizes[s]))
		_, _, lo, hi := moments(tab[rng[0]:rng[1]])
		if lo < -a || hi > a || hi < 0.8*a {
			t.Errorf("slot %d init [%v, %v], want ±%v", s, lo, hi, a)
		}
	}
}
