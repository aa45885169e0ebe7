package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// nullKey marks a null list element in listRows.
const nullKey = math.MinInt64

// listLevelsOf returns the values and levels of list rows in a column of
// the given list and element repetitions: a nil row is a null list, a
// nullKey a null element.
func listLevelsOf(listRep, elemRep parquet.Repetition, rows [][]int64) (vals []int64, def, rep []int16) {
	listDef := int16(0)
	if listRep == opt {
		listDef = 1
	}
	repDef, maxDef := listDef+1, listDef+1
	if elemRep == opt {
		maxDef++
	}
	for _, r := range rows {
		switch {
		case r == nil:
			def, rep = append(def, 0), append(rep, 0)
		case len(r) == 0:
			def, rep = append(def, listDef), append(rep, 0)
		}
		for j, k := range r {
			rep = append(rep, int16(min(j, 1)))
			if k == nullKey {
				def = append(def, repDef)
				continue
			}
			def = append(def, maxDef)
			vals = append(vals, k)
		}
	}
	return vals, def, rep
}

// listTestRows draws n rows of keys in [0, 1000): one-key rows, short
// rows, rows of 100 keys and (when empty) empty rows, in runs so that
// level chunks hold several kinds.
func listTestRows(rng *rand.Rand, n, maxLen int, empty bool) [][]int64 {
	rows := make([][]int64, n)
	kind := 0
	for i := range rows {
		if rng.IntN(40) == 0 {
			kind = rng.IntN(4)
		}
		l := 1
		switch kind {
		case 1:
			l = 2 + rng.IntN(11)
		case 2:
			l = 100
		case 3:
			l = rng.IntN(3)
		}
		l = min(l, maxLen)
		if l == 0 && !empty {
			l = 1
		}
		rows[i] = make([]int64, l)
		for j := range rows[i] {
			rows[i][j] = int64(rng.IntN(1000))
		}
	}
	return rows
}

// writeListFile writes a label column and three list cat columns (int64
// signed, int32 as uint32, int32 signed) of the given repetitions, with
// props, and returns its file list.
func writeListFile(t *testing.T, listRep, elemRep parquet.Repetition, cats [3][][]int64, props ...parquet.WriterProperty) string {
	t.Helper()
	n := len(cats[0])
	lab := make([]float32, n)
	for i := range lab {
		lab[i] = float32(i % 3)
	}
	cols := []rawCol{{node: prim("label", req, parquet.Types.Float), f32: lab}}
	for ci, c := range cats {
		v, def, rep := listLevelsOf(listRep, elemRep, c)
		name := fmt.Sprintf("C%d", ci+1)
		switch ci {
		case 0:
			cols = append(cols, rawCol{node: listNode(name, listRep, elemRep, intNode("element", elemRep, 64, true)), i64: v, def: def, rep: rep})
		default:
			v32 := make([]int32, len(v))
			for i, x := range v {
				v32[i] = int32(x)
			}
			cols = append(cols, rawCol{node: listNode(name, listRep, elemRep, intNode("element", elemRep, 32, ci == 2)), i32: v32, def: def, rep: rep})
		}
	}
	dir := t.TempDir()
	if err := writeRawProps(filepath.Join(dir, "part_0.parquet"), cols, props...); err != nil {
		t.Fatal(err)
	}
	m := &Metadata{FileStats: []FileStat{{"part_0.parquet", int64(n)}}, Labels: []Column{{"label", 0}},
		Cats: []Column{{"C1", 1}, {"C2", 2}, {"C3", 3}}}
	writeMetaList(t, dir, m)
	return filepath.Join(dir, FileListName)
}

// readBothPaths reads list with the streamed list path, which reads the
// row group in pieces, and with arrow-go's column reader (readPaths), and
// returns the streamed path's samples, its error (the same on both paths),
// and the pages it read.
func readBothPaths(t *testing.T, list string, s *formats.Schema, o Options) (*formatstest.Dataset, error, int64) {
	t.Helper()
	return readPaths(t, list, s, o, streamedPath{toggles: []*bool{&streamLists, &streamDicts}, pages: &streamedListPages, pieces: true, sameErrors: true})
}

