package input

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// TestRawNnzPerSlotReadsOneHot: Raw data under an input declaring
// nnz_per_slot 2 (HugeCTR's DLRM samples: DataReaderSparseParam("data1",
// 2, False, 26)) is read one key per slot, as HugeCTR's Raw reader reads
// it (it was refused); a file of that input's multi-hot samples points to
// RawAsync, by its size or by num_samples.
func TestRawNnzPerSlotReadsOneHot(t *testing.T) {
	in := &graph.Input{LabelTops: []string{"label"}, LabelDims: []int{1}, DenseTop: "dense", DenseDim: 2,
		Sparse: []graph.SparseParam{{Top: "data1", SlotNum: 3, NNZPerSlot: []int{2, 2, 2}}}}
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// One-hot: 4·(1+2+3) = 24 bytes; multi-hot: 4·(1+2) + 4·6 = 36 bytes.
	onehot := write("onehot.bin", 24*10)
	src := Source{Format: dataset.Raw, Path: onehot}
	ds, err := src.Sources(in)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Spec.RawLayout != raw.OneHot || len(ds.Schema.Slots) != 3 || ds.Schema.Slots[0].Hotness != 1 {
		t.Fatalf("layout %v, slots %+v", ds.Spec.RawLayout, ds.Schema.Slots)
	}
	r, err := Open(src, in, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()

	multi := write("multi.bin", 36*10) // 15 one-hot samples: num_samples tells
	for _, c := range []struct {
		src  Source
		want string
	}{
		{Source{Format: dataset.Raw, Path: write("multi3.bin", 36*3)}, "are 3 multi-hot samples of 36 bytes (slot 0 has nnz_per_slot 2)"},
		{Source{Format: dataset.Raw, Path: multi, NumSamples: 10}, "exactly num_samples 10 multi-hot samples"},
	} {
		_, err := c.src.Sources(in)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "use format RawAsync") ||
			!strings.Contains(err.Error(), c.src.Path) {
			t.Errorf("%s: %v", c.src.Path, err)
		}
	}
	// An explicit one-hot layout reads it one-hot; num_samples 15 is the
	// one-hot count; multi-hot RawAsync reads it.
	for _, src := range []Source{{Format: dataset.Raw, Path: multi, NumSamples: 10, Layout: raw.OneHot, LayoutSet: true},
		{Format: dataset.Raw, Path: multi, NumSamples: 15}} {
		if _, err := src.Sources(in); err != nil {
			t.Errorf("%+v: %v", src, err)
		}
	}
	mh := Source{Format: dataset.Raw, Path: multi, Layout: raw.MultiHot, LayoutSet: true}
	if ds, err := mh.Sources(in); err != nil || ds.Schema.Slots[0].Hotness != 2 {
		t.Errorf("multi-hot: %v", err)
	}
	// A damaged file fits neither: the reader's size error.
	bad := Source{Format: dataset.Raw, Path: write("bad.bin", 25)}
	if _, err := Open(bad, in, 4, nil); err == nil || strings.Contains(err.Error(), "RawAsync") || !strings.Contains(err.Error(), "not a multiple") {
		t.Errorf("damaged: %v", err)
	}
}

func TestReaderWorkers(t *testing.T) {
	for _, c := range []struct{ workers, cores, want int }{
		{0, 16, 12}, {0, 8, 6}, {0, 4, 3}, {0, 2, 2}, {0, 1, 1}, {0, 0, 1}, {5, 16, 5}, {32, 16, 32},
	} {
		if got := ReaderWorkers(c.workers, c.cores); got != c.want {
			t.Errorf("ReaderWorkers(%d, %d) = %d, want %d", c.workers, c.cores, got, c.want)
		}
	}
}
