package model

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

func memConfig(t *testing.T, batch int, workspaceMB int64, nnz string) *graph.Config {
	t.Helper()
	src := fmt.Sprintf(`{"solver": {"batchsize": %d, "gpu": [0]},
 "layers": [
  {"type": "Data", "label": {"top": "label", "label_dim": 1}, "dense": {"top": "dense", "dense_dim": 2},
   "sparse": [{"top": "s", "slot_num": 2, %s, "is_fixed_length": false}]},
  {"type": "DistributedSlotSparseEmbeddingHash", "bottom": "s", "top": "e",
   "sparse_embedding_hparam": {"workspace_size_per_gpu_in_mb": %d, "embedding_vec_size": 4, "combiner": "sum"}},
  {"type": "Reshape", "bottom": "e", "top": "r", "leading_dim": 8},
  {"type": "Concat", "bottom": ["r", "dense"], "top": "c"},
  {"type": "InnerProduct", "bottom": "c", "top": "fc", "fc_param": {"num_output": 1}},
  {"type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}]}`, batch, nnz, workspaceMB)
	cfg, err := graph.Read(strings.NewReader(src), "m.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func withMemoryLimit(t *testing.T, n int64) {
	old := MemoryLimit
	MemoryLimit = func() (int64, string) { return n, "test limit" }
	t.Cleanup(func() { MemoryLimit = old })
}

// TestBuildRefusesWorkspaceOverMemory: embedding tables larger than the
// memory the process may use are refused with the size they need, before
// anything is allocated (the kernel killed the process).
func TestBuildRefusesWorkspaceOverMemory(t *testing.T) {
	withMemoryLimit(t, 64<<20)
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := memConfig(t, 64, 256, `"nnz_per_slot": 1`)
	_, err = Build(cfg, be, Options{BatchSize: 64})
	if err == nil || !strings.Contains(err.Error(), "embedding tables need") || !strings.Contains(err.Error(), "64.0 MiB") ||
		!strings.Contains(err.Error(), "test limit") {
		t.Fatalf("%v", err)
	}
	if _, err := Build(memConfig(t, 64, 8, `"nnz_per_slot": 1`), be, Options{BatchSize: 64}); err != nil {
		t.Fatalf("8 MB workspace under a 64 MiB limit: %v", err)
	}
}

func TestMemoryLimitReadsSomething(t *testing.T) {
	n, what := memoryLimit()
	if n < 0 || (n > 0 && what == "") {
		t.Fatalf("%d %q", n, what)
	}
}

// TestBuildRefusesHugeCounts: counts of the model file that size
// allocations (batchsize, max_feature_num_per_sample, dense_dim) at
// 2^31-1 are refused with the size they would need, before allocating.
func TestBuildRefusesHugeCounts(t *testing.T) {
	withMemoryLimit(t, 8<<30)
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const huge = 1<<31 - 1
	for _, c := range []struct {
		batch int
		nnz   string
		want  []string
	}{
		{huge, `"nnz_per_slot": 1`, []string{"batchsize 2147483647", "GiB"}},
		{1 << 28, `"nnz_per_slot": 1`, []string{"batchsize 268435456: the model needs", "GiB", "8.0 GiB", "test limit"}},
		{64, `"max_feature_num_per_sample": 2147483647`, []string{"sparse input s", "keys in one batch"}},
		{1 << 20, `"nnz_per_slot": 1`, []string{"batchsize 1048576: the model needs", "TiB", "activations"}},
	} {
		cfg := memConfig(t, c.batch, 1, c.nnz)
		if c.batch == 1<<20 {
			cfg.Graph.Input.DenseDim = 1 << 24
		}
		_, err := Build(cfg, be, Options{BatchSize: c.batch})
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("batch %d %s: %v, want %q", c.batch, c.nnz, err, w)
				break
			}
		}
	}
}

// TestHostMemoryOnDevice: a backend whose tensors live in device memory
// (tensor.DeviceMemory, not only *gpu.Backend) keeps its embedding tables
// out of the host memory check.
func TestHostMemoryOnDevice(t *testing.T) {
	withMemoryLimit(t, 64<<20)
	cfg := memConfig(t, 64, 256, `"nnz_per_slot": 1`)
	g := *cfg.Graph
	opt := graph.DefaultOptimizer()
	if err := g.AutoSlice(opt); err != nil {
		t.Fatal(err)
	}
	info, err := g.Infer(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkHostMemory(&g, info, opt, cpuBackend(t), 64); err == nil || !strings.Contains(err.Error(), "embedding tables need") {
		t.Errorf("host backend: %v", err)
	}
	dev := &deviceBackend{stagingBackend: newStagingBackend(t), free: 1 << 30}
	if err := checkHostMemory(&g, info, opt, dev, 64); err != nil {
		t.Errorf("device backend: %v", err)
	}
}
