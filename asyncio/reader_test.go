package asyncio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func ranges(rs []Range) Source {
	i := 0
	return func() (Range, bool) {
		if i == len(rs) {
			return Range{}, false
		}
		i++
		return rs[i-1], true
	}
}

// batchRanges cuts [0, size) into ranges of n bytes (the last one shorter).
func batchRanges(size, n int64) []Range {
	var rs []Range
	for off := int64(0); off < size; off += n {
		rs = append(rs, Range{off, min(n, size-off)})
	}
	return rs
}

func drain(t *testing.T, r *Reader, f *MemFile, rs []Range) {
	t.Helper()
	for i, want := range rs {
		b, err := r.Next()
		if err != nil {
			t.Fatalf("range %d: %v", i, err)
		}
		if b.Seq != int64(i) || b.Range != want {
			t.Fatalf("range %d: got seq %d %+v", i, b.Seq, b.Range)
		}
		if !bytes.Equal(b.Data, f.Data[want.Off:want.Off+want.Len]) {
			t.Fatalf("range %d: wrong bytes", i)
		}
		r.Release(b)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last range: %v, want io.EOF", err)
	}
}

func TestReaderOrderAndBytes(t *testing.T) {
	size := 1<<20 + 12345 // not a multiple of any block size
	f := NewMemFile("mem.raw", randomBytes(size, 1))
	for _, p := range []Params{
		{NumThreads: 1, IODepth: 1, NumBatchesPerThread: 1, IOBlockSize: 4096},
		{NumThreads: 4, IODepth: 4, NumBatchesPerThread: 2, IOBlockSize: 1000, IOAlignment: 512},
		{NumThreads: 3, IODepth: 2, IOBlockSize: 64 << 10, IOAlignment: 4096},
	} {
		for _, batch := range []int64{160 * 1000, 912 * 37, 1} {
			t.Run(fmt.Sprintf("%d-%d-%d/%d", p.NumThreads, p.IODepth, p.IOBlockSize, batch), func(t *testing.T) {
				rs := batchRanges(int64(size), batch)
				if batch == 1 {
					rs = rs[:3000]
				}
				// Shuffled order: the reader must follow the Source's order.
				rng := rand.New(rand.NewPCG(7, 7))
				rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
				r, err := NewReader(f, ranges(rs), batch, p)
				if err != nil {
					t.Fatal(err)
				}
				drain(t, r, f, rs)
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestShortReadsAreRetried(t *testing.T) {
	f := NewMemFile("mem.raw", randomBytes(100000, 2))
	f.Short = 77
	rs := batchRanges(100000, 9000)
	r, err := NewReader(f, ranges(rs), 9000, Params{NumThreads: 2, IODepth: 3, IOBlockSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	drain(t, r, f, rs)
	if r.Requests() < 100000/77 {
		t.Fatalf("only %d requests for 77-byte reads", r.Requests())
	}
}

func TestErrorsNameFileAndOffset(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(*MemFile)
		sent   error
		offset int64
	}{
		{"EIO", func(m *MemFile) { m.FailAt, m.FailErr = 50000, syscall.EIO }, syscall.EIO, 48128},
		{"file shrank", func(m *MemFile) { m.Trunc = 70000 }, io.ErrUnexpectedEOF, 70000},
		{"short then EOF", func(m *MemFile) { m.Trunc = 70001; m.Short = 1000 }, io.ErrUnexpectedEOF, 70001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewMemFile("mem.raw", randomBytes(100000, 3))
			tc.setup(f)
			rs := batchRanges(100000, 10000)
			r, err := NewReader(f, ranges(rs), 10000, Params{NumThreads: 2, IODepth: 2, IOBlockSize: 4096})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var got error
			for got == nil {
				var b *Buffer
				b, got = r.Next()
				r.Release(b)
			}
			var fe *Error
			if !errors.As(got, &fe) || !errors.Is(got, tc.sent) || fe.Path != "mem.raw" || fe.Offset != tc.offset ||
				fe.Op != "read" || fe.Len <= 0 || fe.Offset+fe.Len > 100000+4096 {
				t.Fatalf("got %v (%#v); want %v at offset %d", got, fe, tc.sent, tc.offset)
			}
			if _, again := r.Next(); again != got {
				t.Fatalf("error not sticky: %v", again)
			}
		})
	}
}

func TestRangeOutsideFile(t *testing.T) {
	f := NewMemFile("mem.raw", randomBytes(1000, 4))
	r, _ := NewReader(f, ranges([]Range{{0, 500}, {900, 200}}), 500, Params{})
	defer r.Close()
	b, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	r.Release(b)
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("range past EOF: %v", err)
	}
}

func TestNoGoroutineOutlivesClose(t *testing.T) {
	base := runtime.NumGoroutine()
	f := NewMemFile("mem.raw", randomBytes(1<<20, 5))
	endless := func() (Range, bool) { return Range{0, 1 << 20}, true }
	for i := 0; i < 5; i++ {
		r, err := NewReader(f, endless, 1<<20, Params{NumThreads: 4, IODepth: 4, IOBlockSize: 8192})
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < i; k++ { // stop with buffers held, in flight and queued
			b, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if k%2 == 0 {
				r.Release(b)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if !f.Closed() {
			t.Fatal("Close did not close the file")
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines after Close, %d before", n, base)
	}
}

func TestOSFileDirect(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data.raw")
	data := randomBytes(3<<20+999, 6)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, notice, err := OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("direct=%v block=%d notice=%q", f.Direct(), f.BlockSize(), notice)
	if !f.Direct() && notice == "" {
		t.Fatal("O_DIRECT refused without a notice")
	}
	rs := batchRanges(int64(len(data)), 160*4096)
	r, err := NewReader(f, ranges(rs), 160*4096, Params{NumThreads: 2, IODepth: 2, IOBlockSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, want := range rs {
		b, err := r.Next()
		if err != nil {
			t.Fatalf("range %d: %v", i, err)
		}
		if uintptr(addr(b.mem))%uintptr(r.Alignment()) != 0 {
			t.Fatal("buffer not aligned")
		}
		if !bytes.Equal(b.Data, data[want.Off:want.Off+want.Len]) {
			t.Fatalf("range %d: wrong bytes", i)
		}
		r.Release(b)
	}
}

func BenchmarkReader(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.raw")
	const size = 64 << 20
	if err := os.WriteFile(path, randomBytes(size, 8), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, direct := range []bool{false, true} {
		b.Run(fmt.Sprintf("direct=%v", direct), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				f, _, err := OpenFile(path, direct)
				if err != nil {
					b.Fatal(err)
				}
				rs := batchRanges(size, 160*65536)
				r, err := NewReader(f, ranges(rs), 160*65536, Params{IOBlockSize: 1 << 20})
				if err != nil {
					b.Fatal(err)
				}
				for {
					buf, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					r.Release(buf)
				}
				r.Close()
			}
		})
	}
}

// TestGetManyConsumers takes the ranges with Get from several goroutines at
// once, each its own residue class of sequence numbers, and checks every
// buffer; then Get past the end gives io.EOF.
func TestGetManyConsumers(t *testing.T) {
	size := 3<<20 + 777
	f := NewMemFile("mem.raw", randomBytes(size, 9))
	for _, consumers := range []int{1, 3, 8} {
		rs := batchRanges(int64(size), 50000)
		r, err := NewReader(f, ranges(rs), 50000, Params{NumThreads: 2, IODepth: 3, NumBatchesPerThread: 2, IOBlockSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, consumers)
		for c := 0; c < consumers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seq := int64(c); seq < int64(len(rs)); seq += int64(consumers) {
					b, err := r.Get(seq)
					if err != nil {
						errs <- fmt.Errorf("seq %d: %v", seq, err)
						return
					}
					want := rs[seq]
					if b.Seq != seq || b.Range != want || !bytes.Equal(b.Data, f.Data[want.Off:want.Off+want.Len]) {
						errs <- fmt.Errorf("seq %d: got seq %d %+v or wrong bytes", seq, b.Seq, b.Range)
						return
					}
					r.Release(b)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%d consumers: %v", consumers, err)
		}
		if _, err := r.Get(int64(len(rs))); err != io.EOF {
			t.Fatalf("Get past the end: %v, want io.EOF", err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseWakesGet closes a reader while goroutines wait in Get for ranges
// the dispatcher cannot reach (the completion window is full because range
// 0 is never taken); they must return ErrClosed.
func TestCloseWakesGet(t *testing.T) {
	base := runtime.NumGoroutine()
	f := NewMemFile("mem.raw", randomBytes(1<<20, 10))
	endless := func() (Range, bool) { return Range{0, 4096}, true }
	r, err := NewReader(f, endless, 4096, Params{NumThreads: 2, IODepth: 2, NumBatchesPerThread: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 3)
	for _, seq := range []int64{4, 5, 100} {
		go func() { _, err := r.Get(seq); got <- err }()
	}
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("Get returned before Close: %v", err)
	default:
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		select {
		case err := <-got:
			if err != ErrClosed {
				t.Fatalf("Get after Close: %v, want ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Close did not wake a goroutine waiting in Get")
		}
	}
	if _, err := r.Get(1); err != ErrClosed {
		t.Fatalf("Get on a closed reader: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines after Close, %d before", n, base)
	}
}

// TestNoAllocPerRange checks that reading a range allocates nothing in
// steady state (no channel or closure per range).
func TestNoAllocPerRange(t *testing.T) {
	f := NewMemFile("mem.raw", randomBytes(1<<20, 11))
	endless := func() (Range, bool) { return Range{4096, 65536}, true }
	r, err := NewReader(f, endless, 65536, Params{NumThreads: 2, IODepth: 2, IOBlockSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	allocs := testing.AllocsPerRun(200, func() {
		b, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		r.Release(b)
	})
	if allocs > 0.05 {
		t.Fatalf("%.2f allocations per range", allocs)
	}
}
