package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// multiTaskJSON is a shared-bottom two-task model: labels "click" and
// "buy" (given in that order: the data's columns are alphabetical, buy
// first), one hash embedding, a shared MLP and one tower and BCE loss per
// task. %d: dense_dim, slots; %s: the slot size array.
const multiTaskJSON = `{"layers": [
  {"name": "data", "type": "Data",
   "label": {"top": ["click", "buy"], "label_dim": [1, 1]},
   "dense": {"top": "dense", "dense_dim": %d},
   "sparse": [{"top": "data1", "slot_num": %d, "is_fixed_length": true, "nnz_per_slot": 1}]},
  {"name": "emb", "type": "LocalizedSlotSparseEmbeddingOneHot", "bottom": "data1", "top": "emb",
   "sparse_embedding_hparam": {"embedding_vec_size": 8, "combiner": "sum", "slot_size_array": [%s]}},
  {"name": "reshape1", "type": "Reshape", "bottom": "emb", "top": "reshape1", "leading_dim": %d},
  {"name": "concat1", "type": "Concat", "bottom": ["reshape1", "dense"], "top": "concat1"},
  {"name": "fc1", "type": "InnerProduct", "bottom": "concat1", "top": "fc1", "fc_param": {"num_output": 64}},
  {"name": "relu1", "type": "ReLU", "bottom": "fc1", "top": "relu1"},
  {"name": "slice1", "type": "Slice", "bottom": "relu1", "top": ["s_click", "s_buy"], "ranges": [[0, 64], [0, 64]]},
  {"name": "fc_click", "type": "InnerProduct", "bottom": "s_click", "top": "fc_click", "fc_param": {"num_output": 1}},
  {"name": "fc_buy", "type": "InnerProduct", "bottom": "s_buy", "top": "fc_buy", "fc_param": {"num_output": 1}},
  {"name": "loss_click", "type": "BinaryCrossEntropyLoss", "bottom": ["fc_click", "click"], "top": "loss_click"},
  {"name": "loss_buy", "type": "BinaryCrossEntropyLoss", "bottom": ["fc_buy", "buy"], "top": "loss_buy"}
]}`

