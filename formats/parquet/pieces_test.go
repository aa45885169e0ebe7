package parquet

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// batchSums reads r to its end (Next when next, else Read) and returns one
// line per batch: its length and a hash of its labels, dense values, CSR
// offsets and keys; a read error ends the list as its text.
func batchSums(t *testing.T, r *Reader, next bool) []string {
	t.Helper()
	var out []string
	own, err := formats.NewBatch(r.Schema(), r.o.BatchSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Free()
	for {
		b := own
		if next {
			b, err = r.Next()
		} else {
			_, err = r.Read(own)
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			return append(out, "error: "+err.Error())
		}
		h := sha256.New()
		for _, f := range [][]float32{b.Labels[:b.N*b.Schema.LabelDim], b.Dense[:b.N*b.Schema.DenseDim]} {
			for _, x := range f {
				binary.Write(h, binary.LittleEndian, math.Float32bits(x))
			}
		}
		binary.Write(h, binary.LittleEndian, b.Offsets[:b.N*len(b.Schema.Slots)+1])
		nk := int(b.Offsets[b.N*len(b.Schema.Slots)])
		if b.Keys64 != nil {
			binary.Write(h, binary.LittleEndian, b.Keys64[:nk])
		} else {
			binary.Write(h, binary.LittleEndian, b.Keys32[:nk])
		}
		out = append(out, fmt.Sprintf("%d %x", b.N, h.Sum(nil)[:8]))
	}
}

// TestPieces checks that decoding row groups in pieces (pieceCuts: rows
// handed to the consumer a batch or so at a time, each column's pages
// going on from piece to piece) yields exactly the batches, and the
// errors, of decoding each row group whole: several files whose row groups
// are not multiples of the batch size (batches spanning row groups and
// files, a short last batch), pages spanning pieces (128 KiB pages of
// 20000-row row groups), plain pages uncompressed (values read from the
// window), snappy and zstd (arrow-go's page reader), dictionary pages
// (arrow-go's column reader), optional columns without nulls and with a
// null late in a file, both key types, 1 and 3 workers, Next and Read.
func TestPieces(t *testing.T) {
	defer func(m int) { minPieceRows = m }(minPieceRows)
	type dataset struct {
		name string
		list string
		s    formats.Schema
		rgs  int // row groups in all
	}
	var sets []dataset
	for _, tc := range []struct {
		name string
		kt   formats.KeyType
		wo   WriterOptions
	}{
		{"snappy-i64", formats.KeyI64, WriterOptions{}},
		{"none-u32", formats.KeyU32, WriterOptions{Compression: "none", CatType: "uint32"}},
		{"zstd-i64", formats.KeyI64, WriterOptions{Compression: "zstd"}},
		{"dict-u32", formats.KeyU32, WriterOptions{Dictionary: true, CatType: "int32"}},
	} {
		rng := rand.New(rand.NewPCG(14, uint64(len(sets))))
		s := formats.NewSchema(1, 3, []int{1, 1, 1, 1}, nil, tc.kt)
		d := formatstest.NewDataset(rng, s, 3*22000, 1, formatstest.AnyFloat)
		if tc.wo.Dictionary {
			for i := range d.Keys { // few distinct keys, so the pages stay dictionary-encoded
				for _, k := range d.Keys[i] {
					k[0] %= 100
				}
			}
		}
		tc.wo.RowGroupSize = 20000
		list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: tc.wo, RowsPerFile: 22000})
		sets = append(sets, dataset{tc.name, list, s, 6})
	}
	// Optional columns (arrow-go's column reader with levels), one row
	// group per file, without nulls, and the same with a null in the last
	// file's row 4321.
	for _, null := range []bool{false, true} {
		dir := t.TempDir()
		rng := rand.New(rand.NewPCG(15, 0))
		m := &Metadata{Labels: []Column{{"label", 0}}, Conts: []Column{{"I1", 1}}, Cats: []Column{{"C1", 2}, {"C2", 3}}}
		for f, rows := range []int{7000, 5000, 6000} {
			cols := []rawCol{
				{node: prim("label", opt, parquet.Types.Float)},
				{node: prim("I1", opt, parquet.Types.Float)},
				{node: intNode("C1", opt, 64, true)},
				{node: intNode("C2", req, 64, true)},
			}
			for i := 0; i < rows; i++ {
				cols[0].f32 = append(cols[0].f32, float32(rng.IntN(2)))
				cols[1].f32 = append(cols[1].f32, rng.Float32())
				cols[3].i64 = append(cols[3].i64, rng.Int64N(1000))
				cols[0].def = append(cols[0].def, 1)
				cols[1].def = append(cols[1].def, 1)
				if null && f == 2 && i == 4321 {
					cols[2].def = append(cols[2].def, 0)
					continue
				}
				cols[2].i64 = append(cols[2].i64, rng.Int64N(1000))
				cols[2].def = append(cols[2].def, 1)
			}
			name := fmt.Sprintf("part_%d.parquet", f)
			if err := writeRaw(filepath.Join(dir, name), cols); err != nil {
				t.Fatal(err)
			}
			m.FileStats = append(m.FileStats, FileStat{name, int64(rows)})
		}
		writeMetaList(t, dir, m)
		sets = append(sets, dataset{fmt.Sprintf("optional-null=%v", null), filepath.Join(dir, FileListName), formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyI64), 3})
	}
	for _, ds := range sets {
		for _, bs := range []int{999, 65536} {
			for _, workers := range []int{1, 3} {
				o := Options{Options: formats.Options{BatchSize: bs, Workers: workers}}
				read := func(mp int, next bool) ([]string, int) {
					minPieceRows = mp
					r, err := OpenList(ds.list, &ds.s, o)
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					got := batchSums(t, r, next)
					r.Close()
					return got, r.pieces
				}
				want, n := read(math.MaxInt32, false) // whole row groups
				if n != ds.rgs {
					t.Fatalf("%s: %d pieces for %d row groups", ds.name, n, ds.rgs)
				}
				for _, mp := range []int{1, 3000} {
					for _, next := range []bool{false, true} {
						got, n := read(mp, next)
						if mp == 1 && bs < 20000 && n <= ds.rgs {
							t.Fatalf("%s batch %d: %d pieces for %d row groups", ds.name, bs, n, ds.rgs)
						}
						if e := want[len(want)-1]; strings.HasPrefix(e, "error: ") && len(got) >= len(want) && got[len(got)-1] == e {
							// A row group decoded whole fails at its
							// first batch; in pieces, the batches of
							// the pieces before the failing one come
							// first, those of the whole one too.
							got = append(got[:len(want)-1:len(want)-1], e)
						}
						if fmt.Sprint(got) != fmt.Sprint(want) {
							t.Fatalf("%s batch %d workers %d pieces of ≥ %d rows, next=%v:\n got %q\nwant %q", ds.name, bs, workers, mp, next, got, want)
						}
					}
				}
				if last := want[len(want)-1]; ds.name == "optional-null=true" {
					if want := "part_2.parquet: offset"; !strings.Contains(last, want) || !strings.Contains(last, "record 4321: null value") {
						t.Fatalf("%s: last %q, want an error at %s", ds.name, last, want)
					}
				} else if len(want) != (66000+bs-1)/bs && ds.rgs == 6 {
					t.Fatalf("%s: %d batches", ds.name, len(want))
				}
			}
		}
	}
}

