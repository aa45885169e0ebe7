package model

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// halfRun trains name's reference model steps steps on the GPU in
// precision p (CUDA graphs on) and returns every step's loss, the model
// and the steps that ran as a graph.
func halfRun(t *testing.T, name string, p graph.Precision, scale float64, steps int) ([]float64, *Model) {
	t.Helper()
	be := gpuOrSkip(t, gpu.Options{Math: GEMMMath(p)})
	cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 16, Width: 1.0 / 8})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 512
	m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 3, Precision: p, LossScale: scale, MixedPrecision: p == graph.FP16, CUDAGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	losses := plantedLosses(t, m, newPlanted(9, batch*steps, 4, smallSlots), batch, steps)
	return losses, m
}

// TestGPUHalfModels: DLRM, DCNv2, WDL, DeepFM and DCN train 20 steps in
// fp16 (scaler 1024) and bf16 as CUDA graphs with every loss finite and
// within a tolerance of the fp32 run's (half activations: fp16 rounds at
// 2^-11, bf16 at 2^-8), and no fp16 step overflows.
func TestGPUHalfModels(t *testing.T) {
	const steps = 20
	for _, name := range graph.ReferenceModels {
		t.Run(name, func(t *testing.T) {
			ref, _ := halfRun(t, name, graph.FP32, 0, steps)
			for _, c := range []struct {
				p     graph.Precision
				scale float64
				tol   float64
			}{{graph.FP16, 1024, 0.01}, {graph.BF16, 0, 0.03}} {
				got, m := halfRun(t, name, c.p, c.scale, steps)
				worst := 0.0
				for i := range got {
					if math.IsNaN(got[i]) || math.IsInf(got[i], 0) {
						t.Fatalf("%s: step %d loss %v", c.p, i+1, got[i])
					}
					worst = math.Max(worst, math.Abs(got[i]-ref[i]))
				}
				t.Logf("%s %s: losses %.5f → %.5f (fp32 %.5f → %.5f), worst difference %.2g; %s", name, c.p, got[0], got[steps-1], ref[0], ref[steps-1], worst, m.PrecisionSummary())
				if worst > c.tol {
					t.Errorf("%s: losses differ from fp32 by up to %.3g (tolerance %g)", c.p, worst, c.tol)
				}
				if gs := m.GraphStats(); gs.Graphed == 0 {
					t.Errorf("%s: no step ran as a CUDA graph: %+v", c.p, gs)
				}
				if n, err := m.SkippedSteps(); err != nil || n != 0 {
					t.Errorf("%s: %d steps skipped (%v)", c.p, n, err)
				}
			}
		})
	}
}

// TestGPUHalfOverflow: fp16 with a loss scale that overflows every
// gradient (2^40) skips every step, CUDA graphs included: the weights and
// the tables stay as built; Fit stops naming the scale and the key.
func TestGPUHalfOverflow(t *testing.T) {
	const scale = 1 << 40
	before := func(m *Model) []float32 {
		var all []float32
		for _, p := range m.params {
			v, err := m.download(p.Value)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, v...)
		}
		for _, e := range m.embs {
			v, err := m.download(e.layer.Table)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, v...)
		}
		return all
	}
	gpuOrSkip(t, gpu.Options{})                       // skip before building
	_, m0 := halfRun(t, "dlrm", graph.FP16, scale, 1) // built and stepped once
	w0 := before(m0)
	for range 12 { // past the graph's warm-up and capture
		if err := trainSteps(m0, 1); err != nil {
			t.Fatal(err)
		}
	}
	n, err := m0.SkippedSteps()
	if err != nil || n != 13 {
		t.Errorf("%d of 13 steps skipped (%v)", n, err)
	}
	if gs := m0.GraphStats(); gs.Graphed == 0 {
		t.Errorf("no skipped step ran as a graph: %+v", gs)
	}
	w1 := before(m0)
	dense := 0
	for _, p := range m0.params {
		dense += p.Value.Len()
	}
	vec := m0.embs[0].layer.Table.Cols()
	for i := range w0 {
		if math.Float32bits(w0[i]) == math.Float32bits(w1[i]) {
			continue
		}
		// A key first seen in a skipped step is still inserted into the
		// hash table by the forward pass, its row initialised (not
		// updated): a table row all zero before may change.
		if i >= dense {
			row := (i - dense) / vec * vec
			zero := true
			for _, v := range w0[dense+row : dense+row+vec] {
				zero = zero && v == 0
			}
			if zero {
				continue
			}
		}
		t.Fatalf("weight %d changed in skipped steps: %v → %v", i, w0[i], w1[i])
	}
	// Fit: the run stops at the first check past guardRun skipped steps.
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 16, Width: 1.0 / 8})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, gpuOrSkip(t, gpu.Options{Math: GEMMMath(graph.FP16)}), Options{BatchSize: 256, Seed: 3, Precision: graph.FP16, LossScale: scale, CUDAGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	data := newPlanted(1, 256*64, 4, smallSlots)
	var log strings.Builder
	_, err = m.Fit(context.Background(), FitOptions{MaxIter: 60, Display: 10, Log: &log, OpenTrain: func() (formats.Reader, error) { return data.reader(256), nil }})
	want := fmt.Sprintf("at loss scale %g: lower the solver's scaler (mixed_precision, --loss-scale)", float64(scale))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Fit: %v, want %q\n%s", err, want, log.String())
	}
}