// TestStreamedLists reads list cat columns of every list and element
// repetition, written as data page v1 and v2, uncompressed and snappy, in
// small pages (rows straddling pages) and large ones (pages of several
// level chunks): the streamed list path must give the samples written,
// as arrow-go's column reader does, with and without slot offsets, for
// both key types.
func TestStreamedLists(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	const rows = 7000
	layouts := []struct{ list, elem parquet.Repetition }{{req, req}, {opt, opt}, {req, opt}, {opt, req}}
	pages := []struct {
		name  string
		props []parquet.WriterProperty
	}{
		{"v1-small-none", []parquet.WriterProperty{parquet.WithDataPageSize(600), parquet.WithBatchSize(37)}},
		{"v1-snappy", []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy)}},
		{"v2-small-snappy", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDataPageSize(900), parquet.WithBatchSize(50),
			parquet.WithCompression(compress.Codecs.Snappy)}},
		{"v2-none", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2)}},
		{"v1-dict-snappy", []parquet.WriterProperty{parquet.WithDictionaryDefault(true), parquet.WithCompression(compress.Codecs.Snappy)}},
		{"v2-dict-small-none", []parquet.WriterProperty{parquet.WithDictionaryDefault(true), parquet.WithDataPageVersion(parquet.DataPageV2),
			parquet.WithDataPageSize(600)}},
		{"v1-dict-fallback-none", []parquet.WriterProperty{parquet.WithDictionaryDefault(true), parquet.WithDictionaryPageSizeLimit(64), parquet.WithDataPageSize(2000)}},
		{"v2-dict-fallback-snappy", []parquet.WriterProperty{parquet.WithDictionaryDefault(true), parquet.WithDataPageVersion(parquet.DataPageV2),
			parquet.WithDictionaryPageSizeLimit(300), parquet.WithCompression(compress.Codecs.Snappy)}},
	}
	for _, lay := range layouts {
		cats := [3][][]int64{listTestRows(rng, rows, 100, true), listTestRows(rng, rows, 1, false), listTestRows(rng, rows, 20, true)}
		want := &formatstest.Dataset{}
		for i := range rows {
			want.Labels = append(want.Labels, []float32{float32(i % 3)})
			want.Dense = append(want.Dense, []float32{})
			want.Keys = append(want.Keys, [][]int64{cats[0][i], cats[1][i], cats[2][i]})
		}
		for _, pg := range pages {
			name := fmt.Sprintf("%v-%v-%s", lay.list, lay.elem, pg.name)
			t.Run(name, func(t *testing.T) {
				list := writeListFile(t, lay.list, lay.elem, cats, pg.props...)
				dictPages := streamedDictPages.Load()
				defer func() {
					if n := streamedDictPages.Load() - dictPages; strings.Contains(pg.name, "dict") != (n > 0) {
						t.Errorf("the streamed path read %d dictionary-encoded pages", n)
					}
				}()
				for _, kt := range []formats.KeyType{formats.KeyI64, formats.KeyU32} {
					got, err, n := readBothPaths(t, list, nil, Options{KeyType: kt})
					if err != nil {
						t.Fatal(err)
					}
					if n == 0 {
						t.Fatal("the streamed list path read no page")
					}
					if d := formatstest.Diff(want, got); d != "" {
						t.Fatalf("%s: %s", kt, d)
					}
				}
				got, err, _ := readBothPaths(t, list, nil, Options{Options: formats.Options{SlotSizeArray: []int64{1000, 1000, 1000}}})
				if err != nil {
					t.Fatal(err)
				}
				for i := range got.Keys {
					for si, ks := range got.Keys[i] {
						for j := range ks {
							if ks[j] != want.Keys[i][si][j]+int64(si)*1000 {
								t.Fatalf("sample %d slot %d: key %d, want %d + the slot offset", i, si, ks[j], want.Keys[i][si][j])
							}
						}
					}
				}
			})
		}
	}
}

