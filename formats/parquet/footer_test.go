package parquet

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
)

// hostileFooter returns a file of about size bytes: PAR1, zero data and a
// footer whose root declares rootChildren children, of which one (an int32
// column) is present, and one row group of rows rows whose column chunk
// holds comp bytes at offset 4.
func hostileFooter(size int, rootChildren int32, rows, comp int64) []byte {
	var tw thriftWriter
	tw.i32(1, 1) // version
	tw.list(2, ctStruct, 2)
	tw.beginElem()
	tw.binary(4, "schema")
	tw.i32(5, rootChildren)
	tw.end()
	tw.beginElem()
	tw.i32(1, 1) // INT32
	tw.i32(3, 0) // REQUIRED
	tw.binary(4, "C1")
	tw.end()
	tw.i64(3, rows)
	tw.list(4, ctStruct, 1)
	tw.beginElem()
	tw.list(1, ctStruct, 1)
	tw.beginElem()
	tw.i64(2, 4)
	tw.begin(3)
	tw.i32(1, 1)
	tw.list(2, ctI32, 1)
	tw.listI32(0)
	tw.list(3, ctBinary, 1)
	tw.listString("C1")
	tw.i32(4, 0)
	tw.i64(5, rows)
	tw.i64(6, comp)
	tw.i64(7, comp)
	tw.i64(9, 4)
	tw.end()
	tw.end()
	tw.i64(2, comp)
	tw.i64(3, rows)
	tw.end()
	tw.b = append(tw.b, 0) // FileMetaData stop
	data := max(size-len(tw.b)-12, 0)
	out := append([]byte("PAR1"), make([]byte, data)...)
	out = append(out, tw.b...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(tw.b)))
	return append(out, "PAR1"...)
}

// TestHostileFooter: counts in a footer that the footer or the file cannot
// hold are refused before arrow-go sees them (a root declaring 2^31-1
// children made arrow-go allocate 32 GiB).
func TestHostileFooter(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"children", hostileFooter(28<<10, 1<<31-1, 10, 100), "declares 2147483647 children"},
		{"children-negative", hostileFooter(28<<10, -5, 10, 100), "num_children -5"},
		{"chunk-past-end", hostileFooter(28<<10, 1, 10, 1<<40), "past the data"},
		{"rows-negative", hostileFooter(28<<10, 1, -1, 100), "negative"},
		{"footer-length", append(hostileFooter(1<<10, 1, 10, 100)[:1<<10-8], 0xff, 0xff, 0xff, 0x7f, 'P', 'A', 'R', '1'), "footer length"},
		{"no-magic", []byte("PAR1 hello world, not a parquet file"), "magic"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".parquet")
			if err := os.WriteFile(p, c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := readFooter(p)
			if err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("readFooter = %v, want a corrupt-footer error naming %s and saying %q", err, p, c.want)
			}
		})
	}
	// The same footer with a count that adds up is read.
	p := filepath.Join(dir, "good.parquet")
	if err := os.WriteFile(p, hostileFooter(28<<10, 1, 10, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if md, _, err := readFooter(p); err != nil || md.NumRows != 10 || md.Schema.NumColumns() != 1 {
		t.Fatalf("readFooter(good) = %v, %v", md, err)
	}
}

// TestHostileFooterThroughOpen: the reader refuses it too, naming the file.
func TestHostileFooterThroughOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.parquet")
	if err := os.WriteFile(p, hostileFooter(28<<10, 1<<31-1, 10, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	s := formats.NewSchema(0, 0, []int{1}, nil, formats.KeyU32)
	meta := MetadataFor(&s, []FileStat{{FileName: "f.parquet", NumRows: 10}})
	if _, err := OpenFiles([]string{p}, meta, &s, Options{}); err == nil || !strings.Contains(err.Error(), "children") {
		t.Fatalf("OpenFiles = %v, want the footer refused", err)
	}
}

// TestHostileFixture keeps testdata/hostile_children (the 28 KB footer
// declaring 2^31-1 children, with its _metadata.json and file list: what
// the command line's memory-limit test reads) equal to hostileFooter;
// -update rewrites it.
func TestHostileFixture(t *testing.T) {
	dir := filepath.Join("testdata", "hostile_children")
	data := hostileFooter(28<<10, 1<<31-1, 10, 100)
	s := formats.NewSchema(0, 0, []int{1}, nil, formats.KeyU32)
	meta, err := MetadataFor(&s, []FileStat{{FileName: "part_0.parquet", NumRows: 10}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"part_0.parquet": data, MetadataName: meta, FileListName: []byte("1\npart_0.parquet\n")}
	for name, want := range files {
		p := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s differs from hostileFooter (err %v); run go test -run TestHostileFixture -update", p, err)
		}
	}
}
