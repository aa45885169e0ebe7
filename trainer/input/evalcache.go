package input

import (
	"fmt"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// EvalCache is HugeCTR's cache_eval_data: the first limit evaluation
// batches stay on the backend (the GPU's memory) as the Feeder loaded them
// — labels, dense values, each sparse input's keys and CSR after
// SplitInputs — so later evaluations run the network on them again without
// opening the data, reading, staging or splitting. The caller reads the
// batches past the cache from a fresh reader, skipping the cached ones.
type EvalCache struct {
	limit   int
	batches []cachedBatch
	// Complete: the data ended with the cached batches (an evaluation
	// need not open it again). The caller sets it.
	Complete bool
	full     *CacheFull
}

// CacheFull says why caching stopped before the limit: batch Cached+1
// needed Need bytes and the device had Free.
type CacheFull struct {
	Cached     int
	Need, Free int64
}

// cachedBatch is one batch as the network's inputs hold it.
type cachedBatch struct {
	n            int
	label, dense tensor.Tensor // dense zero when dense_dim is 0
	keys, offs   []tensor.Tensor
	nnz          []int
}

// NewEvalCache returns an empty cache of up to limit batches.
func NewEvalCache(limit int) *EvalCache { return &EvalCache{limit: limit} }

// EvalCacheReserve is the device memory left free when caching batches
// (the activations of evaluation and the allocator's slack).
const EvalCacheReserve = 256 << 20

// Len is the number of cached batches.
func (c *EvalCache) Len() int { return len(c.batches) }

// Limit is the most batches the cache keeps.
func (c *EvalCache) Limit() int { return c.limit }

// Full is why caching stopped short of the limit (nil: it did not).
func (c *EvalCache) Full() *CacheFull { return c.full }

// Add keeps the batch of n samples f's inputs hold now, unless the cache
// is full (limit batches, or — on a tensor.DeviceMemory backend — the
// device's free memory less EvalCacheReserve).
func (c *EvalCache) Add(f *Feeder, n int) error {
	if len(c.batches) >= c.limit || c.full != nil {
		return nil
	}
	be := f.be
	need := int64(4 * f.Label.Value.Len())
	if f.Dense != nil {
		need += int64(4 * f.Dense.Value.Len())
	}
	for _, in := range f.Inputs {
		need += 8*int64(max(in.NNZ, 1)) + 4*int64(in.Offsets.Len())
	}
	if dm, ok := be.(tensor.DeviceMemory); ok {
		free, _, err := dm.MemInfo()
		if err != nil {
			return err
		}
		if need+EvalCacheReserve > free {
			c.full = &CacheFull{Cached: len(c.batches), Need: need, Free: free}
			return nil
		}
	}
	cb := cachedBatch{n: n, label: be.Alloc(tensor.Float32, f.Label.Value.Len())}
	be.Copy(cb.label, f.Label.Value)
	if f.Dense != nil {
		cb.dense = be.Alloc(tensor.Float32, f.Dense.Value.Len())
		be.Copy(cb.dense, f.Dense.Value)
	}
	for _, in := range f.Inputs {
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

// Replay makes cached batch i f's inputs and returns its sample count.
func (c *EvalCache) Replay(f *Feeder, i int) (int, error) {
	cb, be := &c.batches[i], f.be
	be.Copy(f.Label.Value, cb.label)
	if f.Dense != nil {
		be.Copy(f.Dense.Value, cb.dense)
	}
	for k, in := range f.Inputs {
		if cb.nnz[k] > 0 {
			be.Copy(in.Keys.Prefix(cb.nnz[k]), cb.keys[k])
		}
		be.Copy(in.Offsets, cb.offs[k])
		in.NNZ = cb.nnz[k]
	}
	return cb.n, be.Err()
}

// Bytes is the memory the cached batches hold.
func (c *EvalCache) Bytes() int64 {
	var n int64
	for _, b := range c.batches {
		n += 4 * int64(b.label.Len()+b.dense.Len())
		for k := range b.keys {
			n += 8*int64(b.keys[k].Len()) + 4*int64(b.offs[k].Len())
		}
	}
	return n
}

// Free releases the cached tensors (of backend be) and empties the cache.
func (c *EvalCache) Free(be tensor.Backend) {
	for _, b := range c.batches {
		be.Free(b.label)
		if !b.dense.IsZero() {
			be.Free(b.dense)
		}
		for k := range b.keys {
			be.Free(b.keys[k])
			be.Free(b.offs[k])
		}
	}
	c.batches, c.Complete, c.full = nil, false, nil
}

// CacheBytes bounds the memory of batches cached batches of f: labels,
// dense values, and each sparse input's keys (at its capacity) and CSR.
func CacheBytes(f *Feeder, batches int) float64 {
	per := 4 * float64(f.batch) * float64(f.LabelDim+f.DenseDim)
	for k, in := range f.Inputs {
		per += 8*float64(f.CapKeys[k]) + 4*float64(in.Offsets.Len())
	}
	return float64(batches) * per
}
