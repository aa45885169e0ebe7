package model

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// TestGPUAlgoSearchFirstStep: with the cuBLASLt algorithm search (the
// default, algorithm_search true) the first training step of the reference
// DLRM and DCNv2 searches every GEMM descriptor the step has, and the steps
// after it search nothing — what a CUDA graph captured after the first
// eager step relies on. Losses match a backend without the search
// (algorithm_search false) step by step within the TF32 tolerance, with the
// fused InnerProduct kernels and without.
func TestGPUAlgoSearchFirstStep(t *testing.T) {
	gpuOrSkip(t, gpu.Options{})
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 5000
	}
	const batch, steps, tol = 2048, 6, 5e-3
	data := newPlanted(11, batch*steps, 13, sizes)
	for _, name := range []string{"dlrm", "dcnv2"} {
		for _, fused := range []bool{false, true} {
			mode := "unfused"
			if fused {
				mode = "fused"
			}
			t.Run(name+"/"+mode, func(t *testing.T) {
				opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.01}
				cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 13, SlotSizes: sizes, Optimizer: opt})
				if err != nil {
					t.Fatal(err)
				}
				srch := gpuOrSkip(t, gpu.Options{Math: cuda.TF32, Fused: fused})
				plain := gpuOrSkip(t, gpu.Options{Math: cuda.TF32, Fused: fused, NoAlgorithmSearch: true})
				m, err := Build(cfg, srch, Options{BatchSize: batch, Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				r := data.reader(batch)
				b, err := formats.NewBatch(r.Schema(), batch, nil)
				if err != nil {
					t.Fatal(err)
				}
				var ls []float64
				var first cuda.AlgoSearchStats
				for i := 0; i < steps; i++ {
					if _, err := r.Read(b); err != nil && i < steps-1 {
						t.Fatal(err)
					}
					if err := m.TrainStep(b); err != nil {
						t.Fatalf("step %d: %v", i+1, err)
					}
					l, err := m.Loss()
					if err != nil {
						t.Fatal(err)
					}
					ls = append(ls, l)
					st := srch.AlgoSearch()
					if i == 0 {
						first = st
						if st.Descriptors < 6 || st.Timed == 0 || st.Deferred != 0 {
							t.Fatalf("first step: %v (want every GEMM descriptor searched)", st)
						}
						t.Logf("first step: %v", st)
					} else if st != first {
						t.Errorf("step %d searched again: %v → %v", i+1, first, st)
					}
				}
				lp := trainLosses(t, cfg, plain, data, batch, steps)
				if st := plain.AlgoSearch(); st != (cuda.AlgoSearchStats{}) {
					t.Errorf("algorithm_search false searched: %v", st)
				}
				worst := 0.0
				for i := range lp {
					d := math.Abs(ls[i]-lp[i]) / math.Abs(lp[i])
					if !(d <= tol) {
						t.Errorf("step %d: searched loss %.7f, unsearched %.7f (relative %.2e)", i+1, ls[i], lp[i], d)
					}
					worst = max(worst, d)
				}
				t.Logf("%s %s: loss %.5f → %.5f, worst relative difference searched/unsearched %.2e", name, mode, lp[0], lp[steps-1], worst)
			})
		}
	}
}
