package model

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

func cpuBackend(t testing.TB) *cpu.Backend {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

var smallSlots = []int64{50, 30, 20, 40, 10, 60}

func TestFitLearns(t *testing.T) {
	train := newPlanted(1, 32768, 4, smallSlots)
	eval := newPlanted(2, 8192, 4, smallSlots)
	for _, name := range graph.ReferenceModels {
		t.Run(name, func(t *testing.T) {
			cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 8, Width: 1.0 / 32})
			if err != nil {
				t.Fatal(err)
			}
			opt := graph.DefaultOptimizer()
			opt.LearningRate = 0.01
			m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 256, Seed: 3, Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			var log, metricsOut bytes.Buffer
			res, err := m.Fit(context.Background(), FitOptions{
				OpenTrain:    func() (formats.Reader, error) { return train.reader(256), nil },
				OpenEval:     func() (formats.Reader, error) { return eval.reader(256), nil },
				NumEpochs:    2,
				Display:      32,
				EvalInterval: 64,
				Log:          &log, Metrics: &metricsOut,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Iters != 2*128 {
				t.Errorf("%d iterations, want %d", res.Iters, 2*128)
			}
			t.Logf("%s: eval AUC %.4f, planted %.4f", name, res.LastAUC, eval.auc)
			if math.Abs(res.LastAUC-eval.auc) > 0.03 {
				t.Errorf("eval AUC %.4f, planted %.4f:\n%s", res.LastAUC, eval.auc, log.String())
			}
			if !strings.Contains(log.String(), "samples/s") || strings.Count(metricsOut.String(), "\n") < 6 {
				t.Errorf("log:\n%s\nmetrics:\n%s", log.String(), metricsOut.String())
			}
		})
	}
}

func TestSaveLoadPredict(t *testing.T) {
	train := newPlanted(1, 2048, 4, smallSlots)
	eval := newPlanted(2, 1000, 4, smallSlots) // not a multiple of the batch: padding
	for _, name := range []string{"dcn", "deepfm"} {
		cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
		if err != nil {
			t.Fatal(err)
		}
		m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Fit(context.Background(), FitOptions{OpenTrain: func() (formats.Reader, error) { return train.reader(64), nil }, MaxIter: 40}); err != nil {
			t.Fatal(err)
		}
		want, err := m.Predict(nil, eval.reader(64), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != 1000 {
			t.Fatalf("%d predictions", len(want))
		}
		prefix := filepath.Join(t.TempDir(), name)
		if err := m.Save(prefix, 40); err != nil {
			t.Fatal(err)
		}
		m2, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 99})
		if err != nil {
			t.Fatal(err)
		}
		if err := m2.Load(prefix, 40); err != nil {
			t.Fatal(err)
		}
		got, err := m2.Predict(nil, eval.reader(64), 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: prediction %d: %v after load, %v before", name, i, got[i], want[i])
			}
		}
		// Adam state files: m‖v of every weight.
		st, err := os.Stat(prefix + "_opt_dense_40.model")
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != 2*4*m.Info.DenseParams {
			t.Errorf("dense optimizer state %d bytes, want %d", st.Size(), 2*4*m.Info.DenseParams)
		}
		// A file of the wrong size is refused (HugeCTR's files, no manifest:
		// with one, the manifest's size refuses it first).
		os.Remove(ManifestFile(prefix, 40))
		os.WriteFile(prefix+"_dense_40.model", []byte{1, 2, 3, 4}, 0o644)
		if err := m2.Load(prefix, 40); err == nil || !strings.Contains(err.Error(), "bytes, the model needs") {
			t.Errorf("loading a short dense file: %v", err)
		}
	}
}

