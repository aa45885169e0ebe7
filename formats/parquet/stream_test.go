package parquet

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// withWindow runs f with the column chunk streams' initial window set to n
// bytes.
func withWindow(t *testing.T, n int, f func()) {
	t.Helper()
	old := streamWindow
	streamWindow = n
	defer func() { streamWindow = old }()
	f()
}

// TestStreamWindows reads ctrkit-written files whose 1 MiB pages are larger
// than the window (values of 4 and 8 bytes split across window loads, page
// headers straddling them) with the default window and with tiny ones, and
// compares every sample with what was written.
func TestStreamWindows(t *testing.T) {
	const rows = 150000 // 1.2 MB int64 column chunks: two pages each
	s := formats.NewSchema(1, 3, []int{1, 1, 1}, nil, formats.KeyI64)
	for i := range s.Slots {
		s.Slots[i].MaxNNZ, s.Slots[i].Hotness = 1, 1
	}
	want := formatstest.NewDataset(rand.New(rand.NewPCG(7, 8)), s, rows, 1, formatstest.AnyFloat)
	for _, comp := range []string{"none", "snappy"} {
		for _, cat := range []string{"int64", "int32"} {
			dir := t.TempDir()
			w, err := NewDatasetWriter(dir, &s, DatasetOptions{WriterOptions: WriterOptions{Compression: comp, CatType: cat, RowGroupSize: 100000}})
			if err != nil {
				t.Fatal(err)
			}
			if err := want.WriteAll(w, 4096); err != nil { // closes w
				t.Fatal(err)
			}
			for _, win := range []int{streamWindow, 4096, 64} {
				withWindow(t, win, func() {
					r, err := OpenList(filepath.Join(dir, FileListName), &s, Options{Options: formats.Options{BatchSize: 1000, Workers: 2}})
					if err != nil {
						t.Fatal(err)
					}
					got, err := formatstest.ReadAll(r, 1000, 0)
					r.Close()
					if err != nil {
						t.Fatalf("%s %s window %d: %v", comp, cat, win, err)
					}
					if d := formatstest.Diff(want, got); d != "" {
						t.Fatalf("%s %s window %d: %s", comp, cat, win, d)
					}
				})
			}
		}
	}
}

// TestTruncatedWhileOpen truncates a file after its reader was opened (the
// footer read): reading must end in an ErrCorrupt error naming the file and
// a column chunk's offset, not in a crash or a hang. The producer is held
// until the file is truncated: started at once, it could otherwise read the
// whole small file first (seen under CI's load, for the uncompressed case).
func TestTruncatedWhileOpen(t *testing.T) {
	defer func() { beforeProduce = nil }()
	s := formats.NewSchema(1, 2, []int{1, 1}, nil, formats.KeyI64)
	for i := range s.Slots {
		s.Slots[i].MaxNNZ, s.Slots[i].Hotness = 1, 1
	}
	ds := formatstest.NewDataset(rand.New(rand.NewPCG(1, 1)), s, 20000, 1, formatstest.AnyFloat)
	for _, comp := range []string{"none", "snappy"} {
		dir := t.TempDir()
		w, err := NewDatasetWriter(dir, &s, DatasetOptions{WriterOptions: WriterOptions{Compression: comp, RowGroupSize: 5000}})
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.WriteAll(w, 1000); err != nil { // closes w
			t.Fatal(err)
		}
		path := filepath.Join(dir, "part_0.parquet")
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		truncated := make(chan struct{})
		beforeProduce = func() { <-truncated }
		r, err := OpenList(filepath.Join(dir, FileListName), &s, Options{Options: formats.Options{BatchSize: 1000, Workers: 1}})
		if err != nil {
			t.Fatal(err)
		}
		err = os.Truncate(path, st.Size()/2)
		close(truncated)
		if err != nil {
			r.Close()
			t.Fatal(err)
		}
		_, err = formatstest.ReadAll(r, 1000, 0)
		r.Close()
		var fe *formats.Error
		if !errors.As(err, &fe) || !errors.Is(err, formats.ErrCorrupt) || fe.Path != path || fe.Offset <= 0 || fe.Record < 0 {
			t.Fatalf("%s: got %v, want ErrCorrupt naming %s, a chunk offset and a record", comp, err, path)
		}
		if !strings.Contains(err.Error(), "end of the file") {
			t.Errorf("%s: %v does not say the file ends early", comp, err)
		}
	}
}