// TestStreamedListErrors checks that a null list, a null element, a key
// out of its slot's range, a negative key for uint32 keys and a row
// longer than its slot's max nnz are reported by the streamed list path
// as by arrow-go's column reader: the same error, at the same record.
func TestStreamedListErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 2))
	const rows = 9000
	base := [3][][]int64{listTestRows(rng, rows, 100, true), listTestRows(rng, rows, 1, false), listTestRows(rng, rows, 20, true)}
	long := slices.IndexFunc(base[0], func(r []int64) bool { return len(r) == 100 })
	clone := func() [3][][]int64 {
		var c [3][][]int64
		for i := range c {
			c[i] = make([][]int64, rows)
			for j, r := range base[i] {
				c[i][j] = slices.Clone(r)
			}
		}
		return c
	}
	s := formats.NewSchema(1, 0, []int{100, 1, 20}, nil, formats.KeyI64)
	tight := formats.NewSchema(1, 0, []int{99, 1, 20}, nil, formats.KeyI64)
	u32 := formats.NewSchema(1, 0, []int{100, 1, 20}, nil, formats.KeyU32)
	sizes := Options{Options: formats.Options{SlotSizeArray: []int64{1000, 1000, 1000}}}
	for _, tc := range []struct {
		name     string
		edit     func(c *[3][][]int64)
		s        *formats.Schema
		o        Options
		sentinel error
		rec      int
	}{
		{"null-list", func(c *[3][][]int64) { c[0][777] = nil }, &s, Options{}, formats.ErrNull, 777},
		{"null-element", func(c *[3][][]int64) { c[2][4321] = []int64{1, nullKey} }, &s, Options{}, formats.ErrNull, 4321},
		{"key-range", func(c *[3][][]int64) { c[0][5555] = []int64{3, 5000} }, &s, sizes, formats.ErrKeyRange, 5555},
		{"negative-u32", func(c *[3][][]int64) { c[2][8001] = []int64{-4} }, &u32, Options{KeyType: formats.KeyU32}, formats.ErrKeyRange, 8001},
		{"max-nnz", func(c *[3][][]int64) {}, &tight, Options{}, formats.ErrNNZ, long},
	} {
		for _, v2 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-v2-%v", tc.name, v2), func(t *testing.T) {
				c := clone()
				tc.edit(&c)
				props := []parquet.WriterProperty{parquet.WithDataPageSize(4000), parquet.WithCompression(compress.Codecs.Snappy)}
				if v2 {
					props = append(props, parquet.WithDataPageVersion(parquet.DataPageV2))
				}
				list := writeListFile(t, opt, opt, c, props...)
				_, err, _ := readBothPaths(t, list, tc.s, tc.o)
				checkErr(t, err, tc.sentinel, int64(tc.rec))
			})
		}
	}
}

