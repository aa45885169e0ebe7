package parquet

import (
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// readNext reads a whole epoch with Next.
func readNext(t *testing.T, r *Reader) *formatstest.Dataset {
	t.Helper()
	got := &formatstest.Dataset{Schema: *r.Schema()}
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := formatstest.CheckBatch(b); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			got.AppendFrom(b, i)
		}
	}
}

// TestNext checks that Next lends the batches Read returns: one-hot
// datasets with row groups that are and are not multiples of the batch size
// (views and copies), a multi-hot dataset (copies), with 1 and 3 workers.
func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name          string
		oneHot        bool
		rows, per, rg int
		batch         int
		kt            formats.KeyType
	}{
		{"onehot-aligned", true, 1000, 400, 128, 64, formats.KeyI64},
		{"onehot-aligned-u32", true, 1000, 0, 128, 64, formats.KeyU32},
		{"onehot-unaligned", true, 1000, 300, 70, 64, formats.KeyI64},
		{"multihot", false, 600, 0, 100, 50, formats.KeyI64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, uint64(tc.rows)))
			s := formats.NewSchema(2, 3, []int{1, 1, 1, 1}, nil, tc.kt)
			if !tc.oneHot {
				s = formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 2, MaxDense: 4, MaxSlots: 5, MaxNNZ: 3, KeyType: tc.kt})
				for i := range s.Slots {
					s.Slots[i].MaxNNZ = max(s.Slots[i].MaxNNZ, 2)
				}
			}
			minNNZ := 0
			if tc.oneHot {
				minNNZ = 1
			}
			d := formatstest.NewDataset(rng, s, tc.rows, minNNZ, formatstest.AnyFloat)
			list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: tc.rg}, RowsPerFile: int64(tc.per)})
			for _, workers := range []int{1, 3} {
				r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: tc.batch, Workers: workers}})
				if err != nil {
					t.Fatal(err)
				}
				got := readNext(t, r)
				if _, err := r.Next(); !errors.Is(err, io.EOF) {
					t.Fatalf("Next after the end: %v", err)
				}
				r.Close()
				if _, err := r.Next(); err == nil {
					t.Fatal("Next after Close: no error")
				}
				if diff := formatstest.Diff(d, got); diff != "" {
					t.Fatalf("workers=%d: %s", workers, diff)
				}
			}
		})
	}
}
