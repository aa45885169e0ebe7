package parquet

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// TestSplit checks the column cuts of row groups: Workers/2 parts, or
// ⌈2·Workers/row groups⌉ when the dataset has fewer row groups than
// Workers (at most one part per column), increasing, covering every
// column, with the uncompressed bytes balanced (int64 cats weigh twice a
// float column).
func TestSplit(t *testing.T) {
	s := formats.NewSchema(1, 13, make([]int, 26), nil, formats.KeyI64)
	for i := range s.Slots {
		s.Slots[i].MaxNNZ, s.Slots[i].Hotness = 1, 1
	}
	// 20 row groups of 500 rows, and 2 of 5000.
	d := formatstest.NewDataset(rand.New(rand.NewPCG(1, 2)), s, 10000, 1, formatstest.AnyFloat)
	many := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 500, Compression: "none"}})
	few := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 5000, Compression: "none"}})
	for _, tc := range []struct {
		list    string
		workers int
		want    []int
	}{
		{many, 8, []int{0, 16, 24, 32, 40}}, // 14 float + 26 int64 columns: 18, 16, 16, 16 %
		{many, 4, []int{0, 24, 40}},
		{many, 3, []int{0, 40}},
		{many, 16, []int{0, 9, 16, 20, 24, 28, 32, 36, 40}},
		{many, 400, nil}, // fewer row groups than workers: one column a task
		{few, 2, []int{0, 40}},
		{few, 3, []int{0, 18, 29, 40}}, // ⌈2·3/2⌉ = 3 tasks, cut at thirds of the bytes
	} {
		r, err := OpenList(tc.list, &s, Options{Options: formats.Options{BatchSize: 100, Workers: tc.workers}})
		if err != nil {
			t.Fatal(err)
		}
		got := r.split(r.first, 1)
		r.Close()
		want := tc.want
		if want == nil {
			for c := 0; c <= 40; c++ {
				want = append(want, c)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("workers %d: cuts %v, want %v", tc.workers, got, want)
		}
	}
}
