package model

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// TestGPUMultiCrossEntropyMasked: MultiCrossEntropyLoss with missing labels
// (−1, masked as in HugeCTR's loss.cu) trains on the GPU as on the CPU:
// every one of 20 SGD steps' losses agrees within 1e-3 relative, and the
// GPU's loss of the first batch equals the host formula over the unmasked
// entries (divided by all B·T).
func TestGPUMultiCrossEntropyMasked(t *testing.T) {
	g := gpuOrSkip(t, gpu.Options{})
	const batch, steps = 256, 20
	data := newPlanted(4, batch*steps, 4, smallSlots).twoLabels()
	for i := 1; i < len(data.labels); i += 6 {
		data.labels[i] = -1
	}
	for i := 0; i < len(data.labels); i += 10 {
		data.labels[i] = -1
	}
	cfg := lossVariant(t, "MultiCE")
	cfg.Optimizer = &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lc := trainLosses(t, cfg, c, data, batch, steps)
	lg := trainLosses(t, cfg, g, data, batch, steps)
	for i := range lc {
		if d := math.Abs(lg[i]-lc[i]) / math.Abs(lc[i]); !(d <= 1e-3) {
			t.Errorf("step %d: GPU loss %.7f, CPU %.7f (relative %.2e)", i+1, lg[i], lc[i], d)
		}
	}

	m, err := Build(cfg, g, Options{BatchSize: batch, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	one, err := m.Evaluate(data.reader(batch), 1)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := m.Loss()
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.PredictSamples(nil, data.reader(batch), batch)
	if err != nil {
		t.Fatal(err)
	}
	w := [2]float64{1, 3}
	var want float64
	for i, pv := range p {
		y := float64(data.labels[i])
		if y < -0.5 {
			continue
		}
		q := math.Min(math.Max(float64(pv), 1e-7), 1-1e-7)
		want -= w[i%2] * (y*math.Log(q) + (1-y)*math.Log(1-q))
	}
	want /= float64(len(p))
	if !(math.Abs(one.Loss-want) <= 1e-4*want) || !(math.Abs(dev-want) <= 1e-4*want) {
		t.Errorf("GPU eval loss %.7f, loss layer %.7f, want %.7f (masked entries add 0)", one.Loss, dev, want)
	}
}