// TestMemoryLimit checks that Options.MemoryLimit lowers the workers (then
// the prefetch depth) to fit its estimate — a row group buffer, the first
// pages and a window per column for each worker — and that the samples do
// not change.
func TestMemoryLimit(t *testing.T) {
	s := formats.NewSchema(1, 3, []int{1, 1, 1}, nil, formats.KeyI64)
	for i := range s.Slots {
		s.Slots[i].MaxNNZ, s.Slots[i].Hotness = 1, 1
	}
	want := formatstest.NewDataset(rand.New(rand.NewPCG(5, 6)), s, 50000, 1, formatstest.AnyFloat)
	dir := t.TempDir()
	w, err := NewDatasetWriter(dir, &s, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 20000}})
	if err != nil {
		t.Fatal(err)
	}
	if err := want.WriteAll(w, 4096); err != nil { // closes w
		t.Fatal(err)
	}
	open := func(limit int64) *Reader {
		r, err := OpenList(filepath.Join(dir, FileListName), &s, Options{Options: formats.Options{BatchSize: 1000, Workers: 8, MemoryLimit: limit}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open(0)
	if r.o.Workers != 8 || r.o.Prefetch != 2 {
		t.Errorf("no limit: %d workers, prefetch %d; want 8 and 2", r.o.Workers, r.o.Prefetch)
	}
	// A piece (a batch and up to two short pieces merged into it, of
	// fewer than minPieceRows rows each) with its room for the head of the
	// next row group (rgBuf.room): up to a batch.
	decoded := int64((min(20000, 1000+2*minPieceRows) + 1000 - 1) * (4*4 + 8*3))
	pages := pageSizes(r.first)
	r.Close()
	// Four float columns of one 80000-byte page, three int64 columns whose
	// first page is full.
	if wantPages := int64(4*20000*4 + 3*pageBytes); pages != wantPages {
		t.Errorf("pageSizes %d, want %d", pages, wantPages)
	}
	worker := 2*decoded + pages + 7*int64(streamWindow)
	for _, c := range []struct {
		limit             int64
		workers, prefetch int
	}{{3*worker + 2*decoded, 3, 2}, {3*worker + 2*decoded - 1, 2, 2}, {worker + decoded, 1, 1}, {1, 1, 1}} {
		r := open(c.limit)
		if r.o.Workers != c.workers || r.o.Prefetch != c.prefetch {
			t.Errorf("limit %d: %d workers, prefetch %d; want %d and %d", c.limit, r.o.Workers, r.o.Prefetch, c.workers, c.prefetch)
		}
		got, err := formatstest.ReadAll(r, 1000, 0)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if d := formatstest.Diff(want, got); d != "" {
			t.Fatalf("limit %d: %s", c.limit, d)
		}
	}
}

// chunkFile writes n bytes (byte(i·mul) at offset i) to a file and opens
// it; the file is closed when the test ends.
func chunkFile(t *testing.T, n, mul int) ([]byte, string, *os.File) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * mul)
	}
	p := filepath.Join(t.TempDir(), "c")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return data, p, f
}

// TestChunkStream drives a chunkStream over a file directly: fills that
// move and grow the window, reads and skips past it, and a chunk that runs
// past the end of its (truncated) file.
func TestChunkStream(t *testing.T) {
	data, p, f := chunkFile(t, 10000, 7)
	pool := &poolAllocator{limit: 1 << 20}
	withWindow(t, 64, func() {
		s := chunkStream{f: f, path: p, off: 100, end: 9000}
		defer s.release(pool)
		pos := int64(100) // file offset of the next unconsumed byte
		check := func(b []byte) {
			t.Helper()
			if !bytes.Equal(b, data[pos:pos+int64(len(b))]) {
				t.Fatalf("bytes at %d differ", pos)
			}
			pos += int64(len(b))
		}
		if err := s.fill(pool, 10); err != nil || s.avail() < 10 {
			t.Fatalf("fill 10: %v, %d available", err, s.avail())
		}
		check(s.take(10))
		if err := s.fill(pool, 500); err != nil { // grows the window
			t.Fatal(err)
		}
		check(s.take(500))
		s.skip(3000) // mostly past the window
		pos += 3000
		buf := make([]byte, 2000)
		if err := s.read(buf); err != nil {
			t.Fatal(err)
		}
		check(buf)
		if got := s.left(); got != 9000-pos {
			t.Fatalf("left %d, want %d", got, 9000-pos)
		}
		if err := s.fill(pool, int(s.left())+1); !errors.Is(err, errShortFile) {
			t.Fatalf("fill past the chunk: %v", err)
		}
		if err := os.Truncate(p, 7000); err != nil {
			t.Fatal(err)
		}
		err := s.read(make([]byte, s.left()))
		if !errors.Is(err, errShortFile) || !strings.Contains(err.Error(), p) {
			t.Fatalf("reading past the truncated file: %v", err)
		}
	})
}

// TestShortLoads: a short stream (a chunk of pages larger than the window)
// loads only what is asked for, at least shortRead bytes, so that a page
// header's load does not copy the head of a body read into scratch; a
// stream that is not short fills its window.
func TestShortLoads(t *testing.T) {
	data, p, f := chunkFile(t, 40000, 13)
	pool := &poolAllocator{limit: 1 << 20}
	withWindow(t, 16384, func() {
		s := chunkStream{f: f, path: p, off: 10, end: 39000, short: true}
		defer s.release(pool)
		if err := s.fill(pool, 10); err != nil || s.avail() != shortRead {
			t.Fatalf("short fill 10: %v, %d available, want %d", err, s.avail(), shortRead)
		}
		s.take(100)
		for _, k := range []int{6000, 9000} { // each load reads max(k-left, shortRead)
			left := s.avail()
			if want := left + max(k-left, shortRead); s.fill(pool, k) != nil || s.avail() != want {
				t.Fatalf("short fill %d with %d left: %d available, want %d", k, left, s.avail(), want)
			}
		}
		if b := s.take(6000); !bytes.Equal(b, data[110:6110]) {
			t.Fatal("short loads: bytes differ")
		}
		body := make([]byte, 20000) // a body read past the window, into scratch
		if err := s.read(body); err != nil || !bytes.Equal(body, data[6110:26110]) {
			t.Fatalf("read after short loads: %v", err)
		}
		s.short = false
		if want := min(len(s.buf), int(s.left())); s.fill(pool, 10) != nil || s.avail() != want || want < shortRead*2 {
			t.Fatalf("fill 10: %d available, want the window's or the chunk's rest, %d", s.avail(), want)
		}
		if b := s.take(s.avail()); !bytes.Equal(b, data[26110:26110+len(b)]) {
			t.Fatal("window load: bytes differ")
		}
	})
}
