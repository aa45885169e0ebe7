package ordered

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRingOrderAndBound runs producers that finish in any order and one
// consumer: every number comes out in order with its own value, and no
// producer ever holds a number R or more past the oldest one not released.
func TestRingOrderAndBound(t *testing.T) {
	for _, c := range []struct{ slots, producers int }{{1, 1}, {1, 3}, {3, 2}, {4, 8}, {7, 3}} {
		const total = 2000
		r := New[int64](c.slots)
		var claimed, released atomic.Int64
		var bad atomic.Int64 // a number acquired too early, +1
		var wg sync.WaitGroup
		for p := 0; p < c.producers; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					g := claimed.Add(1) - 1
					if g >= total {
						return
					}
					v, ok := r.Acquire(g)
					if !ok {
						t.Error("Acquire canceled")
						return
					}
					if g >= released.Load()+int64(c.slots) {
						bad.CompareAndSwap(0, g+1)
					}
					if g%3 == 0 {
						runtime.Gosched()
					}
					*v = g * 10
					r.Publish(g, nil)
				}
			}()
		}
		for g := int64(0); g < total; g++ {
			v, err := r.Take(g)
			if err != nil || *v != g*10 {
				t.Fatalf("%+v: Take(%d) = %v, %v", c, g, *v, err)
			}
			released.Add(1) // before Release: Acquire(g+R) must see it
			r.Release(g)
		}
		wg.Wait()
		if b := bad.Load(); b != 0 {
			t.Fatalf("%+v: number %d acquired with fewer than %d released before it", c, b-1, b-int64(c.slots))
		}
	}
}

// TestRingBlocksAtCapacity: with R slots filled and none taken, Acquire(R)
// returns only after Release(0).
func TestRingBlocksAtCapacity(t *testing.T) {
	const R = 3
	r := New[int](R)
	for g := int64(0); g < R; g++ {
		if _, ok := r.Acquire(g); !ok {
			t.Fatal(g)
		}
		r.Publish(g, nil)
	}
	var released atomic.Bool
	got := make(chan bool)
	go func() {
		_, ok := r.Acquire(R)
		got <- ok && released.Load()
	}()
	if _, err := r.Take(0); err != nil {
		t.Fatal(err)
	}
	released.Store(true)
	r.Release(0)
	if !<-got {
		t.Fatal("Acquire(R) returned before Release(0)")
	}
}

// TestRingErrorAndEnd: a published error reaches Take with its value, in
// order; after End(n) the numbers below n still come and Take(n) is io.EOF.
func TestRingErrorAndEnd(t *testing.T) {
	r := New[string](4)
	boom := errors.New("boom")
	for g, v := range []string{"a", "b", "c"} {
		p, _ := r.Acquire(int64(g))
		*p = v
		var err error
		if g == 1 {
			err = boom
		}
		r.Publish(int64(g), err)
	}
	r.End(3)
	r.End(1) // only the first End counts
	if v, err := r.Take(0); err != nil || *v != "a" {
		t.Fatalf("Take(0) = %v, %v", v, err)
	}
	r.Release(0)
	if v, err := r.Take(1); err != boom || *v != "b" {
		t.Fatalf("Take(1) = %v, %v; want b, boom", v, err)
	}
	r.Release(1)
	if v, err := r.Take(2); err != nil || *v != "c" {
		t.Fatalf("Take(2) = %v, %v", v, err)
	}
	r.Release(2)
	if _, err := r.Take(3); err != io.EOF {
		t.Fatalf("Take(3) after End(3) = %v, want io.EOF", err)
	}
	// A consumer already waiting for a number past the end wakes at End.
	r2 := New[int](2)
	done := make(chan error)
	go func() { _, err := r2.Take(5); done <- err }()
	r2.End(2)
	if err := <-done; err != io.EOF {
		t.Fatalf("waiting Take after End = %v", err)
	}
}

// TestRingCancel: Cancel wakes producers waiting for their turn and
// consumers waiting for a number, which get the cancel error, and every
// goroutine ends (none is left behind).
func TestRingCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	r := New[int](2)
	stop := errors.New("closed")
	for g := int64(0); g < 2; g++ { // fill the ring: later Acquires wait
		r.Acquire(g)
		r.Publish(g, nil)
	}
	var wg sync.WaitGroup
	results := make(chan error, 16)
	for g := int64(2); g < 8; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, ok := r.Acquire(g); ok {
				results <- errors.New("Acquire succeeded on a full ring")
			}
		}()
		go func() {
			defer wg.Done()
			_, err := r.Take(g + 10) // never published
			if !errors.Is(err, stop) {
				results <- err
			}
		}()
	}
	r.Cancel(stop)
	r.Cancel(errors.New("second")) // only the first counts
	wg.Wait()
	close(results)
	for err := range results {
		t.Error(err)
	}
	if _, err := r.Take(0); err != stop {
		t.Errorf("Take after Cancel = %v, want the cancel error", err)
	}
	if _, ok := r.Acquire(100); ok || !r.Canceled() {
		t.Error("Acquire after Cancel succeeded")
	}
	for i := 0; i < 100000 && runtime.NumGoroutine() > before; i++ {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines left after Cancel (%d before)", n, before)
	}
	if _, err := func() (*int, error) { c := New[int](1); c.Cancel(nil); return c.Take(0) }(); err != ErrCanceled {
		t.Errorf("Cancel(nil): Take = %v, want ErrCanceled", err)
	}
}
