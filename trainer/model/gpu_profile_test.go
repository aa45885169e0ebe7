package model

import (
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// TestGPUProfile: on the GPU a profile is timed by CUDA events: through
// the pipeline and on the resident batch it has a row per embedding and
// dense layer (and the pipeline's rows), every InnerProduct and the
// embedding take forward, backward and update time, the GEMM layers have
// a TFLOP/s figure, the spans lie within the measured wall time and cover
// most of it, and the pipeline's staging copies are timed on the copy
// stream.
func TestGPUProfile(t *testing.T) {
	be := gpuOrSkip(t, gpu.Options{})
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 2000
	}
	const batch = 2048
	data := newPlanted(3, 4*batch+100, 13, sizes) // 4 full batches a pass
	opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 16, Width: 1.0 / 4, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	open := func() (formats.Reader, error) { return data.reader(batch), nil }
	pr, err := m.ProfileTrain(open, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := formats.NewBatch(&data.schema, batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := data.reader(batch).Read(b); n != batch {
		t.Fatal(n, err)
	}
	rp, err := m.ProfileResident(b, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Profile{"pipeline": pr, "resident": rp} {
		extra := 2
		if name == "pipeline" {
			extra = 3
		}
		if !p.DeviceTimed || p.Steps != 10 || len(p.Layers) != len(m.embs)+len(m.dense)+extra {
			t.Fatalf("%s: device timed %v, %d steps, %d rows", name, p.DeviceTimed, p.Steps, len(p.Layers))
		}
		var share float64
		for i, r := range p.Layers {
			share += r.Share
			work := i < len(m.embs) || (i < len(m.embs)+len(m.dense) && m.Graph.Layers[i-len(m.embs)].Type == graph.InnerProduct)
			if work && (r.FwdMs <= 0 || r.BwdMs <= 0 || r.UpdateMs <= 0) {
				t.Errorf("%s: row %s %s: %v %v %v ms", name, r.Layer, r.Type, r.FwdMs, r.BwdMs, r.UpdateMs)
			}
			if r.Type == graph.InnerProduct && r.TFLOPS <= 0 {
				t.Errorf("%s: row %s: %v TFLOP/s", name, r.Layer, r.TFLOPS)
			}
			t.Logf("%s: %-24s %-36s %.3f %.3f %.3f ms %.1f%% %.2f TFLOP/s, host %.3f ms", name, r.Layer, r.Type, r.FwdMs, r.BwdMs, r.UpdateMs, 100*r.Share, r.TFLOPS, r.HostMs)
		}
		if share < 0.8 || p.SpanMillis > 1.02*p.StepMillis+0.05 {
			t.Errorf("%s: the spans (%.3f ms, %.1f%%) against the measured %.3f ms step", name, p.SpanMillis, 100*share, p.StepMillis)
		}
	}
	if q := pr.Pipeline; q == nil || q.CopyMs <= 0 || q.Batches < 10 {
		t.Errorf("pipeline %+v", pr.Pipeline)
	} else {
		t.Logf("pipeline: %+v", *q)
	}
}
