package input

import (
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
)

// countedReader is a seqReader that knows its sample count and records its
// opening and closing.
type countedReader struct {
	seqReader
	log *chainLog
	id  int
}

func (r *countedReader) NumSamples() int64 { return int64(r.n) }
func (r *countedReader) Close() error {
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	r.log.closed = append(r.log.closed, r.id)
	return nil
}

type chainLog struct {
	mu     sync.Mutex
	opened int
	// readsAtOpen is how many batches had been read (all passes) when each
	// next reader was opened.
	readsAtOpen []int
	closed      []int
}

// TestPrefetcherChain: a chained prefetcher runs its passes back to back,
// each whole and in order with io.EOF at its end, opens each next pass
// ahead of the end (Lookahead batches before it), stops after its passes
// and closes every reader it was given or opened.
func TestPrefetcherChain(t *testing.T) {
	f, s := newFeeder(t, 4)
	const n, passes = 40, 3 // 10 batches a pass
	lg := &chainLog{}
	reads := 0
	mk := func() *countedReader {
		lg.mu.Lock()
		defer lg.mu.Unlock()
		lg.opened++
		lg.readsAtOpen = append(lg.readsAtOpen, reads)
		return &countedReader{seqReader: seqReader{s: s, n: n, batch: 4, reads: &reads}, log: lg, id: lg.opened}
	}
	pf := NewPrefetcher(f)
	if err := pf.StartPasses(func() (formats.Reader, error) { return mk(), nil }, passes); err != nil {
		t.Fatal(err)
	}
	var eofs int
	var seen []float32
	for {
		st := pf.Next()
		if st.Err != nil && !errors.Is(st.Err, io.EOF) {
			t.Fatal(st.Err)
		}
		if st.N > 0 {
			if err := pf.Commit(st); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, labels(t, f)[:st.N]...)
		}
		if st.Err != nil {
			eofs++
			if len(seen) != eofs*n {
				t.Fatalf("pass %d ended after %d samples in all, want %d", eofs, len(seen), eofs*n)
			}
			if eofs == passes+1 {
				t.Fatalf("a pass beyond the %d asked for", passes)
			}
			if eofs == passes {
				// After the last pass Next keeps answering io.EOF.
				if st := pf.Next(); st.N != 0 || !errors.Is(st.Err, io.EOF) {
					t.Fatalf("after the last pass: %+v", st)
				}
				break
			}
		}
	}
	pf.Close()
	var want []float32
	for range passes {
		for i := range n {
			want = append(want, float32(i))
		}
	}
	if !slices.Equal(seen, want) {
		t.Errorf("labels %v, want %v", seen, want)
	}
	if lg.opened != passes {
		t.Errorf("%d readers opened, want %d", lg.opened, passes)
	}
	// The second reader is opened Lookahead batches before the first pass
	// ends (its 10 reads), not after.
	if len(lg.readsAtOpen) > 1 && lg.readsAtOpen[1] > 10-Lookahead+1 {
		t.Errorf("the next pass was opened after %d of the pass's 10 reads; want at most %d", lg.readsAtOpen[1], 10-Lookahead+1)
	}
	slices.Sort(lg.closed)
	if !slices.Equal(lg.closed, []int{1, 2, 3}) {
		t.Errorf("closed readers %v, want [1 2 3]", lg.closed)
	}
}

// TestPrefetcherChainOpenError: a next pass that cannot be opened ends the
// run with its error after the pass before it ended.
func TestPrefetcherChainOpenError(t *testing.T) {
	f, s := newFeeder(t, 4)
	reads := 0
	pf := NewPrefetcher(f)
	defer pf.Close()
	boom := errors.New("the second pass's file is gone")
	opened := 0
	open := func() (formats.Reader, error) {
		if opened++; opened == 1 {
			return &seqReader{s: s, n: 10, batch: 4, reads: &reads}, nil
		}
		return nil, boom
	}
	if err := pf.StartPasses(open, 0); err != nil {
		t.Fatal(err)
	}
	var got int
	for {
		st := pf.Next()
		got += st.N
		if st.N > 0 {
			pf.Release(st)
		}
		if st.Err != nil && !errors.Is(st.Err, io.EOF) {
			if !errors.Is(st.Err, boom) {
				t.Fatalf("error %v, want %v", st.Err, boom)
			}
			break
		}
	}
	if got != 10 {
		t.Errorf("%d samples before the error, want the first pass's 10", got)
	}
}

