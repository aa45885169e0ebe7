package model

import (
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// TestOneHotStoredKeysAreGlobalRows: keys that reach a OneHot embedding
// without reader offsets (Norm, or Raw/Parquet read without a
// slot_size_array) are HugeCTR's one-hot rows, global over the
// embedding's slot_size_array; the feeder takes each slot's prefix off.
// Before, they were taken as slot-local and a global key of slot 1 failed
// with "outside its slot".
func TestOneHotStoredKeysAreGlobalRows(t *testing.T) {
	sizes := []int64{5, 7, 3}
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 2, SlotSizes: sizes, VecSize: 4, Width: 1.0 / 64,
		EmbeddingType: graph.LocalizedOneHot})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sch := m.Schema(formats.KeyI64)
	b, err := formats.NewBatch(&sch, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	b.N = 4
	b.Labels, b.Dense = b.Labels[:4], b.Dense[:cap(b.Dense)][:4*2]
	b.Offsets, b.Keys64 = b.Offsets[:cap(b.Offsets)][:13], b.Keys64[:cap(b.Keys64)][:12]
	// Sample i holds global rows: slot 0 row i, slot 1 row 5+i+2, slot 2 row 12+i%3.
	for i := 0; i < 4; i++ {
		b.Labels[i] = float32(i % 2)
		for s, g := range []int64{int64(i), 5 + int64(i) + 2, 12 + int64(i%3)} {
			k := i*3 + s
			b.Keys64[k] = g
			b.Offsets[k+1] = int32(k + 1)
		}
	}
	if err := m.TrainStep(b); err != nil {
		t.Fatalf("global one-hot keys: %v", err)
	}
	want := [][]int64{{0, 2, 0}, {1, 3, 1}, {2, 4, 2}, {3, 5, 0}}
	keys := cpu.Data[int64](m.feed.Inputs[0].Keys)
	for i, row := range want {
		for s, v := range row {
			if got := keys[i*3+s]; got != v {
				t.Errorf("sample %d slot %d: slot-local row %d, want %d", i, s, got, v)
			}
		}
	}
}
