package formats

import "testing"

// tallyAlloc counts the buffers it hands out and gets back.
type tallyAlloc struct{ allocs, frees int }

func (a *tallyAlloc) Alloc(n int) ([]byte, error) { a.allocs++; return make([]byte, n), nil }
func (a *tallyAlloc) Free([]byte)                 { a.frees++ }

// TestRecycler: buffers freed to a Recycler serve later Allocs of their
// length without the allocator below; it keeps no more bytes than were in
// use at once; Keep/Take hold values by key; Drain frees what it kept.
func TestRecycler(t *testing.T) {
	base := &tallyAlloc{}
	r := NewRecycler(base)
	s := NewSchema(1, 2, []int{1, 1}, nil, KeyI64)
	for epoch := 0; epoch < 3; epoch++ { // a reader's batch per epoch
		b, err := NewBatch(&s, 100, r)
		if err != nil {
			t.Fatal(err)
		}
		b.Free()
	}
	if base.allocs != 4 || base.frees != 0 {
		t.Fatalf("3 batches of 4 buffers: %d allocations, %d frees below, want 4 and 0", base.allocs, base.frees)
	}
	want := int64(4*100 + 4*200 + 4*201 + 8*200)
	if r.Held() != want {
		t.Fatalf("held %d bytes, want %d", r.Held(), want)
	}
	// A buffer that would make the kept bytes exceed the most in use at
	// once goes back to the allocator.
	x, _ := r.Alloc(1 << 20) // the peak becomes 1 MiB
	r.Free(x)                // 1 MiB + want kept > 1 MiB
	if r.Held() != want || base.frees != 1 {
		t.Fatalf("over the peak: held %d, frees %d", r.Held(), base.frees)
	}
	b1, _ := NewBatch(&s, 100, r) // kept buffers, while a new 1 MiB is in use
	x, _ = r.Alloc(1 << 20)
	b1.Free()
	r.Free(x) // now 1 MiB + want were in use at once
	if r.Held() != want+1<<20 || base.frees != 1 {
		t.Fatalf("within the peak: held %d, frees %d", r.Held(), base.frees)
	}
	type key struct{}
	r.Keep(key{}, 7)
	if v := r.Take(key{}); v != 7 || r.Take(key{}) != nil || r.Take(1) != nil {
		t.Fatalf("Take: %v", v)
	}
	r.Keep(key{}, 8)
	r.Drain()
	if r.Held() != 0 || base.frees != 1+5 || r.Take(key{}) != nil {
		t.Fatalf("after Drain: held %d, frees %d", r.Held(), base.frees)
	}
	if b, err := NewBatch(&s, 100, r); err != nil || base.allocs != 4+2+4 {
		t.Fatalf("after Drain: %v, %d allocations", err, base.allocs)
	} else {
		b.Free()
	}
}

// TestRecyclerShared checks that Shared makes a key's value once, gives
// every caller that one, keeps it through Drain, and keeps keys apart.
func TestRecyclerShared(t *testing.T) {
	r := NewRecycler(nil)
	made := 0
	mk := func() any { made++; return make(chan struct{}, 3) }
	a := r.Shared("slots", mk).(chan struct{})
	b := r.Shared("slots", mk).(chan struct{})
	r.Drain()
	c := r.Shared("slots", mk).(chan struct{})
	if a != b || a != c || made != 1 {
		t.Fatalf("Shared made %d values; same value each call: %v", made, a == b && b == c)
	}
	if d := r.Shared("other", mk).(chan struct{}); d == a || made != 2 {
		t.Fatal("two keys share a value")
	}
}
