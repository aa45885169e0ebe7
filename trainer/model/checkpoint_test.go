package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// tinyLocalized is a model with one LocalizedSlotSparseEmbeddingHash over
// three one-hot slots and no slot_size_array (as HugeCTR's DLRM configs).
func tinyLocalized() *graph.Config {
	g := &graph.Graph{
		Input: graph.Input{LabelTops: []string{"label"}, LabelDims: []int{1}, DenseTop: "dense", DenseDim: 1,
			Sparse: []graph.SparseParam{{Top: "data1", SlotNum: 3, NNZPerSlot: []int{1, 1, 1}, IsFixedLength: true}}},
		Embeddings: []graph.SparseEmbedding{{Type: graph.LocalizedHash, Bottom: "data1", Top: "emb", VecSize: 2,
			Combiner: "sum", WorkspaceMB: 1}},
		Layers: []graph.DenseLayer{
			{Type: graph.Reshape, Bottom: []string{"emb"}, Top: []string{"r"}, LeadingDim: 6},
			{Type: graph.Concat, Bottom: []string{"r", "dense"}, Top: []string{"c"}, Axis: 1},
			{Type: graph.InnerProduct, Bottom: []string{"c"}, Top: []string{"fc"}, NumOutput: 1},
			{Type: graph.BinaryCrossEntropyLoss, Bottom: []string{"fc", "label"}, Top: []string{"loss"}},
		},
	}
	return &graph.Config{Graph: g}
}