// encodeHybrid encodes levels of bit width bw in the RLE/bit-packed
// hybrid: runs of 8 or more equal levels (or, at random, shorter ones) as
// RLE runs, the rest bit-packed, the last group padded.
func encodeHybrid(rng *rand.Rand, levels []uint8, bw uint) []byte {
	var out []byte
	n := len(levels)
	for i := 0; i < n; {
		j := i + 1
		for j < n && levels[j] == levels[i] {
			j++
		}
		if j-i >= 8 || rng.IntN(4) == 0 {
			out = binary.AppendUvarint(out, uint64(j-i)<<1)
			out = append(out, levels[i])
			i = j
			continue
		}
		groups := 1 + rng.IntN(3)
		out = binary.AppendUvarint(out, uint64(groups)<<1|1)
		var acc uint64
		nb := uint(0)
		for k := 0; k < 8*groups; k++ {
			var v uint8
			if i+k < n {
				v = levels[i+k]
			}
			acc |= uint64(v) << nb
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

// TestHybrid decodes random levels of widths 1 to 8, in chunks of random
// sizes, through read and skip; and refuses levels above the maximum and
// streams that end early.
func TestHybrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 3))
	for trial := range 3000 {
		bw := uint(1 + trial%8)
		mx := uint8(1<<bw - 1)
		n := rng.IntN(700)
		lv := make([]uint8, n)
		for i := 0; i < n; {
			r, v := 1+rng.IntN(30), uint8(rng.IntN(int(mx)+1))
			for j := 0; j < r && i < n; j++ {
				lv[i] = v
				if rng.IntN(5) == 0 {
					lv[i] = uint8(rng.IntN(int(mx) + 1))
				}
				i++
			}
		}
		enc := encodeHybrid(rng, lv, bw)
		h := hybrid{b: enc, bw: bw, max: mx}
		got := make([]uint8, n)
		for at := 0; at < n; {
			k := min(n-at, 1+rng.IntN(40))
			if h.skip(k, lv[at]) {
				copy(got[at:], lv[at:at+k]) // skip is right only if the run holds them
				if slices.ContainsFunc(lv[at:at+k], func(x uint8) bool { return x != lv[at] }) {
					t.Fatalf("trial %d: skip(%d, %d) at %d over levels %v", trial, k, lv[at], at, lv[at:at+k])
				}
			} else if err := h.read(got[at : at+k]); err != nil {
				t.Fatalf("trial %d (width %d): %v at level %d of %d", trial, bw, err, at, n)
			}
			at += k
		}
		if !slices.Equal(got, lv) {
			t.Fatalf("trial %d (width %d): levels %v decoded as %v", trial, bw, lv, got)
		}
		if n > 0 && bw > 1 {
			// The same stream read against a smaller maximum.
			top := slices.Max(lv)
			if top > 0 {
				h := hybrid{b: enc, bw: bw, max: top - 1}
				if err := h.read(make([]uint8, n)); !errors.Is(err, errLevels) {
					t.Fatalf("trial %d: levels up to %d read with max %d: %v", trial, top, top-1, err)
				}
			}
		}
		h = hybrid{b: enc, bw: bw, max: mx}
		if err := h.read(make([]uint8, n+8*4+1)); !errors.Is(err, errLevels) {
			t.Fatalf("trial %d: reading past the end: %v", trial, err)
		}
	}
}

// FuzzHybrid decodes arbitrary bytes as levels: an error or levels within
// the maximum, never a panic.
func FuzzHybrid(f *testing.F) {
	f.Add([]byte{0x03, 0xff, 0x10, 0x01}, uint8(1), uint16(20))
	f.Add([]byte{0x05, 0x1b, 0xe4, 0x08, 0x02}, uint8(2), uint16(20))
	f.Fuzz(func(t *testing.T, b []byte, bw uint8, n uint16) {
		w := uint(1 + bw%8)
		mx := uint8(1<<w - 1)
		if bw&0x80 != 0 {
			mx /= 2
		}
		h := hybrid{b: b, bw: w, max: mx}
		out := make([]uint8, n)
		if h.read(out) == nil {
			for i, v := range out {
				if v > mx {
					t.Fatalf("level %d = %d above %d", i, v, mx)
				}
			}
		}
	})
}

