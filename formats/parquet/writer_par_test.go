package parquet

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/snappy"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// TestPageSnappy checks that the writer's snappy page bodies (s2's fast
// snappy-compatible encoder, and its "better" one for SmallerSnappy) are
// standard snappy: the reference decoder and arrow-go's codec restore them.
func TestPageSnappy(t *testing.T) {
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, better := range []bool{false, true} {
		e := &pageEncoder{codec: codecSnappy, better: better}
		for _, n := range []int{0, 1, 15, 100, 4096, 65536 + 7, 1 << 20} {
			for _, kind := range []string{"random", "repetitive"} {
				src := make([]byte, n)
				for i := range src {
					if kind == "random" {
						src[i] = byte(rng.Uint32())
					} else {
						src[i] = byte(i % 61)
					}
				}
				enc := e.compress(src)
				dec, err := snappy.Decode(nil, enc)
				if err != nil || !bytes.Equal(dec, src) {
					t.Fatalf("better %v %s %d: reference decode: %v", better, kind, n, err)
				}
				dec, err = compress.Decode(c, nil, enc)
				if err != nil || !bytes.Equal(dec, src) {
					t.Fatalf("better %v %s %d: arrow-go decode: %v", better, kind, n, err)
				}
				if kind == "repetitive" && n >= 4096 && len(enc) > n/4 {
					t.Errorf("better %v repetitive %d: compressed to %d bytes", better, n, len(enc))
				}
			}
		}
	}
}

// TestParallelFlushDeterministic writes the same rows with one and with
// several threads: the concurrent column encoding must not change a byte,
// and the file must read back.
func TestParallelFlushDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name string
		rs   formatstest.RandomSchema
		wo   WriterOptions
	}{
		{"onehot-snappy", formatstest.RandomSchema{MaxLabel: 2, MaxDense: 13, MaxSlots: 26, OneHot: true, KeyType: formats.KeyI64}, WriterOptions{RowGroupSize: 300}},
		{"multihot-dict", formatstest.RandomSchema{MaxLabel: 1, MaxDense: 3, MaxSlots: 9, MaxNNZ: 4, KeyType: formats.KeyU32}, WriterOptions{RowGroupSize: 256, Dictionary: true, CatType: "uint32"}},
		{"multihot-zstd", formatstest.RandomSchema{MaxLabel: 1, MaxDense: 2, MaxSlots: 7, MaxNNZ: 3, KeyType: formats.KeyI64}, WriterOptions{RowGroupSize: 100, Compression: "zstd", CatType: "int32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := formatstest.NewSchema(rng, tc.rs)
			if !tc.rs.OneHot {
				for i := range s.Slots {
					s.Slots[i].MaxNNZ = max(s.Slots[i].MaxNNZ, 2)
				}
			}
			d := formatstest.NewDataset(rng, s, 1234, 0, formatstest.AnyFloat)
			var files [][]byte
			for _, procs := range []int{1, 4} {
				dir := t.TempDir()
				old := runtime.GOMAXPROCS(procs)
				list := writeDataset(t, dir, d, DatasetOptions{WriterOptions: tc.wo})
				runtime.GOMAXPROCS(old)
				b, err := os.ReadFile(filepath.Join(dir, "part_0.parquet"))
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, b)
				got := readAll(t, list, &s, Options{Options: formats.Options{BatchSize: 64}}, 64, 0)
				if diff := formatstest.Diff(d, got); diff != "" {
					t.Fatalf("GOMAXPROCS=%d: %s", procs, diff)
				}
			}
			if !bytes.Equal(files[0], files[1]) {
				t.Fatal("GOMAXPROCS changed the file bytes")
			}
		})
	}
}

