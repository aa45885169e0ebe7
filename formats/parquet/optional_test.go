package parquet

import (
	"encoding/binary"
	"errors"
	"math/bits"
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

// readOptionalPaths reads list with the streamed path for optional scalar
// columns and with arrow-go's column reader (readPaths), and returns the
// streamed path's samples, its error (the same on both paths when same)
// and the pages of optional columns it read.
func readOptionalPaths(t *testing.T, list string, o Options, same bool) (*formatstest.Dataset, error, int64) {
	t.Helper()
	return readPaths(t, list, nil, o, streamedPath{toggles: []*bool{&streamOptional, &streamDicts}, pages: &streamedOptionalPages, sameErrors: same})
}

// TestStreamedOptional reads files whose every column is OPTIONAL and holds
// no null, as pyarrow writes them: PLAIN and dictionary-encoded, data page
// v1 and v2, uncompressed and snappy, small pages and pages larger than a
// column's window. The streamed path must give the samples written, as
// arrow-go's column reader does, for both key types, and must have read
// the pages itself.
func TestStreamedOptional(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 9))
	small, big := dictTestData(rng, 9000), dictTestData(rng, 200000)
	snappy := parquet.WithCompression(compress.Codecs.Snappy)
	v2 := parquet.WithDataPageVersion(parquet.DataPageV2)
	dict := parquet.WithDictionaryDefault(true)
	for _, tc := range []struct {
		name  string
		d     *formatstest.Dataset
		props []parquet.WriterProperty
	}{
		{"v1-none", small, nil},
		{"v1-snappy", small, []parquet.WriterProperty{snappy}},
		{"v2-none", small, []parquet.WriterProperty{v2}},
		{"v2-small-snappy", small, []parquet.WriterProperty{v2, snappy, parquet.WithDataPageSize(700)}},
		{"dict-v1-snappy", small, []parquet.WriterProperty{dict, snappy}},
		{"dict-v1-none", small, []parquet.WriterProperty{dict}},
		{"dict-v2-fallback-none", small, []parquet.WriterProperty{dict, v2, parquet.WithDictionaryPageSizeLimit(100)}},
		{"big-pages-none", big, []parquet.WriterProperty{parquet.WithDataPageSize(4 << 20)}},
		{"big-pages-snappy", big, []parquet.WriterProperty{snappy, parquet.WithDataPageSize(4 << 20)}},
		{"big-pages-dict-v2-snappy", big, []parquet.WriterProperty{dict, v2, snappy, parquet.WithDataPageSize(4 << 20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := writeScalarFile(t, tc.d, opt, nil, tc.props...)
			// Values after an optional column's levels lie at odd
			// offsets: viewed in place and copied to aligned scratch.
			for _, view := range []bool{true, false} {
				withViewUnaligned(t, view)
				for _, kt := range []formats.KeyType{formats.KeyI64, formats.KeyU32} {
					got, err, n := readOptionalPaths(t, list, Options{KeyType: kt}, false)
					if err != nil {
						t.Fatal(err)
					}
					if n == 0 {
						t.Fatal("the streamed path read no page of an optional column")
					}
					if d := formatstest.Diff(tc.d, got); d != "" {
						t.Fatalf("%s, misaligned values viewed in place %v: %s", kt, view, d)
					}
				}
			}
		})
	}
}

// TestStreamedOptionalNulls reads optional columns holding a null (in a
// label, a dense and a cat column; early in a page and deep in a large one,
// whose levels are then bit-packed and, with a small window, read through
// the task's scratch): both paths must report ErrNull at the null's
// record, with the same error.
func TestStreamedOptionalNulls(t *testing.T) {
	defer func(w int) { streamWindow = w }(streamWindow)
	rng := rand.New(rand.NewPCG(16, 10))
	d := dictTestData(rng, 60000)
	for _, tc := range []struct {
		name     string
		col, row int
		window   int
		props    []parquet.WriterProperty
		every    int // more nulls after the first, every so many rows (bit-packed levels, larger than a small window)
	}{
		{"label-v1", 0, 17, 0, nil, 0},
		{"dense-v2-snappy", 2, 4000, 0, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithCompression(compress.Codecs.Snappy)}, 0},
		{"cat-dict-v1-snappy", 4, 59000, 0, []parquet.WriterProperty{parquet.WithDictionaryDefault(true), parquet.WithCompression(compress.Codecs.Snappy)}, 500},
		{"cat-big-page-small-window", 3, 51234, 1024, []parquet.WriterProperty{parquet.WithDataPageSize(4 << 20)}, 3},
		{"dense-big-v2-small-window", 1, 30001, 1024, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDataPageSize(4 << 20)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.window > 0 {
				streamWindow = tc.window
			} else {
				streamWindow = 256 << 10
			}
			list := writeScalarFile(t, d, opt, func(col, row int) bool {
				return col == tc.col && (row == tc.row || tc.every > 0 && row > tc.row && (row-tc.row)%tc.every == 0)
			}, tc.props...)
			_, err, n := readOptionalPaths(t, list, Options{}, true)
			checkErr(t, err, formats.ErrNull, int64(tc.row))
			if n == 0 {
				t.Fatal("the streamed path read no page of an optional column")
			}
		})
	}
}

