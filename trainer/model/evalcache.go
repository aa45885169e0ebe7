package model

import (
	"errors"
	"fmt"
	"io"

	"github.com/ctrkit/ctrkit/formats"
)

// evalCache is HugeCTR's cache_eval_data: the first limit evaluation
// batches are kept in host memory after the first evaluation reads them,
// and later evaluations replay them instead of reading and decoding the
// files again. Batches past the cache are read from a fresh reader that
// skips the cached ones.
type evalCache struct {
	open    func() (formats.Reader, error)
	limit   int
	batches []cachedBatch
	atEOF   bool // the cache holds the whole data
	schema  formats.Schema
}

type cachedBatch struct {
	n       int
	labels  []float32
	dense   []float32
	offsets []int32
	keys32  []uint32
	keys64  []int64
}

func newEvalCache(open func() (formats.Reader, error), limit int) *evalCache {
	return &evalCache{open: open, limit: limit}
}

// Open returns a reader that replays the cache, then reads on.
func (c *evalCache) Open() (formats.Reader, error) {
	var r formats.Reader
	if len(c.batches) == 0 {
		var err error
		if r, err = c.open(); err != nil {
			return nil, err
		}
		c.schema = r.Schema().Clone()
	}
	return &cacheReader{c: c, r: r}, nil
}

// Bytes is the memory the cached batches hold.
func (c *evalCache) Bytes() int64 {
	var n int64
	for _, b := range c.batches {
		n += 4*int64(len(b.labels)+len(b.dense)+len(b.offsets)+len(b.keys32)) + 8*int64(len(b.keys64))
	}
	return n
}

type cacheReader struct {
	c   *evalCache
	r   formats.Reader // nil while replaying
	pos int            // batches handed out
}

func (cr *cacheReader) Schema() *formats.Schema {
	if cr.r != nil {
		return cr.r.Schema()
	}
	return &cr.c.schema
}

func (cr *cacheReader) Read(b *formats.Batch) (int, error) {
	c := cr.c
	if cr.r == nil && cr.pos < len(c.batches) {
		cb := &c.batches[cr.pos]
		cr.pos++
		if err := b.ReserveKeys(len(cb.keys32) + len(cb.keys64)); err != nil {
			return 0, err
		}
		labels, dense, offsets, k32, k64 := b.Full()
		copy(labels, cb.labels)
		copy(dense, cb.dense)
		copy(offsets, cb.offsets)
		copy(k32, cb.keys32)
		copy(k64, cb.keys64)
		b.SetLen(cb.n)
		if cr.pos == len(c.batches) && c.atEOF {
			return cb.n, io.EOF
		}
		return cb.n, nil
	}
	if c.atEOF {
		b.SetLen(0)
		return 0, io.EOF
	}
	if cr.r == nil {
		// Past the cache: read on from a fresh reader.
		r, err := c.open()
		if err != nil {
			return 0, err
		}
		cr.r = r
		for range cr.pos {
			if _, err := r.Read(b); err != nil {
				if errors.Is(err, io.EOF) {
					b.SetLen(0)
				}
				return 0, err
			}
		}
	}
	n, err := cr.r.Read(b)
	if cr.pos == len(c.batches) && (err == nil || errors.Is(err, io.EOF)) {
		kept := n == 0
		if n > 0 && len(c.batches) < c.limit {
			c.batches = append(c.batches, copyBatch(b))
			kept = true
		}
		c.atEOF = errors.Is(err, io.EOF) && kept
	}
	cr.pos++
	return n, err
}

func (cr *cacheReader) Close() error {
	if cr.r != nil {
		return cr.r.Close()
	}
	return nil
}

func copyBatch(b *formats.Batch) cachedBatch {
	return cachedBatch{n: b.N, labels: append([]float32(nil), b.Labels...), dense: append([]float32(nil), b.Dense...),
		offsets: append([]int32(nil), b.Offsets...), keys32: append([]uint32(nil), b.Keys32...),
		keys64: append([]int64(nil), b.Keys64...)}
}

// checkEvalCache refuses a cache_eval_data whose batches (as many as an
// evaluation reads, evalSamples; 0: all) would take more than half the
// memory the process may use.
func checkEvalCache(m *Model, batches int, evalSamples int64) error {
	if evalSamples > 0 {
		batches = int(min(int64(batches), (evalSamples+int64(m.batch)-1)/int64(m.batch)))
	}
	input, _ := batchBytes(m.Graph, m.Info, m.batch)
	need := float64(batches) * input / 5 // one copy of each batch
	limit, what := MemoryLimit()
	if limit > 0 && need > float64(limit)/2 {
		return fmt.Errorf("cache_eval_data %d: caching %d evaluation batches of %d needs %s, more than half the %s this process may use (%s)",
			batches, batches, m.batch, humanBytes(need), humanBytes(float64(limit)), what)
	}
	return nil
}
