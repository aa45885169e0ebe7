package model

import (
	"fmt"

	"github.com/ctrkit/ctrkit/trainer/input"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// cacheNote is the note of a cache that stopped short of its limit ("":
// it did not, or no cache).
func cacheNote(c *input.EvalCache) string {
	if c == nil {
		return ""
	}
	full := c.Full()
	if full == nil {
		return ""
	}
	return fmt.Sprintf("note: cache_eval_data %d: caching %d evaluation batches; batch %d needs %s and the device has %s free: "+
		"later evaluations read the rest from the data", c.Limit(), full.Cached, full.Cached+1, humanBytes(float64(full.Need)), humanBytes(float64(full.Free)))
}

// checkEvalCache refuses a cache_eval_data whose batches (as many as an
// evaluation reads, evalSamples; 0: all) would take more than half the
// memory they live in: the device's free memory on a device backend, else
// the memory the process may use.
func checkEvalCache(m *Model, batches int, evalSamples int64) error {
	if evalSamples > 0 {
		batches = int(min(int64(batches), (evalSamples+int64(m.batch)-1)/int64(m.batch)))
	}
	need := input.CacheBytes(m.feed, batches)
	limit, what := MemoryLimit()
	if dm, ok := m.be.(tensor.DeviceMemory); ok {
		free, _, err := dm.MemInfo()
		if err != nil {
			return err
		}
		limit, what = free, "free on "+m.be.Name()
	}
	if limit > 0 && need > float64(limit)/2 {
		return fmt.Errorf("cache_eval_data %d: caching %d evaluation batches of %d needs up to %s, more than half the %s this process may use (%s): "+
			"lower cache_eval_data", batches, batches, m.batch, humanBytes(need), humanBytes(float64(limit)), what)
	}
	return nil
}
