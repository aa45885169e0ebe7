package parquet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// dictWriterData draws n rows over a label of two values, a dense column of
// few values and one of many, and four slots: one-hot of 50 keys (C1) and of
// up to maxKey (C2), multi-hot (1–3 keys, empty bags too) of 20 keys (C3)
// and of up to maxKey (C4).
func dictWriterData(rng *rand.Rand, n int, maxKey int64, kt formats.KeyType) *formatstest.Dataset {
	d := &formatstest.Dataset{Schema: formats.Schema{LabelDim: 1, DenseDim: 2, KeyType: kt,
		Slots: []formats.Slot{{MaxNNZ: 1, Hotness: 1}, {MaxNNZ: 1, Hotness: 1}, {MaxNNZ: 3}, {MaxNNZ: 3}}}}
	bag := func(k int64) []int64 {
		b := make([]int64, rng.IntN(4))
		for i := range b {
			b[i] = rng.Int64N(k)
		}
		return b
	}
	for range n {
		d.Labels = append(d.Labels, []float32{float32(rng.IntN(2))})
		d.Dense = append(d.Dense, []float32{float32(rng.IntN(7)) / 4, rng.Float32()})
		d.Keys = append(d.Keys, [][]int64{{rng.Int64N(50)}, {rng.Int64N(maxKey)}, bag(20), bag(maxKey)})
	}
	return d
}

// chunkEncodings returns, per row group and column of a Parquet file,
// whether the chunk holds a dictionary page.
func chunkEncodings(t *testing.T, path string) [][]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var out [][]bool
	for g := range rd.NumRowGroups() {
		rg := rd.MetaData().RowGroup(g)
		var cols []bool
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			dict := cc.HasDictionaryPage()
			if encs := cc.Encodings(); dict != slices.Contains(encs, parquet.Encodings.RLEDict) {
				t.Fatalf("%s row group %d column %d: dictionary page %v, encodings %v", path, g, c, dict, encs)
			}
			cols = append(cols, dict)
		}
		out = append(out, cols)
	}
	return out
}

// TestDictionaryWriter writes datasets with WriterOptions.Dictionary and
// reads them back on the streamed path and arrow-go's: one-hot and
// multi-hot slots, int64, int32 and uint32 cats, each compression, several
// row groups. Chunks of few distinct values are dictionary-encoded (the
// footer says so: a dictionary page and RLE_DICTIONARY), chunks of many
// are written PLAIN, and the samples read are those written.
func TestDictionaryWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 12))
	for _, tc := range []struct {
		comp, cat string
		kt        formats.KeyType
	}{
		{"snappy", "int64", formats.KeyI64},
		{"none", "int32", formats.KeyU32},
		{"zstd", "uint32", formats.KeyU32},
		{"snappy", "uint64", formats.KeyI64},
	} {
		t.Run(fmt.Sprintf("%s-%s", tc.comp, tc.cat), func(t *testing.T) {
			const rows, rg = 5000, 2048
			d := dictWriterData(rng, rows, 1<<30, tc.kt)
			dir := t.TempDir()
			list := writeDataset(t, dir, d, DatasetOptions{WriterOptions: WriterOptions{
				Compression: tc.comp, CatType: tc.cat, RowGroupSize: rg, Dictionary: true}})
			files := listFiles(t, list)
			if len(files) != 1 {
				t.Fatalf("%d files", len(files))
			}
			// label, few dense, many dense, C1, C2 (many), C3, C4 (many)
			want := []bool{true, true, false, true, false, true, false}
			for g, cols := range chunkEncodings(t, files[0]) {
				if !slices.Equal(cols, want) {
					t.Fatalf("row group %d: dictionary pages %v, want %v", g, cols, want)
				}
			}
			// The streamed path with the dictionary's keys stored
			// straight into the piece (fusedDict) and through gather.
			for _, fuse := range []bool{true, false} {
				fuseDicts = fuse
				got, err, pages := readDictPaths(t, list, &d.Schema, Options{})
				fuseDicts = true
				if err != nil {
					t.Fatal(err)
				}
				if pages == 0 && tc.comp != "zstd" { // zstd chunks are arrow-go's to read
					t.Fatal("the streamed path read no dictionary-encoded page")
				}
				if diff := formatstest.Diff(d, got); diff != "" {
					t.Fatalf("fused %v: %s", fuse, diff)
				}
			}
		})
	}
}

// TestDictionaryWriterEdges covers a dictionary of one value (bit width 1),
// a chunk whose distinct values pass maxDictBytes (PLAIN), bags all empty
// in a list chunk, and pages of indices split within a chunk (small
// pageBytes-sized pages are many at bit width 1).
func TestDictionaryWriterEdges(t *testing.T) {
	s := formats.Schema{LabelDim: 1, KeyType: formats.KeyI64, Slots: []formats.Slot{{MaxNNZ: 1, Hotness: 1}, {MaxNNZ: 1, Hotness: 1}, {MaxNNZ: 2}}}
	n := 2*maxDictBytes/8 + 10 // C2's distinct values pass the limit
	d := &formatstest.Dataset{Schema: s}
	for i := range n {
		d.Labels = append(d.Labels, []float32{1})
		d.Dense = append(d.Dense, []float32{})
		d.Keys = append(d.Keys, [][]int64{{7}, {int64(i)}, {}})
	}
	list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: n, Dictionary: true}})
	files := listFiles(t, list)
	enc := chunkEncodings(t, files[0])
	if want := []bool{true, true, false, false}; !slices.Equal(enc[0], want) {
		t.Fatalf("dictionary pages %v, want %v (label and C1 one value, C2 past the limit, C3 no values)", enc[0], want)
	}
	got, err, _ := readDictPaths(t, list, &s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := formatstest.Diff(d, got); diff != "" {
		t.Fatal(diff)
	}
}

