package model

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// TestGPUMiscLayersMatchCPU trains the MLPerf-form model (Cast rounding to
// binary16, Head/Body/Tail, two-top Interaction) and the DIN-like model
// (FusedReshapeConcat(General), MLP, PReLU_Dice) for 30 SGD steps on the
// GPU and on the CPU: every step's loss agrees within 1e-3 relative.
func TestGPUMiscLayersMatchCPU(t *testing.T) {
	g := gpuOrSkip(t, gpu.Options{})
	for name, cfg := range map[string]*graph.Config{"mlperf": mlperfModel(), "din-like": dinLikeModel()} {
		t.Run(name, func(t *testing.T) {
			slots := smallSlots
			if name == "din-like" {
				slots = dinSlots
			}
			const batch, steps = 512, 30
			data := newPlanted(5, batch*steps, 4, slots)
			opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
			c, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := Options{BatchSize: batch, Seed: 7, Optimizer: opt, MixedPrecision: true}
			lc := miscLosses(t, cfg, c, o, data, steps)
			lg := miscLosses(t, cfg, g, o, data, steps)
			for i := range lc {
				if d := math.Abs(lg[i]-lc[i]) / math.Abs(lc[i]); !(d <= 1e-3) {
					t.Errorf("step %d: GPU loss %.7f, CPU %.7f (relative %.2e)", i+1, lg[i], lc[i], d)
				}
			}
			t.Logf("%s: loss %.5f → %.5f", name, lc[0], lc[steps-1])
		})
	}
}

func miscLosses(t *testing.T, cfg *graph.Config, be tensor.Backend, o Options, data *planted, steps int) []float64 {
	t.Helper()
	m, err := Build(cfg, be, o)
	if err != nil {
		t.Fatal(err)
	}
	r := data.reader(o.BatchSize)
	b, err := formats.NewBatch(r.Schema(), o.BatchSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for i := 0; i < steps; i++ {
		if _, err := r.Read(b); err != nil && i < steps-1 {
			t.Fatal(err)
		}
		if err := m.TrainStep(b); err != nil {
			t.Fatalf("%s step %d: %v", be.Name(), i+1, err)
		}
		l, err := m.Loss()
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	return losses
}
