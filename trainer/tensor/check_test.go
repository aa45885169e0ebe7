package tensor

import (
	"errors"
	"testing"
)

// mk is a tensor of dtype dt and shape dims on fake storage.
func mk(dt DType, dims ...int) Tensor {
	return Tensor{DType: dt, Shape: dims, Buf: fakeStorage(NumElems(dims...))}
}

func TestChecks(t *testing.T) {
	f := func(dims ...int) Tensor { return mk(Float32, dims...) }
	i32 := func(n int) Tensor { return mk(Int32, n) }
	i64 := func(n int) Tensor { return mk(Int64, n) }
	var none Tensor
	table := HashTable{Keys: i64(16), Rows: i32(16), Count: i32(1), MaxRows: 8}
	adam := OptParams{Kind: Adam}
	gemm := func(ta, tb bool, a, b, c Tensor) error {
		_, _, _, err := GemmShape("op", ta, tb, a, b, c)
		return err
	}
	inter := func(out, x0, emb Tensor) error {
		_, _, err := InteractionShape("op", out, x0, emb)
		return err
	}
	cases := []struct {
		name string
		err  error
		bad  bool
	}{
		{"same len", CheckSameLen("op", f(2, 3), f(6), none), false},
		{"len differs", CheckSameLen("op", f(2, 3), f(5)), true},
		{"want ok", CheckWant("op", i32(4), Int32, 3), false},
		{"want dtype", CheckWant("op", i64(4), Int32, 0), true},
		{"want short", CheckWant("op", i32(2), Int32, 3), true},
		{"copy dtype", CheckCopy("op", f(4), i32(4)), true},
		{"convert absent", CheckConvert("op", none, none), true},
		{"gemm", gemm(false, false, f(2, 3), f(3, 4), f(2, 4)), false},
		{"gemm transposed", gemm(true, true, f(3, 2), f(4, 3), f(2, 4)), false},
		{"gemm k", gemm(false, false, f(2, 3), f(4, 4), f(2, 4)), true},
		{"bias", CheckBiasAct("op", f(2, 3), f(2, 3), f(3)), false},
		{"bias width", CheckBiasAct("op", f(2, 3), f(2, 3), f(2)), true},
		{"act grad no y", CheckActGrad("op", ReLU, f(4), f(4), f(4), none), true},
		{"act grad elu", CheckActGrad("op", ELU, f(4), f(4), f(4), none), false},
		{"reduce", CheckReduce("op", f(2, 4), f(2, 3, 4), 2, 3, 4), false},
		{"broadcast", CheckBroadcast("op", f(2, 3, 4), f(2, 5), 2, 3, 4), true},
		{"copy cols", CheckCopyCols("op", f(2, 5), 1, f(2, 3), 0, 3), false},
		{"copy cols past end", CheckCopyCols("op", f(2, 5), 3, f(2, 3), 0, 3), true},
		{"dropout rate", CheckDropout("op", f(4), f(4), 1), true},
		{"interaction", inter(f(2, 4+3+1), f(2, 4), f(2, 8)), false},
		{"interaction width", inter(f(2, 4+3), f(2, 4), f(2, 8)), true},
		{"fm", CheckFmOrder2Grad("op", f(2, 6), f(2, 3), f(2, 6)), false},
		{"fm k", CheckFmOrder2("op", f(2, 4), f(2, 6)), true},
		{"bn one row", CheckBatchNorm("op", true, f(1, 3), f(1, 3), f(3), f(3), f(3), f(3), f(3), f(3)), true},
		{"bn infer one row", CheckBatchNorm("op", false, f(1, 3), f(1, 3), f(3), f(3), f(3), f(3), none, none), false},
		{"bce weights", CheckBCE("op", f(1), none, f(4, 2), f(4, 2), f(3)), true},
		{"softmax ce", CheckSoftmaxCE("op", f(1), f(4, 3), f(4, 3), f(4)), false},
		{"hash ok", CheckHashTable("op", table, i64(5), i32(5)), false},
		{"hash capacity", CheckHashTable("op", HashTable{Keys: i64(12), Rows: i32(12), Count: i32(1)}, i64(1), i32(1)), true},
		{"hash count", CheckHashTable("op", HashTable{Keys: i64(16), Rows: i32(16), Count: i64(1)}, i64(1), i32(1)), true},
		{"hash rows short", CheckHashTable("op", table, i64(5), i32(4)), true},
		{"slot rows", CheckSlotRows("op", i32(5), i64(5), i32(7), i64(3), i64(3)), false},
		{"slot rows bags", CheckSlotRows("op", i32(5), i64(5), i32(6), i64(3), i64(3)), true},
		{"slot rows sizes", CheckSlotRows("op", i32(5), i64(5), i32(7), i64(3), i64(2)), true},
		{"bag", CheckEmbeddingBag("op", f(3, 4), f(10, 4), i32(5), i32(4)), false},
		{"bag out", CheckEmbeddingBag("op", f(2, 4), f(10, 4), i32(5), i32(4)), true},
		{"bag grad", CheckEmbeddingBagGrad("op", i32(5), f(5, 4), i32(1), f(3, 4), i32(5), i32(4)), false},
		{"bag grad uniq", CheckEmbeddingBagGrad("op", i32(5), f(4, 4), i32(1), f(3, 4), i32(5), i32(4)), true},
		{"sgd no states", CheckOptStates("op", OptParams{Kind: SGD}, 8, none, none), false},
		{"adam no v", CheckOptStates("op", adam, 8, f(8), none), true},
		{"sparse", CheckSparseUpdate("op", adam, f(4, 2), f(8), f(8), i32(4), i32(1)), false},
		{"sparse count", CheckSparseUpdate("op", adam, f(4, 2), f(8), f(8), i32(4), i64(1)), true},
	}
	for _, c := range cases {
		if (c.err != nil) != c.bad {
			t.Errorf("%s: error %v, want failure %v", c.name, c.err, c.bad)
			continue
		}
		var oe *OpError
		if c.bad && (!errors.Is(c.err, ErrShape) || !errors.As(c.err, &oe) || oe.Op != "op" || oe.Detail == "") {
			t.Errorf("%s: %#v is not an ErrShape *OpError of op with a detail", c.name, c.err)
		}
	}
}

func TestGemmShapeDims(t *testing.T) {
	m, k, n, err := GemmShape("gemm", true, false, mk(Float32, 3, 2), mk(Float32, 3, 5), mk(Float32, 2, 5))
	if err != nil || m != 2 || k != 3 || n != 5 {
		t.Fatalf("m %d k %d n %d err %v", m, k, n, err)
	}
	n, d, err := InteractionShape("interaction", mk(Float32, 4, 8+6+1), mk(Float32, 4, 8), mk(Float32, 4, 24))
	if err != nil || n != 3 || d != 8 {
		t.Fatalf("interaction n %d d %d err %v", n, d, err)
	}
}

func TestSparseMode(t *testing.T) {
	last := mk(Int32, 10)
	for _, c := range []struct {
		p    OptParams
		rows int
		want UpdateType
		bad  bool
	}{
		{OptParams{Kind: SGD, Update: Global}, 10, Local, false},
		{OptParams{Kind: AdaGrad, Update: LazyGlobal}, 10, Local, false},
		{OptParams{Kind: MomentumSGD, Update: LazyGlobal}, 10, Global, false},
		{OptParams{Kind: Adam, Update: LazyGlobal}, 10, LazyGlobal, false},
		{OptParams{Kind: Adam, Update: LazyGlobal}, 11, LazyGlobal, true},
		{OptParams{Kind: Adam, Update: Global}, 11, Global, false},
	} {
		mode, err := SparseMode("sparse_update", c.p, last, c.rows)
		if mode != c.want || (err != nil) != c.bad || (err != nil && !errors.Is(err, ErrShape)) {
			t.Errorf("%+v rows %d: mode %v err %v", c.p, c.rows, mode, err)
		}
	}
}
