package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// encodeIndices encodes indices of bit width bw in the RLE/bit-packed
// hybrid: runs of 8 or more equal indices (or, at random, shorter ones) as
// RLE runs of ⌈bw/8⌉-byte values, the rest in bit-packed runs of 1 to 3
// groups, the last group padded with random bits.
func encodeIndices(rng *rand.Rand, idx []uint32, bw uint) []byte {
	var out []byte
	n := len(idx)
	for i := 0; i < n; {
		j := i + 1
		for j < n && idx[j] == idx[i] {
			j++
		}
		if j-i >= 8 || rng.IntN(4) == 0 {
			out = binary.AppendUvarint(out, uint64(j-i)<<1)
			for b := 0; b < int(bw+7)/8; b++ {
				out = append(out, byte(idx[i]>>(8*b)))
			}
			i = j
			continue
		}
		groups := 1 + rng.IntN(3)
		out = binary.AppendUvarint(out, uint64(groups)<<1|1)
		var acc uint64
		nb := uint(0)
		for k := 0; k < 8*groups; k++ {
			v := uint64(rng.Uint32()) & (1<<bw - 1) // padding
			if i+k < n {
				v = uint64(idx[i+k])
			}
			acc |= v << nb
			nb += bw
			for nb >= 8 {
				out = append(out, byte(acc))
				acc >>= 8
				nb -= 8
			}
		}
		i = min(n, i+8*groups)
	}
	return out
}

// refIndices decodes n indices of width bw from b bit by bit, as the
// format describes it (a bit-packed run cut short by the end of b gives the
// indices it holds whole), or fails.
func refIndices(b []byte, bw uint, n int) ([]uint32, bool) {
	var out []uint32
	for len(out) < n {
		hd, k := binary.Uvarint(b)
		if k <= 0 || hd>>1 > 1<<31-1 {
			return nil, false
		}
		b = b[k:]
		cnt := int(hd >> 1)
		if hd&1 == 0 {
			vb := int(bw+7) / 8
			if cnt > 0 && len(b) < vb {
				return nil, false
			}
			var v uint32
			for i := 0; i < vb && i < len(b); i++ {
				v |= uint32(b[i]) << (8 * i)
			}
			b = b[min(vb, len(b)):]
			if bw < 32 {
				v &= 1<<bw - 1
			}
			for ; cnt > 0 && len(out) < n; cnt-- {
				out = append(out, v)
			}
			continue
		}
		nb := min(cnt*int(bw), len(b))
		run := b[:nb]
		b = b[nb:]
		vals := 8 * cnt
		if bw > 0 {
			vals = min(vals, nb*8/int(bw))
		}
		for i := 0; i < vals && len(out) < n; i++ {
			var v uint32
			for j := uint(0); j < bw; j++ {
				p := uint(i)*bw + j
				v |= uint32(run[p/8]>>(p%8)&1) << j
			}
			out = append(out, v)
		}
	}
	return out, true
}

// TestIndices decodes random dictionary indices of every width from 0 to
// 32, in chunks of random sizes, against the bit-by-bit reference; and
// refuses streams that end early.
func TestIndices(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	for trial := range 2000 {
		bw := uint(trial % 33)
		n := rng.IntN(3000)
		idx := make([]uint32, n)
		for i := 0; i < n; {
			r, v := 1+rng.IntN(30), rng.Uint32()&(1<<bw-1)
			for j := 0; j < r && i < n; j++ {
				idx[i] = v
				if rng.IntN(3) == 0 {
					idx[i] = rng.Uint32() & (1<<bw - 1)
				}
				i++
			}
		}
		enc := encodeIndices(rng, idx, bw)
		if trial%4 == 3 { // long bit-packed runs, as arrow writes them
			idx = idx[:n/504*504]
			n = len(idx)
			enc = packedRuns(idx, bw)
		}
		if ref, ok := refIndices(enc, bw, n); !ok || !slices.Equal(ref, idx) {
			t.Fatalf("trial %d: the reference decoder disagrees with the encoder", trial)
		}
		x := indices{b: enc, bw: bw}
		got := make([]uint32, n)
		for at := 0; at < n; {
			k := min(n-at, 1+rng.IntN(700))
			if err := x.read(got[at : at+k]); err != nil {
				t.Fatalf("trial %d (width %d): %v at index %d of %d", trial, bw, err, at, n)
			}
			at += k
		}
		if !slices.Equal(got, idx) {
			t.Fatalf("trial %d (width %d): indices decoded wrong", trial, bw)
		}
		x = indices{b: enc, bw: bw}
		if err := x.read(make([]uint32, n+8*3+1)); !errors.Is(err, errIndices) {
			t.Fatalf("trial %d: reading past the end: %v", trial, err)
		}
	}
}

