package cuda

import (
	"errors"
	"testing"
)

// GEMMs on half operands without a driver: which element types a GEMM
// takes, the compute type each runs in, and that the types are part of a
// GEMM's fingerprint on a tape and of a cuBLASLt descriptor (TestLtKey).

// TestGemmTypes: float32 A and B take a float32 C; float16 and bfloat16
// ones a float32 C or one of their type, and compute in float32 whatever
// the Math; every other mix is ErrTypes, named in the message.
func TestGemmTypes(t *testing.T) {
	for _, ty := range []Types{{}, {R16F, R16F}, {R16F, R32F}, {R16BF, R16BF}, {R16BF, R32F}} {
		if err := ty.check(); err != nil {
			t.Errorf("%v: %v", ty, err)
		}
		for _, m := range []Math{FP32, TF32, BF16} {
			want := m.computeType()
			if ty.half() {
				want = compute32F
			}
			if got := ty.compute(m); got != want {
				t.Errorf("%v in %v: compute type %d, want %d", ty, m, got, want)
			}
		}
	}
	for _, ty := range []Types{{R32F, R16F}, {R32F, R16BF}, {R16F, R16BF}, {R16BF, R16F}, {DataType(1), R32F}, {R16F, DataType(3)}} {
		err := ty.check()
		if !errors.Is(err, ErrTypes) {
			t.Errorf("%v: %v, want ErrTypes", ty, err)
			continue
		}
		t.Log(err)
	}
	if R32F.Size() != 4 || R16F.Size() != 2 || R16BF.Size() != 2 {
		t.Errorf("sizes %d %d %d", R32F.Size(), R16F.Size(), R16BF.Size())
	}
	if R16F.String() != "float16" || R16BF.String() != "bfloat16" || DataType(9).String() != "cudaDataType(9)" || Math(7).String() != "Math(7)" {
		t.Errorf("names %v %v %v %v", R16F, R16BF, DataType(9), Math(7))
	}
}

// TestDryTapeGemmTypes: the element types are part of a recorded GEMM's
// fingerprint (a step that switched a layer from float32 to float16
// operands differs from the captured one), and refused types are an error
// before anything is recorded.
func TestDryTapeGemmTypes(t *testing.T) {
	c := hostCtx()
	rec := func(ty Types) *Tape {
		t.Helper()
		c.StartTape(true)
		if err := c.GemmEx(Stream(3), TF32, ty, false, true, 64, 32, 16, 1, Ptr(1<<20), 64, Ptr(2<<20), 32, 0, Ptr(3<<20), 64); err != nil {
			t.Fatal(err)
		}
		return c.StopTape()
	}
	f32, f16, f16c, bf16 := rec(Types{}), rec(Types{R16F, R16F}), rec(Types{R16F, R32F}), rec(Types{R16BF, R16BF})
	if d := f16.Diff(rec(Types{R16F, R16F})); d != -1 {
		t.Errorf("the same float16 GEMM twice: diff at %d", d)
	}
	for name, tp := range map[string]*Tape{"float16": f16, "float16, float32 C": f16c, "bfloat16": bf16} {
		if d := f32.Diff(tp); d != 0 {
			t.Errorf("float32 vs %s: diff at %d, want 0", name, d)
		}
	}
	if f16.Diff(f16c) != 0 || f16.Diff(bf16) != 0 {
		t.Error("float16 GEMMs of other C or A/B types recorded alike")
	}
	if d := f32.Diff(func() *Tape {
		c.StartTape(true)
		if err := c.Gemm(Stream(3), TF32, false, true, 64, 32, 16, 1, Ptr(1<<20), 64, Ptr(2<<20), 32, 0, Ptr(3<<20), 64); err != nil {
			t.Fatal(err)
		}
		return c.StopTape()
	}()); d != -1 {
		t.Errorf("Gemm and GemmEx with the zero Types: diff at %d", d)
	}
	c.StartTape(true)
	err := c.GemmEx(Stream(3), TF32, Types{R16F, R16BF}, false, false, 8, 8, 8, 1, Ptr(1), 8, Ptr(2), 8, 0, Ptr(3), 8)
	if tp := c.StopTape(); !errors.Is(err, ErrTypes) || len(tp.Items) != 0 {
		t.Errorf("float16 A/B into a bfloat16 C: %v, %d items recorded", err, len(tp.Items))
	}
	c.StartTape(true)
	err = c.GemmExSearch(Stream(3), TF32, Types{R32F, R16F}, false, false, 8, 8, 8, 1, Ptr(1), 8, Ptr(2), 8, 0, Ptr(3), 8, &AlgoSearch{})
	if tp := c.StopTape(); !errors.Is(err, ErrTypes) || len(tp.Items) != 0 {
		t.Errorf("float32 A/B into a float16 C (search): %v, %d items recorded", err, len(tp.Items))
	}
}

// TestSearchSavesC: the bytes of C the search saves around its timed runs
// (beta ≠ 0) are C's extent in its own element type: a half C is half as
// many bytes as a float32 one (copying 4-byte elements would write past
// it, over whatever the allocator put next).
func TestSearchSavesC(t *testing.T) {
	for _, tc := range []struct {
		ty        Types
		m, n, ldc int
		want      int
	}{
		{Types{}, 37, 29, 37, 4 * (37*28 + 37)},
		{Types{R16F, R32F}, 37, 29, 40, 4 * (40*28 + 37)},
		{Types{R16F, R16F}, 37, 29, 37, 2 * (37*28 + 37)},
		{Types{R16BF, R16BF}, 1, 1, 1, 2},
	} {
		if got := cBytes(tc.ty, tc.m, tc.n, tc.ldc); got != tc.want {
			t.Errorf("%v C [%d, %d] ld %d: %d bytes, want %d", tc.ty, tc.m, tc.n, tc.ldc, got, tc.want)
		}
	}
}
