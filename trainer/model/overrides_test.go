package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/graph"
)

func ptr[T any](v T) *T { return &v }

func overridesConfig(t *testing.T) *graph.Config {
	t.Helper()
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	s := *cfg.Solver
	s.MaxIter, s.NumEpochs, s.Display, s.MaxEvalBatches, s.SnapshotPrefix, s.Seed = 1000, 2, 50, 7, "file", 11
	cfg.Solver = &s
	return cfg
}

// TestOverridesSolver: the flags' policy over the solver section.
func TestOverridesSolver(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     Overrides
		check func(s graph.Solver) bool
	}{
		{"none keeps the file", Overrides{Train: true}, func(s graph.Solver) bool {
			return s.MaxIter == 1000 && s.NumEpochs == 2 && s.Display == 50 && s.MaxEvalBatches == 7 && s.SnapshotPrefix == "file" && s.Seed == 11
		}},
		{"flags win", Overrides{Train: true, BatchSize: ptr(32), Display: ptr(5), Seed: ptr(uint64(3)), SnapshotPrefix: ptr("flag"), TF32: ptr(true)},
			func(s graph.Solver) bool {
				return s.BatchSize == 32 && s.Display == 5 && s.Seed == 3 && s.SnapshotPrefix == "flag" && s.EnableTF32
			}},
		{"num-epochs alone: epoch mode", Overrides{Train: true, NumEpochs: ptr(3)}, func(s graph.Solver) bool { return s.NumEpochs == 3 && s.MaxIter == 0 }},
		{"max-iter alone: iteration mode", Overrides{Train: true, MaxIter: ptr(9)}, func(s graph.Solver) bool { return s.MaxIter == 9 && s.NumEpochs == 0 }},
		{"both", Overrides{Train: true, MaxIter: ptr(9), NumEpochs: ptr(3)}, func(s graph.Solver) bool { return s.MaxIter == 9 && s.NumEpochs == 3 }},
		{"evaluate covers all the data", Overrides{}, func(s graph.Solver) bool { return s.MaxEvalBatches == 0 }},
		{"unless told", Overrides{MaxEvalBatches: ptr(4)}, func(s graph.Solver) bool { return s.MaxEvalBatches == 4 }},
		{"export only when training", Overrides{ExportPredictionsPrefix: ptr("p")}, func(s graph.Solver) bool { return s.ExportPredictionsPrefix == "" }},
		{"export", Overrides{Train: true, ExportPredictionsPrefix: ptr("p")}, func(s graph.Solver) bool { return s.ExportPredictionsPrefix == "p" }},
		{"algorithm search by default", Overrides{Train: true}, func(s graph.Solver) bool { return !s.NoAlgorithmSearch }},
		{"--algorithm-search=false", Overrides{Train: true, AlgorithmSearch: ptr(false)}, func(s graph.Solver) bool { return s.NoAlgorithmSearch }},
		{"cuda_graph from the file", Overrides{Train: true}, func(s graph.Solver) bool { return s.CUDAGraph }},
		{"--cuda-graph=false", Overrides{Train: true, CUDAGraph: ptr(false)}, func(s graph.Solver) bool { return !s.CUDAGraph }},
	} {
		cfg := overridesConfig(t)
		before := *cfg.Solver
		if s := c.o.Solver(cfg); !c.check(s) {
			t.Errorf("%s: %+v", c.name, s)
		}
		if !reflect.DeepEqual(*cfg.Solver, before) {
			t.Errorf("%s: the config's solver changed", c.name)
		}
	}
	cfg := overridesConfig(t)
	cfg.Solver.MaxEvalSamples, cfg.Solver.BatchSizeEval = 1000, 64
	if s := (&Overrides{Train: true}).Solver(cfg); s.MaxEvalBatches != 15 {
		t.Errorf("max_eval_samples 1000 / batchsize_eval 64: %d batches, want 15 (HugeCTR truncates)", s.MaxEvalBatches)
	}
	if s := (&Overrides{Train: true, MaxEvalBatches: ptr(2)}).Solver(cfg); s.MaxEvalBatches != 2 {
		t.Errorf("--max-eval-batches over max_eval_samples: %d", s.MaxEvalBatches)
	}
}

