package parquet

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// writeDataset writes d as a dataset in dir and returns the file list path.
func writeDataset(t testing.TB, dir string, d *formatstest.Dataset, o DatasetOptions) string {
	t.Helper()
	w, err := NewDatasetWriter(dir, &d.Schema, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAll(w, 37); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, FileListName)
}

func readAll(t testing.TB, list string, s *formats.Schema, o Options, bs, limit int) *formatstest.Dataset {
	t.Helper()
	r, err := OpenList(list, s, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := formatstest.ReadAll(r, bs, limit)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rs    formatstest.RandomSchema
		wo    WriterOptions
		rows  int
		per   int64
		rg    int
		batch int
	}{
		{"onehot-i32-snappy", formatstest.RandomSchema{MaxLabel: 2, MaxDense: 5, MaxSlots: 6, OneHot: true, KeyType: formats.KeyU32}, WriterOptions{}, 1000, 300, 70, 64},
		{"onehot-i64-zstd", formatstest.RandomSchema{MaxLabel: 1, MaxDense: 13, MaxSlots: 8, OneHot: true, KeyType: formats.KeyI64}, WriterOptions{Compression: "zstd"}, 777, 250, 33, 100},
		{"multihot-i32-none", formatstest.RandomSchema{MaxLabel: 3, MaxDense: 4, MaxSlots: 5, MaxNNZ: 4, KeyType: formats.KeyU32}, WriterOptions{Compression: "none", CatType: "uint32"}, 900, 400, 128, 50},
		{"multihot-i64-int32", formatstest.RandomSchema{MaxLabel: 1, MaxDense: 2, MaxSlots: 4, MaxNNZ: 3, KeyType: formats.KeyI64}, WriterOptions{CatType: "int32", Dictionary: true}, 500, 0, 41, 77},
		{"multihot-uint64", formatstest.RandomSchema{MaxLabel: 1, MaxDense: 0, MaxSlots: 3, MaxNNZ: 5, KeyType: formats.KeyI64}, WriterOptions{CatType: "uint64"}, 300, 120, 50, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			s := formatstest.NewSchema(rng, tc.rs)
			if !tc.rs.OneHot {
				// nnz 0 needs a list column; a MaxNNZ 1 slot is written scalar.
				for i := range s.Slots {
					s.Slots[i].MaxNNZ = max(s.Slots[i].MaxNNZ, 2)
				}
			}
			d := formatstest.NewDataset(rng, s, tc.rows, 0, formatstest.AnyFloat)
			tc.wo.RowGroupSize = tc.rg
			list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: tc.wo, RowsPerFile: tc.per})
			var ref *formatstest.Dataset
			for _, workers := range []int{1, 4, 12} {
				got := readAll(t, list, &s, Options{Options: formats.Options{BatchSize: tc.batch, Workers: workers}}, tc.batch, 0)
				if diff := formatstest.Diff(d, got); diff != "" {
					t.Fatalf("workers=%d: %s", workers, diff)
				}
				if ref != nil && formatstest.Diff(ref, got) != "" {
					t.Fatal("workers changed the output")
				}
				ref = got
			}
			// slot offsets
			sizes := s.SlotSizes()
			got := readAll(t, list, &s, Options{Options: formats.Options{BatchSize: tc.batch, SlotSizeArray: sizes}}, tc.batch, 0)
			if diff := formatstest.Diff(d.WithOffsets(sizes), got); diff != "" {
				t.Fatalf("offsets: %s", diff)
			}
			// nil schema
			r, err := OpenList(list, nil, Options{KeyType: s.KeyType, Options: formats.Options{BatchSize: tc.batch}})
			if err != nil {
				t.Fatal(err)
			}
			got, err = formatstest.ReadAll(r, tc.batch, 0)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if diff := formatstest.Diff(d, got); diff != "" {
				t.Fatalf("nil schema: %s", diff)
			}
		})
	}
}

