package model

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/optim"
)

func smallModel(t testing.TB, name string, batch int) *Model {
	t.Helper()
	cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: batch, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFreezeAndReset(t *testing.T) {
	data := newPlanted(1, 256, 4, smallSlots)
	m := smallModel(t, "wdl", 64)
	r := data.reader(64)
	b, _ := formats.NewBatch(r.Schema(), 64, nil)
	step := func() {
		t.Helper()
		if n, err := r.Read(b); n != 64 {
			t.Fatal(n, err)
		}
		if err := m.TrainStep(b); err != nil {
			t.Fatal(err)
		}
	}
	snap := func() (dense, table []float32) {
		for _, p := range m.params {
			v, _ := m.download(p.Value)
			dense = append(dense, v...)
		}
		for _, e := range m.embs {
			v, _ := m.download(e.layer.Table)
			table = append(table, v...)
		}
		return
	}
	d0, _ := snap()
	names := m.EmbeddingNames()
	if len(names) != 2 {
		t.Fatalf("embeddings %v", names)
	}
	m.FreezeDense()
	if err := m.FreezeEmbedding(names[0]); err != nil {
		t.Fatal(err)
	}
	m.FreezeEmbedding(names[1])
	step()
	d1, t1 := snap()
	if !slices.Equal(d0, d1) {
		t.Error("frozen dense weights changed")
	}
	m.UnfreezeEmbeddings()
	step()
	d2, t2 := snap()
	if !slices.Equal(d1, d2) || slices.Equal(t1, t2) {
		t.Error("unfrozen embeddings did not train, or frozen dense weights changed")
	}
	m.UnfreezeDense()
	step()
	if d3, _ := snap(); slices.Equal(d2, d3) {
		t.Error("unfrozen dense weights did not change")
	}
	// A frozen part keeps the one schedule: every optimizer is at step 3.
	for i, o := range m.optimizers() {
		if o.Step() != 3 {
			t.Errorf("optimizer %d at step %d after 3 steps (2 of them frozen)", i, o.Step())
		}
	}
	if err := m.FreezeEmbedding("nope"); err == nil || !strings.Contains(err.Error(), names[0]+", "+names[1]) {
		t.Errorf("freezing an unknown embedding: %v", err)
	}
	if err := m.SetLearningRate(0.125); err != nil || m.LR() != 0.125 {
		t.Errorf("SetLearningRate: %v, LR %v", err, m.LR())
	}
	step()
	if m.LR() != 0.125 {
		t.Errorf("LR after a step %v, want the set 0.125", m.LR())
	}
	if err := m.SetLearningRate(math.NaN()); err == nil {
		t.Error("SetLearningRate(NaN) accepted")
	}
	if err := m.ResetLRScheduler(optim.Schedule{BaseLR: 0.1, DecaySteps: 1, DecayPower: 0.5}); err == nil {
		t.Error("decay power 0.5 accepted (HugeCTR wants ≥ 1)")
	}
	s := optim.Schedule{BaseLR: 0.2, WarmupSteps: 4, DecaySteps: 1, DecayPower: 2}
	if err := m.ResetLRScheduler(s); err != nil {
		t.Fatal(err)
	}
	if lr := m.LR(); math.Abs(lr-0.05) > 1e-12 {
		t.Errorf("LR after reset %v, want 0.2·1/4", lr)
	}
}

func TestSnapshots(t *testing.T) {
	data := newPlanted(1, 1024, 4, smallSlots)
	m := smallModel(t, "dlrm", 64)
	prefix := filepath.Join(t.TempDir(), "s")
	eval := newPlanted(2, 100, 4, smallSlots)
	res, err := m.Fit(context.Background(), FitOptions{
		OpenTrain: func() (formats.Reader, error) { return data.reader(64), nil },
		OpenEval:  func() (formats.Reader, error) { return eval.reader(64), nil },
		MaxIter:   20, Snapshot: 10, SnapshotPrefix: prefix, EvalInterval: 20, ExportPredictionsPrefix: prefix,
	})
	if err != nil || res.Iters != 20 {
		t.Fatal(err, res.Iters)
	}
	for _, f := range []string{"s_dense_10.model", "s_opt_dense_10.model", "s0_sparse_10.model/key",
		"s0_sparse_10.model/emb_vector", "s0_opt_sparse_10.model", "s_dense_20.model", "s_pred_20", "s_label_20"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(prefix), f)); err != nil {
			t.Error(err)
		}
	}
	if b, _ := os.ReadFile(prefix + "_pred_20"); strings.Count(string(b), "\n") != 100 {
		t.Errorf("exported %d predictions, want 100", strings.Count(string(b), "\n"))
	}
	// Non-epoch mode over a 16-batch dataset wraps around (repeat).
	if res.Iters != 20 {
		t.Errorf("%d iterations", res.Iters)
	}
	// No stray temporary files.
	ents, _ := os.ReadDir(filepath.Dir(prefix))
	for _, e := range ents {
		if e.Name()[0] == '.' {
			t.Errorf("temporary left behind: %s", e.Name())
		}
	}
}

func BenchmarkTrainStep(b *testing.B) {
	for _, name := range graph.ReferenceModels {
		b.Run(name, func(b *testing.B) {
			data := newPlanted(1, 1024, 4, smallSlots)
			cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 16, Width: 0.125})
			if err != nil {
				b.Fatal(err)
			}
			m, err := Build(cfg, cpuBackend(b), Options{BatchSize: 1024, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			r := data.reader(1024)
			batch, _ := formats.NewBatch(r.Schema(), 1024, nil)
			if _, err := r.Read(batch); err != nil && batch.N != 1024 {
				b.Fatal(err)
			}
			b.SetBytes(int64(1024 * (4 + 4*4 + 8*len(smallSlots))))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := m.TrainStep(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
