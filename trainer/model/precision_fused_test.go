package model

import (
	"testing"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// TestHalfFusedBiasCopies: a bf16 model on a backend with fused kernels
// (tensor.FusedReference over the half-storing fake) gives every half
// InnerProduct's bias a half operand copy, which the model refreshes with
// the weights' copies — once after Build, again after each update and each
// load — while the float32 master is what the optimizer and the checkpoint
// see; float32 layers' biases have none.
func TestHalfFusedBiasCopies(t *testing.T) {
	cfg, pl := planned(t, "dlrm", graph.BF16)
	hf := newHalfFake(t)
	ref := tensor.NewFusedReference(hf)
	be := fusedHalf{hf.Backend, ref, hf}
	m, err := Build(cfg, be, Options{BatchSize: 16, Seed: 1, Precision: graph.BF16})
	if err != nil {
		t.Fatal(err)
	}
	var copies []tensor.Tensor
	for i, l := range m.dense {
		if u, ok := l.(interface{ Unwrap() layers.Layer }); ok {
			l = u.Unwrap()
		}
		ip, ok := l.(*layers.InnerProduct)
		if !ok {
			continue
		}
		b := ip.B
		if b.Half.IsZero() != !pl.Half[i] {
			t.Errorf("layer %d: bias copy %v in a half layer %v", i, !b.Half.IsZero(), pl.Half[i])
		}
		if _, half := hf.half[b.Value.Buf]; half {
			t.Errorf("layer %d: the bias master is half", i)
		}
		if !b.Half.IsZero() {
			copies = append(copies, b.Half)
		}
	}
	if len(copies) == 0 {
		t.Fatal("no bias has a half copy")
	}
	written := func(when string, want int) {
		t.Helper()
		for _, c := range copies {
			if n := hf.converts[c.Buf]; n != want {
				t.Errorf("%s: a bias copy written %d times, want %d", when, n, want)
			}
		}
	}
	written("after Build", 1)
	if err := trainSteps(m, 1); err != nil {
		t.Fatal(err)
	}
	written("after a step", 2)
	files := Files{Dense: t.TempDir() + "/dense.model"}
	if err := m.SaveFiles(files); err != nil {
		t.Fatal(err)
	}
	if err := m.LoadFiles(files); err != nil {
		t.Fatal(err)
	}
	written("after LoadFiles", 3)
	if ref.Calls["GemmBiasReLUMask"] == 0 || ref.Calls["GemmDReLUBgrad"] == 0 {
		t.Errorf("fused calls %v", ref.Calls)
	}
}

// fusedHalf is the CPU backend (its optional interfaces) with the reference
// fused kernels over the half-storing fake, whose Alloc and Convert it
// uses.
type fusedHalf struct {
	*cpu.Backend
	*tensor.FusedReference
	hf *halfFake
}

func (f fusedHalf) Alloc(dt tensor.DType, shape ...int) tensor.Tensor {
	return f.hf.Alloc(dt, shape...)
}
func (f fusedHalf) Convert(dst, src tensor.Tensor) { f.hf.Convert(dst, src) }
func (f fusedHalf) Sync() error                    { return f.FusedReference.Sync() }
func (f fusedHalf) Download(dst any, src tensor.Tensor) error {
	return f.FusedReference.Download(dst, src)
}
