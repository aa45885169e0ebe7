package parquet

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// rawDataset writes cols as dir/part_0.parquet with metadata selecting
// labels, conts and cats by index, and returns the file list.
func rawDataset(t *testing.T, cols []rawCol, rows int64, labels, conts, cats []int) string {
	t.Helper()
	dir := t.TempDir()
	if err := writeRaw(filepath.Join(dir, "part_0.parquet"), cols); err != nil {
		t.Fatal(err)
	}
	m := &Metadata{FileStats: []FileStat{{"part_0.parquet", rows}}}
	for _, g := range []struct {
		idx []int
		dst *[]Column
	}{{labels, &m.Labels}, {conts, &m.Conts}, {cats, &m.Cats}} {
		for _, i := range g.idx {
			*g.dst = append(*g.dst, Column{cols[i].node.Name(), i})
		}
	}
	writeMetaList(t, dir, m)
	return filepath.Join(dir, FileListName)
}

// TestColumnKinds reads fixed-list float label/dense columns, non-float
// values, and cat columns of every integer type, scalar and list.
func TestColumnKinds(t *testing.T) {
	cols := []rawCol{
		// label: required list<float> of width 2
		0: {node: listNode("label", req, req, prim("element", req, parquet.Types.Float)),
			f32: []float32{1, 0, 0, 1, 1, 1}, def: []int16{1, 1, 1, 1, 1, 1}, rep: []int16{0, 1, 0, 1, 0, 1}},
		1: {node: prim("I1", req, parquet.Types.Double), f64: []float64{0.5, 1.5, 2.5}},
		2: {node: prim("I2", opt, parquet.Types.Int32), i32: []int32{-1, 7, 9}, def: []int16{1, 1, 1}},
		// dense: optional list<optional float> of width 3
		3: {node: listNode("I3", opt, opt, prim("element", opt, parquet.Types.Float)),
			f32: []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}, def: []int16{3, 3, 3, 3, 3, 3, 3, 3, 3}, rep: []int16{0, 1, 1, 0, 1, 1, 0, 1, 1}},
		4: {node: intNode("C1", opt, 32, true), i32: []int32{3, 4, 5}, def: []int16{1, 1, 1}},
		5: {node: listNode("C2", req, req, intNode("element", req, 64, false)),
			i64: []int64{1, 2, 3}, def: []int16{0, 1, 1, 1}, rep: []int16{0, 0, 0, 1}},
		6: {node: intNode("C3", req, 32, false), i32: []int32{-1, 0, 1}}, // uint32: 4294967295, 0, 1
		7: {node: prim("unused", req, parquet.Types.Int64), i64: []int64{0, 0, 0}},
	}
	list := rawDataset(t, cols, 3, []int{0}, []int{1, 2, 3}, []int{4, 5, 6})
	want := &formatstest.Dataset{
		Labels: [][]float32{{1, 0}, {0, 1}, {1, 1}},
		Dense:  [][]float32{{0.5, -1, 1, 2, 3}, {1.5, 7, 4, 5, 6}, {2.5, 9, 7, 8, 9}},
		Keys:   [][][]int64{{{3}, {}, {4294967295}}, {{4}, {1}, {0}}, {{5}, {2, 3}, {1}}},
	}
	for _, kt := range []formats.KeyType{formats.KeyU32, formats.KeyI64} {
		for _, workers := range []int{1, 3, 9} {
			r, err := OpenList(list, nil, Options{KeyType: kt, Options: formats.Options{BatchSize: 2, Workers: workers}})
			if err != nil {
				t.Fatal(err)
			}
			s := r.Schema()
			if s.LabelDim != 2 || s.DenseDim != 5 || len(s.Slots) != 3 || s.Slots[1].MaxNNZ != 0 || s.Slots[0].Hotness != 1 || s.KeyType != kt {
				t.Fatalf("inferred schema %+v", s)
			}
			got, err := formatstest.ReadAll(r, 2, 0)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if diff := formatstest.Diff(want, got); diff != "" {
				t.Fatalf("key type %s: %s", kt, diff)
			}
		}
	}
	// with a schema: the list widths come from the dims
	s := formats.NewSchema(2, 5, []int{1, 2, 1}, nil, formats.KeyI64)
	r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: 3}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := formatstest.ReadAll(r, 3, 0)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if diff := formatstest.Diff(want, got); diff != "" {
		t.Fatal(diff)
	}
	// slot 1 allows at most 1 key: row 2 has 2
	s.Slots[1].MaxNNZ = 1
	_, err = readErr(t, list, &s, Options{})
	checkErr(t, err, formats.ErrNNZ, 2)
	// a schema whose dims the columns cannot fill
	bad := formats.NewSchema(3, 5, []int{1, 2, 1}, nil, formats.KeyI64)
	_, err = readErr(t, list, &bad, Options{})
	checkErr(t, err, formats.ErrSchema, 0) // the list rows hold 2 values, not 3
	bad = formats.NewSchema(2, 5, []int{1, 2}, nil, formats.KeyI64)
	if _, err := OpenList(list, &bad, Options{}); !errors.Is(err, formats.ErrSchema) {
		t.Fatalf("2 slots for 3 cat columns: %v", err)
	}
}

