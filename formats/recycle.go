package formats

import "sync"

// Recycler is an Allocator that keeps the buffers freed to it for later
// Allocs of the same size instead of handing them back to the allocator it
// wraps, and keeps readers' own decode buffers (Keep, Take) the same way.
// Training opens a reader per epoch (and one per evaluation): given the
// same Recycler as Options.Alloc, each takes the batches and buffers the
// previous one left, already allocated, faulted in or pinned, instead of
// making them anew. It keeps at most as many bytes as were in use at once
// (allocated and not freed); Drain gives them back. Safe for concurrent
// use.
type Recycler struct {
	base Allocator
	mu   sync.Mutex
	free map[int][][]byte // by length
	kept map[any][]any    // Keep's values, by key
	// shared holds Shared's values, by key: used by many readers at once
	// and kept through Drain.
	shared map[any]any
	live   int64 // bytes allocated through r and not freed to it
	peak   int64 // the most live bytes so far
	held   int64 // bytes in free
}

// NewRecycler returns a Recycler over a (nil: the Go heap).
func NewRecycler(a Allocator) *Recycler {
	if a == nil {
		a = HeapAllocator{}
	}
	return &Recycler{base: a, free: map[int][][]byte{}, kept: map[any][]any{}, shared: map[any]any{}}
}

// Shared returns the one value of key that every user of r shares at
// once, made by mk on the first call. Readers of successive passes of a
// training run (all given its Recycler) share their decoding slots this
// way, so that the next pass's reader, opened ahead, and the current one
// together never decode on more cores than one of them would.
func (r *Recycler) Shared(key any, mk func() any) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.shared[key]
	if !ok {
		v = mk()
		r.shared[key] = v
	}
	return v
}

// Alloc implements Allocator: a kept buffer of n bytes, or a new one.
func (r *Recycler) Alloc(n int) ([]byte, error) {
	r.mu.Lock()
	if l := r.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		r.free[n] = l[:len(l)-1]
		r.held -= int64(n)
		r.use(int64(n))
		r.mu.Unlock()
		return b, nil
	}
	r.mu.Unlock()
	b, err := r.base.Alloc(n)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.use(int64(n))
	r.mu.Unlock()
	return b, nil
}

func (r *Recycler) use(n int64) {
	r.live += n
	r.peak = max(r.peak, r.live)
}

// Free implements Allocator: b is kept for an Alloc of its length while
// the kept bytes stay under the most ever in use, else freed.
func (r *Recycler) Free(b []byte) {
	n := int64(len(b))
	r.mu.Lock()
	r.live = max(r.live-n, 0)
	if r.held+n <= r.peak {
		r.free[len(b)] = append(r.free[len(b)], b)
		r.held += n
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.base.Free(b)
}

// Keep holds v, a reader's own buffer, for Take(key); a reader keeps at
// Close what it would take at the next open (bounded by what it made).
func (r *Recycler) Keep(key, v any) {
	r.mu.Lock()
	r.kept[key] = append(r.kept[key], v)
	r.mu.Unlock()
}

// Take returns a value kept with key, or nil.
func (r *Recycler) Take(key any) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.kept[key]
	if len(l) == 0 {
		return nil
	}
	v := l[len(l)-1]
	l[len(l)-1] = nil
	r.kept[key] = l[:len(l)-1]
	return v
}

// Releaser is a kept value (Keep) that holds memory allocated through the
// Recycler: Drain hands it to the wrapped allocator with ReleaseTo before
// dropping the value.
type Releaser interface {
	ReleaseTo(a Allocator)
}

// Drain frees the kept buffers with the wrapped allocator and drops the
// kept values (releasing a Releaser's memory first); the Recycler stays
// usable.
func (r *Recycler) Drain() {
	r.mu.Lock()
	free, kept := r.free, r.kept
	r.free, r.kept, r.held = map[int][][]byte{}, map[any][]any{}, 0
	r.mu.Unlock()
	for _, l := range free {
		for _, b := range l {
			r.base.Free(b)
		}
	}
	for _, l := range kept {
		for _, v := range l {
			if rl, ok := v.(Releaser); ok {
				rl.ReleaseTo(r.base)
			}
		}
	}
}

// Held returns the bytes of batch buffers kept for the next Alloc.
func (r *Recycler) Held() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}
