package graph

import (
	"errors"
	"strings"
	"testing"
)

// TestWithDense: SparseOnly keeps the input and embeddings only; WithDense
// puts another graph's dense network on them, and one reading a tensor the
// sparse graph does not define is refused naming it and its source.
func TestWithDense(t *testing.T) {
	a, err := Reference("wdl", RefOptions{DenseDim: 4, SlotSizes: []int64{10, 20, 30}, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Reference("wdl", RefOptions{DenseDim: 4, SlotSizes: []int64{10, 20, 30}, VecSize: 4, Width: 1.0 / 32})
	if err != nil {
		t.Fatal(err)
	}
	s := a.SparseOnly()
	if len(s.Graph.Layers) != 0 || len(s.Graph.Embeddings) != len(a.Graph.Embeddings) || len(a.Graph.Layers) == 0 {
		t.Fatalf("SparseOnly: %d layers, %d embeddings (source %d layers)", len(s.Graph.Layers), len(s.Graph.Embeddings), len(a.Graph.Layers))
	}
	c, err := a.WithDense(b.Graph, "b.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Graph.Layers) != len(b.Graph.Layers) || c.Graph.Layers[0].NumOutput != b.Graph.Layers[0].NumOutput || len(a.Graph.Layers) == 0 {
		t.Errorf("WithDense: %d layers", len(c.Graph.Layers))
	}
	b.Graph.Layers[0].Bottom = append([]string(nil), b.Graph.Layers[0].Bottom...)
	b.Graph.Layers[0].Bottom[0] = "no_such_embedding"
	_, err = a.WithDense(b.Graph, "b.json", nil)
	if err == nil || !strings.Contains(err.Error(), "b.json") || !strings.Contains(err.Error(), "no_such_embedding") {
		t.Errorf("dense network on an unknown tensor: %v", err)
	}
	var ge *Error
	if !errors.As(err, &ge) {
		t.Errorf("error %v does not unwrap to *Error", err)
	}
}
