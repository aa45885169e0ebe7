package asyncio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestEngines reads one file through both engines (O_DIRECT and buffered)
// and checks every byte; where io_uring is unavailable (not Linux, or a
// kernel that refuses it) asking for it is a clear error and the default
// falls back to pread.
func TestEngines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.raw")
	data := randomBytes(5<<20+4321, 11)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, rlen := range []int64{700_001, 3<<20 + 12345} { // small ranges; ranges in huge-page buffers
		rs := batchRanges(int64(len(data)), rlen) // unaligned ranges
		for _, direct := range []bool{true, false} {
			for _, engine := range []string{"", "pread", "io_uring"} {
				f, _, err := OpenFile(path, direct)
				if err != nil {
					t.Fatal(err)
				}
				r, err := NewReader(f, ranges(rs), rlen, Params{NumThreads: 3, IODepth: 5, IOBlockSize: 128 << 10, Engine: engine})
				if err != nil {
					if engine == "io_uring" && errors.Is(err, errNoUring) {
						t.Logf("io_uring unavailable: %v", err)
						f.Close()
						continue
					}
					t.Fatal(err)
				}
				t.Logf("direct=%v engine %q → %s", f.Direct(), engine, r.Engine())
				if engine != "" && r.Engine() != engine {
					t.Fatalf("asked for %s, got %s", engine, r.Engine())
				}
				for i, want := range rs {
					b, err := r.Next()
					if err != nil {
						t.Fatalf("%s: range %d: %v", r.Engine(), i, err)
					}
					if !bytes.Equal(b.Data, data[want.Off:want.Off+want.Len]) {
						t.Fatalf("%s: range %d: wrong bytes", r.Engine(), i)
					}
					r.Release(b)
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	rs := batchRanges(int64(len(data)), 700_001)
	if _, err := NewReader(&MemFile{Data: data, Path: "mem", FailAt: -1}, ranges(rs), 700_001, Params{Engine: "io_uring"}); !errors.Is(err, errNoUring) {
		t.Fatalf("io_uring on a file without a descriptor: %v", err)
	}
	if _, err := NewReader(&MemFile{Data: data, Path: "mem", FailAt: -1}, ranges(rs), 700_001, Params{Engine: "aio"}); err == nil {
		t.Fatal("unknown engine accepted")
	}
}

// TestURingCloseInFlight closes an io_uring reader while reads are in
// flight: Close waits for them, and no goroutine outlives it.
func TestURingCloseInFlight(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.raw")
	if err := os.WriteFile(path, randomBytes(16<<20, 12), 0o644); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	for round := 0; round < 20; round++ {
		f, _, err := OpenFile(path, true)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(f, ranges(batchRanges(16<<20, 1<<20)), 1<<20, Params{NumThreads: 2, IODepth: 8, IOBlockSize: 64 << 10, Engine: "io_uring"})
		if err != nil {
			if errors.Is(err, errNoUring) {
				t.Skipf("io_uring unavailable: %v", err)
			}
			t.Fatal(err)
		}
		if round%2 == 1 {
			b, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			r.Release(b)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
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