func readErr(t *testing.T, list string, s *formats.Schema, o Options) (*formatstest.Dataset, error) {
	t.Helper()
	r, err := OpenList(list, s, o)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	d, err := formatstest.ReadAll(r, max(o.BatchSize, formats.DefaultBatchSize), 0)
	if err != nil {
		// sticky
		b, _ := formats.NewBatch(r.Schema(), max(o.BatchSize, formats.DefaultBatchSize), nil)
		if _, err2 := r.Read(b); err2 != err {
			t.Fatalf("error not sticky: %v then %v", err, err2)
		}
	}
	return d, err
}

func checkErr(t *testing.T, err error, sentinel error, record int64) {
	t.Helper()
	var fe *formats.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &fe) || fe.Record != record || fe.Path == "" {
		t.Fatalf("got %v, want %v at record %d", err, sentinel, record)
	}
}

func TestKeyRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		col  rawCol
		kt   formats.KeyType
		size int64
		rec  int64
	}{
		{"negative-int32-to-u32", rawCol{node: intNode("C1", req, 32, true), i32: []int32{1, -5}}, formats.KeyU32, 0, 1},
		{"int64-above-u32", rawCol{node: intNode("C1", req, 64, true), i64: []int64{math.MaxUint32 + 1, 0}}, formats.KeyU32, 0, 0},
		{"uint64-above-i64", rawCol{node: intNode("C1", req, 64, false), i64: []int64{0, -1}}, formats.KeyI64, 0, 1},
		{"slot-size", rawCol{node: intNode("C1", req, 64, true), i64: []int64{9, 10}}, formats.KeyI64, 10, 1},
		{"slot-size-negative", rawCol{node: intNode("C1", req, 64, true), i64: []int64{-1, 1}}, formats.KeyI64, 10, 0},
		{"slot-size-list", rawCol{node: listNode("C1", req, req, intNode("element", req, 32, true)), i32: []int32{1, 2, 12},
			def: []int16{1, 1, 1}, rep: []int16{0, 0, 1}}, formats.KeyU32, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := []rawCol{{node: prim("label", req, parquet.Types.Float), f32: []float32{0, 1}}, tc.col}
			list := rawDataset(t, cols, 2, []int{0}, nil, []int{1})
			o := Options{KeyType: tc.kt}
			if tc.size > 0 {
				o.SlotSizeArray = []int64{tc.size}
			}
			_, err := readErr(t, list, nil, o)
			checkErr(t, err, formats.ErrKeyRange, tc.rec)
		})
	}
}