func u64s(v ...uint64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

// TestLocalizedSlotID: a Localized embedding without slot_size_array
// writes the slot each key was inserted from, and loading restores it.
func TestLocalizedSlotID(t *testing.T) {
	cfg := tinyLocalized()
	sgd := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 2, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	s := formats.NewSchema(1, 1, []int{1, 1, 1}, nil, formats.KeyI64)
	b, _ := formats.NewBatch(&s, 2, nil)
	// Step 1: 40 in slots 2 and 1 (the smallest wins), 9 in slot 0, 7 in
	// slot 2 of the second sample, 8 in slot 0 of the second sample.
	b.AppendSample([]float32{1}, []float32{0.5}, [][]int64{{9}, {5}, {40}})
	b.AppendSample([]float32{0}, []float32{0.5}, [][]int64{{8}, {40}, {7}})
	if err := m.TrainStep(b); err != nil {
		t.Fatal(err)
	}
	// Step 2: 9 seen again in slot 2 keeps slot 0; 100 is new in slot 1.
	b.SetLen(0)
	b.AppendSample([]float32{1}, []float32{0.5}, [][]int64{{8}, {100}, {9}})
	b.AppendSample([]float32{0}, []float32{0.5}, [][]int64{{9}, {5}, {7}})
	if err := m.TrainStep(b); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prefix := filepath.Join(dir, "loc")
	if err := m.CheckSave(prefix); err != nil {
		t.Fatal(err)
	}
	if err := m.Save(prefix, 2); err != nil {
		t.Fatal(err)
	}
	sp := filepath.Join(dir, "loc0_sparse_2.model")
	key, _ := os.ReadFile(filepath.Join(sp, "key"))
	slot, err := os.ReadFile(filepath.Join(sp, "slot_id"))
	if err != nil {
		t.Fatal(err)
	}
	// Rows: step 1 inserts 5, 7, 8, 9, 40 (ascending), step 2 inserts 100.
	if want := u64s(5, 7, 8, 9, 40, 100); !bytes.Equal(key, want) {
		t.Fatalf("key % x, want % x", key, want)
	}
	if want := u64s(1, 2, 0, 0, 1, 1); !bytes.Equal(slot, want) {
		t.Fatalf("slot_id %v, want slots 1 2 0 0 1 1", slot)
	}
	// A fresh model loads the slots and writes them again unchanged.
	m2, err := Build(cfg, cpuBackend(t), Options{BatchSize: 2, Optimizer: sgd, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.LoadFiles(SnapshotFiles(prefix, 2, 1)); err != nil {
		t.Fatal(err)
	}
	if err := m2.SaveFiles(SnapshotFiles(prefix, 3, 1)); err != nil {
		t.Fatal(err)
	}
	slot3, _ := os.ReadFile(filepath.Join(dir, "loc0_sparse_3.model", "slot_id"))
	if !bytes.Equal(slot3, slot) {
		t.Errorf("slot_id after load and save %v, want %v", slot3, slot)
	}
	// A slot beyond the embedding's slots, a short file, a missing file.
	for _, c := range []struct {
		data []byte
		want string
	}{{u64s(1, 2, 0, 0, 3, 1), "the embedding has 3 slots"}, {slot[:40], "bytes for 6 keys"}, {nil, "slot_id: missing"}} {
		p := filepath.Join(sp, "slot_id")
		if c.data == nil {
			os.Remove(p)
		} else {
			os.WriteFile(p, c.data, 0o644)
		}
		if err := m2.LoadFiles(SnapshotFiles(prefix, 2, 1)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("loading a bad slot_id: %v, want %q", err, c.want)
		}
	}
}

// TestCheckSaveBeforeTraining: a snapshot prefix that cannot be written is
// refused before the first iteration.
func TestCheckSaveBeforeTraining(t *testing.T) {
	train := newPlanted(1, 256, 4, smallSlots)
	cfg, err := graph.Reference("dcn", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	opened := false
	res, err := m.Fit(context.Background(), FitOptions{OpenTrain: func() (formats.Reader, error) { opened = true; return train.reader(64), nil },
		MaxIter: 4, Snapshot: 2, SnapshotPrefix: filepath.Join(file, "sub", "snap")})
	if err == nil || !strings.Contains(err.Error(), "snapshot prefix") || res.Iters != 0 || opened {
		t.Errorf("Fit with a prefix under a file: %v after %d iterations (data opened: %v)", err, res.Iters, opened)
	}
}

// bnModel is a small DCN-like network with two BatchNorm layers.
func bnModel() *graph.Config {
	g := &graph.Graph{
		Input: graph.Input{LabelTops: []string{"label"}, LabelDims: []int{1}, DenseTop: "dense", DenseDim: 4,
			Sparse: []graph.SparseParam{{Top: "data1", SlotNum: 6, NNZPerSlot: []int{1, 1, 1, 1, 1, 1}, IsFixedLength: true}}},
		Embeddings: []graph.SparseEmbedding{{Type: graph.DistributedHash, Bottom: "data1", Top: "emb", VecSize: 4,
			Combiner: "sum", WorkspaceMB: 1}},
		Layers: []graph.DenseLayer{
			{Type: graph.Reshape, Bottom: []string{"emb"}, Top: []string{"r"}, LeadingDim: 24},
			{Type: graph.Concat, Bottom: []string{"r", "dense"}, Top: []string{"c"}, Axis: 1},
			{Type: graph.InnerProduct, Bottom: []string{"c"}, Top: []string{"fc1"}, NumOutput: 16},
			{Type: graph.BatchNorm, Bottom: []string{"fc1"}, Top: []string{"bn1"}, Factor: 0.1, Eps: 1e-5},
			{Type: graph.ReLU, Bottom: []string{"bn1"}, Top: []string{"relu1"}},
			{Type: graph.InnerProduct, Bottom: []string{"relu1"}, Top: []string{"fc2"}, NumOutput: 8},
			{Type: graph.BatchNorm, Bottom: []string{"fc2"}, Top: []string{"bn2"}, Factor: 0.1, Eps: 1e-5},
			{Type: graph.InnerProduct, Bottom: []string{"bn2"}, Top: []string{"fc3"}, NumOutput: 1},
			{Type: graph.BinaryCrossEntropyLoss, Bottom: []string{"fc3", "label"}, Top: []string{"loss"}},
		},
	}
	return &graph.Config{Graph: g}
}

// TestBatchNormRunningStatsSaved: the running mean and variance travel in
// HugeCTR's <dense>.ntp.json, and the reloaded model predicts bit for bit
// what the saved one did.
func TestBatchNormRunningStatsSaved(t *testing.T) {
	train := newPlanted(1, 2048, 4, smallSlots)
	eval := newPlanted(2, 500, 4, smallSlots)
	cfg := bnModel()
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Fit(context.Background(), FitOptions{OpenTrain: func() (formats.Reader, error) { return train.reader(64), nil }, MaxIter: 30}); err != nil {
		t.Fatal(err)
	}
	want, err := m.Predict(nil, eval.reader(64), 0)
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(t.TempDir(), "bn")
	if err := m.Save(prefix, 30); err != nil {
		t.Fatal(err)
	}
	ntp, err := os.ReadFile(prefix + "_dense_30.model.ntp.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(ntp), "{\n  \"layers\": [\n    {\n      \"type\": \"BatchNorm\",\n      \"mean\": [") ||
		strings.Count(string(ntp), `"var"`) != 2 {
		t.Errorf("ntp.json:\n%s", ntp)
	}
	// The dense file holds only the trainable weights (γ, β of BatchNorm).
	if st, _ := os.Stat(prefix + "_dense_30.model"); st.Size() != 4*m.Info.DenseParams {
		t.Errorf("dense file %d bytes, want %d", st.Size(), 4*m.Info.DenseParams)
	}
	m2, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 99})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Load(prefix, 30); err != nil {
		t.Fatal(err)
	}
	got, err := m2.Predict(nil, eval.reader(64), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("prediction %d: %v after load, %v before", i, got[i], want[i])
		}
	}
	// HugeCTR's own six-decimal values load; a wrong count or a missing
	// file is refused by name.
	os.Remove(ManifestFile(prefix, 30)) // HugeCTR's files from here on
	for _, c := range []struct{ data, want string }{
		{strings.Replace(string(ntp), `"type": "BatchNorm"`, `"type": "LayerNorm"`, 1), "want BatchNorm"},
		{`{"layers": []}`, "0 layers, the model has 2"},
		{`{"layers": [{"type": "BatchNorm", "mean": [0.000001], "var": [1.0]}, {"type": "BatchNorm", "mean": [], "var": []}]}`, "1 values, the layer has 16"},
		{"", "ntp.json: missing"},
	} {
		p := prefix + "_dense_30.model.ntp.json"
		if c.data == "" {
			os.Remove(p)
		} else {
			os.WriteFile(p, []byte(c.data), 0o644)
		}
		if err := m2.Load(prefix, 30); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bad ntp.json: %v, want %q", err, c.want)
		}
	}
	if v, err := ntpValue(json.RawMessage("0.738942")); err != nil || v != float32(0.738942) {
		t.Errorf("HugeCTR value: %v %v", v, err)
	}
}