// FuzzIndices decodes arbitrary bytes as indices of any width: the same
// indices as the bit-by-bit reference, or an error where it fails; never
// a panic.
func FuzzIndices(f *testing.F) {
	f.Add([]byte{0x03, 0xff, 0x10, 0x01}, uint8(3), uint16(20))
	f.Add([]byte{0x05, 0x1b, 0xe4, 0x08, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66}, uint8(17), uint16(30))
	f.Add([]byte{0x04, 0x01, 0x02, 0x03, 0x04, 0x03}, uint8(32), uint16(9))
	f.Fuzz(func(t *testing.T, b []byte, w uint8, n uint16) {
		bw := uint(w % 33)
		ref, ok := refIndices(b, bw, int(n))
		x := indices{b: b, bw: bw}
		got := make([]uint32, n)
		err := x.read(got)
		if ok != (err == nil) {
			t.Fatalf("width %d, %d indices: error %v, the reference ok=%v", bw, n, err, ok)
		}
		if ok && !slices.Equal(got, ref) {
			t.Fatalf("width %d: indices differ from the reference", bw)
		}
	})
}

// TestGather checks gather on aligned and misaligned dictionaries of both
// value sizes, and that it stops at the first index outside the
// dictionary.
func TestGather(t *testing.T) {
	for _, view := range []bool{true, false} {
		t.Run(fmt.Sprintf("view-unaligned-%v", view), func(t *testing.T) {
			withViewUnaligned(t, view)
			testGather(t)
		})
	}
}

func testGather(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 6))
	for _, size := range []int{4, 8} {
		for _, shift := range []int{0, 1, 3} {
			const n = 100
			buf := make([]byte, n*size+8)
			dict := buf[shift : shift+n*size]
			for i := range dict {
				dict[i] = byte(rng.Uint32())
			}
			idx := make([]uint32, 500)
			for i := range idx {
				idx[i] = rng.Uint32N(n)
			}
			out := make([]byte, len(idx)*size)
			if j := gather(out, dict, n, idx, size); j != len(idx) {
				t.Fatalf("size %d shift %d: stopped at %d", size, shift, j)
			}
			for i, x := range idx {
				if !slices.Equal(out[i*size:(i+1)*size], dict[int(x)*size:(int(x)+1)*size]) {
					t.Fatalf("size %d shift %d: value %d wrong", size, shift, i)
				}
			}
			idx[321] = n
			if j := gather(out, dict, n, idx, size); j != 321 {
				t.Fatalf("size %d shift %d: index %d outside %d values: stopped at %d, want 321", size, shift, n, n, j)
			}
		}
	}
}

// TestLiteralHeader checks where a snappy literal's bytes start.
func TestLiteralHeader(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want int
	}{
		{[]byte{10, 9 << 2, 1, 2}, 2},                   // length 10, a literal of 10 (tag 9<<2)
		{[]byte{0x80, 0x02, 60 << 2, 255, 1}, 4},        // length 256, a literal whose length-1 is in 1 byte
		{[]byte{0x80, 0x80, 0x04, 62 << 2, 0, 0, 1}, 7}, // length 65536, 3 length bytes
		{[]byte{20, 1, 0}, 0},                           // a copy first
		{[]byte{0x80}, 0},                               // a truncated length
	} {
		if got := literalHeader(tc.b); got != tc.want {
			t.Fatalf("%x: %d, want %d", tc.b, got, tc.want)
		}
	}
}

// packedRuns encodes idx (a multiple of 504 long) of bit width bw in
// bit-packed runs of 63 groups, as arrow's and parquet-mr's encoders write
// indices that rarely repeat.
func packedRuns(idx []uint32, bw uint) []byte {
	var out []byte
	for i := 0; i < len(idx); i += 504 {
		out = binary.AppendUvarint(out, 63<<1|1)
		var acc uint64
		nb := uint(0)
		for _, v := range idx[i : i+504] {
			acc |= uint64(v) << nb
			for nb += bw; nb >= 8; nb -= 8 {
				out = append(out, byte(acc))
				acc >>= 8
			}
		}
	}
	return out
}

