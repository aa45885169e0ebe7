package model

import (
	"fmt"
	"io"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/input"
)

// Throughput is a timed run of training steps.
type Throughput struct {
	Steps         int
	Samples       int64
	Elapsed       time.Duration
	SamplesPerSec float64
	StepMillis    float64
	LossFirst     float64 // loss after the first timed step
	LossLast      float64 // loss after the last step
	// Wait is how long the training goroutine waited for its batches
	// through the input pipeline (nil for resident steps).
	Wait *InputWait `json:",omitempty"`
}

// InputWait is the training goroutine's wait for the next batch in timed
// steps through the pipeline (host time from one step's launch to the next
// batch in hand; the device may still be busy with earlier steps then).
type InputWait struct {
	MeanMs float64 // per step
	MaxMs  float64
	// Long counts the waits of at least LongMs (1 ms: longer than the
	// steps of small batches, whose device work the staging slots queue
	// two or three steps ahead) and LongTotalMs sums them: the waits that
	// can leave the device idle.
	Long        int
	LongMs      float64
	LongTotalMs float64
	// Turns counts the waits for a new pass's first batch, TurnMs their
	// mean.
	Turns  int
	TurnMs float64
}

// TrainThroughput trains warmup steps, then times steps through the input
// pipeline (the prefetcher: read, pin, upload on the copy stream) reading
// the passes open returns, one after another without a pause (the
// prefetcher opens the next pass while the last batches of the previous
// one train; a pass's short last batch is skipped). The clock starts and
// stops with the backend synchronised, so it counts every step's device
// time.
func (m *Model) TrainThroughput(open func() (formats.Reader, error), warmup, steps int) (Throughput, error) {
	res, _, err := m.pipelineRun(open, warmup, steps, false)
	return res, err
}

// ProfileTrain trains warmup steps through the input pipeline (as
// TrainThroughput), then steps profiled ones: each layer's forward,
// backward and update spans, the pipeline's Commit and the device's idle
// time between steps, timed on the backend (Profile), with the input
// pipeline's own side (Profile.Pipeline).
func (m *Model) ProfileTrain(open func() (formats.Reader, error), warmup, steps int) (Profile, error) {
	if steps <= 0 {
		return Profile{}, errProfileSteps
	}
	_, pr, err := m.pipelineRun(open, warmup, steps, true)
	if err != nil {
		return Profile{}, err
	}
	return *pr, nil
}