func TestRepeatAndShuffle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 3, MaxSlots: 3, MaxNNZ: 2})
	d := formatstest.NewDataset(rng, s, 250, 1, formatstest.AnyFloat)
	list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 30}, RowsPerFile: 50})
	// repeat: 2.5 epochs in batches of 64 (batches span the epoch boundary)
	got := readAll(t, list, &s, Options{Options: formats.Options{BatchSize: 64, Repeat: true, Workers: 3}}, 64, 640)
	want := &formatstest.Dataset{Schema: s}
	for len(want.Labels) < 640 {
		want.Labels = append(want.Labels, d.Labels...)
		want.Dense = append(want.Dense, d.Dense...)
		want.Keys = append(want.Keys, d.Keys...)
	}
	want.Labels, want.Dense, want.Keys = want.Labels[:640], want.Dense[:640], want.Keys[:640]
	if diff := formatstest.Diff(want, got); diff != "" {
		t.Fatalf("repeat: %s", diff)
	}
	// shuffle: same seed same order whatever the workers; files permuted.
	o := Options{Options: formats.Options{BatchSize: 64, Shuffle: true, Seed: 42, Repeat: true, Workers: 1}}
	a := readAll(t, list, &s, o, 64, 500)
	o.Workers = 4
	b := readAll(t, list, &s, o, 64, 500)
	if diff := formatstest.Diff(a, b); diff != "" {
		t.Fatalf("shuffle not deterministic: %s", diff)
	}
	if formatstest.Diff(a, want) == "" {
		t.Fatal("shuffle kept file order")
	}
	// each epoch is a permutation of whole files
	perm := rand.New(rand.NewPCG(42, 0)).Perm(5)
	for i, f := range perm {
		for j := 0; j < 50; j++ {
			if formatstest.Diff(&formatstest.Dataset{Labels: [][]float32{a.Labels[i*50+j]}, Dense: [][]float32{a.Dense[i*50+j]}, Keys: [][][]int64{a.Keys[i*50+j]}},
				&formatstest.Dataset{Labels: [][]float32{d.Labels[f*50+j]}, Dense: [][]float32{d.Dense[f*50+j]}, Keys: [][][]int64{d.Keys[f*50+j]}}) != "" {
				t.Fatalf("epoch 0 position %d: not file %d row %d", i*50+j, f, j)
			}
		}
	}
	o.Seed = 43
	c := readAll(t, list, &s, o, 64, 500)
	if formatstest.Diff(a, c) == "" {
		t.Fatal("different seeds gave the same order")
	}
}

func TestCloseStopsGoroutines(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 3, MaxSlots: 4, OneHot: true})
	d := formatstest.NewDataset(rng, s, 2000, 1, formatstest.AnyFloat)
	list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 100}, RowsPerFile: 500})
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: 50, Repeat: true, Workers: 4}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(&s, 50, nil)
		for j := 0; j < i*7; j++ {
			if _, err := r.Read(b); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
		if _, err := r.Read(b); err == nil {
			t.Fatal("Read after Close succeeded")
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

func TestEpochEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 1, MaxSlots: 2, OneHot: true})
	d := formatstest.NewDataset(rng, s, 130, 1, formatstest.AnyFloat)
	list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 40}, RowsPerFile: 60})
	r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := formats.NewBatch(&s, 64, nil)
	var sizes []int
	for {
		n, err := r.Read(b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, n)
	}
	if fmt.Sprint(sizes) != "[64 64 2]" {
		t.Fatalf("batch sizes %v", sizes)
	}
	if n, err := r.Read(b); n != 0 || err != io.EOF {
		t.Fatalf("after EOF: %d, %v", n, err)
	}
}

var _ = errors.Is
var _ = os.Remove

// TestLargeBatches covers the parallel copy of Read (batches of many rows).
func TestLargeBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, oneHot := range []bool{true, false} {
		s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 2, MaxDense: 3, MaxSlots: 3, MaxNNZ: 3, OneHot: oneHot, KeyType: formats.KeyU32})
		d := formatstest.NewDataset(rng, s, 30000, 1, formatstest.AnyFloat)
		list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 7000}, RowsPerFile: 16000})
		for _, workers := range []int{1, 4, 12} {
			got := readAll(t, list, &s, Options{Options: formats.Options{BatchSize: 12000, Workers: workers}}, 12000, 0)
			if diff := formatstest.Diff(d, got); diff != "" {
				t.Fatalf("one-hot %v workers %d: %s", oneHot, workers, diff)
			}
		}
	}
}
