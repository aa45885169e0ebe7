package formats

import (
	"math"
	"testing"
	"unsafe"
)

type countingAlloc struct {
	HeapAllocator
	live int
}

func (a *countingAlloc) Alloc(n int) ([]byte, error) { a.live++; return a.HeapAllocator.Alloc(n) }
func (a *countingAlloc) Free([]byte)                 { a.live-- }

func TestBatchAppendGrowFree(t *testing.T) {
	for _, kt := range []KeyType{KeyU32, KeyI64} {
		s := NewSchema(1, 2, []int{0, 3}, nil, kt) // slot 0 unbounded → growable keys
		a := &countingAlloc{}
		b, err := NewBatch(&s, 4, a)
		if err != nil {
			t.Fatal(err)
		}
		if uintptr(unsafe.Pointer(&b.Labels[:1][0]))%64 != 0 {
			t.Fatal("labels not 64-byte aligned")
		}
		if b.KeyCap() != 4*2 {
			t.Fatalf("key cap %d, want one per slot and sample", b.KeyCap())
		}
		samples := [][][]int64{{{1, 2, 3, 4, 5}, {6}}, {{}, {7, 8, 9}}, {{10}, {}}}
		for i, k := range samples {
			if err := b.AppendSample([]float32{float32(i)}, []float32{1, 2}, k); err != nil {
				t.Fatal(err)
			}
		}
		if b.N != 3 || b.NumKeys() != 10 || len(b.Labels) != 3 || len(b.Dense) != 6 || len(b.Offsets) != 7 {
			t.Fatalf("N=%d keys=%d lens %d %d %d", b.N, b.NumKeys(), len(b.Labels), len(b.Dense), len(b.Offsets))
		}
		for i, k := range samples {
			for s := range k {
				lo, hi := b.Row(i, s)
				if hi-lo != len(k[s]) {
					t.Fatalf("sample %d slot %d nnz %d", i, s, hi-lo)
				}
				for j := lo; j < hi; j++ {
					if b.Key(j) != k[s][j-lo] {
						t.Fatalf("key mismatch at %d", j)
					}
				}
			}
		}
		c, _ := NewBatch(&s, 4, nil)
		for i := 0; i < b.N; i++ {
			if err := c.CopySample(b, i); err != nil {
				t.Fatal(err)
			}
		}
		if c.NumKeys() != b.NumKeys() || c.Key(9) != 10 {
			t.Fatal("CopySample lost keys")
		}
		if err := b.AppendSample([]float32{0}, []float32{0, 0}, [][]int64{{}, {}}); err != nil {
			t.Fatal(err)
		}
		if err := b.AppendSample([]float32{0}, []float32{0, 0}, [][]int64{{}, {}}); err == nil {
			t.Fatal("append past capacity succeeded")
		}
		b.SetLen(0)
		if b.NumKeys() != 0 || len(b.Keys32)+len(b.Keys64) != 0 {
			t.Fatal("SetLen(0) kept keys")
		}
		b.Free()
		if a.live != 0 {
			t.Fatalf("%d buffers not freed", a.live)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	s := NewSchema(1, 0, []int{1, 1}, nil, KeyU32)
	for _, tc := range []struct {
		sizes []int64
		ok    bool
	}{
		{nil, true}, {[]int64{3, 4}, true}, {[]int64{3}, false}, {[]int64{3, 0}, false},
		{[]int64{1 << 31, 1 << 31}, true}, {[]int64{1 << 31, 1<<31 + 1}, false},
	} {
		o := Options{SlotSizeArray: tc.sizes}
		if err := o.Validate(&s); (err == nil) != tc.ok {
			t.Errorf("sizes %v: err = %v", tc.sizes, err)
		}
	}
	if got := SlotOffsets([]int64{3, 4, 5}); got[0] != 0 || got[1] != 3 || got[2] != 7 {
		t.Fatalf("offsets %v", got)
	}
}

func TestDenseFromInt32(t *testing.T) {
	for _, x := range []int32{-5, -1, 0, 1, 3, 65535, 65536, 1 << 30} {
		want := float32(0)
		if x > 0 {
			want = float32(math.Log(float64(x) + 1))
		}
		if got := DenseFromInt32(x); got != want {
			t.Errorf("DenseFromInt32(%d) = %v want %v", x, got, want)
		}
	}
}

func TestInt32FromDense(t *testing.T) {
	for x := int32(0); x < denseTableLen; x++ {
		if got, ok := Int32FromDense(DenseFromInt32(x)); !ok || got != x {
			t.Fatalf("Int32FromDense(DenseFromInt32(%d)) = %d, %v", x, got, ok)
		}
	}
	for _, v := range []float32{-1, 0.5, 1e-9, 30, float32(math.NaN())} {
		if x, ok := Int32FromDense(v); ok {
			t.Errorf("Int32FromDense(%v) = %d, want no preimage", v, x)
		}
	}
}
