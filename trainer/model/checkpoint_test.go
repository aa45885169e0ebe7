package model

import (
	"bytes"
	"context"
	"encoding/binary"
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