// BenchmarkUnpackIndices decodes random dictionary indices: "short", the
// mixed short runs of encodeIndices; "long", bit-packed runs of 504
// indices, as pyarrow writes a column of many distinct values.
func BenchmarkUnpackIndices(b *testing.B) {
	for _, tc := range []struct {
		bw   uint
		long bool
	}{{8, false}, {17, false}, {32, false}, {8, true}, {17, true}, {32, true}} {
		b.Run(fmt.Sprintf("w%d-%s", tc.bw, map[bool]string{false: "short", true: "long"}[tc.long]), func(b *testing.B) {
			bw := tc.bw
			rng := rand.New(rand.NewPCG(1, uint64(bw)))
			vals := make([]uint32, 504*dictChunk)
			for i := range vals {
				vals[i] = rng.Uint32() & (1<<bw - 1)
			}
			var enc []byte
			if tc.long {
				enc = packedRuns(vals, bw)
			} else {
				for i := 0; i < len(vals); i += 1024 {
					enc = append(enc, encodeIndices(rng, vals[i:i+1024], bw)...)
				}
			}
			dst := make([]uint32, dictChunk)
			b.SetBytes(4 * dictChunk)
			b.ReportAllocs()
			x, done := indices{b: enc, bw: bw}, 0
			for b.Loop() {
				if done == len(vals) {
					x, done = indices{b: enc, bw: bw}, 0
				}
				done += len(dst)
				if err := x.read(dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGather(b *testing.B) {
	const dn = 131072
	rng := rand.New(rand.NewPCG(2, 2))
	dict := make([]byte, 8*dn)
	idx := make([]uint32, dictChunk)
	for i := range idx {
		idx[i] = rng.Uint32N(dn)
	}
	out := make([]byte, 8*dictChunk)
	b.SetBytes(8 * dictChunk)
	b.ReportAllocs()
	for b.Loop() {
		if gather(out, dict, dn, idx, 8) != dictChunk {
			b.Fatal("bad index")
		}
	}
}

// dictTestData draws n rows for writeDictFile: a label of 3 values, a dense
// column of few values and one of many, and cat keys of 50 values (C1,
// int64), of up to 5000 (C2, int32 as uint32) and of 3 (C3, int32).
func dictTestData(rng *rand.Rand, n int) *formatstest.Dataset {
	d := &formatstest.Dataset{}
	for i := range n {
		k1 := int64(i % 50)
		if i >= 50 {
			k1 = int64(rng.IntN(50))
		}
		d.Labels = append(d.Labels, []float32{float32(rng.IntN(3))})
		d.Dense = append(d.Dense, []float32{float32(rng.IntN(7)) / 4, rng.Float32()})
		d.Keys = append(d.Keys, [][]int64{{k1}, {int64(rng.IntN(5000))}, {int64(rng.IntN(3))}})
	}
	return d
}

// writeDictFile writes d with arrow-go's writer, dictionary encoding on
// (and props), and returns its file list.
func writeDictFile(t *testing.T, d *formatstest.Dataset, props ...parquet.WriterProperty) string {
	t.Helper()
	return writeScalarFile(t, d, req, nil, append([]parquet.WriterProperty{parquet.WithDictionaryDefault(true)}, props...)...)
}

// writeScalarFile writes d (in dictTestData's shape: a label, 2 dense
// columns, 3 one-hot cat columns) with arrow-go's writer and props, every
// column of repetition rep, and returns its file list. When null is set,
// the value of column col (0-5) in row i is null where null(col, i).
func writeScalarFile(t *testing.T, d *formatstest.Dataset, rep parquet.Repetition, null func(col, row int) bool, props ...parquet.WriterProperty) string {
	t.Helper()
	n := d.Len()
	lab, d0, d1 := make([]float32, 0, n), make([]float32, 0, n), make([]float32, 0, n)
	c1, c2, c3 := make([]int64, 0, n), make([]int32, 0, n), make([]int32, 0, n)
	defs := make([][]int16, 6)
	for i := range n {
		vals := []float32{d.Labels[i][0], d.Dense[i][0], d.Dense[i][1]}
		keys := []int64{d.Keys[i][0][0], d.Keys[i][1][0], d.Keys[i][2][0]}
		for col := range 6 {
			if null != nil && null(col, i) {
				defs[col] = append(defs[col], 0)
				continue
			}
			if rep != req {
				defs[col] = append(defs[col], 1)
			}
			switch col {
			case 0:
				lab = append(lab, vals[0])
			case 1:
				d0 = append(d0, vals[1])
			case 2:
				d1 = append(d1, vals[2])
			case 3:
				c1 = append(c1, keys[0])
			case 4:
				c2 = append(c2, int32(keys[1]))
			case 5:
				c3 = append(c3, int32(keys[2]))
			}
		}
	}
	cols := []rawCol{
		{node: prim("label", rep, parquet.Types.Float), f32: lab, def: defs[0]},
		{node: prim("I1", rep, parquet.Types.Float), f32: d0, def: defs[1]},
		{node: prim("I2", rep, parquet.Types.Float), f32: d1, def: defs[2]},
		{node: intNode("C1", rep, 64, true), i64: c1, def: defs[3]},
		{node: intNode("C2", rep, 32, false), i32: c2, def: defs[4]},
		{node: intNode("C3", rep, 32, true), i32: c3, def: defs[5]},
	}
	dir := t.TempDir()
	if err := writeRawProps(filepath.Join(dir, "part_0.parquet"), cols, props...); err != nil {
		t.Fatal(err)
	}
	m := &Metadata{FileStats: []FileStat{{"part_0.parquet", int64(n)}}, Labels: []Column{{"label", 0}},
		Conts: []Column{{"I1", 1}, {"I2", 2}}, Cats: []Column{{"C1", 3}, {"C2", 4}, {"C3", 5}}}
	writeMetaList(t, dir, m)
	return filepath.Join(dir, FileListName)
}

// readDictPaths reads list with the streamed dictionary path and with
// arrow-go's column reader (readPaths), and returns the streamed path's
// samples, its error, and the dictionary-encoded pages it read.
func readDictPaths(t *testing.T, list string, s *formats.Schema, o Options) (*formatstest.Dataset, error, int64) {
	t.Helper()
	return readPaths(t, list, s, o, streamedPath{toggles: []*bool{&streamDicts}, pages: &streamedDictPages})
}

// TestStreamedDicts reads dictionary-encoded scalar columns (labels, dense
// and cat keys of three physical types) written as data page v1 and v2,
// uncompressed and snappy, in small pages and in pages larger than a
// column's window, and with dictionaries that overflow their limit (the
// chunk going on in PLAIN pages): the streamed path must give the samples
// written, as arrow-go's column reader does, for both key types, with slot
// offsets, and must have read the pages itself.
func TestStreamedDicts(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 7))
	small, big := dictTestData(rng, 9000), dictTestData(rng, 200000)
	for _, tc := range []struct {
		name  string
		d     *formatstest.Dataset
		props []parquet.WriterProperty
	}{
		{"v1-none", small, nil},
		{"v1-snappy", small, []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy)}},
		{"v2-small-snappy", small, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDataPageSize(700),
			parquet.WithCompression(compress.Codecs.Snappy)}},
		{"v2-none", small, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2)}},
		{"v1-fallback-snappy", small, []parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(256), parquet.WithDataPageSize(2000), parquet.WithCompression(compress.Codecs.Snappy)}},
		{"v2-fallback-none", small, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDictionaryPageSizeLimit(100)}},
		{"big-pages-none", big, []parquet.WriterProperty{parquet.WithDataPageSize(4 << 20)}},
		{"big-pages-snappy", big, []parquet.WriterProperty{parquet.WithDataPageSize(4 << 20), parquet.WithCompression(compress.Codecs.Snappy)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := writeDictFile(t, tc.d, tc.props...)
			for _, kt := range []formats.KeyType{formats.KeyI64, formats.KeyU32} {
				got, err, n := readDictPaths(t, list, nil, Options{KeyType: kt})
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					t.Fatal("the streamed path read no dictionary-encoded page")
				}
				if d := formatstest.Diff(tc.d, got); d != "" {
					t.Fatalf("%s: %s", kt, d)
				}
			}
			sizes := []int64{50, 5000, 3}
			got, err, _ := readDictPaths(t, list, nil, Options{Options: formats.Options{SlotSizeArray: sizes}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range got.Keys {
				off := int64(0)
				for si, ks := range got.Keys[i] {
					if ks[0] != tc.d.Keys[i][si][0]+off {
						t.Fatalf("sample %d slot %d: key %d, want %d + the slot offset %d", i, si, ks[0], tc.d.Keys[i][si][0], off)
					}
					off += sizes[si]
				}
			}
			// A key outside its slot's size, found through the dictionary.
			_, err, _ = readDictPaths(t, list, nil, Options{Options: formats.Options{SlotSizeArray: []int64{50, 5000, 2}}})
			bad := slices.IndexFunc(tc.d.Keys, func(k [][]int64) bool { return k[2][0] == 2 })
			checkErr(t, err, formats.ErrKeyRange, int64(bad))
		})
	}
}

