package asyncio

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// gateFile is a MemFile whose reads wait at a gate: the test sees which
// requests are in flight at once before letting them finish.
type gateFile struct {
	*MemFile
	mu      sync.Mutex
	cond    sync.Cond
	waiting []int64 // offsets of the reads waiting at the gate
	open    bool
}

func newGateFile(data []byte) *gateFile {
	g := &gateFile{MemFile: NewMemFile("gate.bin", data)}
	g.cond.L = &g.mu
	return g
}

func (g *gateFile) ReadAt(p []byte, off int64) (int, error) {
	g.mu.Lock()
	g.waiting = append(g.waiting, off)
	g.cond.Broadcast()
	for !g.open {
		g.cond.Wait()
	}
	g.mu.Unlock()
	return g.MemFile.ReadAt(p, off)
}

// inFlight waits until n reads wait at the gate and returns their offsets,
// sorted.
func (g *gateFile) inFlight(t *testing.T, n int) []int64 {
	deadline := time.Now().Add(10 * time.Second)
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.waiting) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads in flight, want %d", len(g.waiting), n)
		}
		g.mu.Unlock()
		time.Sleep(time.Millisecond)
		g.mu.Lock()
	}
	return slices.Sorted(slices.Values(g.waiting))
}

func (g *gateFile) release() {
	g.mu.Lock()
	g.open = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// TestOldestBlocksInFlight: the NumThreads × IODepth requests in flight
// are the first blocks of the stream, all of range 0 here, not the first
// block of NumThreads ranges (the design before, one range per thread,
// made the first range wait for the reads of all the others).
func TestOldestBlocksInFlight(t *testing.T) {
	const block, perRange, nr = 4096, 4, 8
	data := randomBytes(block*perRange*nr, 7)
	g := newGateFile(data)
	rs := batchRanges(int64(len(data)), block*perRange)
	p := Params{NumThreads: 4, IODepth: 1, NumBatchesPerThread: 2, IOBlockSize: block, Engine: "pread"}
	r, err := NewReader(g, ranges(rs), block*perRange, p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { g.release(); r.Close() }()
	got := g.inFlight(t, 4)
	want := []int64{0, block, 2 * block, 3 * block}
	if !slices.Equal(got, want) {
		t.Fatalf("requests in flight at offsets %v, want range 0's blocks %v", got, want)
	}
	g.release()
	drain(t, r, g.MemFile, rs)
}

// TestBuffersReused: a reader opened after another of the same shape is
// closed takes its read buffers (no new allocation for the next pass).
func TestBuffersReused(t *testing.T) {
	data := randomBytes(1<<16, 3)
	rs := batchRanges(int64(len(data)), 1<<12)
	p := Params{NumThreads: 2, NumBatchesPerThread: 2, Engine: "pread"}
	f := NewMemFile("a.bin", data)
	r, err := NewReader(f, ranges(rs), 1<<12, p)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, r, f, rs)
	var first []*byte
	for len(r.free) > 0 {
		b := <-r.free
		first = append(first, &b.mem[0])
		r.free <- b
		if len(first) == cap(r.free) {
			break
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f2 := NewMemFile("b.bin", data)
	r2, err := NewReader(f2, ranges(rs), 1<<12, p)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	reused := 0
	for i := 0; i < cap(r2.free); i++ {
		b := <-r2.free
		if slices.Contains(first, &b.mem[0]) {
			reused++
		}
		r2.free <- b
	}
	// sync.Pool may drop buffers (a GC in between, another P's cache), so
	// ask for one, not all.
	if reused == 0 {
		t.Errorf("no buffer of the closed reader reused")
	}
	drain(t, r2, f2, rs)
}