// TestPieceCuts checks the pieces a row group is cut into: at batch ends,
// a head or tail of its own from mergeRows rows on (a shorter one merged),
// the pieces between of at least minPieceRows rows of whole batches, whole
// for list row groups and batches longer than the row group.
func TestPieceCuts(t *testing.T) {
	defer func(m int) { minPieceRows = m }(minPieceRows)
	minPieceRows = 32768
	for _, tc := range []struct {
		rows, tail, bs int
		fixed          bool
		want           string
	}{
		{131072, 0, 65536, true, "[0 65536 131072]"},
		{118928, 0, 65536, true, "[0 65536 118928]"},
		{131072, 53392, 65536, true, "[0 12144 77680 131072]"},  // a head of 12144 (≥ 4096) of its own
		{131072, 20000, 65536, true, "[0 45536 111072 131072]"}, // and a tail of 20000
		{131072, 62000, 65536, true, "[0 69072 131072]"},        // a head of 3536 merged
		{131072, 0, 65536, false, "[0 131072]"},
		{131072, 0, 1 << 20, true, "[0 131072]"},
		{40000, 0, 999, true, "[0 32967 40000]"},                 // 33 batches, then a tail of 7033
		{100000, 0, 16384, true, "[0 32768 65536 98304 100000]"}, // a tail of 1696 (≥ 1024)
		{100000, 5, 7, true, "[0 32769 65543 98317 100000]"},     // a head of 2 merged
		{250000, 1000, 2048, true, "[0 1048 33816 66584 99352 132120 164888 197656 230424 250000]"},
		{1 << 24, 0, 1, true, ""},              // 512 pieces, without a step per row
		{65535, 0, 1, true, "[0 32768 65535]"}, // a tail of 32767
		{33000, 0, 1, true, "[0 33000]"},       // a tail of 232 merged
	} {
		cuts := pieceCuts(tc.rows, tc.tail, tc.bs, tc.fixed)
		if tc.want == "" {
			if len(cuts) != tc.rows/minPieceRows+1 || cuts[1] != minPieceRows {
				t.Errorf("pieceCuts(%d, %d, %d, %v): %d cuts from %v", tc.rows, tc.tail, tc.bs, tc.fixed, len(cuts), cuts[:2])
			}
			continue
		}
		if got := fmt.Sprint(cuts); got != tc.want {
			t.Errorf("pieceCuts(%d, %d, %d, %v) = %s, want %s", tc.rows, tc.tail, tc.bs, tc.fixed, got, tc.want)
		}
	}
}