// TestOptimizerOverrides: a new optimizer type starts from its defaults
// with the update type and learning rate kept; names are checked.
func TestOptimizerOverrides(t *testing.T) {
	base := graph.DefaultOptimizer()
	base.Type, base.LearningRate, base.UpdateType, base.MomentumFactor = "MomentumSGD", 0.5, "Global", 0.7
	keep := *base
	o, err := OptimizerOverrides{Type: ptr("SGD"), WarmupSteps: ptr(int64(10)), EndLR: ptr(0.01)}.Apply(base)
	if err != nil {
		t.Fatal(err)
	}
	if o.Type != "SGD" || o.LearningRate != 0.5 || o.UpdateType != "Global" || o.MomentumFactor == 0.7 || o.WarmupSteps != 10 || o.EndLR != 0.01 {
		t.Errorf("%+v", o)
	}
	if !reflect.DeepEqual(*base, keep) {
		t.Error("base modified")
	}
	if o, _ := (OptimizerOverrides{Type: ptr("momentum"), LR: ptr(0.1)}).Apply(base); o.MomentumFactor != 0.7 || o.LearningRate != float32(0.1) {
		t.Errorf("same type: %+v", o)
	}
	for _, bad := range []OptimizerOverrides{{Type: ptr("lamb")}, {UpdateType: ptr("sometimes")}} {
		if _, err := bad.Apply(nil); err == nil || !strings.Contains(err.Error(), "is not") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestNewJob: starting weights and the data callback's place.
func TestNewJob(t *testing.T) {
	cfg := overridesConfig(t)
	var seen graph.Solver
	j, err := NewJob(cfg, Overrides{Train: true, Seed: ptr(uint64(5)), Optimizer: OptimizerOverrides{LR: ptr(0.25)}, FreezeDense: true},
		func(j *Job) error { seen = j.Solver; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if seen.Seed != 5 || j.Optimizer.LearningRate != 0.25 || !j.FreezeDense || j.Init.Dense != "" || j.Resume.Prefix != "" {
		t.Errorf("job %+v, data saw seed %d", j, seen.Seed)
	}
	if _, err := NewJob(cfg, Overrides{}, nil); err == nil || !strings.Contains(err.Error(), "--load-prefix") {
		t.Errorf("evaluate with no weights: %v", err)
	}
	if _, err := NewJob(cfg, Overrides{Train: true, LoadPrefix: "snap"}, nil); err == nil || !strings.Contains(err.Error(), "--load-iter") {
		t.Errorf("prefix without iter: %v", err)
	}
	errData := errors.New("no data")
	if _, err := NewJob(cfg, Overrides{}, func(*Job) error { return errData }); !errors.Is(err, errData) {
		t.Errorf("the data error comes first: %v", err)
	}
	j, err = NewJob(cfg, Overrides{LoadPrefix: "snap", LoadIter: ptr(int64(40))}, nil)
	if err != nil || j.Resume != (Snapshot{Prefix: "snap", Iter: 40}) || j.Optimizer != nil {
		t.Errorf("evaluate from a snapshot: %+v %v", j.Resume, err)
	}
	if j, _ := NewJob(cfg, Overrides{Train: true, LoadPrefix: "snap", LoadIter: ptr(int64(40))}, nil); !j.Resume.FreshOptimizer {
		t.Error("training from a snapshot without --load-optimizer keeps its optimizer state")
	}
	j, err = NewJob(cfg, Overrides{Train: true, LoadPrefix: "snap", LoadIter: ptr(int64(40)), LoadOptimizer: true, DenseFrom: true}, nil)
	n := len(cfg.Graph.Embeddings)
	if err != nil || j.Resume.Prefix != "" || j.Init.Dense != "" || j.Init.DenseOpt != "" || len(j.Init.Sparse) != n || len(j.Init.SparseOpt) != n {
		t.Errorf("--dense-from: %+v %v", j.Init, err)
	}
	cfg.Solver.SparseModelFiles = []string{"a", "b", "c"}
	if _, err := NewJob(cfg, Overrides{ConfigFile: "m.json"}, nil); err == nil || !strings.Contains(err.Error(), "m.json: solver.sparse_model_file names 3 files") {
		t.Errorf("sparse files of another model: %v", err)
	}
	cfg.Solver.SparseModelFiles, cfg.Solver.DenseModelFile, cfg.Solver.DenseOptStatesFile = nil, "d.model", "o.model"
	if j, err := NewJob(cfg, Overrides{}, nil); err != nil || j.Init.Dense != "d.model" || j.Init.DenseOpt != "" {
		t.Errorf("evaluate from the solver's files: %+v %v (no optimizer states)", j.Init, err)
	}
}
