package parquet

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

var update = flag.Bool("update", false, "regenerate testdata fixtures and golden files")

// rawCol is one column of a hand-written Parquet file: its node and its
// values with explicit levels.
type rawCol struct {
	node     schema.Node
	f32      []float32
	f64      []float64
	i32      []int32
	i64      []int64
	def, rep []int16
}

// writeRaw writes cols as one row group, with arrow-go's low-level writer.
func writeRaw(path string, cols []rawCol) error { return writeRawProps(path, cols) }

// writeRawProps is writeRaw with writer properties added to its own
// (plain, uncompressed, no statistics).
func writeRawProps(path string, cols []rawCol, extra ...parquet.WriterProperty) error {
	var fields schema.FieldList
	for _, c := range cols {
		fields = append(fields, c.node)
	}
	root, err := schema.NewGroupNode("schema", parquet.Repetitions.Required, fields, -1)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	props := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithCreatedBy("ctrkit-test"),
		parquet.WithDictionaryDefault(false), parquet.WithStats(false)}, extra...)...)
	pw := file.NewParquetWriter(f, root, file.WithWriterProps(props))
	rgw := pw.AppendRowGroup()
	for _, c := range cols {
		cw, err := rgw.NextColumn()
		if err != nil {
			return err
		}
		switch w := cw.(type) {
		case *file.Float32ColumnChunkWriter:
			_, err = w.WriteBatch(c.f32, c.def, c.rep)
		case *file.Float64ColumnChunkWriter:
			_, err = w.WriteBatch(c.f64, c.def, c.rep)
		case *file.Int32ColumnChunkWriter:
			_, err = w.WriteBatch(c.i32, c.def, c.rep)
		case *file.Int64ColumnChunkWriter:
			_, err = w.WriteBatch(c.i64, c.def, c.rep)
		default:
			err = fmt.Errorf("unexpected writer %T", cw)
		}
		if err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
	}
	if err := rgw.Close(); err != nil {
		return err
	}
	return pw.Close()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func prim(name string, rep parquet.Repetition, t parquet.Type) schema.Node {
	return must(schema.NewPrimitiveNode(name, rep, t, -1, -1))
}

func intNode(name string, rep parquet.Repetition, bits int, signed bool) schema.Node {
	t := parquet.Types.Int64
	if bits == 32 {
		t = parquet.Types.Int32
	}
	return must(schema.NewPrimitiveNodeLogical(name, rep, schema.NewIntLogicalType(int8(bits), signed), t, -1, -1))
}

func listNode(name string, listRep, elemRep parquet.Repetition, elem schema.Node) schema.Node {
	_ = elemRep
	return must(schema.ListOfWithName(name, elem, listRep, -1))
}

var opt, req = parquet.Repetitions.Optional, parquet.Repetitions.Required

// fixtureSchema is the schema of the valid fixtures: 1 label, 2 dense, a
// scalar and a list slot.
func fixtureSchema() formats.Schema {
	s := formats.NewSchema(1, 2, []int{1, 3}, []int64{10, 20}, formats.KeyI64)
	return s
}

func fixtureData() *formatstest.Dataset {
	d := &formatstest.Dataset{Schema: fixtureSchema()}
	for i := 0; i < 5; i++ {
		d.Labels = append(d.Labels, []float32{float32(i % 2)})
		d.Dense = append(d.Dense, []float32{float32(i) * 0.5, float32(-i)})
		list := []int64{}
		for j := 0; j < i%4; j++ {
			list = append(list, int64(10+i+j))
		}
		d.Keys = append(d.Keys, [][]int64{{int64(i)}, list})
	}
	return d
}

