package model

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// TestGPUParallelWorld1: NCCL with one rank on GPU 0 runs the sharded
// step (its exchange forced: the rank's sample block, the embedding
// reduce-scatter and all-to-all, the gradient all-reduce, the loss
// all-reduce and the gathered predictions, all real NCCL calls) and
// trains DLRM and WDL (a DistributedSlot and a LocalizedSlot embedding,
// Dropout) like the single-device step on the same GPU within 1e-5 over
// 20 steps, predictions included (issue #19 acceptance 2). Run it on
// the GPU machine: go test ./trainer/model -run TestGPUParallelWorld1.
func TestGPUParallelWorld1(t *testing.T) {
	be := gpuOrSkip(t, gpu.Options{})
	g, err := collective.NewLocalGroup(1, collective.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nccl, err := collective.NewNCCL(g, []*gpu.Backend{be})
	if err != nil {
		t.Fatal(err)
	}
	defer nccl[0].Close()
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 2000
	}
	const batch, steps = 1024, 20
	data := newPlanted(3, batch*(steps+1), 13, sizes)
	for _, name := range []string{"dlrm", "wdl"} {
		t.Run(name, func(t *testing.T) {
			opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
			cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 16, Width: 1.0 / 8, Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			if name == "wdl" {
				cfg.Graph.Embeddings[1].Type = graph.LocalizedHash
			}
			run := func(p *Parallel) ([]float64, []float32) {
				m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 9, Parallel: p})
				if err != nil {
					t.Fatal(err)
				}
				if (m.par != nil) != (p != nil) {
					t.Fatalf("sharded step %v, want %v", m.par != nil, p != nil)
				}
				losses := trainLossesOf(t, m, data, batch, steps)
				pred, err := m.PredictSamples(nil, data.reader(batch), int64(batch))
				if err != nil {
					t.Fatal(err)
				}
				return losses, pred
			}
			want, wantPred := run(nil)
			got, gotPred := run(&Parallel{Comm: nccl[0], exchange: true})
			for i := range want {
				if d := math.Abs(got[i]-want[i]) / math.Abs(want[i]); !(d <= 1e-5) {
					t.Errorf("step %d: loss %.7f through NCCL, %.7f single-device (relative %.2e)", i+1, got[i], want[i], d)
				}
			}
			for i := range wantPred {
				if d := math.Abs(float64(gotPred[i] - wantPred[i])); !(d <= 1e-5) {
					t.Fatalf("prediction %d: %v through NCCL, %v single-device", i, gotPred[i], wantPred[i])
				}
			}
			t.Logf("%s: %d steps, loss %.5f → %.5f", name, steps, want[0], want[steps-1])
		})
	}
}
