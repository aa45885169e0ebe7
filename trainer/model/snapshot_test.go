package model

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// snapModel builds a small DCN trained by Adam with a warmup, so the
// learning rate depends on the iteration.
func snapModel(t *testing.T, seed uint64) *Model {
	t.Helper()
	cfg, err := graph.Reference("dcn", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	opt := graph.DefaultOptimizer()
	opt.LearningRate, opt.WarmupSteps = 0.01, 100
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: seed, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fitSnap(t *testing.T, m *Model, prefix string, maxIter, every, keep int) FitResult {
	t.Helper()
	train := newPlanted(1, 1024, 4, smallSlots)
	res, err := m.Fit(context.Background(), FitOptions{OpenTrain: func() (formats.Reader, error) { return train.reader(64), nil },
		MaxIter: maxIter, Snapshot: every, SnapshotPrefix: prefix, KeepSnapshots: keep})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestResumeContinues: a run resumed from a snapshot continues its
// iteration count and learning-rate schedule and never rewrites the
// snapshot it loaded.
func TestResumeContinues(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "run")
	fitSnap(t, snapModel(t, 1), prefix, 20, 10, 0)
	before, err := os.ReadFile(prefix + "_dense_20.model")
	if err != nil {
		t.Fatal(err)
	}
	manifest20, _ := os.ReadFile(ManifestFile(prefix, 20))

	m := snapModel(t, 2)
	if err := m.LoadSnapshot(prefix, 20, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if m.Iter() != 20 || m.opt.Step() != 20 || m.LR() != m.sched.LR(21) {
		t.Fatalf("after load: iter %d, optimizer step %d, LR %v (want %v)", m.Iter(), m.opt.Step(), m.LR(), m.sched.LR(21))
	}
	res := fitSnap(t, m, prefix, 30, 10, 0)
	if res.First != 20 || res.Iters != 30 {
		t.Errorf("resumed Fit ran iterations %d..%d, want 20..30", res.First, res.Iters)
	}
	after, _ := os.ReadFile(prefix + "_dense_20.model")
	manifestAfter, _ := os.ReadFile(ManifestFile(prefix, 20))
	if !bytes.Equal(before, after) || !bytes.Equal(manifest20, manifestAfter) {
		t.Error("the resumed run rewrote the snapshot it loaded")
	}
	if err := snapModel(t, 3).Load(prefix, 30); err != nil {
		t.Errorf("snapshot 30 of the resumed run: %v", err)
	}
	// max_iter counts from 0: nothing is left to do at iteration 30.
	m3 := snapModel(t, 3)
	if err := m3.Load(prefix, 30); err != nil {
		t.Fatal(err)
	}
	train := newPlanted(1, 1024, 4, smallSlots)
	if _, err := m3.Fit(context.Background(), FitOptions{OpenTrain: func() (formats.Reader, error) { return train.reader(64), nil }, MaxIter: 30}); err == nil ||
		!strings.Contains(err.Error(), "nothing to train") {
		t.Errorf("Fit past max_iter: %v", err)
	}
}

// TestSnapshotRefusals: an incomplete, mismatched or partial snapshot is
// refused with the file named; the optimizer state can be started fresh;
// HugeCTR's files without a manifest load with a note.
func TestSnapshotRefusals(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "s")
	fitSnap(t, snapModel(t, 1), prefix, 20, 10, 0)
	load := func(o LoadOptions) error { return snapModel(t, 7).LoadSnapshot(prefix, 10, o) }
	if err := load(LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	restore := func(name string) func() {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return func() { os.WriteFile(name, data, 0o644) }
	}
	// A file of another snapshot (a mixed set).
	undo := restore(prefix + "0_sparse_10.model/emb_vector")
	other, _ := os.ReadFile(prefix + "0_sparse_20.model/emb_vector")
	os.WriteFile(prefix+"0_sparse_10.model/emb_vector", other, 0o644)
	if err := load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), "emb_vector: CRC-32C") {
		t.Errorf("mixed set: %v", err)
	}
	undo()
	// An optimizer file missing: refused, unless started fresh.
	undo = restore(prefix + "_opt_dense_10.model")
	os.Remove(prefix + "_opt_dense_10.model")
	if err := load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), "s_opt_dense_10.model: missing") {
		t.Errorf("missing optimizer state: %v", err)
	}
	if err := load(LoadOptions{FreshOptimizer: true}); err != nil {
		t.Errorf("fresh optimizer: %v", err)
	}
	undo()
	// An interrupted save.
	undo = restore(ManifestFile(prefix, 10))
	os.WriteFile(ManifestFile(prefix, 10), []byte(`{"ctrkit_snapshot": 1, "complete": false, "iter": 10}`), 0o644)
	if err := load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), "incomplete: its save, or its removal by --keep-snapshots, was interrupted") {
		t.Errorf("incomplete snapshot: %v", err)
	}
	undo()
	// Optimizer state of another optimizer.
	cfg, _ := graph.Reference("dcn", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
	mom := graph.DefaultOptimizer()
	mom.Type = "AdaGrad"
	ma, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Optimizer: mom})
	if err != nil {
		t.Fatal(err)
	}
	if err := ma.LoadSnapshot(prefix, 10, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "optimizer state of Adam") {
		t.Errorf("Adam state into AdaGrad: %v", err)
	}
	// HugeCTR's files: no manifest.
	os.Remove(ManifestFile(prefix, 10))
	var note bytes.Buffer
	if err := load(LoadOptions{Log: &note}); err != nil || !strings.Contains(note.String(), "no manifest") || strings.Count(note.String(), "\n") != 1 {
		t.Errorf("HugeCTR files: %v, note %q", err, note.String())
	}
	os.Remove(prefix + "0_opt_sparse_10.model")
	if err := load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), "s0_opt_sparse_10.model") || !strings.Contains(err.Error(), "--load-optimizer=false") {
		t.Errorf("HugeCTR files without optimizer state: %v", err)
	}
	if err := load(LoadOptions{FreshOptimizer: true}); err != nil {
		t.Errorf("HugeCTR files, fresh optimizer: %v", err)
	}
	os.RemoveAll(prefix + "0_sparse_10.model")
	if err := load(LoadOptions{FreshOptimizer: true}); err == nil || !strings.Contains(err.Error(), "s0_sparse_10.model/key") {
		t.Errorf("HugeCTR files without the sparse model: %v", err)
	}
}

// TestKeepSnapshots: only the newest K snapshots remain, each complete.
func TestKeepSnapshots(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "k")
	fitSnap(t, snapModel(t, 1), prefix, 25, 5, 2)
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var want []string
	for _, it := range []string{"20", "25"} {
		want = append(want, "k0_opt_sparse_"+it+".model", "k0_sparse_"+it+".model", "k_dense_"+it+".model", "k_opt_dense_"+it+".model", "k_snapshot_"+it+".json")
	}
	sort.Strings(want)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("files after keeping 2:\n%v\nwant\n%v", names, want)
	}
	for _, it := range []int64{20, 25} {
		if err := snapModel(t, 2).Load(prefix, it); err != nil {
			t.Error(err)
		}
	}
}