// TestSnappyLiteral checks the single-literal shortcut against s2.Decode:
// incompressible blocks of 1 byte to 1 MiB (every literal length
// encoding) are viewed in place and equal to their decoding; compressible,
// truncated, padded and mislabelled blocks are left to s2.Decode.
func TestSnappyLiteral(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 59, 60, 61, 255, 256, 257, 65535, 65536, 65537, 1 << 17, 1<<24 + 3} {
		if n > 1<<20 && testing.Short() {
			continue
		}
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		enc := s2.EncodeSnappy(nil, raw)
		dec, err := s2.Decode(nil, enc)
		if err != nil {
			t.Fatal(err)
		}
		lit, ok := snappyLiteral(enc, n, compress.Codecs.Snappy)
		if !ok || !bytes.Equal(lit, dec) {
			t.Fatalf("%d random bytes: ok %v, equal %v", n, ok, bytes.Equal(lit, dec))
		}
		for _, bad := range [][]byte{enc[:len(enc)-1], append(enc[:len(enc):len(enc)], 0)} {
			if _, ok := snappyLiteral(bad, n, compress.Codecs.Snappy); ok {
				t.Fatalf("%d bytes: a block of %d bytes taken as a literal", n, len(bad))
			}
		}
		if _, ok := snappyLiteral(enc, n+1, compress.Codecs.Snappy); ok {
			t.Fatalf("%d bytes: taken for %d", n, n+1)
		}
		if _, ok := snappyLiteral(enc, n, compress.Codecs.Zstd); ok {
			t.Fatalf("%d bytes: a zstd page taken as a snappy literal", n)
		}
	}
	zeros := s2.EncodeSnappy(nil, make([]byte, 4096))
	if _, ok := snappyLiteral(zeros, 4096, compress.Codecs.Snappy); ok {
		t.Fatal("a compressed block taken as a literal")
	}
	if _, ok := snappyLiteral(nil, 0, compress.Codecs.Snappy); ok {
		t.Fatal("an empty block taken as a literal")
	}
}

