package dataset

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// fullFile fails with ENOSPC once limit bytes were written through it.
type fullFile struct {
	*os.File
	limit int64
}

func (f *fullFile) Write(p []byte) (int, error) {
	if int64(len(p)) > f.limit {
		n, _ := f.File.Write(p[:f.limit])
		f.limit = 0
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC} // as *os.File's

	}
	f.limit -= int64(len(p))
	return f.File.Write(p)
}

func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	if int64(len(p)) > f.limit {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

// diskFull returns an Open that gives the file whose base name is name
// room for limit bytes.
func diskFull(name string, limit int64) atomicfile.OpenFunc {
	return func(p string) (atomicfile.OutFile, error) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil || filepath.Base(p) != name && !strings.HasPrefix(filepath.Base(p), "."+name+".tmp-") {
			return f, err
		}
		return &fullFile{File: f, limit: limit}, nil
	}
}

// normSource writes n one-hot samples as a Norm dataset and resolves it.
func normSource(t *testing.T, n int) *Dataset {
	t.Helper()
	ds := genKind(7, oneHotInt, n, formats.KeyU32)
	o := variants[0].out
	p := writeDirect(t, t.TempDir(), ds, o)
	d, err := Resolve(p, readSpec(&ds.Schema, oneHotInt, o))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// snapshot maps every file under dir (temporary ones included) to its
// content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			m[p] = string(b)
		}
		return nil
	})
	return m
}

// TestConvertDiskFull makes the disk fill up while a conversion replaces a
// dataset (--force), in a data file and in each index file, for every
// output format: the conversion fails with an error naming the final path
// (not a temporary one), nothing of the new output remains and the old
// dataset is untouched.
func TestConvertDiskFull(t *testing.T) {
	d := normSource(t, 300)
	dir := t.TempDir()
	cases := []struct {
		format   Format
		dst      string
		victim   string
		limit    int64
		wantName string
	}{
		{Norm, "n", "part_1.data", 100, "part_1.data"},
		{Norm, "n", "file_list.txt", 3, "file_list.txt"},
		{Parquet, "p", "part_0.parquet", 100, "part_0.parquet"},
		{Parquet, "p", "_metadata.json", 10, "_metadata.json"},
		{Parquet, "p", "_file_list.txt", 3, "_file_list.txt"},
		{Raw, "r.bin", "r.bin", 1000, "r.bin"},
	}
	for _, c := range cases {
		out := Output{Format: c.format, KeyType: d.Schema.KeyType, SamplesPerFile: 100}
		if c.format == Raw {
			out.SamplesPerFile, out.RawLayout, out.RawLayoutSet = 0, raw.OneHot, true
		}
		dst := filepath.Join(dir, c.dst)
		os.RemoveAll(dst)
		if _, err := Convert(context.Background(), d, dst, out, formats.Options{BatchSize: 64}, nil); err != nil {
			t.Fatalf("%s: first conversion: %v", c.format, err)
		}
		before := snapshot(t, dir)
		out.Force, out.Open = true, diskFull(c.victim, c.limit)
		_, err := Convert(context.Background(), d, dst, out, formats.Options{BatchSize: 64}, nil)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s %s full: error %v, want ENOSPC", c.format, c.victim, err)
		}
		if !strings.Contains(err.Error(), filepath.Join(dst, c.wantName)) && !strings.Contains(err.Error(), dst) || strings.Contains(err.Error(), ".tmp-") {
			t.Errorf("%s %s full: error %q does not name the final path %s (or names a temporary one)", c.format, c.victim, err, filepath.Join(dst, c.wantName))
		}
		after := snapshot(t, dir)
		for p, b := range after {
			if before[p] != b {
				t.Errorf("%s %s full: %s new or changed", c.format, c.victim, p)
			}
		}
		for p := range before {
			if _, ok := after[p]; !ok {
				t.Errorf("%s %s full: %s of the old dataset removed", c.format, c.victim, p)
			}
		}
	}
}

// TestCreateUncreatable creates outputs where none can be: below a file,
// in a read-only directory. Each is an error naming the output, never a
// panic (a typed nil writer aborted), and nothing is left behind.
func TestCreateUncreatable(t *testing.T) {
	d := normSource(t, 50)
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	os.WriteFile(file, []byte("x"), 0o644)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	roOK := os.WriteFile(filepath.Join(ro, "probe"), nil, 0o644) != nil // root ignores modes
	for _, f := range []Format{Norm, Parquet, Raw} {
		for _, dst := range []string{filepath.Join(file, "sub"), filepath.Join(file, "sub", "list.txt"), filepath.Join(ro, "out"), filepath.Join(ro, "out.bin")} {
			if strings.HasPrefix(dst, ro) && !roOK {
				continue
			}
			out := Output{Format: f, KeyType: d.Schema.KeyType, SamplesPerFile: 20}
			if f == Raw {
				out.SamplesPerFile, out.RawLayout, out.RawLayoutSet = 0, raw.OneHot, true
			}
			_, err := Convert(context.Background(), d, dst, out, formats.Options{BatchSize: 16}, nil)
			if err == nil {
				t.Errorf("%s to %s: no error", f, dst)
			}
		}
	}
	os.Remove(filepath.Join(ro, "probe"))
	if n := len(snapshot(t, ro)); n != 0 {
		t.Errorf("%d files left in %s", n, ro)
	}
}

// TestListNameIsDst: a Norm or Parquet output whose DST names a .txt file
// writes its file list under that name, so the path convert printed is the
// one train and validate open (Parquet wrote _file_list.txt whatever DST
// said); a directory DST gets the format's default list.
func TestListNameIsDst(t *testing.T) {
	d := normSource(t, 300)
	dir := t.TempDir()
	cases := []struct {
		format   Format
		dst, out string // DST relative to dir, the list expected
	}{
		{Parquet, "p1/file_list.txt", "p1/file_list.txt"},
		{Parquet, "p2/train.txt", "p2/train.txt"},
		{Parquet, "p3", "p3/_file_list.txt"},
		{Norm, "n1/train.txt", "n1/train.txt"},
		{Norm, "n2", "n2/file_list.txt"},
	}
	for _, c := range cases {
		out := Output{Format: c.format, KeyType: d.Schema.KeyType, SamplesPerFile: 100}
		if _, err := Convert(context.Background(), d, filepath.Join(dir, c.dst), out, formats.Options{BatchSize: 64}, nil); err != nil {
			t.Fatalf("%s %s: %v", c.format, c.dst, err)
		}
		list := filepath.Join(dir, c.out)
		ds, err := Resolve(list, Spec{})
		if err != nil {
			t.Errorf("%s %s: resolving %s: %v", c.format, c.dst, c.out, err)
			continue
		}
		r, err := ds.Open(formats.Options{BatchSize: 64})
		if err != nil {
			t.Fatalf("%s %s: opening %s: %v", c.format, c.dst, c.out, err)
		}
		n, err := countSamples(r, 64)
		r.Close()
		if err != nil || n != 300 {
			t.Errorf("%s %s: %d samples (%v), want 300", c.format, c.dst, n, err)
		}
	}
}

// countSamples reads r to its end.
func countSamples(r formats.Reader, batch int) (int, error) {
	b, err := formats.NewBatch(r.Schema(), batch, nil)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := r.Read(b)
		total += n
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
