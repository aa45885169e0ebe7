package tensor

// Timer is a backend that times its own work where that work runs: the
// GPU records CUDA events on its compute stream, so a span between two
// points measures the device time of the operations issued between them
// (and any time the stream sat idle waiting for them). A backend without
// Timer runs each operation before returning (the CPU), so the host's
// wall clock times it; a profiler uses that instead.
type Timer interface {
	// NewTimeline returns a timeline of n ≥ 2 points.
	NewTimeline(n int) (Timeline, error)
}

// Timeline is n points in the order of the backend's work. Mark and
// Millis are called from the goroutine that issues the backend's
// operations.
type Timeline interface {
	// Mark records point i after every operation issued so far, without
	// waiting and without allocating. A point may be marked again once
	// Millis has read it.
	Mark(i int)
	// Millis sets dst[i] (len(dst) ≥ n−1) to the milliseconds from point i
	// to point i+1 for the n−1 spans; it waits for the last point. Errors
	// are the backend's (a point never marked, a failed device).
	Millis(dst []float64) error
	// Free releases the timeline.
	Free()
}

// CopyTimer is a Staging that times its copies on the copy stream where
// they run (the GPU: events around each Stage's copies).
type CopyTimer interface {
	// TimeCopies starts (on) or stops timing and clears the totals.
	TimeCopies(on bool)
	// CopyMillis returns the milliseconds of the copies timed since
	// TimeCopies(true) and how many Stage calls they were. Safe to call
	// from any goroutine.
	CopyMillis() (ms float64, stages int)
}
