package parquet

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// fuzzRows is the row count of the fuzz seed files.
const fuzzRows = 100

// fuzzSeedFile writes a small file of fuzzRows rows (scalar and list cats,
// several pages and row groups), dictionary-encoded when dict, and returns
// its bytes.
func fuzzSeedFile(tb testing.TB, compression string, dict ...bool) []byte {
	tb.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	s := formats.NewSchema(1, 3, []int{1, 3}, []int64{50, 70}, formats.KeyI64)
	d := formatstest.NewDataset(rng, s, fuzzRows, 1, formatstest.AnyFloat)
	p := filepath.Join(tb.TempDir(), "seed.parquet")
	w, err := Create(p, &s, WriterOptions{Compression: compression, RowGroupSize: 40, Dictionary: len(dict) > 0 && dict[0]})
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.WriteAll(w, 30); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzReadFile reads mutated Parquet files through the whole reader (the
// streamed raw-page path and arrow-go's): any input must end in samples or an
// error, never a panic, a hang or an unbounded allocation.
func FuzzReadFile(f *testing.F) {
	for _, c := range []string{"none", "snappy", "zstd"} {
		f.Add(fuzzSeedFile(f, c))
		f.Add(fuzzSeedFile(f, c, true)) // dictionary-encoded (dict.go)
	}
	// A 28 KB footer whose root declares 2^31-1 children (arrow-go
	// allocated 32 GiB for it), and one whose counts add up.
	f.Add(hostileFooter(28<<10, 1<<31-1, fuzzRows, 100))
	f.Add(hostileFooter(28<<10, 1, fuzzRows, 100))
	// One file per fuzzing process, rewritten by each input (t.TempDir per
	// input cost more than the read), in memory where there is a tmpfs.
	dir := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir = "/dev/shm"
	}
	p := filepath.Join(dir, fmt.Sprintf("ctrkit-fuzz-%d.parquet", os.Getpid()))
	f.Cleanup(func() { os.Remove(p) })
	// The one-hot read (the scalar cat only) decodes its row groups in
	// pieces of a batch or two (pieceCuts).
	defer func(m int) { minPieceRows = m }(minPieceRows)
	minPieceRows = 8
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, nnz := range [][]int{{1, 3}, {1}} {
			s := formats.NewSchema(1, 3, nnz, []int64{50, 70}[:len(nnz)], formats.KeyI64)
			meta := MetadataFor(&s, []FileStat{{FileName: filepath.Base(p), NumRows: fuzzRows}})
			r, err := OpenFiles([]string{p}, meta, &s, Options{Options: formats.Options{BatchSize: 16 * len(nnz), Workers: 2}})
			if err != nil {
				continue
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				formatstest.ReadAll(r, 16*len(nnz), 1000)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("reading a mutated file did not end")
			}
			r.Close()
		}
	})
}
