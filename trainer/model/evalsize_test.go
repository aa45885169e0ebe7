package model

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/graph"
)

// TestEvalBatchSize: batchsize_eval decides how many samples an evaluation
// covers (max_eval_batches × batchsize_eval), whatever the network's batch
// size, and the metrics are those of exactly those samples.
func TestEvalBatchSize(t *testing.T) {
	if got := EvalSamples(3, 100, 64); got != 300 {
		t.Fatalf("EvalSamples(3, 100, 64) = %d", got)
	}
	if got := EvalSamples(3, 0, 64); got != 192 {
		t.Fatalf("EvalSamples(3, 0, 64) = %d", got)
	}
	eval := newPlanted(2, 1000, 4, smallSlots)
	cfg, err := graph.Reference("dcn", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	// 300 samples = 4 network batches of 64 and 44 of a fifth.
	got, err := m.EvaluateSamples(eval.reader(64), 300)
	if err != nil {
		t.Fatal(err)
	}
	if got.Samples != 300 {
		t.Fatalf("evaluated %d samples, want 300", got.Samples)
	}
	scores, err := m.PredictSamples(nil, eval.reader(64), 300)
	if err != nil || len(scores) != 300 {
		t.Fatalf("%d predictions, %v", len(scores), err)
	}
	all, err := m.PredictSamples(nil, eval.reader(64), 0)
	if err != nil || len(all) != 1000 {
		t.Fatalf("%d predictions, %v", len(all), err)
	}
	for i := range scores {
		if scores[i] != all[i] {
			t.Fatalf("prediction %d differs when limited: %v vs %v", i, scores[i], all[i])
		}
	}
	if math.IsNaN(got.AUC) || got.Loss <= 0 {
		t.Fatalf("result %+v", got)
	}
}
