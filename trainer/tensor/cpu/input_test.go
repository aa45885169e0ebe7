package cpu

import (
	"errors"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestSplitInputs checks the reference by hand: two samples over three
// slots (slot 1 two-hot), split into a one-slot wide input and a two-slot
// deep input, keys widened and offset, padded to a batch of three.
func TestSplitInputs(t *testing.T) {
	be, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := be.Alloc(tensor.Uint32, 7)
	be.Upload(keys, []uint32{1, 2, 3, 0, 4, 5, 6})
	// sample 0: slot0 {1}, slot1 {2,3}, slot2 {0}; sample 1: {4}, {5}, {6}
	off := be.Alloc(tensor.Int32, 7)
	be.Upload(off, []int32{0, 1, 3, 4, 5, 6, 7})
	add := be.Alloc(tensor.Int64, 3)
	be.Upload(add, []int64{0, 10, 20})
	size := be.Alloc(tensor.Int64, 3)
	be.Upload(size, []int64{0, 10, 10})
	inputs := []tensor.SparseSlots{{First: 0, Slots: 1}, {First: 1, Slots: 2}}
	dk := []tensor.Tensor{be.Alloc(tensor.Int64, 3), be.Alloc(tensor.Int64, 6)}
	do := []tensor.Tensor{be.Alloc(tensor.Int32, 4), be.Alloc(tensor.Int32, 7)}
	be.SplitInputs(dk, do, keys, off, add, size, inputs, 2)
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		keys []int64
		off  []int32
	}{
		{[]int64{1, 4, 0}, []int32{0, 1, 2, 2}},
		{[]int64{12, 13, 20, 15, 26, 0}, []int32{0, 2, 3, 4, 5, 5, 5}},
	}
	for k, w := range want {
		if got := Data[int64](dk[k]); !slices.Equal(got, w.keys) {
			t.Errorf("input %d keys %v, want %v", k, got, w.keys)
		}
		if got := Data[int32](do[k]); !slices.Equal(got, w.off) {
			t.Errorf("input %d offsets %v, want %v", k, got, w.off)
		}
	}
	if got := tensor.InputKeyCounts(nil, Data[int32](off), 2, 3, inputs); !slices.Equal(got, []int{2, 5}) {
		t.Errorf("key counts %v", got)
	}

	// Slot 2's size is 10: key 12 is ErrRange; a decreasing CSR is ErrShape.
	be.Upload(keys, []uint32{1, 2, 3, 12, 4, 5, 6})
	be.SplitInputs(dk, do, keys, off, add, size, inputs, 2)
	if err := be.Err(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("key outside its slot: %v", err)
	}
	be.Reset()
	be.Upload(off, []int32{0, 1, 3, 2, 5, 6, 7})
	be.SplitInputs(dk, do, keys, off, add, size, inputs, 2)
	if err := be.Err(); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("decreasing offsets: %v", err)
	}
}
