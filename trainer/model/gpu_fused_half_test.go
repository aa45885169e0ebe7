package model

import (
	"math"
	"os"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// TestGPUHalfFusedDLRM: a DLRM-shaped model (bottom MLP 64-32-16, top MLP
// 128-128-64-32-1, every width a multiple of 8) trains 20 steps in bf16
// and in fp16 (scaler 1024) as CUDA graphs with the fused InnerProduct
// kernels on and off: the losses agree within half tolerance, and the
// fused run took the half epilogues — no RELU_AUX_BIAS forward fell back,
// DRELU_BGRAD ran, the weight gradients ran as the plain searched GEMM
// (gpu.Options.HalfBgradEpilogue off), and the only fallbacks allowed are
// the 1-wide output layer's (one per step and operation, its leading
// dimension 2 bytes).
//
//	model.test -test.run 'GPUHalfFused' -test.v
func TestGPUHalfFusedDLRM(t *testing.T) {
	const steps, batch = 20, 512
	gpuOrSkip(t, gpu.Options{}) // skip before building
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 16, SlotSizes: smallSlots, VecSize: 16, Width: 1.0 / 8})
	if err != nil {
		t.Fatal(err)
	}
	run := func(p graph.Precision, scale float64, fused bool) ([]float64, gpu.FusedStats, GraphStats) {
		t.Helper()
		be := gpuOrSkip(t, gpu.Options{Math: GEMMMath(p), Fused: fused})
		if be.FusesDense() != fused || os.Getenv("CTRKIT_HALF_BGRAD_EPILOGUE") != "" {
			t.Skipf("CTRKIT_FUSED or CTRKIT_HALF_BGRAD_EPILOGUE overrides the options")
		}
		m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 3, Precision: p, LossScale: scale, MixedPrecision: p == graph.FP16, CUDAGraph: true})
		if err != nil {
			t.Fatal(err)
		}
		losses := plantedLosses(t, m, newPlanted(9, batch*steps, 16, smallSlots), batch, steps)
		if n, err := m.SkippedSteps(); err != nil || n != 0 {
			t.Errorf("%s fused %v: %d steps skipped (%v)", p, fused, n, err)
		}
		return losses, be.FusedStats(), m.GraphStats()
	}
	for _, c := range []struct {
		p          graph.Precision
		scale, tol float64
	}{{graph.BF16, 0, 0.03}, {graph.FP16, 1024, 0.01}} {
		t.Run(c.p.String(), func(t *testing.T) {
			plain, _, _ := run(c.p, c.scale, false)
			fused, st, gs := run(c.p, c.scale, true)
			worst := 0.0
			for i := range fused {
				if math.IsNaN(fused[i]) || math.IsInf(fused[i], 0) {
					t.Fatalf("fused step %d loss %v", i+1, fused[i])
				}
				worst = math.Max(worst, math.Abs(fused[i]-plain[i]))
			}
			t.Logf("%s: fused losses %.5f → %.5f, plain %.5f → %.5f, worst difference %.2g; fused calls ran %v, fell back %v, half bias gradients %d; graphs %+v",
				c.p, fused[0], fused[steps-1], plain[0], plain[steps-1], worst, st.Ran, st.Fallback, st.HalfBiasGrad, gs)
			if worst > c.tol {
				t.Errorf("fused and plain losses differ by up to %.3g (tolerance %g)", worst, c.tol)
			}
			if gs.Graphed == 0 {
				t.Errorf("no fused step ran as a CUDA graph: %+v", gs)
			}
			// The ReLU-mask chain is refused in half (gpu.halfMaskRefused):
			// the layers do not chain, so it is never called; the forward
			// epilogue (RELU_BIAS, the half bias copy) runs instead.
			if st.Ran["gemm_bias_relu_mask"]+st.Fallback["gemm_bias_relu_mask"]+st.Ran["gemm_drelu_bgrad"]+st.Fallback["gemm_drelu_bgrad"] != 0 {
				t.Errorf("the half ReLU-mask chain was called: %v, %v", st.Ran, st.Fallback)
			}
			if st.Ran["gemm_bias_act"] == 0 {
				t.Errorf("the half RELU_BIAS forward never ran (fell back %d times)", st.Fallback["gemm_bias_act"])
			}
			// The weight gradients of half operands run as the plain
			// searched GEMM (gpu.Options.HalfBgradEpilogue off).
			if st.Plain["gemm_bgrad"] == 0 || st.Ran["gemm_bgrad"] != 0 {
				t.Errorf("half weight gradients: %d plain, %d BGRADA epilogue GEMMs (want all plain)", st.Plain["gemm_bgrad"], st.Ran["gemm_bgrad"])
			}
			for _, op := range []string{"gemm_bias_act"} {
				if st.Fallback[op] > steps {
					t.Errorf("%s fell back %d times in %d steps (more than the 1-wide output layer's)", op, st.Fallback[op], steps)
				}
			}
		})
	}
}
