package cpu

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// TestSplitOneHot checks SplitOneHot against SplitInputs on one-hot
// batches: layouts of one, two and three inputs, 32- and 64-bit keys, with
// and without slot offsets and checks, short batches padded to B; and a key
// outside its slot (ErrRange) and too few keys (ErrShape).
func TestSplitOneHot(t *testing.T) {
	be, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(20, 1))
	sizes := []int64{10, 1, 1000, 50000, 3}
	S := len(sizes)
	for _, inputs := range [][]tensor.SparseSlots{
		{{First: 0, Slots: S}},
		{{First: 0, Slots: 1}, {First: 1, Slots: S - 1}},
		{{First: 0, Slots: 2}, {First: 2, Slots: 1}, {First: 3, Slots: 2}},
	} {
		for _, kt := range []tensor.DType{tensor.Uint32, tensor.Int64} {
			for _, checked := range []bool{false, true} {
				for _, c := range []struct{ n, B int }{{1, 1}, {3, 5}, {700, 700}} {
					at := fmt.Sprintf("%v %v checked %v n %d B %d", inputs, kt, checked, c.n, c.B)
					keys := be.Alloc(kt, c.n*S)
					raw := make([]int64, c.n*S)
					for j := range raw {
						raw[j] = rng.Int64N(sizes[j%S])
					}
					if kt == tensor.Uint32 {
						k32 := make([]uint32, len(raw))
						for j, v := range raw {
							k32[j] = uint32(v)
						}
						be.Upload(keys, k32)
					} else {
						be.Upload(keys, raw)
					}
					off := be.Alloc(tensor.Int32, c.n*S+1)
					iota := make([]int32, c.n*S+1)
					for j := range iota {
						iota[j] = int32(j)
					}
					be.Upload(off, iota)
					if !tensor.OneHot(iota) {
						t.Fatalf("%s: OneHot of 0..%d is false", at, c.n*S)
					}
					add, size := be.Alloc(tensor.Int64, S), be.Alloc(tensor.Int64, S)
					if checked {
						var o int64
						a := make([]int64, S)
						for s := range S {
							a[s] = o
							o += sizes[s]
						}
						be.Upload(add, a)
						be.Upload(size, sizes)
					}
					var dk, do, rk, ro []tensor.Tensor
					for _, in := range inputs {
						dk, rk = append(dk, be.Alloc(tensor.Int64, c.B*in.Slots)), append(rk, be.Alloc(tensor.Int64, c.B*in.Slots))
						do, ro = append(do, be.Alloc(tensor.Int32, c.B*in.Slots+1)), append(ro, be.Alloc(tensor.Int32, c.B*in.Slots+1))
					}
					be.SplitOneHot(dk, do, keys, add, size, inputs, c.n, nil)
					be.SplitInputs(rk, ro, keys, off, add, size, inputs, c.n)
					if err := be.Err(); err != nil {
						t.Fatalf("%s: %v", at, err)
					}
					for k, in := range inputs {
						if got, want := Data[int64](dk[k])[:c.n*in.Slots], Data[int64](rk[k])[:c.n*in.Slots]; !slices.Equal(got, want) {
							t.Fatalf("%s input %d: keys %v, want %v", at, k, got, want)
						}
						if got, want := Data[int32](do[k]), Data[int32](ro[k]); !slices.Equal(got, want) {
							t.Fatalf("%s input %d: offsets %v, want %v", at, k, got, want)
						}
					}
				}
			}
		}
	}
	if tensor.OneHot([]int32{0, 1, 1, 2}) || tensor.OneHot([]int32{0, 2}) || tensor.OneHot(nil) || !tensor.OneHot([]int32{0}) {
		t.Error("OneHot of a CSR with an empty or a two-key bag, or of no offsets")
	}

	// Slot 1's size is 1: key 1 is ErrRange; two keys for two samples of
	// two slots are ErrShape.
	keys := be.Alloc(tensor.Uint32, 4)
	be.Upload(keys, []uint32{3, 1, 0, 0})
	add, size := be.Alloc(tensor.Int64, 2), be.Alloc(tensor.Int64, 2)
	be.Upload(size, []int64{10, 1})
	in := []tensor.SparseSlots{{First: 0, Slots: 2}}
	dk, do := []tensor.Tensor{be.Alloc(tensor.Int64, 4)}, []tensor.Tensor{be.Alloc(tensor.Int32, 5)}
	be.SplitOneHot(dk, do, keys, add, size, in, 2, nil)
	if err := be.Err(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("key outside its slot: %v", err)
	}
	be.Reset()
	be.SplitOneHot(dk, do, keys.Prefix(2), add, size, in, 2, nil)
	if err := be.Err(); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("two keys for two samples of two slots: %v", err)
	}
	be.Reset()

	// The copies are made; one of two lengths is ErrShape.
	be.Upload(keys, []uint32{3, 0, 0, 0})
	src, dst := be.Alloc(tensor.Float32, 3), be.Alloc(tensor.Float32, 3)
	be.Upload(src, []float32{1.5, -2, 3})
	be.SplitOneHot(dk, do, keys, add, size, in, 2, []tensor.Copy{{Dst: dst, Src: src}})
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
	if got := Data[float32](dst); !slices.Equal(got, []float32{1.5, -2, 3}) {
		t.Errorf("copied %v", got)
	}
	be.SplitOneHot(dk, do, keys, add, size, in, 2, []tensor.Copy{{Dst: dst, Src: src.Prefix(2)}})
	if err := be.Err(); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("a copy of 2 values into 3: %v", err)
	}
	be.Reset()
}