// TestKeyRanges: Options.KeyRanges checks every key against its slot's
// range while decoding and passes keys through unchanged: scalar and list
// columns, both key types, signed and unsigned file types, slot-local and
// global ranges, with Read and with Next; the error names the record, the
// slot, the range and the hint.
func TestKeyRanges(t *testing.T) {
	i64 := func(v ...int64) rawCol { return rawCol{node: intNode("C1", req, 64, true), i64: v} }
	u64 := func(v ...int64) rawCol { return rawCol{node: intNode("C1", req, 64, false), i64: v} }
	i32 := func(v ...int32) rawCol { return rawCol{node: intNode("C1", req, 32, true), i32: v} }
	u32 := func(v ...int32) rawCol { return rawCol{node: intNode("C1", req, 32, false), i32: v} }
	for _, tc := range []struct {
		name string
		col  rawCol
		kt   formats.KeyType
		kr   KeyRange
		rec  int64 // -1: no error
		bad  int64 // the key at rec
	}{
		{"i64-in", i64(0, 9, 3), formats.KeyI64, KeyRange{0, 10}, -1, 0},
		{"i64-above", i64(0, 9, 10), formats.KeyI64, KeyRange{0, 10}, 2, 10},
		{"i64-negative", i64(0, -1, 3), formats.KeyI64, KeyRange{0, 10}, 1, -1},
		{"i64-min", i64(math.MinInt64, 0, 0), formats.KeyI64, KeyRange{5, 10}, 0, math.MinInt64},
		{"i64-global-in", i64(100, 109, 105), formats.KeyI64, KeyRange{100, 10}, -1, 0},
		{"i64-global-below", i64(100, 99, 105), formats.KeyI64, KeyRange{100, 10}, 1, 99},
		{"i64-global-above", i64(100, 101, 110), formats.KeyI64, KeyRange{100, 10}, 2, 110},
		{"u64-above", u64(1, 2, 10), formats.KeyI64, KeyRange{0, 10}, 2, 10},
		{"u64-huge", u64(1, -1, 3), formats.KeyI64, KeyRange{0, 10}, 1, 0},
		{"i32-to-u32-in", i32(0, 9, 4), formats.KeyU32, KeyRange{0, 10}, -1, 0},
		{"i32-to-u32-above", i32(0, 9, 10), formats.KeyU32, KeyRange{0, 10}, 2, 10},
		{"i32-to-u32-negative", i32(-3, 9, 4), formats.KeyU32, KeyRange{0, 10}, 0, 0},
		{"u32-global-above", u32(20, 29, 30), formats.KeyU32, KeyRange{20, 10}, 2, 30},
		{"u32-range-past-u32", u32(-1, -2, 7), formats.KeyU32, KeyRange{math.MaxUint32 - 1, 1 << 40}, 2, 7},
		{"i64-to-u32", i64(1, 2, 3), formats.KeyU32, KeyRange{0, 10}, -1, 0},
		{"i64-to-u32-above", i64(1, 2, 30), formats.KeyU32, KeyRange{0, 10}, 2, 30},
		{"list-in", rawCol{node: listNode("C1", req, req, intNode("element", req, 64, true)), i64: []int64{1, 2, 9, 0},
			def: []int16{1, 1, 1, 1}, rep: []int16{0, 1, 0, 0}}, formats.KeyI64, KeyRange{0, 10}, -1, 0},
		{"list-above", rawCol{node: listNode("C1", req, req, intNode("element", req, 64, true)), i64: []int64{1, 2, 9, 10},
			def: []int16{1, 1, 1, 1}, rep: []int16{0, 1, 0, 0}}, formats.KeyI64, KeyRange{0, 10}, 2, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := []rawCol{{node: prim("label", req, parquet.Types.Float), f32: []float32{0, 1, 0}}, tc.col}
			list := rawDataset(t, cols, 3, []int{0}, nil, []int{1})
			o := Options{KeyType: tc.kt, KeyRanges: []KeyRange{tc.kr}, KeyRangeHint: "the test's ranges"}
			plain, err := readErr(t, list, nil, Options{KeyType: tc.kt})
			if tc.rec < 0 {
				if err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				got, err := readErr(t, list, nil, o)
				if err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				if diff := formatstest.Diff(plain, got); diff != "" {
					t.Fatalf("keys changed: %s", diff)
				}
				return
			}
			for _, next := range []bool{false, true} {
				var err error
				if next {
					r, oerr := OpenList(list, nil, o)
					if oerr != nil {
						t.Fatal(oerr)
					}
					for err == nil {
						_, err = r.Next()
					}
					r.Close()
				} else {
					_, err = readErr(t, list, nil, o)
				}
				checkErr(t, err, formats.ErrKeyRange, tc.rec)
				want := fmt.Sprintf("slot 0 key %d outside [%d, %d) (the test's ranges)", tc.bad, tc.kr.Lo, tc.kr.Lo+tc.kr.Size)
				if strings.HasSuffix(tc.name, "huge") || strings.HasSuffix(tc.name, "negative") && tc.kt == formats.KeyU32 {
					want = "does not fit key type" // the key type's check comes first
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
	// Ranges that cannot be are refused at open.
	cols := []rawCol{{node: prim("label", req, parquet.Types.Float), f32: []float32{0}}, i64(1)}
	list := rawDataset(t, cols, 1, []int{0}, nil, []int{1})
	for _, krs := range [][]KeyRange{{{0, 0}}, {{-1, 5}}, {{1, math.MaxInt64}}, {{0, 5}, {0, 5}}} {
		if r, err := OpenList(list, nil, Options{KeyType: formats.KeyI64, KeyRanges: krs}); err == nil {
			r.Close()
			t.Errorf("ranges %v accepted", krs)
		}
	}
}

func TestNulls(t *testing.T) {
	for _, tc := range []struct {
		name string
		col  rawCol
		rec  int64
	}{
		{"null-list", rawCol{node: listNode("C1", opt, req, intNode("element", req, 64, true)), i64: []int64{1},
			def: []int16{2, 0, 1}, rep: []int16{0, 0, 0}}, 1},
		{"null-element", rawCol{node: listNode("C1", req, opt, intNode("element", opt, 64, true)), i64: []int64{1},
			def: []int16{2, 1, 0}, rep: []int16{0, 1, 0}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := []rawCol{{node: prim("label", req, parquet.Types.Float), f32: []float32{0, 1}}, tc.col}
			if tc.name == "null-list" {
				cols[0].f32 = []float32{0, 1, 1}
			}
			rows := int64(len(cols[0].f32))
			list := rawDataset(t, cols, rows, []int{0}, nil, []int{1})
			_, err := readErr(t, list, nil, Options{})
			checkErr(t, err, formats.ErrNull, tc.rec)
		})
	}
	// a null label
	cols := []rawCol{{node: prim("label", opt, parquet.Types.Float), f32: []float32{1}, def: []int16{1, 0}}}
	list := rawDataset(t, cols, 2, []int{0}, nil, nil)
	_, err := readErr(t, list, nil, Options{})
	checkErr(t, err, formats.ErrNull, 1)
}

func TestWriterErrors(t *testing.T) {
	s := formats.NewSchema(1, 0, []int{1}, nil, formats.KeyI64)
	for _, tc := range []struct {
		cat  string
		key  int64
		want error
	}{
		{"int32", math.MaxInt32 + 1, formats.ErrKeyRange},
		{"uint32", -1, formats.ErrKeyRange},
		{"uint64", -1, formats.ErrKeyRange},
		{"int32", -5, nil},
		{"uint32", math.MaxUint32, nil},
	} {
		dir := t.TempDir()
		w, err := Create(filepath.Join(dir, "x.parquet"), &s, WriterOptions{CatType: tc.cat})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(&s, 4, nil)
		b.AppendSample([]float32{1}, nil, [][]int64{{1}})
		b.AppendSample([]float32{1}, nil, [][]int64{{tc.key}})
		err = w.Write(b)
		if tc.want == nil {
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		checkErr(t, err, tc.want, 1)
		if err := w.Close(); err == nil {
			t.Fatal("Close after a failed Write succeeded")
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
			t.Fatalf("files left after a failed write: %v", m)
		}
	}
	// a scalar column cannot hold 2 keys
	w, err := Create(filepath.Join(t.TempDir(), "x.parquet"), &s, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms := formats.NewSchema(1, 0, []int{2}, nil, formats.KeyI64)
	b, _ := formats.NewBatch(&ms, 4, nil)
	b.AppendSample([]float32{1}, nil, [][]int64{{1, 2}})
	checkErr(t, w.Write(b), formats.ErrNNZ, 0)
	w.Abort()
	for _, o := range []WriterOptions{{Compression: "lz5"}, {CatType: "int8"}, {RowGroupSize: -1}} {
		if _, err := Create(filepath.Join(t.TempDir(), "x.parquet"), &s, o); err == nil {
			t.Fatalf("options %+v accepted", o)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	// a file that is not Parquet
	list := rawDataset(t, []rawCol{{node: prim("label", req, parquet.Types.Float), f32: []float32{1}}}, 1, []int{0}, nil, nil)
	p := filepath.Join(filepath.Dir(list), "part_0.parquet")
	if err := writeFile(p, []byte("not a parquet file at all")); err != nil {
		t.Fatal(err)
	}
	_, err := OpenList(list, nil, Options{})
	var fe *formats.Error
	if !errors.As(err, &fe) || fe.Path != p || !formats.IsCorrupt(err) {
		t.Fatalf("not parquet: %v", err)
	}
	// no metadata entry for the file
	if _, err := OpenFiles([]string{p}, &Metadata{}, nil, Options{}); !errors.Is(err, formats.ErrMetadata) && !formats.IsCorrupt(err) {
		t.Fatalf("missing entry: %v", err)
	}
	_ = dir
}

// TestCorruptBytes overwrites bytes across a valid file: reading must give
// the data or a corruption error, never a panic or a hang.
func TestCorruptBytes(t *testing.T) {
	s := fixtureSchema()
	d := fixtureData()
	dir := t.TempDir()
	w, err := NewDatasetWriter(dir, &s, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAll(w, 5); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "part_0.parquet")
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for off := 4; off < len(orig)-8; off += 17 {
		for _, fill := range []byte{0xff, 0x00} {
			bad := append([]byte(nil), orig...)
			for i := off; i < min(off+5, len(bad)-8); i++ {
				bad[i] = fill
			}
			if err := os.WriteFile(p, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := readErr(t, filepath.Join(dir, FileListName), &s, Options{Options: formats.Options{BatchSize: 2}})
			if err != nil && !formats.IsCorrupt(err) {
				t.Fatalf("offset %d fill %#x: error %v is not a corruption", off, fill, err)
			}
		}
	}
}