// TestSparseFilesByteExact: a tiny model whose table is set by hand writes
// SPEC §7's key and emb_vector bytes.
func TestSparseFilesByteExact(t *testing.T) {
	g := &graph.Graph{
		Input: graph.Input{LabelTops: []string{"label"}, LabelDims: []int{1}, DenseTop: "dense", DenseDim: 1,
			Sparse: []graph.SparseParam{{Top: "data1", SlotNum: 2, NNZPerSlot: []int{1, 1}, IsFixedLength: true}}},
		Embeddings: []graph.SparseEmbedding{{Type: graph.DistributedHash, Bottom: "data1", Top: "emb", VecSize: 2,
			Combiner: "sum", SlotSizeArray: []int64{10, 10}}},
		Layers: []graph.DenseLayer{
			{Type: graph.Reshape, Bottom: []string{"emb"}, Top: []string{"r"}, LeadingDim: 4},
			{Type: graph.Concat, Bottom: []string{"r", "dense"}, Top: []string{"c"}, Axis: 1},
			{Type: graph.InnerProduct, Bottom: []string{"c"}, Top: []string{"fc"}, NumOutput: 1},
			{Type: graph.BinaryCrossEntropyLoss, Bottom: []string{"fc", "label"}, Top: []string{"loss"}},
		},
	}
	sgd := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0}
	m, err := Build(&graph.Config{Graph: g}, cpuBackend(t), Options{BatchSize: 1, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	// One training step sees keys 17 (slot 1) then 3 (slot 0): new keys get
	// rows in ascending key order, so 3 → row 0, 17 → row 1.
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyI64)
	b, _ := formats.NewBatch(&s, 1, nil)
	b.AppendSample([]float32{1}, []float32{0.5}, [][]int64{{17}, {3}})
	b2, _ := formats.NewBatch(&s, 1, nil)
	b2.AppendSample([]float32{0}, []float32{0.5}, [][]int64{{3}, {17}})
	if err := m.TrainStep(b); err != nil {
		t.Fatal(err)
	}
	tbl := m.embs[0].layer.Table
	vals := make([]float32, tbl.Len())
	vals[0], vals[1], vals[2], vals[3] = 0.25, -1.5, 3, 1e-3
	m.be.Upload(tbl, vals)
	dir := t.TempDir()
	if err := m.Save(filepath.Join(dir, "tiny"), 7); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "tiny0_sparse_7.model", "key"))
	if err != nil {
		t.Fatal(err)
	}
	wantKey := []byte{3, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(key, wantKey) {
		t.Errorf("key = % x, want % x", key, wantKey)
	}
	emb, _ := os.ReadFile(filepath.Join(dir, "tiny0_sparse_7.model", "emb_vector"))
	wantEmb := []byte{
		0x00, 0x00, 0x80, 0x3e, // 0.25
		0x00, 0x00, 0xc0, 0xbf, // -1.5
		0x00, 0x00, 0x40, 0x40, // 3
		0x6f, 0x12, 0x83, 0x3a, // 0.001
	}
	if !bytes.Equal(emb, wantEmb) {
		t.Errorf("emb_vector = % x, want % x", emb, wantEmb)
	}
	if _, err := os.Stat(filepath.Join(dir, "tiny0_sparse_7.model", "slot_id")); !os.IsNotExist(err) {
		t.Errorf("a Distributed embedding wrote slot_id: %v", err)
	}
	// SGD has no state: empty optimizer files.
	for _, f := range []string{"tiny_opt_dense_7.model", "tiny0_opt_sparse_7.model"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() != 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	dense, _ := os.ReadFile(filepath.Join(dir, "tiny_dense_7.model"))
	if len(dense) != 4*(5+1) {
		t.Errorf("dense file %d bytes, want %d (W [5,1], b [1])", len(dense), 4*6)
	}
	// Loading into a fresh model reproduces the table row for each key.
	m2, err := Build(&graph.Config{Graph: g}, cpuBackend(t), Options{BatchSize: 1, Optimizer: sgd, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Load(filepath.Join(dir, "tiny"), 7); err != nil {
		t.Fatal(err)
	}
	p1, _ := m.forward(b2, make([]float32, 1))
	p1 = append([]float32(nil), p1...)
	p2, _ := m2.forward(b2, make([]float32, 1))
	if math.Float32bits(p1[0]) != math.Float32bits(p2[0]) {
		t.Errorf("prediction %v after load, %v before", p2[0], p1[0])
	}
	// A key file that is not whole int64s is refused.
	os.WriteFile(filepath.Join(dir, "tiny0_sparse_7.model", "key"), wantKey[:9], 0o644)
	if err := m2.Load(filepath.Join(dir, "tiny"), 7); err == nil {
		t.Error("loaded a 9-byte key file")
	}
}
