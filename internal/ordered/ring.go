// Package ordered provides Ring, the one ordered-output pattern of ctrkit's
// parallel readers: an ordered, bounded, cancellable sequence of slots.
//
// Sequence numbers 0, 1, 2, … pass through a ring of R slots; number seq
// lives in slot seq mod R. A producer that holds number seq waits for its
// turn (Acquire: the consumer is done with seq−R), fills the slot and
// publishes it (Publish, with the error it met, if any); a consumer takes
// the numbers in order (Take), each waiting only for its own slot, and
// gives the slot to seq+R (Release). So producers run at most R numbers
// ahead of the oldest one not yet released, whatever order they finish in,
// and nothing is allocated per number.
//
//	producer g:  Acquire(g) → fill *slot → Publish(g, err)
//	consumer:    Take(g) → use *slot → Release(g)      (g = 0, 1, …)
//
// End(n) says no number ≥ n will be published (Take(n) is io.EOF); Cancel
// wakes every waiter (Acquire reports false, Take the cancel error). The
// package imports nothing of ctrkit; asyncio's completion table and
// formats/raw's decode pipelines are Rings.
package ordered

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// ErrCanceled is what Take returns after Cancel(nil).
var ErrCanceled = errors.New("ordered ring canceled")

// Ring is an ordered, bounded, cancellable sequence of slots holding values
// of type T. The value of a slot belongs to the producer of its sequence
// number from Acquire to Publish and to the consumer from Take to Release;
// the owner may read and write it without a lock. Every method is safe for
// concurrent use; each sequence number must be acquired by one producer and
// taken by one consumer.
type Ring[T any] struct {
	slots    []slot[T]
	end      atomic.Int64 // numbers published at most, -1 before End
	mu       sync.Mutex   // serializes Cancel
	canceled atomic.Bool  // set by Cancel after cause
	cause    error        // written once, before canceled is set
}

type slot[T any] struct {
	mu    sync.Mutex // guards turn, ready, err
	cond  sync.Cond
	turn  int64 // the sequence number the slot serves now
	ready bool  // turn is published
	err   error // what the producer of turn met
	val   T
}

// New returns a ring of n slots (n ≥ 1) for the numbers 0, 1, …: slot i
// serves number i first.
func New[T any](n int) *Ring[T] {
	if n < 1 {
		n = 1
	}
	r := &Ring[T]{slots: make([]slot[T], n)}
	for i := range r.slots {
		s := &r.slots[i]
		s.turn = int64(i)
		s.cond.L = &s.mu
	}
	r.end.Store(-1)
	return r
}

// Len returns the number of slots.
func (r *Ring[T]) Len() int { return len(r.slots) }

// Value returns the value of slot i (0 ≤ i < Len), to set up or tear down
// what the slots hold while no producer or consumer runs.
func (r *Ring[T]) Value(i int) *T { return &r.slots[i].val }

func (r *Ring[T]) slot(seq int64) *slot[T] { return &r.slots[seq%int64(len(r.slots))] }

// Acquire waits until seq's slot serves seq (the consumer released seq−R)
// and returns its value for the producer to fill; false once the ring is
// canceled.
func (r *Ring[T]) Acquire(seq int64) (*T, bool) {
	s := r.slot(seq)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.turn != seq || s.ready {
		if r.canceled.Load() {
			return nil, false
		}
		s.cond.Wait()
	}
	if r.canceled.Load() {
		return nil, false
	}
	return &s.val, true
}

// Publish hands the filled slot of seq, and err (nil when it was filled
// without one), to the consumer.
func (r *Ring[T]) Publish(seq int64, err error) {
	s := r.slot(seq)
	s.mu.Lock()
	s.ready, s.err = true, err
	s.cond.Broadcast()
	s.mu.Unlock()
}

// Take waits for seq to be published and returns its value and the error
// its producer published. It returns io.EOF when End(n) came with seq ≥ n
// and seq was not published, and the cancel error once the ring is
// canceled. After a nil or a published error the slot stays the caller's
// until Release(seq).
func (r *Ring[T]) Take(seq int64) (*T, error) {
	if r.canceled.Load() {
		return nil, r.cause
	}
	s := r.slot(seq)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.turn != seq || !s.ready {
		if r.canceled.Load() {
			return nil, r.cause
		}
		if e := r.end.Load(); e >= 0 && seq >= e {
			return nil, io.EOF
		}
		s.cond.Wait()
	}
	return &s.val, s.err
}

// Release gives the slot of seq, taken by Take, to seq+R.
func (r *Ring[T]) Release(seq int64) {
	s := r.slot(seq)
	s.mu.Lock()
	if s.turn == seq && s.ready {
		s.turn, s.ready, s.err = seq+int64(len(r.slots)), false, nil
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// End says that no number ≥ n will be published: a Take of one returns
// io.EOF (numbers below n still come). Only the first End counts.
func (r *Ring[T]) End(n int64) {
	if r.end.CompareAndSwap(-1, max(n, 0)) {
		r.wakeAll()
	}
}

// Cancel wakes every waiter: Acquire returns false and Take returns err
// (ErrCanceled when err is nil), now and from then on. Only the first
// Cancel counts.
func (r *Ring[T]) Cancel(err error) {
	if err == nil {
		err = ErrCanceled
	}
	r.mu.Lock()
	if !r.canceled.Load() {
		r.cause = err
		r.canceled.Store(true)
	}
	r.mu.Unlock()
	r.wakeAll()
}

// Canceled reports whether Cancel was called.
func (r *Ring[T]) Canceled() bool { return r.canceled.Load() }

// wakeAll wakes every waiter after end or canceled changed. Taking each
// slot's lock orders the change before any waiter's next check.
func (r *Ring[T]) wakeAll() {
	for i := range r.slots {
		s := &r.slots[i]
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}
