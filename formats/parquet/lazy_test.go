package parquet

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
)

// TestOpenReadsFootersLazily: opening a list that names one file many
// times reads one footer and holds memory independent of the count (it
// read and kept every footer: 16 KB per entry); reading reaches every
// entry.
func TestOpenReadsFootersLazily(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.parquet")
	if err := os.WriteFile(p, fuzzSeedFile(t, "snappy"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := formats.NewSchema(1, 3, []int{1, 3}, []int64{50, 70}, formats.KeyI64)
	meta := MetadataFor(&s, []FileStat{{FileName: "f.parquet", NumRows: fuzzRows}})
	// The heap a reader of k entries holds once closed (its decoding
	// buffers released: what is left is its list of files).
	held := func(k int) int64 {
		paths := make([]string, k)
		for i := range paths {
			paths[i] = p
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := footersRead.Load()
		r, err := OpenFiles(paths, meta, &s, Options{Options: formats.Options{BatchSize: 1000, Workers: 2}})
		if err != nil {
			t.Fatal(err)
		}
		// The first footer, and those of the files the producer reached:
		// it stops at 2·Workers+Prefetch pieces ahead.
		r.Close()
		if got := footersRead.Load() - start; got > 8 {
			t.Errorf("OpenFiles of %d entries read %d footers, want 1 (plus a few reached)", k, got)
		}
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(r)
		return int64(after.HeapAlloc) - int64(before.HeapAlloc)
	}
	const n = 2000
	// The list itself is n·(16 + 24) bytes here; a kept footer is ~16 KB,
	// so footers kept per entry would hold ~32 MB. The bound leaves room
	// for the heap's noise (the race detector's runs add a few MB).
	if grew := held(n) - held(10); grew > 8<<20 {
		t.Errorf("a reader of %d entries holds %d bytes more than of 10", n, grew)
	}
	paths := make([]string, n)
	for i := range paths {
		paths[i] = p
	}
	r, err := OpenFiles(paths, meta, &s, Options{Options: formats.Options{BatchSize: 1000, Workers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := formats.NewBatch(&s, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for {
		k, err := r.Read(b)
		rows += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if rows != fuzzRows*n {
		t.Errorf("read %d rows, want %d", rows, fuzzRows*n)
	}
}

// TestLazyFooterErrorNamesFile: a file after the first whose footer is
// bad, or whose layout differs, fails the read when it is reached, naming
// it; the rows before it are read.
func TestLazyFooterErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "0.parquet")
	if err := os.WriteFile(good, fuzzSeedFile(t, "none"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "1.parquet")
	if err := os.WriteFile(bad, hostileFooter(4<<10, 1<<31-1, fuzzRows, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "2.parquet")
	if err := os.WriteFile(other, hostileFooter(4<<10, 1, fuzzRows, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	s := formats.NewSchema(1, 3, []int{1, 3}, []int64{50, 70}, formats.KeyI64)
	meta := MetadataFor(&s, []FileStat{{FileName: "0.parquet", NumRows: fuzzRows}, {FileName: "1.parquet", NumRows: fuzzRows}, {FileName: "2.parquet", NumRows: fuzzRows}})
	for _, c := range []struct {
		second, want string
	}{{bad, "declares 2147483647 children"}, {other, "column"}} {
		r, err := OpenFiles([]string{good, c.second}, meta, &s, Options{Options: formats.Options{BatchSize: 100, Workers: 2}})
		if err != nil {
			t.Fatalf("OpenFiles: %v (the second footer must be read when reached)", err)
		}
		b, _ := formats.NewBatch(&s, 100, nil)
		var rows int
		for {
			k, err := r.Read(b)
			rows += k
			if err == nil {
				continue
			}
			if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), c.second) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Read ended with %v, want an error naming %s saying %q", err, c.second, c.want)
			}
			break
		}
		if rows != fuzzRows {
			t.Errorf("read %d rows before the bad file, want %d", rows, fuzzRows)
		}
		r.Close()
	}
}
