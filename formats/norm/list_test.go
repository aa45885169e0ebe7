package norm

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

func TestCreateListSplitsFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 2, MaxDense: 3, MaxSlots: 4, MaxNNZ: 3})
	d := formatstest.NewDataset(rng, s, 1000, 0, formatstest.AnyFloat)
	list := filepath.Join(t.TempDir(), "out", "file_list.txt")
	w, err := CreateList(list, &s, ListOptions{WriterOptions: WriterOptions{Check: CheckSum}, SamplesPerFile: 300})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAll(w, 128); err != nil { // batches straddle file ends
		t.Fatal(err)
	}
	text, _ := os.ReadFile(list)
	if string(text) != "4\npart_0.data\npart_1.data\npart_2.data\npart_3.data\n" {
		t.Fatalf("file list %q", text)
	}
	r, err := OpenList(list, &s, Options{Check: CheckSum})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Header(3).NumRecords != 100 {
		t.Fatalf("last file holds %d records, want 100", r.Header(3).NumRecords)
	}
	got, err := formatstest.ReadAll(r, formats.DefaultBatchSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := formatstest.Diff(d, got); diff != "" {
		t.Fatal(diff)
	}
}
