package parquet

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// TestMixedHotness: a list whose first file holds a slot as a scalar
// column and a later file as a list column, read without a schema, takes
// the slot as one-hot (from the first file) and fails at the later file's
// first row of several keys: ErrNNZ naming that file and record and the
// flag that sets the max nnz (--nnz-array). The fourteenth session met it
// as "more than 1 keys (slot 0 max nnz)", which named neither.
func TestMixedHotness(t *testing.T) {
	one := formats.NewSchema(1, 2, []int{1, 1}, nil, formats.KeyI64)
	multi := formats.NewSchema(1, 2, []int{4, 4}, nil, formats.KeyI64)
	for i := range one.Slots {
		one.Slots[i].Hotness = 1
		multi.Slots[i].Hotness = 4 // fixed: every row 4 keys
	}
	rng := rand.New(rand.NewPCG(8, 9))
	d1 := formatstest.NewDataset(rng, one, 100, 1, formatstest.AnyFloat)
	d2 := formatstest.NewDataset(rng, multi, 100, 1, formatstest.AnyFloat)
	l1 := writeDataset(t, filepath.Join(t.TempDir(), "one"), d1, DatasetOptions{})
	l2 := writeDataset(t, filepath.Join(t.TempDir(), "multi"), d2, DatasetOptions{})
	f1, f2 := listFiles(t, l1)[0], listFiles(t, l2)[0]
	list := filepath.Join(filepath.Dir(f1), "mixed.txt")
	if err := os.WriteFile(list, []byte("2\n"+f1+"\n"+f2+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readErr(t, list, nil, Options{Options: formats.Options{BatchSize: 64}})
	var fe *formats.Error
	if !errors.As(err, &fe) || !errors.Is(err, formats.ErrNNZ) || fe.Path != f2 || fe.Record != 0 {
		t.Fatalf("got %v, want ErrNNZ at record 0 of %s", err, f2)
	}
	if !strings.Contains(err.Error(), "--nnz-array") || !strings.Contains(err.Error(), "first file") {
		t.Errorf("%v: does not name --nnz-array and why the slot is one-hot", err)
	}
}

// listFiles returns the data files of a file list, as written.
func listFiles(t *testing.T, list string) []string {
	t.Helper()
	b, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range strings.Fields(string(b))[1:] {
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(list), f)
		}
		out = append(out, f)
	}
	return out
}