// TestDefined checks the definition-level check alone on hybrid streams
// of mixed RLE and bit-packed runs, of bit widths 1-3: levels all at the
// maximum pass, the first lower one is ErrNull at its row (offset by the
// page's row), and a stream shorter than its page is ErrCorrupt.
func TestDefined(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 11))
	for trial := range 300 {
		md := uint8(1 + rng.IntN(7))
		n := 1 + rng.IntN(20000)
		lv := make([]uint8, n)
		for i := range lv {
			lv[i] = md
		}
		null := -1
		if trial%2 == 1 {
			null = rng.IntN(n)
			lv[null] = uint8(rng.IntN(int(md)))
			if k := null + 1 + rng.IntN(n); k < n {
				lv[k] = 0 // a later null: the first is reported
			}
		}
		// Runs of the maximum broken into mixed runs.
		for range rng.IntN(5) {
			i := rng.IntN(n)
			lv[i] = md
		}
		if null >= 0 {
			lv[null] = uint8(rng.IntN(int(md)))
		}
		enc := encodeHybrid(rng, lv, uint(bits.Len8(md)))
		dec := &decoder{cp: &colPlan{maxDef: int16(md), meta: Column{"C1", 3}}, b: &rgBuf{fp: &filePlan{path: "t.parquet"}, start: 1000}}
		e := dec.defined(5, enc, n)
		if null < 0 && e != nil {
			t.Fatalf("trial %d: all %d levels at %d: %v", trial, n, md, e)
		}
		if null >= 0 {
			checkErr(t, e, formats.ErrNull, int64(1000+5+null))
		}
		if e := dec.defined(0, enc[:len(enc)/2], n); !errors.Is(e, formats.ErrCorrupt) && !errors.Is(e, formats.ErrNull) {
			t.Fatalf("trial %d: half the stream: %v", trial, e)
		}
	}
}

// TestOptionalSeeds reads FuzzReadFile's optional seed files (a scalar
// and a list cat column, every column optional, PLAIN v1 and dictionary
// v2 snappy, pages of about 100 bytes): they must hold fuzzSeedFile's rows,
// through the streamed paths, as through arrow-go's.
func TestOptionalSeeds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := formats.NewSchema(1, 3, []int{1, 3}, []int64{50, 70}, formats.KeyI64)
	want := formatstest.NewDataset(rng, s, fuzzRows, 1, formatstest.AnyFloat)
	for i, b := range [][]byte{optionalSeedFile(t),
		optionalSeedFile(t, parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(true))} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "part_0.parquet"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		writeMetaList(t, dir, MetadataFor(&s, []FileStat{{"part_0.parquet", fuzzRows}}))
		got, err, n := readPaths(t, filepath.Join(dir, FileListName), &s, Options{}, streamedPath{
			toggles: []*bool{&streamOptional, &streamDicts, &streamLists}, pages: &streamedOptionalPages})
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if n == 0 {
			t.Fatalf("seed %d: the streamed path read no page of an optional column", i)
		}
		if d := formatstest.Diff(want, got); d != "" {
			t.Fatalf("seed %d: %s", i, d)
		}
	}
}

// TestStreamedOptionalErrors damages the first data page of an optional
// dense column (PLAIN, v1, uncompressed): a level length past the page, a
// run of level 2 (above the maximum, 1) and a run of nulls (level 0). The
// streamed path must report ErrCorrupt, ErrCorrupt and ErrNull at record 0,
// and arrow-go's path must fail too.
func TestStreamedOptionalErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 12))
	d := dictTestData(rng, 3000)
	list := writeScalarFile(t, d, opt, nil)
	path := filepath.Join(filepath.Dir(list), "part_0.parquet")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := fr.MetaData().RowGroup(0).ColumnChunk(1)
	fr.Close()
	if err != nil {
		t.Fatal(err)
	}
	at := cc.DataPageOffset()
	h, n, err := parsePageHeader(raw[at:])
	if err != nil || h.typ != pageData || h.defEnc != int32(parquet.Encodings.RLE) {
		t.Fatalf("first data page of I1: %+v, %v", h, err)
	}
	body := at + int64(n)
	// The levels: one RLE run of h.nv ones: a varint header, then the value.
	lv := raw[body+4 : body+4+int64(binary.LittleEndian.Uint32(raw[body:]))]
	hd, k := binary.Uvarint(lv)
	if hd != uint64(h.nv)<<1 || k+1 != len(lv) || lv[k] != 1 {
		t.Fatalf("levels %x: not one run of %d ones", lv, h.nv)
	}
	val := body + 4 + int64(k)
	for _, tc := range []struct {
		name     string
		edit     func(b []byte)
		sentinel error
	}{
		{"levels-past-page", func(b []byte) { binary.LittleEndian.PutUint32(b[body:], uint32(h.usize)) }, formats.ErrCorrupt},
		{"level-above-max", func(b []byte) { b[val] = 2 }, formats.ErrCorrupt},
		{"nulls", func(b []byte) { b[val] = 0 }, formats.ErrNull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(raw)
			tc.edit(b)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err, _ := readOptionalPaths(t, list, Options{}, false)
			checkErr(t, err, tc.sentinel, 0)
		})
	}
}

// withViewUnaligned sets viewUnaligned to v until t ends.
func withViewUnaligned(t *testing.T, v bool) {
	old := viewUnaligned
	viewUnaligned = v
	t.Cleanup(func() { viewUnaligned = old })
}