func multiTaskConfig(t *testing.T, dense int, sizes []int64) *graph.Config {
	t.Helper()
	var ss []string
	for _, s := range sizes {
		ss = append(ss, fmt.Sprint(s))
	}
	js := fmt.Sprintf(multiTaskJSON, dense, len(sizes), strings.Join(ss, ", "), 8*len(sizes))
	cfg, err := graph.Read(strings.NewReader(js), "multitask.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMultiTaskPlanted is issue 17's acceptance 3: a two-task model (two
// labels, two BCE losses, loss weights 1 and 0.5) trained on planted data
// whose two label columns come from two hidden models reaches each task's
// planted AUC within 0.02.
func TestMultiTaskPlanted(t *testing.T) {
	dir := t.TempDir()
	p := datagen.DefaultParams()
	p.Format = datagen.Norm
	p.LabelDim, p.DenseDim, p.NumSlot = 2, 4, 8
	p.SlotSizeArray = []int64{40, 60, 20, 80, 30, 50, 10, 70}
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 8, 1, 8192
	p.Seed = 17
	res, err := datagen.Generate(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Norm keys are global: the one-hot embedding takes its slot offsets
	// off through the embedding's slot_size_array.
	cfg := multiTaskConfig(t, p.DenseDim, p.SlotSizeArray)
	opt := graph.DefaultOptimizer()
	opt.LearningRate = 0.01
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 256, Seed: 1, Optimizer: opt,
		LossWeights: map[string]float64{"click": 1, "buy": 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Tasks(); len(got) != 2 || got[0] != "click" || got[1] != "buy" {
		t.Fatalf("tasks %v", got)
	}
	train := Source{Format: dataset.Norm, Path: p.Source, Check: norm.CheckSum}
	eval := Source{Format: dataset.Norm, Path: p.EvalSource, Check: norm.CheckSum}
	if _, err := m.Fit(context.Background(), FitOptions{
		OpenTrain: func() (formats.Reader, error) { return m.Open(train) },
		NumEpochs: 2,
	}); err != nil {
		t.Fatal(err)
	}
	r, err := m.Open(eval)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := m.Evaluate(r, 0)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Tasks) != 2 {
		t.Fatalf("tasks %+v", ev.Tasks)
	}
	// Data columns are alphabetical: column 0 is buy, column 1 click.
	planted := map[string]float64{"buy": res.PlantedAUCs[0], "click": res.PlantedAUCs[1]}
	var wloss, mean float64
	for _, tk := range ev.Tasks {
		t.Logf("task %s (weight %g): AUC %.4f, planted %.4f, loss %.4f", tk.Label, tk.Weight, tk.AUC, planted[tk.Label], tk.Loss)
		if math.IsNaN(tk.AUC) || math.Abs(tk.AUC-planted[tk.Label]) > 0.02 {
			t.Errorf("task %s: AUC %.4f, planted %.4f", tk.Label, tk.AUC, planted[tk.Label])
		}
		wloss += tk.Weight * tk.Loss
		mean += tk.AUC / 2
	}
	if math.Abs(ev.Loss-wloss) > 1e-9 || math.Abs(ev.AUC-mean) > 1e-12 {
		t.Errorf("eval loss %v AUC %v; tasks' weighted loss %v, mean AUC %v", ev.Loss, ev.AUC, wloss, mean)
	}
	if m.PredictionWidth() != 2 {
		t.Errorf("prediction width %d", m.PredictionWidth())
	}
}

// TestMultiTaskLossWeights: the trained loss is Σ w·loss (here a task of
// weight 0 gets no gradient: its tower stays as initialized while the
// other trains), and a weight for a label no loss reads is refused.
func TestMultiTaskLossWeights(t *testing.T) {
	sizes := []int64{5, 7, 3}
	cfg := multiTaskConfig(t, 2, sizes)
	be := cpuBackend(t)
	if _, err := Build(cfg, be, Options{BatchSize: 8, LossWeights: map[string]float64{"like": 1}}); err == nil || !strings.Contains(err.Error(), `"like"`) || !strings.Contains(err.Error(), "click, buy") {
		t.Errorf("unknown label weight: %v", err)
	}
	if _, err := Build(cfg, be, Options{BatchSize: 8, LossWeights: map[string]float64{"buy": -1}}); err == nil {
		t.Error("negative loss weight accepted")
	}
	m, err := Build(cfg, be, Options{BatchSize: 8, Seed: 3, LossWeights: map[string]float64{"buy": 0}})
	if err != nil {
		t.Fatal(err)
	}
	b := multiTaskBatch(t, m, sizes)
	w0 := m.DenseWeights(t)
	if err := m.TrainStep(b); err != nil {
		t.Fatal(err)
	}
	w1 := m.DenseWeights(t)
	// Per-layer params in file order: fc1 W,b, fc_click W,b, fc_buy W,b.
	if eq(w0[2], w1[2]) || !eq(w0[4], w1[4]) || !eq(w0[5], w1[5]) {
		t.Errorf("weight 0 for buy: fc_click moved %v, fc_buy moved %v", !eq(w0[2], w1[2]), !eq(w0[4], w1[4]))
	}
	// The reported training loss is click's alone.
	loss, err := m.Loss()
	if err != nil {
		t.Fatal(err)
	}
	if !(loss > 0) {
		t.Errorf("loss %v", loss)
	}
}

func eq(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// multiTaskBatch is a batch of 8 samples for multiTaskConfig: labels
// alternating, keys global.
func multiTaskBatch(t *testing.T, m *Model, sizes []int64) *formats.Batch {
	t.Helper()
	s := m.Schema(formats.KeyI64)
	b, err := formats.NewBatch(&s, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	labels, dense, offsets, _, k64 := b.Full()
	pos := 0
	for i := 0; i < 8; i++ {
		labels[2*i], labels[2*i+1] = float32(i%2), float32(i/4)
		dense[2*i], dense[2*i+1] = float32(i)/8, 0.5
		var off int64
		for sl, n := range sizes {
			k64[pos] = off + int64(i)%n
			off += n
			pos++
			offsets[i*len(sizes)+sl+1] = int32(pos)
		}
	}
	b.SetLen(8)
	return b
}

// DenseWeights downloads every dense parameter (tests).
func (m *Model) DenseWeights(t *testing.T) [][]float32 {
	t.Helper()
	var ws [][]float32
	for _, p := range m.params {
		v := make([]float32, p.Value.Len())
		if err := m.be.Download(v, p.Value); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, v)
	}
	return ws
}

// TestMultiLabelRefusals: a loss reading a tensor that is not a label, and
// two losses on one label, are refused by name.
func TestMultiLabelRefusals(t *testing.T) {
	js := strings.Replace(fmt.Sprintf(multiTaskJSON, 2, 3, "5, 7, 3", 24), `"bottom": ["fc_buy", "buy"]`, `"bottom": ["fc_buy", "click"]`, 1)
	cfg, err := graph.Read(strings.NewReader(js), "two-on-one.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(cfg, cpuBackend(t), Options{BatchSize: 8})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `label "click"`) {
		t.Errorf("two losses on one label: %v", err)
	}
}

const inferenceJSON = `{"layers": [
  {"name": "data", "type": "Data", "label": {"top": "label", "label_dim": 1},
   "dense": {"top": "dense", "dense_dim": 2},
   "sparse": [{"top": "data1", "slot_num": 3, "is_fixed_length": true, "nnz_per_slot": 1}]},
  {"name": "emb", "type": "LocalizedSlotSparseEmbeddingOneHot", "bottom": "data1", "top": "emb",
   "sparse_embedding_hparam": {"embedding_vec_size": 4, "combiner": "sum", "slot_size_array": [5, 7, 3]}},
  {"name": "reshape1", "type": "Reshape", "bottom": "emb", "top": "reshape1", "leading_dim": 12},
  {"name": "concat1", "type": "Concat", "bottom": ["reshape1", "dense"], "top": "concat1"},
  {"name": "fc1", "type": "InnerProduct", "bottom": "concat1", "top": "fc1", "fc_param": {"num_output": 1}},
  {"name": "sigmoid", "type": "Sigmoid", "bottom": "fc1", "top": "sigmoid"}
]}`

// TestInferenceGraph: a graph without loss layer (ending in Sigmoid) builds,
// predicts probabilities (its own Sigmoid, not σ twice), evaluates (AUC,
// BCE of the probabilities) and refuses to train, naming what to do.
func TestInferenceGraph(t *testing.T) {
	cfg, err := graph.Read(strings.NewReader(inferenceJSON), "inference.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Inference() || m.PredictionWidth() != 1 {
		t.Fatalf("inference %v, width %d", m.Inference(), m.PredictionWidth())
	}
	sizes := []int64{5, 7, 3}
	s := m.Schema(formats.KeyI64)
	b, err := formats.NewBatch(&s, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	labels, dense, offsets, _, k64 := b.Full()
	pos := 0
	for i := 0; i < 8; i++ {
		labels[i] = float32(i % 2)
		dense[2*i], dense[2*i+1] = float32(i)/8, 0.5
		var off int64
		for sl, n := range sizes {
			k64[pos] = off + int64(i)%n
			off += n
			pos++
			offsets[i*len(sizes)+sl+1] = int32(pos)
		}
	}
	b.SetLen(8)
	if err := m.TrainStep(b); !errors.Is(err, errInference) || !strings.Contains(err.Error(), "no loss layer") {
		t.Errorf("TrainStep of an inference graph: %v", err)
	}
	scores := make([]float32, 8)
	x, err := m.forwardLogits(b, scores)
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, 8)
	if err := m.be.Download(logits, m.dense[len(m.dense)-2].Outputs()[0].Value); err != nil {
		t.Fatal(err)
	}
	var ls float64
	for i, p := range x {
		want := 1 / (1 + math.Exp(-float64(logits[i])))
		if math.Abs(float64(p)-want) > 1e-6 {
			t.Errorf("sample %d: prediction %v, σ(logit) %v", i, p, want)
		}
		ls += bceFromProbability(float64(p), float64(labels[i]))
	}
	m.probabilities(x) // an inference output stays as it is
	got, err := m.lossSums(x, labels, 8)
	if err != nil || math.Abs(got[0]-ls) > 1e-9 {
		t.Errorf("loss %v (%v), want %v", got, err, ls)
	}
}
