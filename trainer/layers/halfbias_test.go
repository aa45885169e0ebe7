package layers

import (
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// halfStore is the CPU backend storing half tensors as float32 (the CPU
// has no half dtype): enough for the layers' bookkeeping of half copies.
type halfStore struct{ *cpu.Backend }

func (h halfStore) Alloc(dt tensor.DType, shape ...int) tensor.Tensor {
	if dt.IsHalf() {
		dt = tensor.Float32
	}
	return h.Backend.Alloc(dt, shape...)
}

// biasSpy is a fused backend (tensor.FusedReference on halfStore) that
// records the bias each fused forward is given, and counts conversions.
type biasSpy struct {
	*tensor.FusedReference
	biases   []tensor.Storage // GemmBiasReLUMask's and GemmBiasAct's bias, in call order
	converts map[tensor.Storage]int
}

func (s *biasSpy) GemmBiasReLUMask(x, w, bias, y, mask tensor.Tensor) bool {
	s.biases = append(s.biases, bias.Buf)
	return s.FusedReference.GemmBiasReLUMask(x, w, bias, y, mask)
}

// GemmBiasAct implements FusedGemm: it records and falls back.
func (s *biasSpy) GemmBiasAct(_ tensor.Activation, _, _, bias, _ tensor.Tensor) bool {
	s.biases = append(s.biases, bias.Buf)
	return false
}

func (s *biasSpy) Convert(dst, src tensor.Tensor) {
	s.converts[dst.Buf]++
	s.FusedReference.Convert(dst, src)
}

func newBiasSpy(t *testing.T, fused bool) *biasSpy {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := tensor.NewFusedReference(halfStore{be})
	ref.Off = !fused
	return &biasSpy{FusedReference: ref, converts: map[tensor.Storage]int{}}
}

// TestHalfBiasCopy: in a half region on a backend with fused kernels, an
// InnerProduct's (and an MLP's) bias gets a half operand copy, which
// RefreshHalf rewrites from the float32 master and the fused forwards
// read; the float32 master stays the parameter (Value, Grad). Without
// fused kernels, or outside a half region, there is none and every path
// reads the master.
func TestHalfBiasCopy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fused, half bool
	}{{"fused half", true, true}, {"plain half", false, true}, {"fused float32", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			be := newBiasSpy(t, tc.fused)
			c := NewCtx(be, tensor.Float32, 1)
			if tc.half {
				c.Act = tensor.BFloat16
			}
			in := c.Blob(4, 8)
			l1, err := NewInnerProduct(c, in, 16, tensor.ReLU)
			if err != nil {
				t.Fatal(err)
			}
			l2, err := NewInnerProduct(c, l1.out, 8, tensor.Identity)
			if err != nil {
				t.Fatal(err)
			}
			mlp, err := NewMLP(c, in, []int{16, 8}, []bool{true, false}, []tensor.Activation{tensor.ReLU, tensor.Identity})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.fused && tc.half
			for _, p := range []Param{l1.B, l2.B, mlp.B[0]} {
				if p.Half.IsZero() == want || p.Value.DType != tensor.Float32 || p.Grad.DType != tensor.Float32 {
					t.Fatalf("bias %+v: half copy %v, want %v; master and gradient float32", p, !p.Half.IsZero(), want)
				}
				if want && p.Half.Buf == p.Value.Buf {
					t.Fatal("the bias's half copy is its master")
				}
			}
			if !mlp.B[1].Half.IsZero() {
				t.Error("an MLP sub-layer without a bias has a half bias copy")
			}
			if chained := l2.ChainReLU(l1); chained != tc.fused {
				t.Fatalf("ChainReLU %v", chained)
			}

			// RefreshHalf rewrites the copies from the masters.
			be.Upload(l1.B.Value, []float32{0.5, -1, 2, 0, 0.25, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3})
			ps := append(l1.Params(), l2.Params()...)
			copies := 0
			for _, p := range ps {
				if !p.Half.IsZero() {
					copies++
				}
			}
			if n := RefreshHalf(be, ps); n != copies {
				t.Fatalf("RefreshHalf rewrote %d of %d copies", n, copies)
			}
			if want {
				if be.converts[l1.B.Half.Buf] != 1 || be.converts[l2.B.Half.Buf] != 1 {
					t.Errorf("bias copies converted %d and %d times", be.converts[l1.B.Half.Buf], be.converts[l2.B.Half.Buf])
				}
				got := make([]float32, 16)
				if err := be.Download(got, l1.B.Half); err != nil || got[0] != 0.5 || got[15] != 3 {
					t.Errorf("bias copy %v after RefreshHalf (%v)", got, err)
				}
			}

			// The fused forwards read the copy; the plain path the master.
			l1.Forward(Pass{Training: true})
			l2.Forward(Pass{Training: true})
			b1, b2 := l1.B.Value.Buf, l2.B.Value.Buf
			if want {
				b1, b2 = l1.B.Half.Buf, l2.B.Half.Buf
			}
			wantBiases := []tensor.Storage{b1, b2} // l1: GemmBiasReLUMask (chained) or GemmBiasAct; l2: GemmBiasAct
			if !slices.Equal(be.biases, wantBiases) {
				t.Errorf("fused forwards read biases %v, want %v", be.biases, wantBiases)
			}
			if err := be.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
