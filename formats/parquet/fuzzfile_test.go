package parquet

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

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

// optionalSeedFile writes fuzzSeedFile's rows with arrow-go's writer (and
// props), every column optional (the list and its elements too), in
// pages of about 100 bytes, and returns its bytes.
func optionalSeedFile(tb testing.TB, props ...parquet.WriterProperty) []byte {
	tb.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	s := formats.NewSchema(1, 3, []int{1, 3}, []int64{50, 70}, formats.KeyI64)
	d := formatstest.NewDataset(rng, s, fuzzRows, 1, formatstest.AnyFloat)
	ones := make([]int16, fuzzRows)
	for i := range ones {
		ones[i] = 1
	}
	var cols []rawCol
	col := func(name string, at func(i int) float32) {
		v := make([]float32, fuzzRows)
		for i := range v {
			v[i] = at(i)
		}
		cols = append(cols, rawCol{node: prim(name, opt, parquet.Types.Float), f32: v, def: ones})
	}
	col("label", func(i int) float32 { return d.Labels[i][0] })
	for j := range 3 {
		col(fmt.Sprintf("I%d", j+1), func(i int) float32 { return d.Dense[i][j] })
	}
	c1, c2 := make([]int64, fuzzRows), make([][]int64, fuzzRows)
	for i := range fuzzRows {
		c1[i], c2[i] = d.Keys[i][0][0], d.Keys[i][1]
	}
	cols = append(cols, rawCol{node: intNode("C1", opt, 64, true), i64: c1, def: ones})
	vals, def, rep := listLevelsOf(opt, opt, c2)
	cols = append(cols, rawCol{node: listNode("C2", opt, opt, intNode("element", opt, 64, true)), i64: vals, def: def, rep: rep})
	p := filepath.Join(tb.TempDir(), "seed.parquet")
	if err := writeRawProps(p, cols, append([]parquet.WriterProperty{parquet.WithDataPageSize(100)}, props...)...); err != nil {
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
	// Every column optional, as pyarrow writes (optional.go).
	f.Add(optionalSeedFile(f))
	f.Add(optionalSeedFile(f, parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(true)))
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
