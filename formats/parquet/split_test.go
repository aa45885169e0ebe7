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
// float column). The last row groups of an epoch are split like a dataset
// of that many row groups (epoch mode, more than one worker), with 2 or 3
// workers only those of a last wave that is not full.
func TestSplit(t *testing.T) {
	s := formats.NewSchema(1, 13, make([]int, 26), nil, formats.KeyI64)
	for i := range s.Slots {
		s.Slots[i].MaxNNZ, s.Slots[i].Hotness = 1, 1
	}
	// 20 row groups of 500 rows, and 2 of 5000.
	d := formatstest.NewDataset(rand.New(rand.NewPCG(1, 2)), s, 10000, 1, formatstest.AnyFloat)
	many := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 500, Compression: "none"}})
	few := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 5000, Compression: "none"}})
	odd := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 2000, Compression: "none"}})
	for _, tc := range []struct {
		list    string
		workers int
		want    []int
		left    int64 // rows from row group 1 to the epoch's end (0: many)
		repeat  bool
	}{
		{many, 8, []int{0, 16, 24, 32, 40}, 0, false}, // 14 float + 26 int64 columns: 18, 16, 16, 16 %
		{many, 4, []int{0, 24, 40}, 0, false},
		{many, 3, []int{0, 40}, 0, false},
		{many, 16, []int{0, 9, 16, 20, 24, 28, 32, 36, 40}, 0, false},
		{many, 400, nil, 0, false}, // fewer row groups than workers: one column a task
		{few, 2, []int{0, 40}, 0, false},
		{few, 3, []int{0, 18, 29, 40}, 0, false}, // ⌈2·3/2⌉ = 3 tasks, cut at thirds of the bytes
		// The epoch's last row groups, 2 workers. 20 of 500 rows: the
		// last wave of two is full, so whole. 5 of 2000 rows: the last,
		// alone in its wave, by 4 tasks; the two before it (a full wave),
		// repeat mode or one worker: whole.
		{many, 2, []int{0, 40}, 1000, false},
		{many, 2, []int{0, 40}, 500, false},
		{odd, 2, []int{0, 16, 24, 32, 40}, 2000, false},
		{odd, 2, []int{0, 40}, 4000, false},
		{odd, 2, []int{0, 40}, 2000, true},
		{odd, 1, []int{0, 40}, 2000, false},
		// 3 workers, 5 row groups: a last wave of 2, each by 3 tasks.
		{odd, 3, []int{0, 18, 29, 40}, 4000, false},
		{odd, 3, []int{0, 40}, 6000, false},
		{many, 8, []int{0, 16, 24, 32, 40}, 4000, false},                // 8 left: Workers/2 as before
		{many, 8, []int{0, 9, 16, 20, 24, 28, 32, 36, 40}, 1000, false}, // 2 left: 8 tasks
		{few, 2, []int{0, 40}, 10000, false},                            // 2 row groups, 2 workers: one wave
	} {
		r, err := OpenList(tc.list, &s, Options{Options: formats.Options{BatchSize: 100, Workers: tc.workers, Repeat: tc.repeat}})
		if err != nil {
			t.Fatal(err)
		}
		left := tc.left
		if left == 0 {
			left = 1 << 40
		}
		got := r.split(r.first, 1, left)
		r.Close()
		want := tc.want
		if want == nil {
			for c := 0; c <= 40; c++ {
				want = append(want, c)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("workers %d, %d rows left, repeat %v: cuts %v, want %v", tc.workers, tc.left, tc.repeat, got, want)
		}
	}
}
