package parquet

import (
	"math/bits"
	"sync"

	"github.com/ctrkit/ctrkit/formats"
)

// poolAllocator is the memory.Allocator given to arrow-go's column readers:
// it recycles the page and decompression buffers that a column chunk reader
// frees on Close, so decoding a row group does not allocate them anew.
// Buffers come in power-of-two capacities, one free list per size. The free
// lists hold at most limit bytes (a buffer freed beyond that is left to the
// garbage collector); unlike a sync.Pool they survive garbage collections,
// so the page buffers of every open column chunk (all columns of a row group
// per worker) are not allocated and faulted in again after each one.
type poolAllocator struct {
	mu    sync.Mutex
	free  [48][][]byte // free[c] holds buffers of capacity 1<<c
	held  int          // bytes in free
	limit int
	slab  []byte // the rest of a huge page that new buffers are cut from
	// rec, when the reader's Options.Alloc is a formats.Recycler, keeps
	// the free lists of a closed reader for the next (instead of spare).
	rec *formats.Recycler
}

// poolKey is the formats.Recycler key of buffers of one size class.
type poolKey int

// minSlabClass is the size class from which new buffers are cut from huge
// pages (see makeBuf): snappy files have a decompressed page buffer (128
// KiB as ctrkit writes them, 1 MiB as pyarrow does) and every streamed
// column a window per selected column and worker, most of a fresh read's
// page faults after the row group buffers.
const minSlabClass = 16

// spare holds the pooled buffers of closed readers, for the next reader
// (one reader per epoch is common); the garbage collector empties it.
var spare [48]sync.Pool // *[]byte of capacity 1<<c

const minPooled = 6 // buffers under 64 bytes are not pooled

func sizeClass(n int) int { return bits.Len(uint(n - 1)) }

// Allocate returns n bytes. A recycled buffer is not cleared: arrow-go's
// column reading path writes every byte of the buffers it allocates before
// reading them (page bodies are read or decompressed to their full,
// length-checked size), and clearing the page buffers of every column chunk
// cost more memory bandwidth than the decoded data itself.
func (p *poolAllocator) Allocate(n int) []byte {
	if n <= 0 {
		return []byte{}
	}
	c := max(sizeClass(n), minPooled)
	if c >= len(p.free) {
		return make([]byte, n)
	}
	p.mu.Lock()
	if k := len(p.free[c]); k > 0 {
		b := p.free[c][k-1]
		p.free[c][k-1] = nil
		p.free[c] = p.free[c][:k-1]
		p.held -= cap(b)
		p.mu.Unlock()
		return b[:n]
	}
	p.mu.Unlock()
	var v any
	if p.rec != nil {
		v = p.rec.Take(poolKey(c))
	} else {
		v = spare[c].Get()
	}
	if v != nil {
		return (*v.(*[]byte))[:n]
	}
	if c < minSlabClass {
		return make([]byte, n, 1<<c)
	}
	if 1<<c >= hugePage {
		return makeBuf[byte](1 << c)[:n]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.slab) < 1<<c {
		p.slab = makeBuf[byte](hugePage)
	}
	b := p.slab[: n : 1<<c]
	p.slab = p.slab[1<<c:]
	return b
}

// release hands the free lists to spare; called when no column reader is
// open any more.
func (p *poolAllocator) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.free {
		for i, b := range p.free[c] {
			if p.rec != nil {
				p.rec.Keep(poolKey(c), &b)
			} else {
				spare[c].Put(&b)
			}
			p.free[c][i] = nil
		}
		p.free[c] = nil
	}
	p.held = 0
}

// Reallocate grows b to n bytes, keeping its contents.
func (p *poolAllocator) Reallocate(n int, b []byte) []byte {
	if n <= cap(b) {
		old := len(b)
		b = b[:n]
		if n > old {
			clear(b[old:])
		}
		return b
	}
	nb := p.Allocate(n)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free returns b to its free list.
func (p *poolAllocator) Free(b []byte) {
	c := cap(b)
	if c < 1<<minPooled || c&(c-1) != 0 {
		return
	}
	k := sizeClass(c)
	if k >= len(p.free) {
		return
	}
	p.mu.Lock()
	if p.held+c <= p.limit {
		p.free[k] = append(p.free[k], b[:c])
		p.held += c
	}
	p.mu.Unlock()
}
