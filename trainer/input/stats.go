package input

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Stats are what a prefetcher's goroutine spent, since TimeStats(true).
type Stats struct {
	// Batches read (the reader's last, empty call included).
	Batches int
	// Read is the wait for the reader (Read, or a lending reader's
	// Next); HostSide the checks and key counts of staged batches; Stage
	// the Stage calls (a free slot, then the copies).
	Read, HostSide, Stage time.Duration
	// CopyMillis is the device time of the staging copies on the copy
	// stream over Copies Stage calls, when the staging times them
	// (tensor.CopyTimer); else 0.
	CopyMillis float64
	Copies     int
	// Turns are the switches from a pass's reader to the next's
	// (StartPasses), Turn their time in the prefetcher's goroutine
	// (closing the old reader, opening the new one when not opened
	// ahead).
	Turns int
	Turn  time.Duration
}

// stat names a duration of Stats.
type stat int

const (
	statRead stat = iota
	statHostSide
	statStage
	statTurn
)

// pipeStats collects Stats; off, it costs one atomic load per batch.
type pipeStats struct {
	on atomic.Bool
	mu sync.Mutex // guards s
	s  Stats
}

// now is the time when on, else the zero time (which add ignores).
func (p *pipeStats) now() time.Time {
	if !p.on.Load() {
		return time.Time{}
	}
	return time.Now()
}

func (p *pipeStats) add(k stat, t0 time.Time) {
	if t0.IsZero() {
		return
	}
	d := time.Since(t0)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch k {
	case statRead:
		p.s.Read += d
		p.s.Batches++
	case statHostSide:
		p.s.HostSide += d
	case statStage:
		p.s.Stage += d
	case statTurn:
		p.s.Turn += d
		p.s.Turns++
	}
}

// TimeStats starts (on) or stops timing the prefetcher's goroutine and
// its staging copies, and clears the totals.
func (pf *Prefetcher) TimeStats(on bool) {
	pf.st.mu.Lock()
	pf.st.s = Stats{}
	pf.st.mu.Unlock()
	pf.st.on.Store(on)
	if ct, ok := pf.stg.(tensor.CopyTimer); ok {
		ct.TimeCopies(on)
	}
}

// Stats returns the totals since TimeStats(true).
func (pf *Prefetcher) Stats() Stats {
	pf.st.mu.Lock()
	s := pf.st.s
	pf.st.mu.Unlock()
	if ct, ok := pf.stg.(tensor.CopyTimer); ok {
		s.CopyMillis, s.Copies = ct.CopyMillis()
	}
	return s
}

// Staging reports whether batches go through the backend's staging
// (tensor.Stager: pinned memory, copies on a copy stream) rather than a
// synchronous load on Commit.
func (pf *Prefetcher) Staging() bool { return pf.stg != nil }
