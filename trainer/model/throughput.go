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
}

// TrainThroughput trains warmup steps, then times steps through the input
// pipeline (the prefetcher: read, pin, upload on the copy stream) reading
// open's reader, reopened at its end. The clock starts and stops with the
// backend synchronised, so it counts every step's device time.
func (m *Model) TrainThroughput(open func() (formats.Reader, error), warmup, steps int) (Throughput, error) {
	var res Throughput
	r, err := open()
	if err != nil {
		return res, err
	}
	// One pipeline for the run, opening each next pass ahead of the
	// pass's end, as Fit does.
	pf := input.NewPrefetcher(m.feed)
	defer pf.Close()
	if err := pf.StartChain(r, open, 0); err != nil {
		return res, err
	}
	var pass int64 // samples of this pass
	var start time.Time
	for i := 0; i < warmup+steps; {
		if i == warmup {
			if err := m.be.Sync(); err != nil {
				return res, err
			}
			start = time.Now()
		}
		st := pf.Next()
		if st.Err != nil && st.Err != io.EOF {
			return res, st.Err
		}
		if st.N == m.batch {
			if err := pf.Commit(st); err != nil {
				return res, err
			}
			if err := m.step(m.batch); err != nil {
				return res, err
			}
			if i == warmup {
				if res.LossFirst, err = m.Loss(); err != nil {
					return res, err
				}
			}
			i++
		} else {
			pf.Release(st)
		}
		pass += int64(st.N)
		if st.Err == io.EOF {
			if pass < int64(m.batch) {
				return res, fmt.Errorf("a pass over the data holds %d samples, less than one batch of %d", pass, m.batch)
			}
			pass = 0
		}
	}
	return m.finish(res, start, steps)
}

// ResidentThroughput times steps on one batch loaded once: the model alone,
// with no input pipeline (the ceiling TrainThroughput is compared with).
func (m *Model) ResidentThroughput(b *formats.Batch, warmup, steps int) (Throughput, error) {
	var res Throughput
	if b.N != m.batch {
		return res, fmt.Errorf("batch of %d samples, want %d", b.N, m.batch)
	}
	if err := m.feed.Load(b); err != nil {
		return res, err
	}
	var start time.Time
	for i := 0; i < warmup+steps; i++ {
		if i == warmup {
			if err := m.be.Sync(); err != nil {
				return res, err
			}
			start = time.Now()
		}
		if err := m.step(m.batch); err != nil {
			return res, err
		}
		if i == warmup {
			var err error
			if res.LossFirst, err = m.Loss(); err != nil {
				return res, err
			}
		}
	}
	return m.finish(res, start, steps)
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