// TestChainLead: the next pass opens Lookahead batches before the end,
// earlier (twice the start-up time ahead) after a pass whose reader made
// the first read wait, never more than half a pass ahead.
func TestChainLead(t *testing.T) {
	c := &chain{}
	if got := c.lead(100); got != Lookahead {
		t.Errorf("no start-up measured: lead %d, want %d", got, Lookahead)
	}
	c.startup, c.interval = 50*time.Millisecond, 10*time.Millisecond
	if got := c.lead(100); got != 11 {
		t.Errorf("start-up 50 ms, 10 ms a step: lead %d, want 11", got)
	}
	if got := c.lead(16); got != 8 {
		t.Errorf("a pass of 16 batches: lead %d, want at most half, 8", got)
	}
	if got := c.lead(4); got != Lookahead {
		t.Errorf("a pass of 4 batches: lead %d, want %d", got, Lookahead)
	}
}

// ringReader is a countedReader that allocates a ring of buffers from
// alloc when it opens and frees them at Close, as the Raw readers do.
type ringReader struct {
	countedReader
	alloc formats.Allocator
	ring  [][]byte
}

func (r *ringReader) Close() error {
	for _, b := range r.ring {
		r.alloc.Free(b)
	}
	r.ring = nil
	return r.countedReader.Close()
}

// countingAlloc counts the buffers it makes.
type countingAlloc struct {
	mu   sync.Mutex
	made int
}

func (a *countingAlloc) Alloc(n int) ([]byte, error) {
	a.mu.Lock()
	a.made++
	a.mu.Unlock()
	return make([]byte, n), nil
}
func (a *countingAlloc) Free([]byte) {}

// TestStartPassesAllocatesUpFront: every buffer the passes' readers
// allocate when they open is made before StartPasses returns — the second
// pass's reader is opened with the first, and from the third pass on the
// readers take the buffers of the one two passes before from the
// Recycler — so no (pinned) allocation falls inside the training steps.
// Before, the second reader was opened Lookahead batches before the first
// pass's end and allocated its ring there (a 59% slower pipeline over the
// measured steps of a 16-batch pass on the H200).
func TestStartPassesAllocatesUpFront(t *testing.T) {
	f, s := newFeeder(t, 4)
	base := &countingAlloc{}
	rec := formats.NewRecycler(base)
	lg := &chainLog{}
	reads := 0
	open := func() (formats.Reader, error) {
		lg.mu.Lock()
		lg.opened++
		id := lg.opened
		lg.mu.Unlock()
		r := &ringReader{countedReader: countedReader{seqReader: seqReader{s: s, n: 40, batch: 4, reads: &reads}, log: lg, id: id}, alloc: rec}
		for range 3 {
			b, err := rec.Alloc(1 << 12)
			if err != nil {
				return nil, err
			}
			r.ring = append(r.ring, b)
		}
		return r, nil
	}
	for _, passes := range []int{1, 5, 0} {
		pf := NewPrefetcher(f)
		if err := pf.StartPasses(open, passes); err != nil {
			t.Fatal(err)
		}
		base.mu.Lock()
		atStart := base.made
		base.mu.Unlock()
		want := 2
		if passes == 1 {
			want = 1
		}
		if lg.opened != want {
			t.Errorf("passes %d: %d readers opened by StartPasses, want %d", passes, lg.opened, want)
		}
		for eofs := 0; eofs < 5 && (passes == 0 || eofs < passes); {
			st := pf.Next()
			if st.Err != nil && !errors.Is(st.Err, io.EOF) {
				t.Fatal(st.Err)
			}
			pf.Release(st)
			if st.Err != nil {
				eofs++
			}
		}
		pf.Close()
		base.mu.Lock()
		if base.made != atStart {
			t.Errorf("passes %d: %d buffers allocated after the start, want 0", passes, base.made-atStart)
		}
		base.mu.Unlock()
		lg.opened, base.made = 0, 0
		rec = formats.NewRecycler(base)
	}
}