// TestPieceTasks checks that tasks decoding every column of a one-hot
// piece through their staging block (stagePiece: 1 and 2 workers, one task
// per row group), and tasks over column ranges of one (8 workers, not
// staged), yield the batches and the errors of one worker decoding
// straight into the pieces: snappy and uncompressed plain pages,
// dictionary pages, both key types, row groups of several pages and
// pieces, none a multiple of stageRows, and a key out of its slot's range
// late in a row group (the error's file, record and column).
func TestPieceTasks(t *testing.T) {
	defer func(s bool, m int) { staging, minPieceRows = s, m }(staging, minPieceRows)
	minPieceRows = 3000
	rng := rand.New(rand.NewPCG(16, 0))
	s64 := formats.NewSchema(2, 3, []int{1, 1, 1}, nil, formats.KeyI64)
	s32 := formats.NewSchema(1, 2, []int{1, 1, 1, 1}, nil, formats.KeyU32)
	cases := []struct {
		name string
		s    formats.Schema
		wo   WriterOptions
		bad  int // row whose first key is put out of range, -1 for none
	}{
		{"snappy-i64", s64, WriterOptions{}, -1},
		{"none-u32", s32, WriterOptions{Compression: "none", CatType: "uint32"}, -1},
		{"dict-u32", s32, WriterOptions{Dictionary: true, CatType: "int32"}, -1},
		{"snappy-i64-bad-key", s64, WriterOptions{}, 103457},
		{"none-u32-bad-key", s32, WriterOptions{Compression: "none", CatType: "uint32"}, 71234},
	}
	const rows, perFile = 130001, 60000
	for _, tc := range cases {
		d := formatstest.NewDataset(rng, tc.s, rows, 1, formatstest.AnyFloat)
		for i := range d.Keys {
			for _, k := range d.Keys[i] {
				k[0] %= 1000
			}
		}
		if tc.bad >= 0 {
			d.Keys[tc.bad][0][0] = 5000
		}
		tc.wo.RowGroupSize = 50000 // 128 KiB pages: 16384 int64 values
		list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: tc.wo, RowsPerFile: perFile})
		read := func(workers int, staged bool) ([]string, int) {
			staging = staged
			o := Options{Options: formats.Options{BatchSize: 4000, Workers: workers, SlotSizeArray: []int64{1000, 1000, 1000, 1000}[:len(tc.s.Slots)]}}
			r, err := OpenList(list, &tc.s, o)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got := batchSums(t, r, true)
			r.Close() // its producer has ended: r.pieces is final
			return got, r.pieces
		}
		want, _ := read(1, false)
		for _, workers := range []int{1, 2, 8} {
			for _, staged := range []bool{false, true} {
				if got, n := read(workers, staged); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s, %d workers, staged %v (%d pieces):\n got %q\nwant %q", tc.name, workers, staged, n, got, want)
				}
			}
		}
		last := want[len(want)-1]
		if tc.bad >= 0 {
			f, rec := tc.bad/perFile, tc.bad%perFile
			if !strings.Contains(last, fmt.Sprintf("part_%d.parquet", f)) || !strings.Contains(last, fmt.Sprintf("record %d", rec)) || !strings.Contains(last, `"C1"`) {
				t.Fatalf("%s: last %q, want the bad key's file, record and column", tc.name, last)
			}
		} else if strings.HasPrefix(last, "error") || len(want) != (rows+3999)/4000 {
			t.Fatalf("%s: %d batches, last %q", tc.name, len(want), last)
		}
	}
}

// TestSharedSlots checks that readers given one Recycler (a training run's
// passes, the next opened while the current one decodes) share their
// decoding slots, and that readers without one, or with another worker
// count, do not.
func TestSharedSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 0))
	s := formats.NewSchema(1, 2, []int{1, 3}, nil, formats.KeyI64)
	d := formatstest.NewDataset(rng, s, 3000, 1, formatstest.AnyFloat)
	list := writeDataset(t, t.TempDir(), d, DatasetOptions{RowsPerFile: 1000})
	rec := formats.NewRecycler(nil)
	open := func(alloc formats.Allocator, workers int) *Reader {
		r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: 500, Workers: workers, Alloc: alloc}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	a, b := open(rec, 3), open(rec, 3)
	if a.slots != b.slots || cap(a.slots) != 3 {
		t.Fatalf("two readers of one Recycler: slots shared %v, %d of them", a.slots == b.slots, cap(a.slots))
	}
	if c := open(rec, 2); c.slots == a.slots {
		t.Fatal("readers of another worker count share the slots")
	}
	if c := open(nil, 3); c.slots == a.slots {
		t.Fatal("a reader without the Recycler shares its slots")
	}
	// Both read the whole dataset, interleaved, as two passes around a
	// boundary do.
	for _, r := range []*Reader{a, b} {
		got, err := formatstest.ReadAll(r, 500, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := formatstest.Diff(d, got); diff != "" {
			t.Fatal(diff)
		}
	}
}