func (m *Model) pipelineRun(open func() (formats.Reader, error), warmup, steps int, profile bool) (Throughput, *Profile, error) {
	var res Throughput
	pf := input.NewPrefetcher(m.feed)
	defer pf.Close()
	pf.DropShort(true) // steps are full batches
	if err := pf.StartPasses(open, 0); err != nil {
		return res, nil, err
	}
	var prof *profiler
	if profile {
		var err error
		if prof, err = newProfiler(m, true); err != nil {
			return res, nil, err
		}
		defer prof.free()
		defer func() { m.prof = nil }()
	}
	var start, waitFrom time.Time
	var wait, waitMax, waitTurn, waitLong time.Duration
	turns, longs := 0, 0
	const longAt = time.Millisecond
	turned := false // the next batch is a new pass's first
	full := false   // a full batch in this pass
	for i := 0; i < warmup+steps; {
		if i == warmup && start.IsZero() {
			if err := m.be.Sync(); err != nil {
				return res, nil, err
			}
			if prof != nil {
				pf.TimeStats(true)
				m.prof = prof
				prof.start()
			}
			start = time.Now()
			waitFrom = start
		}
		st := pf.Next()
		if st.Err != nil && st.Err != io.EOF {
			pf.Release(st)
			return res, nil, st.Err
		}
		if st.N == m.batch {
			full = true
			if i >= warmup {
				d := time.Since(waitFrom)
				wait += d
				waitMax = max(waitMax, d)
				if d >= longAt {
					longs++
					waitLong += d
				}
				if turned {
					waitTurn += d
					turns++
				}
			}
			turned = false
			m.prof.mark(spanGap, 0)
			if err := pf.Commit(st); err != nil {
				return res, nil, err
			}
			m.prof.mark(spanCommit, 0)
			if err := m.step(m.batch); err != nil {
				return res, nil, err
			}
			if i == warmup && prof == nil {
				var err error
				if res.LossFirst, err = m.Loss(); err != nil {
					return res, nil, err
				}
			}
			i++
			if prof != nil && i > warmup {
				if err := prof.endStep(i == warmup+steps); err != nil {
					return res, nil, err
				}
			}
			waitFrom = time.Now()
		} else {
			pf.Release(st)
		}
		if st.Err == io.EOF {
			if !full {
				return res, nil, fmt.Errorf("the data holds no full batch of %d samples", m.batch)
			}
			full = false // the prefetcher reads the next pass
			turned = true
		}
	}
	res, err := m.finish(res, start, steps)
	if err != nil {
		return res, nil, err
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	res.Wait = &InputWait{MeanMs: ms(wait) / float64(steps), MaxMs: ms(waitMax), Long: longs, LongMs: ms(longAt), LongTotalMs: ms(waitLong), Turns: turns}
	if turns > 0 {
		res.Wait.TurnMs = ms(waitTurn) / float64(turns)
	}
	if prof == nil {
		return res, nil, nil
	}
	if err := prof.flush(); err != nil {
		return res, nil, err
	}
	pr := prof.profile(m, res.Elapsed)
	ps := pf.Stats()
	w := res.Wait
	pp := &PipelineProfile{WaitMs: w.MeanMs, WaitMaxMs: w.MaxMs, Turns: w.Turns, TurnWaitMs: w.TurnMs, Batches: ps.Batches, Staged: pf.Staging()}
	if ps.Batches > 0 {
		nb := float64(ps.Batches)
		pp.ReadMs = float64(ps.Read) / 1e6 / nb
		pp.HostSideMs = float64(ps.HostSide) / 1e6 / nb
		pp.StageMs = float64(ps.Stage) / 1e6 / nb
		if pp.ReadMs > 0 {
			pp.ReaderRate = float64(m.batch) / (pp.ReadMs / 1e3)
		}
	}
	if ps.Copies > 0 {
		pp.CopyMs = ps.CopyMillis / float64(ps.Copies)
	}
	if ps.Turns > 0 {
		pp.TurnMs = float64(ps.Turn) / 1e6 / float64(ps.Turns)
	}
	pr.Pipeline = pp
	return res, &pr, nil
}

// ResidentThroughput times steps on one batch loaded once: the model alone,
// with no input pipeline (the ceiling TrainThroughput is compared with).
func (m *Model) ResidentThroughput(b *formats.Batch, warmup, steps int) (Throughput, error) {
	res, _, err := m.residentRun(b, warmup, steps, false)
	return res, err
}

// ProfileResident is ProfileTrain on one batch loaded once (no pipeline
// rows).
func (m *Model) ProfileResident(b *formats.Batch, warmup, steps int) (Profile, error) {
	if steps <= 0 {
		return Profile{}, errProfileSteps
	}
	_, pr, err := m.residentRun(b, warmup, steps, true)
	if err != nil {
		return Profile{}, err
	}
	return *pr, nil
}

func (m *Model) residentRun(b *formats.Batch, warmup, steps int, profile bool) (Throughput, *Profile, error) {
	var res Throughput
	if b.N != m.batch {
		return res, nil, fmt.Errorf("batch of %d samples, want %d", b.N, m.batch)
	}
	if err := m.feed.Load(b); err != nil {
		return res, nil, err
	}
	var prof *profiler
	if profile {
		var err error
		if prof, err = newProfiler(m, false); err != nil {
			return res, nil, err
		}
		defer prof.free()
		defer func() { m.prof = nil }()
	}
	var start time.Time
	for i := 0; i < warmup+steps; i++ {
		if i == warmup {
			if err := m.be.Sync(); err != nil {
				return res, nil, err
			}
			if prof != nil {
				m.prof = prof
				prof.start()
			}
			start = time.Now()
		}
		m.prof.mark(spanGap, 0)
		if err := m.step(m.batch); err != nil {
			return res, nil, err
		}
		if i == warmup && prof == nil {
			var err error
			if res.LossFirst, err = m.Loss(); err != nil {
				return res, nil, err
			}
		}
		if prof != nil && i >= warmup {
			if err := prof.endStep(i+1 == warmup+steps); err != nil {
				return res, nil, err
			}
		}
	}
	res, err := m.finish(res, start, steps)
	if err != nil || prof == nil {
		return res, nil, err
	}
	if err := prof.flush(); err != nil {
		return res, nil, err
	}
	pr := prof.profile(m, res.Elapsed)
	return res, &pr, nil
}

func (m *Model) finish(res Throughput, start time.Time, steps int) (Throughput, error) {
	loss, err := m.Loss() // synchronises
	if err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	res.Steps = steps
	res.Samples = int64(steps) * int64(m.batch)
	res.SamplesPerSec = float64(res.Samples) / res.Elapsed.Seconds()
	res.StepMillis = res.Elapsed.Seconds() * 1000 / float64(steps)
	res.LossLast = loss
	return res, nil
}
