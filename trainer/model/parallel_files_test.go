package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestSparseFilesKeySorted: a sparse directory lists its rows in ascending
// key order whatever order the keys were first seen in, with emb_vector,
// slot_id and the optimizer states in the same order: a model loaded from
// the files predicts, trains and saves as the saved one.
func TestSparseFilesKeySorted(t *testing.T) {
	cfg := tinyLocalized()
	adam := &graph.Optimizer{Type: "Adam", UpdateType: "Global", LearningRate: 0.01, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7}
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 2, Optimizer: adam, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := formats.NewSchema(1, 1, []int{1, 1, 1}, nil, formats.KeyI64)
	b, _ := formats.NewBatch(&s, 2, nil)
	// First seen: 900 … 500 in step 1, then 3, 1, 2 in step 2.
	steps := [][2][][]int64{
		{{{900}, {500}, {700}}, {{800}, {600}, {950}}},
		{{{3}, {1}, {2}}, {{900}, {2}, {500}}},
	}
	for _, st := range steps {
		b.SetLen(0)
		b.AppendSample([]float32{1}, []float32{0.5}, st[0])
		b.AppendSample([]float32{0}, []float32{0.25}, st[1])
		if err := m.TrainStep(b); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	prefix := filepath.Join(dir, "ks")
	if err := m.Save(prefix, 2); err != nil {
		t.Fatal(err)
	}
	kd, _ := os.ReadFile(filepath.Join(dir, "ks0_sparse_2.model", "key"))
	var keys []int64
	for i := 0; i+8 <= len(kd); i += 8 {
		keys = append(keys, int64(binary.LittleEndian.Uint64(kd[i:])))
	}
	if want := []int64{1, 2, 3, 500, 600, 700, 800, 900, 950}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %v, want ascending %v", keys, want)
	}
	slots, _ := os.ReadFile(filepath.Join(dir, "ks0_sparse_2.model", "slot_id"))
	if want := u64s(1, 1, 0, 1, 1, 2, 0, 0, 2); !bytes.Equal(slots, want) { // 2: slots 2 and 1 of step 2
		t.Fatalf("slot_id %v, want slots 1 1 0 1 1 2 0 0 2", slots)
	}
	// Another seed's model loads the files: same predictions, the same
	// next step (vectors and Adam's states belong to their keys), the same
	// files.
	m2, err := Build(cfg, cpuBackend(t), Options{BatchSize: 2, Optimizer: adam, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Load(prefix, 2); err != nil {
		t.Fatal(err)
	}
	b.SetLen(0)
	b.AppendSample([]float32{1}, []float32{0.5}, [][]int64{{1}, {600}, {950}})
	b.AppendSample([]float32{0}, []float32{0.75}, [][]int64{{800}, {2}, {3}})
	p1, err := m.Predict(nil, &batchesReader{&s, []*formats.Batch{b}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := m2.Predict(nil, &batchesReader{&s, []*formats.Batch{b}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p1, p2) {
		t.Fatalf("predictions after loading %v, saved model %v", p2, p1)
	}
	for _, x := range []*Model{m, m2} {
		if err := x.TrainStep(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SaveFiles(SnapshotFiles(prefix+"a", 3, 1)); err != nil {
		t.Fatal(err)
	}
	if err := m2.SaveFiles(SnapshotFiles(prefix+"b", 3, 1)); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, SnapshotFiles(prefix+"a", 3, 1), SnapshotFiles(prefix+"b", 3, 1))
}

// sameFiles fails t unless the two snapshots' files are byte-identical.
func sameFiles(t *testing.T, a, b Files) {
	t.Helper()
	pairs := [][2]string{{a.Dense, b.Dense}, {a.DenseOpt, b.DenseOpt}}
	for i := range a.Sparse {
		for _, f := range []string{"key", "emb_vector", "slot_id"} {
			pairs = append(pairs, [2]string{filepath.Join(a.Sparse[i], f), filepath.Join(b.Sparse[i], f)})
		}
		pairs = append(pairs, [2]string{a.SparseOpt[i], b.SparseOpt[i]})
	}
	for _, p := range pairs {
		x, errA := os.ReadFile(p[0])
		y, errB := os.ReadFile(p[1])
		if os.IsNotExist(errA) && os.IsNotExist(errB) {
			continue
		}
		if errA != nil || errB != nil {
			t.Fatalf("%v, %v", errA, errB)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s (%d bytes) differs from %s (%d bytes)", p[1], len(y), p[0], len(x))
		}
	}
}

// onRanks runs fn on each of w in-process CPU ranks at once and returns
// their errors.
func onRanks(t *testing.T, w int, fn func(c collective.Comm) error) []error {
	t.Helper()
	bes := make([]tensor.Backend, w)
	for i := range bes {
		bes[i] = cpuBackend(t)
	}
	cs, err := collective.NewLocal(bes, collective.Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, w)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			errs[i] = fn(c)
		}()
	}
	wg.Wait()
	return errs
}

// TestGatherRows: rows spread over ranks (keys owned by floorMod, in
// chunks of more than one AllToAllV round) arrive on rank 0 merged in key
// order with their slots, vectors and states; a key on two ranks is an
// error naming both.
func TestGatherRows(t *testing.T) {
	const w, vec = 3, 5
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int64]bool{}
	var all []int64
	for len(all) < 4000 {
		k := rng.Int64N(1<<40) - 1<<39
		if !seen[k] {
			seen[k] = true
			all = append(all, k)
		}
	}
	row := func(k int64, j int) float32 { return float32(k%1000)/7 + float32(j) }
	parts := make([]*sparseRows, w)
	for r := range parts {
		p := &sparseRows{vec: vec, states: make([][]float32, 2)}
		for _, k := range all {
			if !(layers.Shard{Rank: r, World: w}).OwnsKey(k) {
				continue
			}
			p.keys = append(p.keys, k)
			p.slots = append(p.slots, k&7)
			for j := range vec {
				p.emb = append(p.emb, row(k, j))
				p.states[0] = append(p.states[0], -row(k, j))
				p.states[1] = append(p.states[1], 2*row(k, j))
			}
		}
		parts[r] = p
	}
	defer func(c int) { gatherChunkRows = c }(gatherChunkRows)
	gatherChunkRows = 100 // 14 rounds of 100 rows
	got := make([]*sparseRows, w)
	errs := onRanks(t, w, func(c collective.Comm) error {
		var err error
		got[c.Rank()], err = gatherRows(c, parts[c.Rank()], true)
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if got[1] != nil || got[2] != nil {
		t.Fatal("ranks 1 and 2 got rows")
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	g := got[0]
	if !reflect.DeepEqual(g.keys, all) {
		t.Fatalf("rank 0 got %d keys, not the %d in ascending order", len(g.keys), len(all))
	}
	for i, k := range g.keys {
		if g.slots[i] != k&7 {
			t.Fatalf("key %d: slot %d, want %d", k, g.slots[i], k&7)
		}
		for j := range vec {
			if g.emb[i*vec+j] != row(k, j) || g.states[0][i*vec+j] != -row(k, j) || g.states[1][i*vec+j] != 2*row(k, j) {
				t.Fatalf("key %d: vector or states not the key's", k)
			}
		}
	}
	// Key 42 on ranks 0 and 2.
	dup := []*sparseRows{{vec: 1, keys: []int64{7, 42}, emb: []float32{1, 2}}, {vec: 1, keys: []int64{5}, emb: []float32{3}}, {vec: 1, keys: []int64{42}, emb: []float32{4}}}
	errs = onRanks(t, 3, func(c collective.Comm) error {
		_, err := gatherRows(c, dup[c.Rank()], false)
		return err
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "key 42 is held by ranks 0 and 2") {
		t.Errorf("a key on two ranks: %v", errs[0])
	}
}

// TestAgree: a save phase that failed on one rank fails on all.
func TestAgree(t *testing.T) {
	errs := onRanks(t, 3, func(c collective.Comm) error {
		m := &Model{comm: c}
		var err error
		if c.Rank() == 1 {
			err = os.ErrPermission
		}
		return m.agree(err)
	})
	if errs[1] != os.ErrPermission {
		t.Errorf("the failing rank: %v", errs[1])
	}
	for _, r := range []int{0, 2} {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "another rank of the group failed") {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
	errs = onRanks(t, 2, func(c collective.Comm) error { return (&Model{comm: c}).agree(nil) })
	if errs[0] != nil || errs[1] != nil {
		t.Errorf("no failure: %v", errs)
	}
}

// dirFiles reads every file under dir (relative name → bytes).
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameDirs fails t unless a and b hold the same files, byte for byte.
func sameDirs(t *testing.T, what string, a, b string) {
	t.Helper()
	x, y := dirFiles(t, a), dirFiles(t, b)
	if len(x) == 0 {
		t.Fatalf("%s: no files in %s", what, a)
	}
	for name, data := range x {
		if other, ok := y[name]; !ok {
			t.Errorf("%s: %s missing", what, name)
		} else if !bytes.Equal(data, other) {
			t.Errorf("%s: %s differs (%d and %d bytes)", what, name, len(data), len(other))
		}
	}
	for name := range y {
		if _, ok := x[name]; !ok {
			t.Errorf("%s: extra file %s", what, name)
		}
	}
}

// TestParallelFilesAcrossRanks: a model trained over 2 ranks and saved
// (rank 0 gathering the sharded rows), loaded into 1 rank and into 4 ranks
// (each keeping the rows it owns) and saved again, gives byte-identical
// files — every kind of embedding, Adam's states, slot_id, the manifest —
// and the reloaded models predict as the saved one.
func TestParallelFilesAcrossRanks(t *testing.T) {
	multi := newParData(t, 1024, []int{2, 1, 3, 1, 2, 1})
	one := newParData(t, 1024, nil)
	adam := &graph.Optimizer{Type: "Adam", UpdateType: "Global", LearningRate: 0.01, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7}
	cases := []struct {
		name string
		d    parData
		cfg  func(d parData) (*graph.Config, error)
	}{
		{"wdl-distributed-localized", multi, func(d parData) (*graph.Config, error) {
			cfg, err := graph.Reference("wdl", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, NNZPerSlot: d.nnz, VecSize: 4, Width: 1.0 / 64, Optimizer: adam})
			if err == nil {
				cfg.Graph.Embeddings[1].Type = graph.LocalizedHash
			}
			return cfg, err
		}},
		{"dcn-onehot", one, func(d parData) (*graph.Config, error) {
			return graph.Reference("dcn", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, VecSize: 4, Width: 1.0 / 64, Optimizer: adam,
				EmbeddingType: graph.LocalizedOneHot})
		}},
	}
	const batch, iters = 64, 6
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := c.cfg(c.d)
			if err != nil {
				t.Fatal(err)
			}
			o := Options{BatchSize: batch, Seed: 7}
			base := t.TempDir()
			prefix := func(w int) string { return filepath.Join(base, fmt.Sprintf("w%d", w), "m") }
			// Train over 2 ranks and save.
			g2, err := NewGroup(cfg, hostWorld(t, 2).Comms, o)
			if err != nil {
				t.Fatal(err)
			}
			open := func(m *Model, s Source) func() (formats.Reader, error) {
				return func() (formats.Reader, error) { return m.Open(s) }
			}
			err = g2.Run(context.Background(), func(ctx context.Context, m *Model) error {
				if _, err := m.Fit(ctx, FitOptions{OpenTrain: open(m, c.d.train), MaxIter: iters}); err != nil {
					return err
				}
				return m.Save(prefix(2), iters)
			})
			if err != nil {
				t.Fatal(err)
			}
			want, err := g2.PredictSamples(context.Background(), nil, open(g2.Models[0], c.d.eval), 256)
			if err != nil {
				t.Fatal(err)
			}
			// Load into 1 rank and into 4, save again.
			for _, w := range []int{1, 4} {
				var g *Group
				if w == 1 {
					m, err := Build(cfg, cpuBackend(t), o)
					if err != nil {
						t.Fatal(err)
					}
					g = &Group{Models: []*Model{m}}
				} else if g, err = NewGroup(cfg, hostWorld(t, w).Comms, o); err != nil {
					t.Fatal(err)
				}
				err := g.Run(context.Background(), func(ctx context.Context, m *Model) error {
					if err := m.Load(prefix(2), iters); err != nil {
						return err
					}
					return m.Save(prefix(w), iters)
				})
				if err != nil {
					t.Fatalf("%d ranks: %v", w, err)
				}
				sameDirs(t, fmt.Sprintf("saved by 2 ranks, reloaded and saved by %d", w), filepath.Dir(prefix(2)), filepath.Dir(prefix(w)))
				got, err := g.PredictSamples(context.Background(), nil, open(g.Models[0], c.d.eval), 256)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
						t.Fatalf("%d ranks: prediction %d is %v, the 2-rank model's %v", w, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestReadRows: a rank reads only its rows of a vector or state file (each
// block), and a file of another size is refused by name.
func TestReadRows(t *testing.T) {
	const n, vec = 5, 3
	var v []float32
	for b := range 2 {
		for i := range n * vec {
			v = append(v, float32(100*b+i))
		}
	}
	p := filepath.Join(t.TempDir(), "opt")
	os.WriteFile(p, f32bytes(nil, v), 0o644)
	got, err := readRows(p, 2, n, vec, []int{1, 4})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{3, 4, 5, 12, 13, 14}, {103, 104, 105, 112, 113, 114}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if _, err := readRows(p, 2, n+1, vec, nil); err == nil || !strings.Contains(err.Error(), p+": 120 bytes, the model needs 144 (36 float32)") {
		t.Errorf("a short file: %v", err)
	}
}
