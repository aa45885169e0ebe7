package parquet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// TestPageLayouts reads required scalar columns written as many small pages
// (data page v1 and v2, plain and dictionary — arrow-go keeps the dictionary
// only for the label column there —, snappy and none) in several
// row groups, with 1 and 4 workers: the page-by-page path and arrow-go's
// column reader must give the same samples.
func TestPageLayouts(t *testing.T) {
	const rows, rgRows = 5000, 1700
	want := &formatstest.Dataset{Schema: formats.NewSchema(1, 2, []int{1, 1}, nil, formats.KeyI64)}
	lab, d1, d2 := make([]float32, rows), make([]float64, rows), make([]float32, rows)
	k1, k2 := make([]int64, rows), make([]int32, rows)
	for i := range rows {
		lab[i], d1[i], d2[i] = float32(i%2), float64(i)*0.25, float32(-i)
		k1[i], k2[i] = int64(i*7919%100003)<<20, int32(uint32(i)*2654435761)
		want.Labels = append(want.Labels, []float32{lab[i]})
		want.Dense = append(want.Dense, []float32{float32(d1[i]), d2[i]})
		want.Keys = append(want.Keys, [][]int64{{k1[i]}, {int64(uint32(k2[i]))}})
	}
	fields := schema.FieldList{
		prim("label", req, parquet.Types.Float), prim("I1", req, parquet.Types.Double), prim("I2", req, parquet.Types.Float),
		intNode("C1", req, 64, true), intNode("C2", req, 32, false),
	}
	meta := &Metadata{
		FileStats: []FileStat{{FileName: "part_0.parquet", NumRows: rows}},
		Labels:    []Column{{"label", 0}}, Conts: []Column{{"I1", 1}, {"I2", 2}}, Cats: []Column{{"C1", 3}, {"C2", 4}},
	}
	for _, tc := range []struct {
		name string
		opts []parquet.WriterProperty
	}{
		{"v1-plain-snappy", []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy)}},
		{"v2-plain-snappy", []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDataPageVersion(parquet.DataPageV2)}},
		{"v2-plain-none", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2)}},
		{"v1-dict", []parquet.WriterProperty{parquet.WithDictionaryDefault(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "part_0.parquet")
			root := must(schema.NewGroupNode("schema", req, fields, -1))
			f := must(os.Create(path))
			props := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithDictionaryDefault(false),
				parquet.WithDataPageSize(700), parquet.WithBatchSize(64), parquet.WithMaxRowGroupLength(rgRows)}, tc.opts...)...)
			pw := file.NewParquetWriter(f, root, file.WithWriterProps(props))
			for lo := 0; lo < rows; lo += rgRows {
				hi := min(lo+rgRows, rows)
				rgw := pw.AppendRowGroup()
				for ci := 0; ci < 5; ci++ {
					cw := must(rgw.NextColumn())
					var err error
					switch w := cw.(type) {
					case *file.Float32ColumnChunkWriter:
						if ci == 0 {
							_, err = w.WriteBatch(lab[lo:hi], nil, nil)
						} else {
							_, err = w.WriteBatch(d2[lo:hi], nil, nil)
						}
					case *file.Float64ColumnChunkWriter:
						_, err = w.WriteBatch(d1[lo:hi], nil, nil)
					case *file.Int64ColumnChunkWriter:
						_, err = w.WriteBatch(k1[lo:hi], nil, nil)
					case *file.Int32ColumnChunkWriter:
						_, err = w.WriteBatch(k2[lo:hi], nil, nil)
					}
					if err != nil {
						t.Fatal(err)
					}
					if err := cw.Close(); err != nil {
						t.Fatal(err)
					}
				}
				if err := rgw.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if err := pw.Close(); err != nil {
				t.Fatal(err)
			}
			s := want.Schema
			for _, workers := range []int{1, 4, 12} {
				for _, win := range []int{streamWindow, 100} { // 100: pages straddle window loads
					withWindow(t, win, func() {
						r, err := OpenFiles([]string{path}, meta, &s, Options{Options: formats.Options{BatchSize: 777, Workers: workers}})
						if err != nil {
							t.Fatal(err)
						}
						got, err := formatstest.ReadAll(r, 777, 0)
						r.Close()
						if err != nil {
							t.Fatal(err)
						}
						if d := formatstest.Diff(want, got); d != "" {
							t.Fatalf("workers %d, window %d: %s", workers, win, d)
						}
					})
				}
			}
		})
	}
}
