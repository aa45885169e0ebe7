package model

import (
	"bytes"
	"encoding/binary"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// TestGPULocalizedSlotID: a Localized embedding trained on the GPU writes
// the CPU's key and slot_id files, and a snapshot saved on the GPU loads
// on the CPU (and back) with the same slots.
func TestGPULocalizedSlotID(t *testing.T) {
	g := gpuOrSkip(t, gpu.Options{})
	data := newPlanted(3, 4096, 1, []int64{1000, 300, 5000})
	cfg := tinyLocalized()
	sgd := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
	dir := t.TempDir()
	save := func(be tensor.Backend, name string) string {
		m, err := Build(cfg, be, Options{BatchSize: 256, Optimizer: sgd})
		if err != nil {
			t.Fatal(err)
		}
		r := data.reader(256)
		b, _ := formats.NewBatch(r.Schema(), 256, nil)
		for range 8 {
			if _, err := r.Read(b); err != nil {
				t.Fatal(err)
			}
			if err := m.TrainStep(b); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(dir, name)
		if err := m.Save(p, 8); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cp, gp := save(cpuBackend(t), "cpu"), save(g, "gpu")
	for _, f := range []string{"key", "slot_id"} {
		c, _ := os.ReadFile(cp + "0_sparse_8.model/" + f)
		d, _ := os.ReadFile(gp + "0_sparse_8.model/" + f)
		if len(c) == 0 || !bytes.Equal(c, d) {
			t.Errorf("%s: GPU %d bytes differ from CPU %d bytes", f, len(d), len(c))
		}
	}
	m, err := Build(cfg, g, Options{BatchSize: 256, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Load(cp, 8); err != nil {
		t.Fatal(err)
	}
	if err := m.SaveFiles(SnapshotFiles(filepath.Join(dir, "again"), 8, 1)); err != nil {
		t.Fatal(err)
	}
	c, d := keySlots(t, cp+"0_sparse_8.model"), keySlots(t, filepath.Join(dir, "again0_sparse_8.model"))
	if len(c) == 0 || !maps.Equal(c, d) {
		t.Errorf("slots loaded on the GPU and saved again differ: %d and %d keys", len(c), len(d))
	}
}

// keySlots maps each key of a Localized model directory to its slot (a
// reload inserts keys in ascending order, so rows, and file order, change).
func keySlots(t *testing.T, dir string) map[uint64]uint64 {
	k, _ := os.ReadFile(filepath.Join(dir, "key"))
	s, _ := os.ReadFile(filepath.Join(dir, "slot_id"))
	if len(k) != len(s) {
		t.Fatalf("%s: %d key bytes, %d slot_id bytes", dir, len(k), len(s))
	}
	out := map[uint64]uint64{}
	for i := 0; i+8 <= len(k); i += 8 {
		out[binary.LittleEndian.Uint64(k[i:])] = binary.LittleEndian.Uint64(s[i:])
	}
	return out
}
