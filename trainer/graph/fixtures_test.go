package graph

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestOldConfig reads a ≤ v3.0 JSON config with every section.
func TestOldConfig(t *testing.T) {
	cfg, err := ReadFile("testdata/old_config.json")
	if err != nil {
		t.Fatal(err)
	}
	s, o, r := cfg.Solver, cfg.Optimizer, cfg.Reader
	if s.BatchSize != 64 || s.BatchSizeEval != 64 || s.MaxEvalBatches != 4 || !s.I64InputKey || s.AUCThreshold != 0.75 || s.MaxIter != 100 {
		t.Errorf("solver %+v", s)
	}
	if o.Type != "SGD" || o.UpdateType != "Local" || o.LearningRate != 0.5 || o.WarmupSteps != 30 || o.DecayStart != 60 || o.DecaySteps != 20 || o.DecayPower != 2 {
		t.Errorf("optimizer %+v", o)
	}
	if r.Format != "Raw" || r.Check != "None" || len(r.Source) != 1 || r.NumSamples != 1000 || len(r.SlotSizeArray) != 3 {
		t.Errorf("reader %+v", r)
	}
	e := cfg.Graph.Embeddings[0]
	if e.Combiner != "mean" || e.MaxVocabPerGPU != 60 {
		t.Errorf("embedding %+v", e)
	}
	sp := cfg.Graph.Input.Sparse[0]
	if sp.MaxFeatures() != 3 || len(sp.NNZPerSlot) != 3 {
		t.Errorf("sparse %+v", sp)
	}
	info, err := cfg.Graph.Infer(cfg.Optimizer)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(16*8 + 8 + 8 + 1); info.DenseParams != want {
		t.Errorf("dense params %d, want %d", info.DenseParams, want)
	}
	if info.Embeddings[0].Rows != 60 {
		t.Errorf("embedding rows %d", info.Embeddings[0].Rows)
	}
}

// TestGolden: the graph JSON and the summary of the fixture, against golden
// files (go test -update rewrites them).
func TestGolden(t *testing.T) {
	cfg, err := ReadFile("testdata/old_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var js, sum bytes.Buffer
	if err := cfg.Graph.WriteJSON(&js, WriteOptions{Optimizer: cfg.Optimizer}); err != nil {
		t.Fatal(err)
	}
	if err := Summary(&sum, cfg); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/old_config.graph.json", js.Bytes())
	golden(t, "testdata/old_config.summary", sum.Bytes())
	// The written graph reads back to the same bytes.
	back, err := Read(bytes.NewReader(js.Bytes()), "graph")
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	back.Graph.WriteJSON(&again, WriteOptions{Optimizer: cfg.Optimizer})
	if !bytes.Equal(again.Bytes(), js.Bytes()) {
		t.Error(firstDiff(again.String(), js.String()))
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %s", path, firstDiff(string(got), string(want)))
	}
}

func TestErrors(t *testing.T) {
	base, err := os.ReadFile("testdata/old_config.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, from, to string
		want           error
		path           string
	}{
		{"syntax", `"solver": {`, `"solver": {{`, ErrSyntax, ""},
		{"missing num_output", `"fc_param": {"num_output": 8}`, `"fc_param": {}`, ErrMissing, "layers[4].fc_param.num_output"},
		{"wrong type", `"num_output": 8`, `"num_output": "8"`, ErrType, "layers[4].fc_param.num_output"},
		{"negative", `"num_output": 8`, `"num_output": -8`, ErrValue, "layers[4].fc_param.num_output"},
		{"unknown layer", `"type": "ReLU"`, `"type": "Relu"`, ErrValue, "layers[5].type"},
		{"first not data", `"type": "Data"`, `"type": "Dat"`, ErrValue, "layers[0].type"},
		{"combiner", `"combiner": 1`, `"combiner": 2`, ErrValue, "layers[1].sparse_embedding_hparam.combiner"},
		{"update type", `"global_update": false`, `"update_type": "Lazy"`, ErrValue, "optimizer.update_type"},
		{"nnz count", `"max_feature_num_per_sample": 3`, `"nnz_per_slot": [1, 2]`, ErrValue, "layers[0].sparse[0].nnz_per_slot"},
		{"bad metric", `"AverageLoss"`, `"Recall"`, ErrValue, "solver.eval_metrics[1]"},
		{"no layers", `"layers"`, `"layerz"`, ErrMissing, "layers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !bytes.Contains(base, []byte(c.from)) {
				t.Fatalf("fixture lacks %q", c.from)
			}
			data := bytes.Replace(base, []byte(c.from), []byte(c.to), 1)
			_, err := Read(bytes.NewReader(data), "f.json")
			var ge *Error
			if !errors.As(err, &ge) || !errors.Is(err, c.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if ge.Path != c.path || ge.File != "f.json" {
				t.Errorf("path %q file %q, want %q", ge.Path, ge.File, c.path)
			}
		})
	}
	// Tensor errors come from Infer.
	data := bytes.Replace(base, []byte(`"bottom": "relu1"`), []byte(`"bottom": "relu9"`), 1)
	cfg, err := Read(bytes.NewReader(data), "f.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Graph.Infer(nil); !errors.Is(err, ErrTensor) || !strings.Contains(err.Error(), "layers[6].bottom[0]") {
		t.Errorf("Infer: %v", err)
	}
}

func FuzzRead(f *testing.F) {
	for _, p := range []string{"testdata/old_config.json", "testdata/old_config.graph.json"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	if dir, err := filepath.Abs(shared); err == nil {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".json") {
				if b, err := os.ReadFile(p); err == nil {
					f.Add(b)
				}
			}
			return nil
		})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Read(bytes.NewReader(data), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error outside the class: %v", err)
			}
			return
		}
		info, ierr := cfg.Graph.Infer(cfg.Optimizer)
		var a bytes.Buffer
		if err := cfg.Graph.WriteJSON(&a, WriteOptions{Optimizer: cfg.Optimizer}); err != nil {
			t.Fatal(err)
		}
		back, err := Read(bytes.NewReader(a.Bytes()), "rewritten")
		if err != nil {
			if ierr == nil {
				t.Fatalf("valid graph does not read back: %v\n%s", err, a.String())
			}
			return
		}
		var b bytes.Buffer
		back.Graph.WriteJSON(&b, WriteOptions{Optimizer: cfg.Optimizer})
		if ierr == nil && !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("round trip differs: %s", firstDiff(b.String(), a.String()))
		}
		_ = info
	})
}