// TestReserveKeys checks the bounds on the keys a streamed list column
// makes room for.
func TestReserveKeys(t *testing.T) {
	for _, tc := range []struct {
		nv, n, size, rows int64
		nnz               int
		want              int
	}{
		{1000, 1 << 20, 8, 100, 0, 1000},  // the footer's count
		{1 << 40, 4000, 8, 1e9, 0, 4000},  // a lying count: 8× the bytes, as values
		{1 << 40, 4000, 4, 10, 100, 1000}, // rows · max nnz
		{-5, 4000, 4, 10, 0, 0},
	} {
		if got := reserveKeys(tc.nv, tc.n, tc.size, tc.rows, tc.nnz); got != tc.want {
			t.Errorf("reserveKeys(%d, %d, %d, %d, %d) = %d, want %d", tc.nv, tc.n, tc.size, tc.rows, tc.nnz, got, tc.want)
		}
	}
}

// TestStreamedListsSigned reads negative int64 and int32 keys and uint32
// keys of 2³¹ and above, in rows without empty lists (so that every level
// chunk takes the one-pass key conversion).
func TestStreamedListsSigned(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 4))
	const rows = 9000
	cats := [3][][]int64{listTestRows(rng, rows, 100, false), listTestRows(rng, rows, 1, false), listTestRows(rng, rows, 20, false)}
	want := &formatstest.Dataset{}
	for i := range rows {
		for j := range cats[0][i] {
			cats[0][i][j] = cats[0][i][j]*1e9 - 5e11
		}
		cats[1][i][0] += 1<<31 - 500 // written as int32, read as uint32
		for j := range cats[2][i] {
			cats[2][i][j] -= 500
		}
		want.Labels = append(want.Labels, []float32{float32(i % 3)})
		want.Dense = append(want.Dense, []float32{})
		want.Keys = append(want.Keys, [][]int64{cats[0][i], cats[1][i], cats[2][i]})
	}
	list := writeListFile(t, req, req, cats, parquet.WithCompression(compress.Codecs.Snappy))
	got, err, n := readBothPaths(t, list, nil, Options{KeyType: formats.KeyI64})
	if err != nil || n == 0 {
		t.Fatalf("error %v, %d streamed pages", err, n)
	}
	if d := formatstest.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

// TestStreamedListsBigPages reads two list columns whose uncompressed pages
// are larger than a column's window, in pieces: such a page is read past
// the window, and must stay the column's own while the task's other
// columns read theirs (a regression test: it was read into the task's
// shared scratch, which the next column's page overwrote).
func TestStreamedListsBigPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 9))
	const rows = 20000
	// C3 smaller than C1 (both past the window): its page reuses the
	// scratch C1's came through rather than a larger one.
	cats := [3][][]int64{listTestRows(rng, rows, 100, true), listTestRows(rng, rows, 1, false), listTestRows(rng, rows, 40, true)}
	want := &formatstest.Dataset{}
	for i := range rows {
		want.Labels = append(want.Labels, []float32{float32(i % 3)})
		want.Dense = append(want.Dense, []float32{})
		want.Keys = append(want.Keys, [][]int64{cats[0][i], cats[1][i], cats[2][i]})
	}
	v2 := parquet.WithDataPageVersion(parquet.DataPageV2)
	snappy := parquet.WithCompression(compress.Codecs.Snappy)
	for _, pages := range []struct {
		name  string
		props []parquet.WriterProperty
	}{{"v1-none", nil}, {"v2-snappy", []parquet.WriterProperty{v2, snappy}}, {"v2-none", []parquet.WriterProperty{v2}}, {"v1-snappy", []parquet.WriterProperty{snappy}}} {
		for _, dict := range []bool{false, true} {
			list := writeListFile(t, req, req, cats, append([]parquet.WriterProperty{parquet.WithDataPageSize(16 << 20), parquet.WithDictionaryDefault(dict)}, pages.props...)...)
			got, err, n := readBothPaths(t, list, nil, Options{})
			if err != nil {
				t.Fatalf("%s, dictionary %v: %v", pages.name, dict, err)
			}
			if n == 0 {
				t.Fatal("the streamed list path read no page")
			}
			if d := formatstest.Diff(want, got); d != "" {
				t.Fatalf("%s, dictionary %v: %s", pages.name, dict, d)
			}
		}
	}
}
