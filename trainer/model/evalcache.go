package model

import (
	"fmt"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// evalCache is HugeCTR's cache_eval_data: the first limit evaluation
// batches stay on the backend (the GPU's memory) as the model loaded them
// — labels, dense values, each sparse input's keys and CSR after
// SplitInputs — and later evaluations run the network on them again
// without opening the data, reading, staging or splitting. Batches past
// the cache are read from a fresh reader that skips the cached ones.
type evalCache struct {
	limit   int
	batches []cachedBatch
	// complete: the data ended with the cached batches (an evaluation
	// never opens it again).
	complete bool
	// full: a batch did not fit the device's free memory; note says so
	// (Fit prints it once).
	full bool
	note string
}

// cachedBatch is one batch as the network's inputs hold it.
type cachedBatch struct {
	n            int
	label, dense tensor.Tensor // dense zero when dense_dim is 0
	keys, offs   []tensor.Tensor
	nnz          []int
}

func newEvalCache(limit int) *evalCache { return &evalCache{limit: limit} }

// evalCacheReserve is the device memory left free when caching batches
// (the activations of evaluation and the allocator's slack).
const evalCacheReserve = 256 << 20

// add keeps the batch of n samples the inputs hold now, unless the cache is
// full (limit batches, or the device's memory).
func (c *evalCache) add(m *Model, n int) error {
	if len(c.batches) >= c.limit || c.full {
		return nil
	}
	f, be := m.feed, m.be
	need := int64(4 * f.label.Value.Len())
	if f.dense != nil {
		need += int64(4 * f.dense.Value.Len())
	}
	for _, in := range f.inputs {
		need += 8*int64(max(in.NNZ, 1)) + 4*int64(in.Offsets.Len())
	}
	if dm, ok := be.(tensor.DeviceMemory); ok {
		free, _, err := dm.MemInfo()
		if err != nil {
			return err
		}
		if need+evalCacheReserve > free {
			c.full = true
			c.note = fmt.Sprintf("note: cache_eval_data %d: caching %d evaluation batches; batch %d needs %s and the device has %s free: "+
				"later evaluations read the rest from the data", c.limit, len(c.batches), len(c.batches)+1, humanBytes(float64(need)), humanBytes(float64(free)))
			return nil
		}
	}
	cb := cachedBatch{n: n, label: be.Alloc(tensor.Float32, f.label.Value.Len())}
	be.Copy(cb.label, f.label.Value)
	if f.dense != nil {
		cb.dense = be.Alloc(tensor.Float32, f.dense.Value.Len())
		be.Copy(cb.dense, f.dense.Value)
	}
	for _, in := range f.inputs {
		k := max(in.NNZ, 1)
		keys, offs := be.Alloc(tensor.Int64, k), be.Alloc(tensor.Int32, in.Offsets.Len())
		if in.NNZ > 0 {
			be.Copy(keys, in.Keys.Prefix(k))
		}
		be.Copy(offs, in.Offsets)
		cb.keys, cb.offs, cb.nnz = append(cb.keys, keys), append(cb.offs, offs), append(cb.nnz, in.NNZ)
	}
	if err := be.Err(); err != nil {
		return fmt.Errorf("cache_eval_data: caching evaluation batch %d: %w", len(c.batches)+1, err)
	}
	c.batches = append(c.batches, cb)
	return nil
}

// restore makes the cached batch the network's input.
func (cb *cachedBatch) restore(m *Model) error {
	f, be := m.feed, m.be
	be.Copy(f.label.Value, cb.label)
	if f.dense != nil {
		be.Copy(f.dense.Value, cb.dense)
	}
	for k, in := range f.inputs {
		if cb.nnz[k] > 0 {
			be.Copy(in.Keys.Prefix(cb.nnz[k]), cb.keys[k])
		}
		be.Copy(in.Offsets, cb.offs[k])
		in.NNZ = cb.nnz[k]
	}
	return be.Err()
}

// Bytes is the memory the cached batches hold.
func (c *evalCache) Bytes() int64 {
	var n int64
	for _, b := range c.batches {
		n += 4 * int64(b.label.Len()+b.dense.Len())
		for k := range b.keys {
			n += 8*int64(b.keys[k].Len()) + 4*int64(b.offs[k].Len())
		}
	}
	return n
}

// free releases the cached tensors.
func (c *evalCache) free(m *Model) {
	for _, b := range c.batches {
		m.be.Free(b.label)
		if !b.dense.IsZero() {
			m.be.Free(b.dense)
		}
		for k := range b.keys {
			m.be.Free(b.keys[k])
			m.be.Free(b.offs[k])
		}
	}
	c.batches, c.complete = nil, false
}

// evalCacheBytes bounds the memory of batches cached batches: labels,
// dense values, and each sparse input's keys (at its capacity) and CSR.
func evalCacheBytes(m *Model, batches int) float64 {
	f, B := m.feed, m.batch
	per := 4 * float64(B) * float64(f.labelDim+f.denseDim)
	for k, in := range f.inputs {
		per += 8*float64(f.capKeys[k]) + 4*float64(in.Offsets.Len())
	}
	return float64(batches) * per
}

// checkEvalCache refuses a cache_eval_data whose batches (as many as an
// evaluation reads, evalSamples; 0: all) would take more than half the
// memory they live in: the device's free memory on a device backend, else
// the memory the process may use.
func checkEvalCache(m *Model, batches int, evalSamples int64) error {
	if evalSamples > 0 {
		batches = int(min(int64(batches), (evalSamples+int64(m.batch)-1)/int64(m.batch)))
	}
	need := evalCacheBytes(m, batches)
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
