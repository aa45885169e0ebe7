package graph

import (
	"errors"
	"strings"
	"testing"
)

// minimalConfig is a JSON config with every section; tests splice keys in.
const minimalConfig = `{
  "solver": {"lr_policy": "fixed", "display": 10, "max_iter": 100, "gpu": [0], "batchsize": 64,
             "snapshot": 0, "snapshot_prefix": "./", "eval_interval": 50, "max_eval_batches": 4 SOLVER},
  "optimizer": {"type": "Adam", "update_type": "Global",
                "adam_hparam": {"learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7 ADAM}},
  "layers": [
    {"name": "data", "type": "Data", "source": "./train.txt", "eval_source": "./test.txt", "check": "Sum" DATA,
     "label": {"top": "label", "label_dim": 1}, "dense": {"top": "dense", "dense_dim": 2},
     "sparse": [{"top": "data1", "slot_num": 2, "nnz_per_slot": 1, "is_fixed_length": true}]},
    {"name": "emb", "type": "DistributedSlotSparseEmbeddingHash", "bottom": "data1", "top": "emb",
     "sparse_embedding_hparam": {"workspace_size_per_gpu_in_mb": 1, "embedding_vec_size": 4, "combiner": "sum" HPARAM}},
    {"name": "r", "type": "Reshape", "bottom": "emb", "top": "r", "leading_dim": 8},
    {"name": "c", "type": "Concat", "bottom": ["r", "dense"], "top": "c"},
    {"name": "fc", "type": "InnerProduct", "bottom": "c", "top": "fc", "fc_param": {"num_output": 1 FC}},
    {"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}
  ]
}`

func splice(repl ...string) string {
	s := minimalConfig
	for i := 0; i+1 < len(repl); i += 2 {
		s = strings.Replace(s, " "+repl[i], repl[i+1], 1)
	}
	for _, k := range []string{"SOLVER", "ADAM", "DATA", "HPARAM", "FC"} {
		s = strings.Replace(s, " "+k, "", 1)
	}
	return s
}

func TestConfigKeysBase(t *testing.T) {
	cfg, err := Read(strings.NewReader(splice()), "m.json")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Solver.MaxIter != 100 || cfg.Reader.Source[0] != "./train.txt" {
		t.Fatalf("%+v", cfg.Solver)
	}
}

// TestConfigUnknownKeys: a misspelt key is an error naming the file, the
// key's path and the key it probably means (they were dropped silently).
func TestConfigUnknownKeys(t *testing.T) {
	for _, c := range []struct {
		at, key, path, want string
	}{
		{"ADAM", `, "learning_rat": 0.1`, "optimizer.adam_hparam.learning_rat", `did you mean "learning_rate"`},
		{"SOLVER", `, "batch_size": 32`, "solver.batch_size", `did you mean "batchsize"`},
		{"SOLVER", `, "max_itr": 5`, "solver.max_itr", `did you mean "max_iter"`},
		{"DATA", `, "num_worker": 2`, "layers[0].num_worker", `did you mean "num_workers"`},
		{"HPARAM", `, "embeding_vec_size": 2`, "layers[1].sparse_embedding_hparam.embeding_vec_size", `did you mean "embedding_vec_size"`},
		{"FC", `, "weight_int": "Zero"`, "layers[4].fc_param.weight_int", `did you mean "weight_init"`},
		{"SOLVER", `, "zzz": 1`, "solver.zzz", "keys known here:"},
	} {
		_, err := Read(strings.NewReader(splice(c.at, c.key)), "m.json")
		if err == nil {
			t.Errorf("%s: accepted", c.key)
			continue
		}
		var ge *Error
		if !errors.As(err, &ge) || ge.Path != c.path || ge.File != "m.json" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (path %q), want path %s and %q", c.key, err, ge.Path, c.path, c.want)
		}
	}
}

// TestConfigKeysHugeCTRRefuses: combinations HugeCTR's parser refuses, and
// an optimizer's parameters under another optimizer's name.
func TestConfigKeysHugeCTRRefuses(t *testing.T) {
	for _, c := range []struct{ at, key, want string }{
		{"SOLVER", `, "num_epochs": 1`, "max_iter and num_epochs"},
		{"SOLVER", `, "max_eval_samples": 64`, "max_eval_batches and max_eval_samples"},
		{"SOLVER", `, "mixed_precision": 128, "enable_tf32_compute": true`, "mixed_precision and enable_tf32_compute"},
		{"SOLVER", `, "mixed_precision": 0`, "mixed_precision 0: the loss scale must be > 0"},
		{"SOLVER", `, "mixed_precision": -1024`, "mixed_precision -1024: the loss scale must be > 0"},
		{"SOLVER", `, "device_layout": "Sideways"`, "device_layout"},
		{"ADAM", `}, "sgd_hparam": {"learning_rate": 1`, "sgd_hparam given, but the optimizer type is Adam"},
	} {
		_, err := Read(strings.NewReader(splice(c.at, c.key)), "m.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.key, err, c.want)
		}
	}
	// Scheduling switches HugeCTR defines are accepted.
	if _, err := Read(strings.NewReader(splice("SOLVER", `, "cuda_graph": false, "algorithm_search": true, "device_layout": "NodeFirst"`)), "m.json"); err != nil {
		t.Error(err)
	}
}

