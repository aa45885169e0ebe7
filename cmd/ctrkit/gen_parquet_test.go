package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// TestGenParquetEncoding: gen takes convert's Parquet output flags and its
// files are written that way (compression, row groups, cat type,
// dictionary pages); for another format the flags are refused by name.
func TestGenParquetEncoding(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "pq", "file_list.txt")
	args := genSmall("parquet", list, "--num-files", "1", "--num-samples-per-file", "1000",
		"--compression", "zstd", "--row-group-size", "300", "--cat-type", "int32", "--dictionary")
	if out, code := ctrkitArgs(t, args...); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "pq", "train", "*.parquet"))
	if len(files) != 1 {
		t.Fatalf("train files %v, want one", files)
	}
	r, err := file.OpenParquetFile(files[0], false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	md := r.MetaData()
	if n := md.NumRowGroups(); n != 4 { // 1000 rows by 300
		t.Errorf("%d row groups, want 4", n)
	}
	for ci := range md.Schema.NumColumns() {
		col := md.Schema.Column(ci)
		cc, err := md.RowGroup(0).ColumnChunk(ci)
		if err != nil {
			t.Fatal(err)
		}
		if cc.Compression() != compress.Codecs.Zstd {
			t.Errorf("column %s: compression %v, want ZSTD", col.Name(), cc.Compression())
		}
		// The label (two values) and the cat columns (few keys) pay for
		// a dictionary; the dense columns (random floats) are PLAIN.
		if dict := slices.Contains(cc.Encodings(), parquet.Encodings.RLEDict); dict != !strings.HasPrefix(col.Name(), "I") {
			t.Errorf("column %s: encodings %v", col.Name(), cc.Encodings())
		}
		if strings.HasPrefix(col.Name(), "C") && col.PhysicalType() != parquet.Types.Int32 {
			t.Errorf("column %s: %v, want INT32", col.Name(), col.PhysicalType())
		}
	}
	for _, f := range []string{"--dictionary", "--compression=none", "--row-group-size=10", "--cat-type=int32"} {
		out, code := ctrkitArgs(t, genSmall("norm", filepath.Join(dir, "n", "file_list.txt"), f)...)
		if code != 2 || !strings.Contains(out, strings.SplitN(f, "=", 2)[0]+" applies to --format parquet") {
			t.Errorf("gen --format norm %s: exit %d, output %q; want 2 and the flag named", f, code, out)
		}
	}
	out, code := ctrkitArgs(t, genSmall("parquet", filepath.Join(dir, "p2", "file_list.txt"), "--compression", "lz4")...)
	if code != 2 || !strings.Contains(out, "--compression: want snappy, zstd or none") {
		t.Errorf("gen --compression lz4: exit %d, output %q", code, out)
	}
}

// TestGenParquetDictionaryDefault: gen writes dictionary pages by default,
// as HugeCTR's data generator (cudf), pyarrow and NVTabular do, where they
// pay (the label and the cat columns of few keys here; the dense columns of
// random floats stay PLAIN); --dictionary=false writes every chunk PLAIN.
func TestGenParquetDictionaryDefault(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		dict  bool
	}{{nil, true}, {[]string{"--dictionary=false"}, false}} {
		dir := t.TempDir()
		args := genSmall("parquet", filepath.Join(dir, "pq", "file_list.txt"), append([]string{"--num-files", "1", "--num-samples-per-file", "2000"}, tc.flags...)...)
		if out, code := ctrkitArgs(t, args...); code != 0 {
			t.Fatalf("gen %v: exit %d\n%s", tc.flags, code, out)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "pq", "train", "*.parquet"))
		if len(files) != 1 {
			t.Fatalf("train files %v, want one", files)
		}
		r, err := file.OpenParquetFile(files[0], false)
		if err != nil {
			t.Fatal(err)
		}
		md := r.MetaData()
		for ci := range md.Schema.NumColumns() {
			name := md.Schema.Column(ci).Name()
			cc, err := md.RowGroup(0).ColumnChunk(ci)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.dict && !strings.HasPrefix(name, "I")
			if got := slices.Contains(cc.Encodings(), parquet.Encodings.RLEDict); got != want || cc.HasDictionaryPage() != want {
				t.Errorf("gen %v: column %s: encodings %v, dictionary page %v; want dictionary %v", tc.flags, name, cc.Encodings(), cc.HasDictionaryPage(), want)
			}
		}
		r.Close()
	}
}