// TestBackgroundWriteError makes the file unwritable under a writer whose
// row groups are written in the background: the error must come back from
// Write or Close, the file must not be committed, and no goroutine may be
// left behind.
func TestBackgroundWriteError(t *testing.T) {
	s := criteoSchema()
	batch := criteoBatch(&s, 4096, 9)
	before := runtime.NumGoroutine()
	p := filepath.Join(t.TempDir(), "x.parquet")
	w, err := Create(p, &s, WriterOptions{RowGroupSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	tmp := w.f.File.Name()
	w.f.File.Close()
	var werr error
	for i := 0; i < 8 && werr == nil; i++ {
		werr = w.Write(batch)
	}
	cerr := w.Close()
	if werr == nil && cerr == nil {
		t.Fatal("writing to a closed file succeeded")
	}
	if werr != nil && cerr == nil {
		t.Fatalf("Close after failed Write returned nil (Write: %v)", werr)
	}
	for _, q := range []string{p, tmp} {
		if _, err := os.Stat(q); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", q, err)
		}
	}
	waitGoroutines(t, before)
}

// TestAbortPendingRowGroup aborts while a row group is being written in the
// background.
func TestAbortPendingRowGroup(t *testing.T) {
	s := criteoSchema()
	batch := criteoBatch(&s, 4096, 10)
	before := runtime.NumGoroutine()
	p := filepath.Join(t.TempDir(), "x.parquet")
	w, err := Create(p, &s, WriterOptions{RowGroupSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(batch); err != nil {
		t.Fatal(err)
	}
	if w.pending == nil {
		t.Fatal("no row group in flight after 4 row groups of rows")
	}
	if w.NumRows()+int64(w.nbuf) != 4096 {
		t.Fatalf("rows %d + buffered %d, want 4096", w.NumRows(), w.nbuf)
	}
	tmp := w.f.File.Name()
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(batch); err == nil {
		t.Error("Write after Abort succeeded")
	}
	for _, q := range []string{p, tmp} {
		if _, err := os.Stat(q); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", q, err)
		}
	}
	waitGoroutines(t, before)
}

func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 100 && runtime.NumGoroutine() > n; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > n {
		t.Errorf("%d goroutines, %d before", g, n)
	}
}

// TestSmallerSnappy checks that SmallerSnappy selects the better encoder:
// a smaller file with the same rows.
func TestSmallerSnappy(t *testing.T) {
	s := criteoSchema()
	batch := criteoBatch(&s, 8192, 11)
	var sizes []int64
	for _, smaller := range []bool{false, true} {
		dir := t.TempDir()
		p := filepath.Join(dir, "x.parquet")
		w, err := Create(p, &s, WriterOptions{RowGroupSize: 3000, SmallerSnappy: smaller})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(batch); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, st.Size())
		list := filepath.Join(dir, FileListName)
		if err := formats.WriteFileList(list, []string{p}); err != nil {
			t.Fatal(err)
		}
		if err := WriteMetadata(filepath.Join(dir, MetadataName), w.Metadata()); err != nil {
			t.Fatal(err)
		}
		r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: 8192}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := formats.NewBatch(&s, 8192, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Read(got)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got.N != batch.N || !slices.Equal(got.Dense[:got.N*13], batch.Dense[:batch.N*13]) || !slices.Equal(got.Keys64[:got.N*26], batch.Keys64[:batch.N*26]) {
			t.Fatalf("SmallerSnappy=%v: rows differ", smaller)
		}
	}
	if sizes[1] >= sizes[0] {
		t.Errorf("SmallerSnappy file %d bytes, default %d", sizes[1], sizes[0])
	}
	t.Logf("fast %d bytes, better %d bytes", sizes[0], sizes[1])
}