// TestAlgorithmSearchKey: solver.algorithm_search is honoured (HugeCTR's
// default true: search; false: the heuristic's first choice), and a value
// that is not a bool is refused by name.
func TestAlgorithmSearchKey(t *testing.T) {
	for _, c := range []struct {
		key  string
		want bool // NoAlgorithmSearch
	}{{"", false}, {`, "algorithm_search": true`, false}, {`, "algorithm_search": false`, true}, {`, "algorithm_search": 0`, true}} {
		cfg, err := Read(strings.NewReader(splice("SOLVER", c.key)), "m.json")
		if err != nil {
			t.Fatalf("%q: %v", c.key, err)
		}
		if cfg.Solver.NoAlgorithmSearch != c.want {
			t.Errorf("%q: NoAlgorithmSearch %v, want %v", c.key, cfg.Solver.NoAlgorithmSearch, c.want)
		}
	}
	if _, err := Read(strings.NewReader(splice("SOLVER", `, "algorithm_search": "yes"`)), "m.json"); err == nil || !strings.Contains(err.Error(), "algorithm_search") {
		t.Errorf("algorithm_search \"yes\": %v", err)
	}
}

// TestConfigSyntaxLineColumn: a JSON syntax error names line and column.
func TestConfigSyntaxLineColumn(t *testing.T) {
	src := "{\n  \"layers\": [\n    {\"type\": \"Data\",, }\n  ]\n}\n"
	_, err := Read(strings.NewReader(src), "bad.json")
	if err == nil || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "bad.json: line 3, column 21") {
		t.Fatalf("%v", err)
	}
	_, err = Read(strings.NewReader("{\n\"layers\": [\n"), "cut.json")
	if err == nil || !strings.Contains(err.Error(), "line 3, column 1") || !strings.Contains(err.Error(), "unexpected end of file") {
		t.Fatalf("%v", err)
	}
}

// TestConfigEnumDidYouMean: a misspelt layer type or enum value names the
// value it probably means (was: only "unknown layer type").
func TestConfigEnumDidYouMean(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{`"type": "InnerProduct"`, `"type": "InnerProdct"`, `unknown layer type "InnerProdct" (did you mean "InnerProduct"?)`},
		{`"type": "Concat"`, `"type": "concat"`, `(did you mean "Concat"?)`},
		{`"type": "DistributedSlotSparseEmbeddingHash"`, `"type": "DistributedSlotSparseEmbedingHash"`, `(did you mean "DistributedSlotSparseEmbeddingHash"?)`},
		{`"type": "Adam"`, `"type": "Adma"`, `(did you mean "Adam"?)`},
		{`"check": "Sum"`, `"check": "sum"`, `(did you mean "Sum"?)`},
		{`"combiner": "sum"`, `"combiner": "mena"`, `(did you mean "mean"?)`},
	} {
		s := strings.Replace(splice(), c.from, c.to, 1)
		_, err := Read(strings.NewReader(s), "m.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.to, err, c.want)
		}
	}
	_, err := Read(strings.NewReader(strings.Replace(splice(), `"type": "Concat"`, `"type": "Zzzzzzzz"`, 1)), "m.json")
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a far-off type gets no suggestion: %v", err)
	}
}

// TestSolverCUDAGraph: solver "cuda_graph" is Solver.CUDAGraph, true when
// absent (HugeCTR's use_cuda_graph default), as is DefaultSolver's; a
// non-bool is refused by name.
func TestSolverCUDAGraph(t *testing.T) {
	for _, c := range []struct {
		key  string
		want bool
	}{{"", true}, {`, "cuda_graph": true`, true}, {`, "cuda_graph": false`, false}, {`, "cuda_graph": 0`, false}} {
		cfg, err := Read(strings.NewReader(splice("SOLVER", c.key)), "m.json")
		if err != nil {
			t.Fatalf("%q: %v", c.key, err)
		}
		if cfg.Solver.CUDAGraph != c.want {
			t.Errorf("%q: CUDAGraph %v", c.key, cfg.Solver.CUDAGraph)
		}
	}
	if !DefaultSolver().CUDAGraph {
		t.Error("DefaultSolver: CUDAGraph false")
	}
	if _, err := Read(strings.NewReader(splice("SOLVER", `, "cuda_graph": "yes"`)), "m.json"); err == nil || !strings.Contains(err.Error(), "cuda_graph") {
		t.Errorf("a string cuda_graph: %v", err)
	}
}
