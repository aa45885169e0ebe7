package tensor

import "testing"

func TestTensorHandle(t *testing.T) {
	var z Tensor
	if !z.IsZero() || z.Len() != 0 {
		t.Fatal("zero tensor")
	}
	x := Tensor{DType: Float32, Shape: []int{4, 3, 2}, Buf: fakeStorage(24)}
	if x.Rows() != 4 || x.Cols() != 6 || x.Len() != 24 || x.String() != "float32[4,3,2]" {
		t.Fatalf("%v rows %d cols %d", x, x.Rows(), x.Cols())
	}
	if r := x.Reshape(8, 3); r.Buf != x.Buf || r.Cols() != 3 {
		t.Fatal("reshape shares storage")
	}
	if p := x.Prefix(5); p.Len() != 5 || p.Buf != x.Buf {
		t.Fatal("prefix")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("reshape to another count must panic")
		}
	}()
	x.Reshape(5, 5)
}

type fakeStorage int

func (f fakeStorage) Len() int { return int(f) }

func TestHashSlotAndUniform(t *testing.T) {
	seen := map[uint64]bool{}
	for k := int64(0); k < 1000; k++ {
		s := HashSlot(k, 1<<20-1)
		if s >= 1<<20 {
			t.Fatal("slot out of range")
		}
		seen[s] = true
	}
	if len(seen) < 990 {
		t.Fatalf("consecutive keys collide too much: %d distinct slots", len(seen))
	}
	var sum float64
	for i := 0; i < 4000; i++ {
		u := PhiloxUniform(1, 2, i)
		if u < 0 || u >= 1 {
			t.Fatalf("uniform %v", u)
		}
		sum += float64(u)
	}
	if m := sum / 4000; m < 0.48 || m > 0.52 {
		t.Fatalf("mean %v", m)
	}
	if Float64.Size() != 8 || Uint32.Size() != 4 || !Float32.IsFloat() || Int64.IsFloat() {
		t.Fatal("dtype properties")
	}
}
