package model

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/graph"
)

// TestHybridIsOneHot: on one device a HybridSparseEmbedding trains exactly
// as the LocalizedSlotSparseEmbeddingOneHot of the same slot_size_array
// (same weights after a step, same model files), and its hybrid
// parameters survive graph_to_json.
func TestHybridIsOneHot(t *testing.T) {
	sizes := []int64{5, 7, 3}
	oneHot := multiTaskConfig(t, 2, sizes)
	js := strings.Replace(fmt.Sprintf(multiTaskJSON, 2, 3, "5, 7, 3", 24), `"type": "LocalizedSlotSparseEmbeddingOneHot"`, `"type": "HybridSparseEmbedding"`, 1)
	js = strings.Replace(js, `"combiner": "sum",`, `"combiner": "sum", "max_num_frequent_categories": 4, "communication_type": "NVLink_SingleNode",`, 1)
	hybrid, err := graph.Read(strings.NewReader(js), "hybrid.json")
	if err != nil {
		t.Fatal(err)
	}
	if hybrid.Graph.Embeddings[0].Type != graph.Hybrid {
		t.Fatalf("embedding type %s", hybrid.Graph.Embeddings[0].Type)
	}
	dir := t.TempDir()
	var files [2][]string
	var weights [2][][]float32
	for i, cfg := range []*graph.Config{oneHot, hybrid} {
		m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8, Seed: 9})
		if err != nil {
			t.Fatalf("%s: %v", cfg.Graph.Embeddings[0].Type, err)
		}
		if err := m.TrainStep(multiTaskBatch(t, m, sizes)); err != nil {
			t.Fatal(err)
		}
		weights[i] = m.DenseWeights(t)
		prefix := filepath.Join(dir, fmt.Sprint(i), "m")
		if err := m.Save(prefix, 1); err != nil {
			t.Fatal(err)
		}
		filepath.Walk(filepath.Dir(prefix), func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && !strings.HasSuffix(p, ".json") {
				b, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(filepath.Dir(prefix), p)
				files[i] = append(files[i], rel+":"+string(b))
			}
			return nil
		})
	}
	for k := range weights[0] {
		if !eq(weights[0][k], weights[1][k]) {
			t.Errorf("dense parameter %d differs between OneHot and Hybrid", k)
		}
	}
	if len(files[0]) == 0 || strings.Join(files[0], "\n") != strings.Join(files[1], "\n") {
		t.Errorf("model files differ: %d and %d files", len(files[0]), len(files[1]))
	}
	var b bytes.Buffer
	if err := hybrid.Graph.WriteJSON(&b, graph.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"HybridSparseEmbedding"`, `"max_num_frequent_categories": 4`, `"NVLink_SingleNode"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("graph JSON lacks %s", want)
		}
	}
}