// TestPackIndices checks the bit-packed runs against the reader's decoder
// (unpackIndices through indices.read) at every bit width.
func TestPackIndices(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 13))
	for bw := uint(1); bw <= 32; bw++ {
		for _, n := range []int{1, 7, 8, 9, 1000} {
			idx := make([]uint32, n)
			for i := range idx {
				idx[i] = uint32(rng.Uint64() & (1<<bw - 1))
			}
			b := packIndices(nil, idx, bw)
			ref, ok := refIndices(b, bw, n)
			if !ok || !slices.Equal(ref, idx) {
				t.Fatalf("bw %d n %d: reference decode %v (ok %v), want %v", bw, n, ref[:min(len(ref), 10)], ok, idx[:min(n, 10)])
			}
			got := make([]uint32, n)
			ix := indices{b: b, bw: bw}
			if err := ix.read(got); err != nil || !slices.Equal(got, idx) {
				t.Fatalf("bw %d n %d: reader: %v", bw, n, err)
			}
		}
	}
}

// TestDictBuilder checks the hash table: indices in first-seen order, the
// limit on distinct values, 4- and 8-byte values, and worthDict.
func TestDictBuilder(t *testing.T) {
	var d dictBuilder
	vals := valueBytes([]int64{5, -1, 5, 1 << 40, -1, 0})
	if !d.build(vals, 8, 4) {
		t.Fatal("4 distinct values over the limit of 4")
	}
	if !slices.Equal(d.idx, []uint32{0, 1, 0, 2, 1, 3}) || len(d.vals) != 4 {
		t.Fatalf("indices %v, %d values", d.idx, len(d.vals))
	}
	if got := valueBytes(d.vals); !slices.Equal(d.appendDictValues(nil, 8), got) {
		t.Fatal("dictionary values")
	}
	if d.build(vals, 8, 3) {
		t.Fatal("4 distinct values within a limit of 3")
	}
	if !d.build(valueBytes([]float32{0.5, 0.5, float32(math.Copysign(0, -1)), 0}), 4, 10) || len(d.vals) != 3 {
		t.Fatalf("float bits: %d values, want 3 (0 and -0 differ)", len(d.vals))
	}
	if !worthDict(1000, 10, 8) || worthDict(1000, 1000, 4) || worthDict(1, 1, 8) {
		t.Fatal("worthDict")
	}
	if w := indexWidth(1); w != 1 {
		t.Fatalf("indexWidth(1) = %d", w)
	}
	if w := indexWidth(1 << 17); w != 17 {
		t.Fatalf("indexWidth(1<<17) = %d", w)
	}
}

// TestDictionaryKeyRange: a dictionary holding a key that 32-bit keys
// cannot hold is read through gather and emitScalar (fusedDict refuses
// it), which name the record of the first sample holding it.
func TestDictionaryKeyRange(t *testing.T) {
	s := formats.Schema{LabelDim: 1, KeyType: formats.KeyI64, Slots: []formats.Slot{{MaxNNZ: 1, Hotness: 1}}}
	d := &formatstest.Dataset{Schema: s}
	for i := range 3000 {
		k := int64(i % 7)
		if i == 2345 {
			k = 1 << 33
		}
		d.Labels = append(d.Labels, []float32{0})
		d.Dense = append(d.Dense, []float32{})
		d.Keys = append(d.Keys, [][]int64{{k}})
	}
	list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{Dictionary: true}})
	if enc := chunkEncodings(t, listFiles(t, list)[0]); !enc[0][1] {
		t.Fatal("C1 is not dictionary-encoded")
	}
	s32 := s
	s32.KeyType = formats.KeyU32
	_, err, pages := readDictPaths(t, list, &s32, Options{})
	if pages == 0 {
		t.Fatal("the streamed path read no dictionary-encoded page")
	}
	checkErr(t, err, formats.ErrKeyRange, 2345)
}

// FuzzDictionaryWriter writes rows drawn from the fuzzer's bytes (a one-hot
// and a multi-hot cat column over a vocabulary the input sizes, a label of
// few values) with dictionary encoding, in row groups the input sizes, and
// reads them back: the samples must be those written, whichever chunks got
// a dictionary.
func FuzzDictionaryWriter(f *testing.F) {
	f.Add([]byte{3, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add(make([]byte, 300))
	f.Add([]byte("the quick brown fox jumps over the lazy dog, again and again and again"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 3 {
			return
		}
		vocab := int64(b[0]) + 1
		rg := int(b[1])%50 + 1
		b = b[2:]
		s := formats.Schema{LabelDim: 1, KeyType: formats.KeyI64, Slots: []formats.Slot{{MaxNNZ: 1, Hotness: 1}, {MaxNNZ: 3}}}
		d := &formatstest.Dataset{Schema: s}
		for i, x := range b {
			bag := make([]int64, int(x)%4)
			for j := range bag {
				bag[j] = int64(b[(i+j+1)%len(b)]) % vocab
			}
			d.Labels = append(d.Labels, []float32{float32(x % 3)})
			d.Dense = append(d.Dense, []float32{})
			d.Keys = append(d.Keys, [][]int64{{int64(x) % vocab}, bag})
		}
		list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: rg, Dictionary: true}})
		got := readAll(t, list, &s, Options{Options: formats.Options{BatchSize: 7, Workers: 2}}, 7, 0)
		if diff := formatstest.Diff(d, got); diff != "" {
			t.Fatal(diff)
		}
	})
}
