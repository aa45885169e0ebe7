package parquet

import (
	"math/bits"
	"sync"
)

// poolAllocator is the memory.Allocator given to arrow-go's column readers:
// it recycles the page and decompression buffers that a column chunk reader
// frees on Close, so decoding a row group does not allocate them anew.
// Buffers come in power-of-two capacities, one sync.Pool per size.
type poolAllocator struct {
	pools [48]sync.Pool // pools[c] holds *[]byte of capacity 1<<c
}

const minPooled = 6 // buffers under 64 bytes are not pooled

func sizeClass(n int) int { return bits.Len(uint(n - 1)) }

// Allocate returns n zeroed bytes.
func (p *poolAllocator) Allocate(n int) []byte {
	if n <= 0 {
		return []byte{}
	}
	c := max(sizeClass(n), minPooled)
	if c >= len(p.pools) {
		return make([]byte, n)
	}
	if v := p.pools[c].Get(); v != nil {
		b := (*v.(*[]byte))[:n]
		clear(b)
		return b
	}
	return make([]byte, n, 1<<c)
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

// Free returns b to its pool.
func (p *poolAllocator) Free(b []byte) {
	c := cap(b)
	if c < 1<<minPooled || c&(c-1) != 0 {
		return
	}
	k := sizeClass(c)
	if k >= len(p.pools) {
		return
	}
	b = b[:c]
	p.pools[k].Put(&b)
}
