package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// TestDenseFrom: train --config A --dense-from B takes A's input and
// embeddings and B's dense network (HugeCTR construct_from_json(A,
// include_dense_network=False) plus B's layers), loads only A's embedding
// files from --load-prefix, and refuses a dense network that reads a
// tensor A does not define, naming B.
func TestDenseFrom(t *testing.T) {
	src, eval, _ := genData(t, datagen.Norm, []int64{40, 60, 20}, 4)
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")
	common := []string{"--slot-size-array", "40,60,20", "--dense-dim", "4", "--vec-size", "8", "--batchsize", "256",
		"--source", src, "--eval-source", eval, "--max-iter", "4", "--device", "cpu"}
	run := func(args ...string) string {
		t.Helper()
		out, err := runCtrkit(t, append(append([]string{"train"}, common...), args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	run("--model", "wdl", "--width", "0.03125", "--snapshot-prefix", filepath.Join(dir, "A"), "--graph-out", a)
	run("--model", "wdl", "--width", "0.0625", "--snapshot-prefix", filepath.Join(dir, "B"), "--graph-out", b)
	run("--config", a, "--dense-from", b, "--load-prefix", filepath.Join(dir, "A"), "--load-iter", "4",
		"--snapshot-prefix", filepath.Join(dir, "C"), "--graph-out", c)
	ga, _ := graph.ReadFile(a)
	gb, _ := graph.ReadFile(b)
	gc, err := graph.ReadFile(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(gc.Graph.Layers) != len(gb.Graph.Layers) || len(gc.Graph.Embeddings) != len(ga.Graph.Embeddings) {
		t.Fatalf("composed graph: %d layers (B %d), %d embeddings (A %d)", len(gc.Graph.Layers), len(gb.Graph.Layers), len(gc.Graph.Embeddings), len(ga.Graph.Embeddings))
	}
	for i := range gb.Graph.Layers {
		if gc.Graph.Layers[i].NumOutput != gb.Graph.Layers[i].NumOutput {
			t.Errorf("layer %d: num_output %d, B's %d", i, gc.Graph.Layers[i].NumOutput, gb.Graph.Layers[i].NumOutput)
		}
	}
	// A's dense file does not fit B's network: loading it would fail, so a
	// run that succeeds loaded the embedding files only. A missing
	// embedding file is an error.
	out, err := runCtrkit(t, append(append([]string{"train"}, common...), "--config", a, "--dense-from", b,
		"--load-prefix", filepath.Join(dir, "nope"), "--load-iter", "4")...)
	if err == nil || !strings.Contains(err.Error()+out, "nope0_sparse_4.model") {
		t.Errorf("missing embedding files: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "bad.json")
	gb.Graph.Layers[0].Bottom = []string{"no_such_embedding"}
	if err := gb.Graph.WriteFile(bad, graph.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = runCtrkit(t, append(append([]string{"train"}, common...), "--config", a, "--dense-from", bad)...)
	if err == nil || !strings.Contains(err.Error()+out, "bad.json") {
		t.Errorf("dense network on an unknown tensor: %v\n%s", err, out)
	}
}
