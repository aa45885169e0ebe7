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
		{many, 8, []int{0, 15, 24, 32, 40}, 0, false}, // 14 float + 26 int64 columns: 24, 27, 24, 24 % (a page header less in the heaviest than 0, 16, …)
		{many, 4, []int{0, 23, 40}, 0, false},
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
		{odd, 2, []int{0, 15, 24, 32, 40}, 2000, false},
		{odd, 2, []int{0, 40}, 4000, false},
		{odd, 2, []int{0, 40}, 2000, true},
		{odd, 1, []int{0, 40}, 2000, false},
		// 3 workers, 5 row groups: a last wave of 2, each by 3 tasks.
		{odd, 3, []int{0, 18, 29, 40}, 4000, false},
		{odd, 3, []int{0, 40}, 6000, false},
		{many, 8, []int{0, 15, 24, 32, 40}, 4000, false},                // 8 left: Workers/2 as before
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

// TestBalancedCuts: the heaviest run of balancedCuts is the least any k
// contiguous runs allow (a brute force over every cut on random weights),
// every run has a column, and a column heavier than its share runs alone
// instead of taking its neighbours along (DCNv2's C21: half a row group's
// bytes).
func TestBalancedCuts(t *testing.T) {
	heaviest := func(w []int64, cuts []int) int64 {
		var m int64
		for i := 1; i < len(cuts); i++ {
			var sum int64
			for _, x := range w[cuts[i-1]:cuts[i]] {
				sum += x
			}
			m = max(m, sum)
		}
		return m
	}
	// best is the least heaviest run of k runs over w (exhaustive).
	var best func(w []int64, k int) int64
	best = func(w []int64, k int) int64 {
		if k == 1 {
			return heaviest(w, []int{0, len(w)})
		}
		m := int64(-1)
		var head int64
		for e := 1; e <= len(w)-(k-1); e++ {
			head += w[e-1]
			if r := max(head, best(w[e:], k-1)); m < 0 || r < m {
				m = r
			}
		}
		return m
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 400; it++ {
		nc := 1 + rng.IntN(12)
		w := make([]int64, nc)
		for i := range w {
			w[i] = 1 + rng.Int64N(100)
			if rng.IntN(5) == 0 {
				w[i] *= 50 // a heavy column
			}
		}
		k := 1 + rng.IntN(nc)
		cuts := balancedCuts(w, k)
		if len(cuts) != k+1 || cuts[0] != 0 || cuts[k] != nc {
			t.Fatalf("w %v, k %d: cuts %v", w, k, cuts)
		}
		for i := 1; i <= k; i++ {
			if cuts[i] <= cuts[i-1] {
				t.Fatalf("w %v, k %d: cuts %v not increasing", w, k, cuts)
			}
		}
		if got, want := heaviest(w, cuts), best(w, k); got != want {
			t.Fatalf("w %v, k %d: cuts %v, heaviest run %d, want %d", w, k, cuts, got, want)
		}
	}
	// The DCNv2 shape (uncompressed bytes of a row group, KB): label, 13
	// dense, 26 multi-hot cats with C21 at 47% of the whole.
	w := []int64{524, 524, 524, 524, 524, 524, 524, 524, 524, 524, 524, 524, 524, 524,
		2129, 1600, 1049, 1598, 3734, 1049, 1049, 1049, 1049, 4264, 2133, 4789, 1049, 3735, 5334, 3202, 1049, 1049, 1049,
		6947, 53430, 14963, 5875, 2128, 1049, 1049}
	for k := 6; k <= 8; k++ {
		cuts := balancedCuts(w, k)
		if i := slices.Index(cuts, 34); i < 0 || cuts[i+1] != 35 {
			t.Errorf("k %d: cuts %v: C21 (column 34) does not run alone", k, cuts)
		}
	}
}