// generateFixtures writes testdata/<case>/.
func generateFixtures(t *testing.T) {
	must(0, os.RemoveAll("testdata"))
	s := fixtureSchema()
	d := fixtureData()
	// valid: NVTabular layout, 2 files (3 + 2 rows), row groups of 2.
	w, err := NewDatasetWriter("testdata/valid", &s, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 2}, RowsPerFile: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAll(w, 4); err != nil {
		t.Fatal(err)
	}
	// the corrupt copies of the single-file dataset
	one := func(dir string) {
		w, err := NewDatasetWriter(dir, &s, DatasetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.WriteAll(w, 5); err != nil {
			t.Fatal(err)
		}
	}
	editMeta := func(dir string, f func(m *Metadata)) {
		m, err := ReadMetadata(filepath.Join(dir, MetadataName))
		if err != nil {
			t.Fatal(err)
		}
		f(m)
		if err := WriteMetadata(filepath.Join(dir, MetadataName), m); err != nil {
			t.Fatal(err)
		}
	}
	one("testdata/missing_col")
	editMeta("testdata/missing_col", func(m *Metadata) { m.Cats[1].Index = 9 })
	one("testdata/bad_name")
	editMeta("testdata/bad_name", func(m *Metadata) { m.Cats[0].ColName = "C7" })
	one("testdata/bad_rows")
	editMeta("testdata/bad_rows", func(m *Metadata) { m.FileStats[0].NumRows = 6 })

	// null_cat: an optional scalar cat column with a null in row 2.
	dir := "testdata/null_cat"
	must(0, os.MkdirAll(dir, 0o755))
	err = writeRaw(filepath.Join(dir, "part_0.parquet"), []rawCol{
		{node: prim("label", req, parquet.Types.Float), f32: []float32{0, 1, 0, 1}},
		{node: intNode("C1", opt, 64, true), i64: []int64{3, 4, 6}, def: []int16{1, 1, 0, 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	writeMetaList(t, dir, &Metadata{FileStats: []FileStat{{"part_0.parquet", 4}},
		Labels: []Column{{"label", 0}}, Cats: []Column{{"C1", 1}}})

	// hugectr: HugeCTR's generator layout, cudf-named columns _col<i>,
	// metadata names label0/C<i>, file gen_0.parquet listed as 0.parquet,
	// nullable list column with nullable elements (cudf's schema).
	dir = "testdata/hugectr"
	must(0, os.MkdirAll(dir, 0o755))
	err = writeRaw(filepath.Join(dir, "gen_0.parquet"), []rawCol{
		{node: prim("_col0", req, parquet.Types.Float), f32: []float32{0.25, 0.5, 0.75}},
		{node: prim("_col1", req, parquet.Types.Float), f32: []float32{1, 2, 3}},
		{node: intNode("_col2", req, 64, true), i64: []int64{7, 8, 9}},
		{node: listNode("_col3", opt, opt, intNode("element", opt, 64, true)),
			i64: []int64{1, 2, 3, 4, 5, 6}, def: []int16{3, 3, 3, 3, 3, 3}, rep: []int16{0, 0, 1, 0, 1, 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	writeMetaList(t, dir, &Metadata{FileStats: []FileStat{{"0.parquet", 3}},
		Labels: []Column{{"label0", 0}}, Conts: []Column{{"C1", 1}}, Cats: []Column{{"C2", 2}, {"C3", 3}}})
}

func writeMetaList(t *testing.T, dir string, m *Metadata) {
	t.Helper()
	if err := WriteMetadata(filepath.Join(dir, MetadataName), m); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range m.FileStats {
		name := f.FileName
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			name = "gen_" + name
		}
		files = append(files, filepath.Join(dir, name))
	}
	if err := formats.WriteFileList(filepath.Join(dir, FileListName), files); err != nil {
		t.Fatal(err)
	}
}

// dump renders a dataset one sample per line.
func dump(d *formatstest.Dataset) string {
	var b strings.Builder
	for i := 0; i < d.Len(); i++ {
		fmt.Fprintf(&b, "label=%v dense=%v keys=%v\n", d.Labels[i], d.Dense[i], d.Keys[i])
	}
	return b.String()
}

func TestFixtures(t *testing.T) {
	if *update {
		generateFixtures(t)
	}
	for _, tc := range []struct {
		dir      string
		schema   bool // read with fixtureSchema (else nil schema)
		sentinel error
		record   int64
		path     string
	}{
		{dir: "valid", schema: true},
		{dir: "hugectr"},
		{dir: "null_cat", sentinel: formats.ErrNull, record: 2, path: "part_0.parquet"},
		{dir: "missing_col", schema: true, sentinel: formats.ErrSchema, record: -1, path: "part_0.parquet"},
		{dir: "bad_name", schema: true, sentinel: formats.ErrSchema, record: -1, path: "part_0.parquet"},
		{dir: "bad_rows", schema: true, sentinel: formats.ErrMetadata, record: -1, path: "part_0.parquet"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.dir)
			var s *formats.Schema
			if tc.schema {
				fs := fixtureSchema()
				s = &fs
			}
			// 12 workers split each row group over 3 tasks (Reader.split):
			// the same rows and the same error.
			for _, workers := range []int{2, 12} {
				var out string
				r, err := OpenList(filepath.Join(dir, FileListName), s, Options{Options: formats.Options{BatchSize: 2, Workers: workers}})
				if err == nil {
					var got *formatstest.Dataset
					got, err = formatstest.ReadAll(r, 2, 0)
					r.Close()
					if err == nil {
						out = dump(got)
					}
				}
				if err != nil {
					out = "error: " + err.Error() + "\n"
					if tc.sentinel == nil {
						t.Fatalf("unexpected error: %v", err)
					}
					if !errors.Is(err, tc.sentinel) || !errors.Is(err, formats.ErrCorrupt) {
						t.Fatalf("error %v is not %v", err, tc.sentinel)
					}
					var fe *formats.Error
					if !errors.As(err, &fe) {
						t.Fatalf("error %T is not a *formats.Error", err)
					}
					if fe.Path != filepath.Join(dir, tc.path) || fe.Record != tc.record {
						t.Fatalf("error at %s record %d, want %s record %d", fe.Path, fe.Record, filepath.Join(dir, tc.path), tc.record)
					}
				} else if tc.sentinel != nil {
					t.Fatalf("no error, want %v", tc.sentinel)
				}
				golden := filepath.Join(dir, "want.txt")
				if *update && workers == 2 {
					if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatal(err)
				}
				if string(want) != out {
					t.Fatalf("workers %d: got:\n%s\nwant:\n%s", workers, out, want)
				}
			}
		})
	}
	// the valid fixture holds fixtureData
	fs := fixtureSchema()
	r, err := OpenList("testdata/valid/"+FileListName, &fs, Options{Options: formats.Options{BatchSize: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := formatstest.ReadAll(r, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := formatstest.Diff(fixtureData(), got); diff != "" {
		t.Fatal(diff)
	}
}

func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }
