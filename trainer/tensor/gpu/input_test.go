package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestSplitInputs checks the input kernels against the CPU backend: one
// input over all slots, several inputs (WDL's wide + deep), 32- and 64-bit
// keys, with and without slot offsets, short batches padded to B, multi-hot
// bags and empty bags.
func TestSplitInputs(t *testing.T) {
	h := newHarness(t)
	sizes := []int64{10, 1, 1000, 50000, 3, 7}
	S := len(sizes)
	layouts := map[string][]tensor.SparseSlots{
		"one input": {{First: 0, Slots: S}},
		"wide+deep": {{First: 0, Slots: 1}, {First: 1, Slots: S - 1}},
		"three":     {{First: 0, Slots: 2}, {First: 2, Slots: 1}, {First: 3, Slots: 3}},
	}
	for name, inputs := range layouts {
		for _, kt := range []tensor.DType{tensor.Uint32, tensor.Int64} {
			for _, withOff := range []bool{false, true} {
				for _, c := range []struct{ n, B, hot int }{{0, 4, 1}, {1, 1, 1}, {3, 5, 3}, {1000, 1024, 1}, {70000, 70000, 4}} {
					off := make([]int64, c.n*S+1)
					var keys []int64
					for b := range c.n * S {
						for range h.rng.IntN(c.hot + 1) {
							keys = append(keys, int64(h.rng.IntN(int(sizes[b%S]))))
						}
						off[b+1] = int64(len(keys))
					}
					add := make([]int64, S)
					chk := make([]int64, S)
					if withOff {
						var o int64
						for s := range S {
							add[s], chk[s] = o, sizes[s]
							o += sizes[s]
						}
					}
					if len(keys) == 0 {
						keys = []int64{0} // the one element of an empty batch's key buffer
					}
					k := h.Ints(kt, keys, len(keys))
					o := h.Ints(tensor.Int32, off, len(off))
					a := h.Ints(tensor.Int64, add, S)
					sz := h.Ints(tensor.Int64, chk, S)
					var dk, do []pair
					var gk, gdo, ck, cdo []tensor.Tensor
					for _, in := range inputs {
						dk = append(dk, h.Out(tensor.Int64, max(c.B*in.Slots*c.hot, 1)))
						do = append(do, h.Out(tensor.Int32, c.B*in.Slots+1))
						gk, ck = append(gk, dk[len(dk)-1].G), append(ck, dk[len(dk)-1].C)
						gdo, cdo = append(gdo, do[len(do)-1].G), append(cdo, do[len(do)-1].C)
					}
					h.g.SplitInputs(gk, gdo, k.G, o.G, a.G, sz.G, inputs, c.n)
					h.c.SplitInputs(ck, cdo, k.C, o.C, a.C, sz.C, inputs, c.n)
					offs32 := make([]int32, len(off))
					for i, v := range off {
						offs32[i] = int32(v)
					}
					nnz := tensor.InputKeyCounts(nil, offs32, c.n, S, inputs)
					for i := range inputs {
						at := fmt.Sprintf("%s %v offsets %v n %d B %d input %d", name, kt, withOff, c.n, c.B, i)
						h.Check(at+" offsets", do[i], 0)
						h.Check(at+" keys", pair{dk[i].G.Prefix(nnz[i]), dk[i].C.Prefix(nnz[i])}, 0)
						h.Free(dk[i], do[i])
					}
					h.Free(k, o, a, sz)
				}
			}
		}
	}

	// A key outside its slot's size is ErrRange on both.
	k := h.Ints(tensor.Uint32, []int64{3, 1}, 2)
	o := h.Ints(tensor.Int32, []int64{0, 1, 2}, 3)
	a := h.Ints(tensor.Int64, []int64{0, 10}, 2)
	sz := h.Ints(tensor.Int64, []int64{10, 1}, 2)
	dk, do := h.Out(tensor.Int64, 2), h.Out(tensor.Int32, 3)
	in := []tensor.SparseSlots{{First: 0, Slots: 2}}
	h.g.SplitInputs([]tensor.Tensor{dk.G}, []tensor.Tensor{do.G}, k.G, o.G, a.G, sz.G, in, 1)
	h.c.SplitInputs([]tensor.Tensor{dk.C}, []tensor.Tensor{do.C}, k.C, o.C, a.C, sz.C, in, 1)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("gpu key outside slot: %v", err)
	}
	if err := h.c.Err(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("cpu key outside slot: %v", err)
	}
	h.g.Reset()
	h.c.Reset()
}