// TestBufferParallel writes batches large enough to be buffered by several
// goroutines and checks the file is byte for byte the one small batches
// give; a key that does not fit the cat type deep in such a batch fails at
// its own record, even with a later bad record in another part.
func TestBufferParallel(t *testing.T) {
	for _, kt := range []formats.KeyType{formats.KeyI64, formats.KeyU32} {
		s := formats.NewSchema(2, 3, []int{1, 1, 1, 1}, nil, kt)
		for i := range s.Slots {
			s.Slots[i].MaxNNZ, s.Slots[i].Hotness = 1, 1
		}
		const n = 6*bufferMin + 77
		ds := formatstest.NewDataset(rand.New(rand.NewPCG(9, 9)), s, n, 1, formatstest.AnyFloat)
		dir := t.TempDir()
		for _, cat := range []string{"int64", "uint32", "int32"} {
			write := func(name string, batch int) []byte {
				p := filepath.Join(dir, cat+name)
				w, err := Create(p, &s, WriterOptions{CatType: cat, RowGroupSize: 5 * bufferMin})
				if err != nil {
					t.Fatal(err)
				}
				if err := ds.WriteAll(w, batch); err != nil { // closes w
					t.Fatal(err)
				}
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			if cat == "int32" && kt == formats.KeyI64 {
				continue // the generated i64 keys do not fit
			}
			ser := write("ser.parquet", 1000)
			if par := write("par.parquet", n); !bytes.Equal(par, ser) {
				t.Fatalf("%s keys, %s cats: files from large and small batches differ", kt, cat)
			}
			// Small and large ranges mixed in one row group: the rows a
			// small range buffered stay when a large one is moved in.
			all, err := ds.Batches(n)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, cat+"mixed.parquet")
			w, err := Create(p, &s, WriterOptions{CatType: cat, RowGroupSize: 5 * bufferMin})
			if err != nil {
				t.Fatal(err)
			}
			for lo, k := 0, 0; lo < n; k++ {
				hi := min(lo+[]int{5, 3 * bufferMin, 7, 2*bufferMin + 1}[k%4], n)
				if err := w.writeRange(all[0], lo, hi); err != nil {
					t.Fatal(err)
				}
				lo = hi
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(p); !bytes.Equal(got, ser) {
				t.Fatalf("%s keys, %s cats: mixed ranges differ from small batches", kt, cat)
			}
		}
		// Faults in one large batch: the first bad row is reported (its
		// first bad slot), although a later part and a later column of
		// the same block hold faults too.
		const badAt = 4*bufferMin + 5
		S := len(s.Slots)
		for _, tc := range []struct {
			name  string
			plant func(b *formats.Batch)
			want  error
		}{
			{"key", func(b *formats.Batch) {
				setKey(b, badAt*S+2, -3)
				setKey(b, badAt*S+3, -3)
				setKey(b, (badAt+bufferMin)*S, -4)
			}, formats.ErrKeyRange},
			{"nnz", func(b *formats.Batch) {
				b.Offsets[badAt*S+1]-- // slot 0 empty, slot 1 two keys
				setKey(b, (badAt+1)*S, -4)
			}, formats.ErrNNZ},
		} {
			bs, err := ds.Batches(n)
			if err != nil {
				t.Fatal(err)
			}
			b := bs[0]
			tc.plant(b)
			cat := "uint32"
			if kt == formats.KeyU32 {
				cat = "int32" // u32 keys: only "negative" as int32 is out of range
			}
			w, err := Create(filepath.Join(dir, "bad.parquet"), &s, WriterOptions{CatType: cat})
			if err != nil {
				t.Fatal(err)
			}
			err = w.Write(b)
			checkErr(t, err, tc.want, badAt)
			var fe *formats.Error
			if errors.As(err, &fe) && tc.name == "key" && !strings.Contains(err.Error(), "slot 2 ") {
				t.Errorf("%s %s: %v, want slot 2", kt, tc.name, err)
			}
			if tc.name == "nnz" && !strings.Contains(err.Error(), "slot 0 holds 0 keys") {
				t.Errorf("%s %s: %v, want slot 0 holding 0 keys", kt, tc.name, err)
			}
			w.Abort()
		}
	}
}

// setKey sets key j of b to k (as uint32 in a u32 batch: -3 is then
// 2^32-3, above any int32).
func setKey(b *formats.Batch, j int, k int64) {
	if b.Keys64 != nil {
		b.Keys64[j] = k
		return
	}
	b.Keys32[j] = uint32(k)
}