// dictChunkPages returns the offsets of the first two page headers of
// column col's chunk in row group 0 of the file at path (its dictionary
// page and first data page), with the dictionary page's header parsed.
func dictChunkPages(t *testing.T, path string, col int) (dictAt, dataAt int64, h pageHeader, raw []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	cc, err := fr.MetaData().RowGroup(0).ColumnChunk(col)
	if err != nil || !cc.HasDictionaryPage() {
		t.Fatalf("column %d: no dictionary page (%v)", col, err)
	}
	dictAt = cc.DictionaryPageOffset()
	h, n, err := parsePageHeader(raw[dictAt:])
	if err != nil || h.typ != pageDictionary {
		t.Fatalf("column %d: page at %d: %+v, %v", col, dictAt, h, err)
	}
	return dictAt, dictAt + int64(n) + int64(h.csize), h, raw
}

// TestStreamedDictErrors damages dictionary-encoded files: a dictionary too
// short for the indices of the data pages, a dictionary page turned into an
// index page (the data pages then come without a dictionary), an index bit
// width above 32, and index streams cut short. The streamed path must
// report each as ErrCorrupt (at the record of the first bad index where
// there is one), and arrow-go's path must fail too.
func TestStreamedDictErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 8))
	d := dictTestData(rng, 3000)
	list := writeDictFile(t, d)
	path := filepath.Join(filepath.Dir(list), "part_0.parquet")
	_, dataAt, h, raw := dictChunkPages(t, path, 3) // C1: 50 values, first seen in rows 0-49
	if h.nv != 50 {
		t.Fatalf("C1's dictionary holds %d values, want 50", h.nv)
	}
	dictAt, _, _, _ := dictChunkPages(t, path, 3)
	hdr := raw[dictAt:dataAt]
	// The dictionary page header's num_values (field 1 of field 7):
	// zigzag 100, one byte.
	at := slices.Index(hdr, 0x15)
	for at >= 0 && !(hdr[at] == 0x15 && hdr[at+1] == 100 && at > 0 && hdr[at-1]&0xf == ctStruct) {
		at++
		if at+1 >= len(hdr) {
			t.Fatal("no num_values field in the dictionary page header")
		}
	}
	dh, dn, _ := parsePageHeader(raw[dataAt:])
	for _, tc := range []struct {
		name string
		edit func(b []byte)
		rec  int64
	}{
		{"short-dictionary", func(b []byte) { b[dictAt+int64(at)+1] = 20 }, 10}, // 10 values: row 10 holds the 11th
		{"no-dictionary", func(b []byte) { b[dictAt+1] = 2 }, 0},                // type DICTIONARY_PAGE (zigzag 4) → INDEX_PAGE (2)
		{"index-width", func(b []byte) { b[dataAt+int64(dn)] = 33 }, 0},
		{"indices-end", func(b []byte) { b[dataAt+int64(dn)] = 30 }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if dh.enc != int32(parquet.Encodings.RLEDict) || raw[dictAt+1] != 4 {
				t.Fatalf("unexpected layout: data page encoding %d, dictionary page type byte %d", dh.enc, raw[dictAt+1])
			}
			b := slices.Clone(raw)
			tc.edit(b)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err, _ := readDictPaths(t, list, nil, Options{})
			if tc.rec >= 0 {
				checkErr(t, err, formats.ErrCorrupt, tc.rec)
			} else if !errors.Is(err, formats.ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}
