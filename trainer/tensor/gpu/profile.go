package gpu

import (
	"fmt"
	"sync"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

var (
	_ tensor.Timer     = (*Backend)(nil)
	_ tensor.CopyTimer = (*Uploader)(nil)
)

// timeline is a tensor.Timeline of timing events recorded on the compute
// stream.
type timeline struct {
	be *Backend
	ev []cuda.Event
}

// NewTimeline implements tensor.Timer: n timing events, each point
// recorded on the compute stream (cuEventRecord), the spans read with
// cuEventElapsedTime.
func (be *Backend) NewTimeline(n int) (tensor.Timeline, error) {
	if n < 2 {
		return nil, fmt.Errorf("gpu: a timeline of %d points (want at least 2)", n)
	}
	t := &timeline{be: be, ev: make([]cuda.Event, n)}
	err := be.dev.Do(func(c *cuda.Ctx) error {
		for i := range t.ev {
			var err error
			if t.ev[i], err = c.NewEvent(true); err != nil {
				for _, e := range t.ev[:i] {
					c.DestroyEvent(e)
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: timeline: %w", err)
	}
	return t, nil
}

// Mark records point i on the compute stream.
func (t *timeline) Mark(i int) {
	be := t.be
	e := t.ev[i]
	be.do("profile", func(c *cuda.Ctx) error { return c.Record(e, be.s) })
}

// Millis waits for the last point and reads the spans.
func (t *timeline) Millis(dst []float64) error {
	be := t.be
	if err := be.Err(); err != nil {
		return err
	}
	if len(dst) < len(t.ev)-1 {
		return fmt.Errorf("gpu: %d spans into %d values", len(t.ev)-1, len(dst))
	}
	return be.dev.Do(func(c *cuda.Ctx) error {
		if err := c.EventSync(t.ev[len(t.ev)-1]); err != nil {
			return err
		}
		for i := 0; i+1 < len(t.ev); i++ {
			ms, err := c.Elapsed(t.ev[i], t.ev[i+1])
			if err != nil {
				return fmt.Errorf("gpu: timeline span %d: %w", i, err)
			}
			dst[i] = float64(ms)
		}
		return nil
	})
}

// Free destroys the events (the driver releases them once recorded work
// completes).
func (t *timeline) Free() {
	t.be.dev.Do(func(c *cuda.Ctx) error {
		for _, e := range t.ev {
			c.DestroyEvent(e)
		}
		return nil
	})
	t.ev = nil
}

// copyTimes are an Uploader's timing events (two per slot, around each
// Stage's copies on the copy stream) and their totals.
type copyTimes struct {
	ev     [stageSlots][2]cuda.Event // per slot: before and after the copies
	mu     sync.Mutex                // guards the fields below
	on     bool
	ms     float64
	stages int
}

func (u *Uploader) newCopyTimers(c *cuda.Ctx) error {
	for s := range u.ct.ev {
		for k := range u.ct.ev[s] {
			var err error
			if u.ct.ev[s][k], err = c.NewEvent(true); err != nil {
				return err
			}
		}
	}
	return nil
}

func (u *Uploader) freeCopyTimers(c *cuda.Ctx) {
	for s := range u.ct.ev {
		for _, e := range u.ct.ev[s] {
			if e != 0 {
				c.DestroyEvent(e)
			}
		}
	}
}

// timing reports whether Stage times its copies.
func (u *Uploader) timing() bool {
	u.ct.mu.Lock()
	defer u.ct.mu.Unlock()
	return u.ct.on
}

// markCopy records slot's start (0) or end (1) event on the copy stream.
func (u *Uploader) markCopy(c *cuda.Ctx, slot, k int) error { return c.Record(u.ct.ev[slot][k], u.s) }

// addCopy adds the time of slot's finished copies to the totals.
func (u *Uploader) addCopy(slot int) error {
	var ms float32
	err := u.be.dev.Do(func(c *cuda.Ctx) error {
		var err error
		ms, err = c.Elapsed(u.ct.ev[slot][0], u.ct.ev[slot][1])
		return err
	})
	if err != nil {
		return err
	}
	u.ct.mu.Lock()
	defer u.ct.mu.Unlock()
	if u.ct.on {
		u.ct.ms += float64(ms)
		u.ct.stages++
	}
	return nil
}

// TimeCopies implements tensor.CopyTimer.
func (u *Uploader) TimeCopies(on bool) {
	u.ct.mu.Lock()
	defer u.ct.mu.Unlock()
	u.ct.on, u.ct.ms, u.ct.stages = on, 0, 0
}

// CopyMillis implements tensor.CopyTimer.
func (u *Uploader) CopyMillis() (float64, int) {
	u.ct.mu.Lock()
	defer u.ct.mu.Unlock()
	return u.ct.ms, u.ct.stages
}