// TestSplitOneHot checks the one-hot input kernel (SplitOneHot) against
// the CPU backend's SplitInputs, the reference, on one-hot batches: the
// layouts of TestSplitInputs, 32- and 64-bit keys, with and without slot
// offsets, short batches padded to B (the padding bags' offsets written),
// with the copies it makes alongside (labels- and dense-like, longer and
// shorter than the bags, and a third, made apart); and a key outside its
// slot (ErrRange).
func TestSplitOneHot(t *testing.T) {
	h := newHarness(t)
	sizes := []int64{10, 1, 1000, 50000, 3, 7}
	S := len(sizes)
	layouts := map[string][]tensor.SparseSlots{
		"one input": {{First: 0, Slots: S}},
		"wide+deep": {{First: 0, Slots: 1}, {First: 1, Slots: S - 1}},
		"three":     {{First: 0, Slots: 2}, {First: 2, Slots: 1}, {First: 3, Slots: 3}},
	}
	for name, inputs := range layouts {
		for _, kt := range []tensor.DType{tensor.Uint32, tensor.Int64} {
			for _, withOff := range []bool{false, true} {
				for _, c := range []struct{ n, B int }{{1, 1}, {3, 5}, {1000, 1024}, {2048, 2048}, {70000, 70000}} {
					off := make([]int64, c.n*S+1)
					keys := make([]int64, c.n*S)
					for b := range keys {
						keys[b] = int64(h.rng.IntN(int(sizes[b%S])))
						off[b+1] = int64(b + 1)
					}
					add := make([]int64, S)
					chk := make([]int64, S)
					if withOff {
						var o int64
						for s := range S {
							add[s], chk[s] = o, sizes[s]
							o += sizes[s]
						}
					}
					k := h.Ints(kt, keys, len(keys))
					o := h.Ints(tensor.Int32, off, len(off))
					a := h.Ints(tensor.Int64, add, S)
					sz := h.Ints(tensor.Int64, chk, S)
					var dk, do []pair
					var gk, gdo, ck, cdo []tensor.Tensor
					for _, in := range inputs {
						dk = append(dk, h.Out(tensor.Int64, c.B*in.Slots))
						do = append(do, h.Out(tensor.Int32, c.B*in.Slots+1))
						gk, ck = append(gk, dk[len(dk)-1].G), append(ck, dk[len(dk)-1].C)
						gdo, cdo = append(gdo, do[len(do)-1].G), append(cdo, do[len(do)-1].C)
					}
					// Copies of n, 13·n and 3 values (Float32 on the GPU,
					// Float64 on the CPU, copied there with Copy).
					var srcs, dsts []pair
					var gc []tensor.Copy
					for _, m := range []int{c.n, 13 * c.n, 3} {
						srcs, dsts = append(srcs, h.Rand(-1, 1, m)), append(dsts, h.Out(tensor.Float32, m))
						i := len(srcs) - 1
						gc = append(gc, tensor.Copy{Dst: dsts[i].G, Src: srcs[i].G})
						h.c.Copy(dsts[i].C, srcs[i].C)
					}
					h.g.SplitOneHot(gk, gdo, k.G, a.G, sz.G, inputs, c.n, gc)
					h.c.SplitInputs(ck, cdo, k.C, o.C, a.C, sz.C, inputs, c.n)
					for i := range srcs {
						h.Check(fmt.Sprintf("%s %v n %d copy %d", name, kt, c.n, i), dsts[i], 0)
						h.Free(srcs[i], dsts[i])
					}
					for i, in := range inputs {
						at := fmt.Sprintf("%s %v offsets %v n %d B %d input %d", name, kt, withOff, c.n, c.B, i)
						h.Check(at+" offsets", do[i], 0)
						h.Check(at+" keys", pair{dk[i].G.Prefix(c.n * in.Slots), dk[i].C.Prefix(c.n * in.Slots)}, 0)
						h.Free(dk[i], do[i])
					}
					h.Free(k, o, a, sz)
				}
			}
		}
	}

	// A key outside its slot's size is ErrRange, named SplitOneHot.
	k := h.Ints(tensor.Uint32, []int64{3, 1}, 2)
	a := h.Ints(tensor.Int64, []int64{0, 10}, 2)
	sz := h.Ints(tensor.Int64, []int64{10, 1}, 2)
	dk, do := h.Out(tensor.Int64, 2), h.Out(tensor.Int32, 3)
	in := []tensor.SparseSlots{{First: 0, Slots: 2}}
	h.g.SplitOneHot([]tensor.Tensor{dk.G}, []tensor.Tensor{do.G}, k.G, a.G, sz.G, in, 1, nil)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) || !strings.Contains(err.Error(), "SplitOneHot") {
		t.Errorf("gpu key outside slot: %v", err)
	}
	h.g.Reset()
}
