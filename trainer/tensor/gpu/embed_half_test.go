package gpu

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Half-precision embeddings: EmbeddingBag's pooled output and
// EmbeddingBagGrad's dOut in Float16 / BFloat16 (the tables and uniqGrad
// stay Float32).

var embHalfDTypes = []tensor.DType{tensor.Float16, tensor.BFloat16}

// embHalfCases: one-hot (one row or none per bag), multi-hot, every bag
// empty, widths 1, 7, 16, 128 (scalar lanes, 4-half accesses, several
// column passes) and hot rows.
var embHalfCases = []embCase{
	{1, 1, 1, 1, 0, 0},
	{1, 0, 5, 4, 0, 0},    // nnz 0
	{64, 0, 10, 16, 0, 0}, // all bags empty
	{3000, 1, 2000, 1, 0, 0.05},
	{3000, 1, 2000, 7, 0.05, 0.05},
	{3000, 1, 2000, 16, 0, 0},
	{2000, 1, 50000, 128, 0.01, 0.01},
	{1000, 6, 500, 1, 0.1, 0.05},
	{777, 6, 3000, 7, 0.05, 0.1},
	{1000, 4, 500, 16, 0.1, 0.05},
	{500, 8, 300, 128, 0.3, 0.05},
	{20000, 2, 1000, 13, 0.9, 0}, // hot row in most bags, scalar lanes
}

// f32Bits downloads t (any float dtype) widened to float32.
func f32Bits(h *harness, t tensor.Tensor) []float32 {
	h.t.Helper()
	v := make([]float32, t.Len())
	if err := h.g.Download(v, t); err != nil {
		h.t.Fatal(err)
	}
	return v
}

// TestEmbeddingBagHalf: a half pooled output is within 1e-2 of the float64
// reference rounded to its dtype, and equals the float32 output rounded
// (the device's Convert), bit for bit: one rounding of the same float32
// sum, for sum and mean, empty bags included.
func TestEmbeddingBagHalf(t *testing.T) {
	h := newHarness(t)
	for _, tc := range embHalfCases {
		b := embGen(h, tc.bags, tc.maxPer, tc.nrows, tc.hot, tc.neg)
		table := h.Rand(-1, 1, tc.nrows, tc.v)
		rows := h.Ints(tensor.Int32, b.rows, len(b.rows))
		off := h.Ints(tensor.Int32, b.off, len(b.off))
		for _, c := range embCombiners {
			f32 := h.Out(tensor.Float32, tc.bags, tc.v)
			h.g.EmbeddingBag(f32.G, table.G, rows.G, off.G, c)
			for _, dt := range embHalfDTypes {
				name := fmt.Sprintf("embedding bag %v %+v comb %d", dt, tc, c)
				out := h.OutDT(dt, tc.bags, tc.v)
				h.g.EmbeddingBag(out.G, table.G, rows.G, off.G, c)
				h.c.EmbeddingBag(out.C, table.C, rows.C, off.C, c)
				h.RoundC(dt, out)
				h.Check(name, out, tolBF16)
				conv := h.g.Alloc(dt, tc.bags, tc.v)
				h.g.Convert(conv, f32.G)
				got, want := f32Bits(h, out.G), f32Bits(h, conv)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Errorf("%s: [%d] %g, the float32 output rounded is %g", name, i, got[i], want[i])
						break
					}
				}
				for k := range tc.bags { // an empty bag is exactly 0
					if b.off[k] == b.off[k+1] && tc.v > 0 && got[k*tc.v] != 0 {
						t.Errorf("%s: empty bag %d pooled %g", name, k, got[k*tc.v])
						break
					}
				}
				h.g.Free(conv)
				h.Free(out)
			}
			h.Free(f32)
		}
		h.Free(table, rows, off)
	}
}

// TestEmbeddingBagGradHalf: with a half dOut, uniqGrad (float32) is within
// 1e-5 of the float64 reference computed from the same rounded gradient,
// and bit-identical to the float32 dOut holding those values (the same
// summation order), uniqRows and numUniq equal; repeated and hot rows
// (chunked and block-reduced paths) included.
func TestEmbeddingBagGradHalf(t *testing.T) {
	h := newHarness(t)
	cases := append(embHalfCases,
		embCase{50000, 4, 100, 128, 0.4, 0.05}, // chunked hot rows, 4-half loads
		embCase{50000, 4, 100, 7, 0.4, 0.05},   // the same with scalar lanes
		embCase{3000, 1, 40, 8, 0, 0},          // every row in ~75 bags: just past one chunk
	)
	for _, tc := range cases {
		b := embGen(h, tc.bags, tc.maxPer, tc.nrows, tc.hot, tc.neg)
		nnz := len(b.rows)
		rows := h.Ints(tensor.Int32, b.rows, nnz)
		off := h.Ints(tensor.Int32, b.off, len(b.off))
		fill := make([]int64, nnz)
		for i := range fill {
			fill[i] = -7
		}
		for _, dt := range embHalfDTypes {
			dOut := h.RandDT(dt, -1, 1, tc.bags, tc.v)
			dOut32 := h.g.Alloc(tensor.Float32, tc.bags, tc.v) // the same values in float32
			h.g.Convert(dOut32, dOut.G)
			for _, c := range embCombiners {
				name := fmt.Sprintf("embedding bag grad %v %+v comb %d", dt, tc, c)
				ur := h.Ints(tensor.Int32, fill, nnz)
				ug := h.Rand(-1, 1, nnz, tc.v)
				nu := h.Ints(tensor.Int32, []int64{-3}, 1)
				ur32 := h.g.Alloc(tensor.Int32, nnz)
				ug32 := h.g.Alloc(tensor.Float32, nnz, tc.v)
				nu32 := h.g.Alloc(tensor.Int32, 1)
				h.g.Copy(ur32, ur.G)
				h.g.Copy(ug32, ug.G)
				h.g.EmbeddingBagGrad(ur.G, ug.G, nu.G, dOut.G, rows.G, off.G, c)
				h.g.EmbeddingBagGrad(ur32, ug32, nu32, dOut32, rows.G, off.G, c)
				h.c.EmbeddingBagGrad(ur.C, ug.C, nu.C, dOut.C, rows.C, off.C, c)
				h.Check(name+" numUniq", nu, 0)
				h.Check(name+" uniqRows", ur, 0)
				h.Check(name+" uniqGrad", ug, tolFP32)
				got, want := f32Bits(h, ug.G), f32Bits(h, ug32)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Errorf("%s: uniqGrad[%d] %g, from the float32 dOut %g", name, i, got[i], want[i])
						break
					}
				}
				var n1, n2 [1]int32
				r1, r2 := make([]int32, nnz), make([]int32, nnz)
				for _, e := range []error{h.g.Download(n1[:], nu.G), h.g.Download(n2[:], nu32),
					h.g.Download(r1, ur.G), h.g.Download(r2, ur32)} {
					if e != nil {
						t.Fatal(e)
					}
				}
				if n1 != n2 || fmt.Sprint(r1) != fmt.Sprint(r2) {
					t.Errorf("%s: numUniq %d / %d and uniqRows differ from the float32 dOut's", name, n1[0], n2[0])
				}
				h.Free(ur, ug, nu)
				for _, x := range []tensor.Tensor{ur32, ug32, nu32} {
					h.g.Free(x)
				}
			}
			h.Free(dOut)
			h.g.Free(dOut32)
		}
		h.Free(rows, off)
	}
}

// TestEmbeddingHalfRefused: a half table or uniqGrad, and an integer
// pooled output or dOut, are ErrDType naming the operation and the operand.
func TestEmbeddingHalfRefused(t *testing.T) {
	h := newHarness(t)
	rows := h.Ints(tensor.Int32, []int64{0, 1, 1}, 3)
	off := h.Ints(tensor.Int32, []int64{0, 1, 3}, 3)
	for _, dt := range embHalfDTypes {
		check := func(what, op, operand string) {
			t.Helper()
			err := h.g.Sync()
			if !errors.Is(err, tensor.ErrDType) || !strings.Contains(err.Error(), op) || !strings.Contains(err.Error(), operand) {
				t.Errorf("%v %s: %v", dt, what, err)
			}
			h.g.Reset()
		}
		table := h.g.Alloc(dt, 4, 8)
		out := h.g.Alloc(dt, 2, 8)
		h.g.EmbeddingBag(out, table, rows.G, off.G, tensor.Sum)
		check("half table", "embedding_bag", "table")
		ur, nu := h.g.Alloc(tensor.Int32, 3), h.g.Alloc(tensor.Int32, 1)
		ug := h.g.Alloc(dt, 3, 8)
		h.g.EmbeddingBagGrad(ur, ug, nu, out, rows.G, off.G, tensor.Sum)
		check("half uniqGrad", "embedding_bag_grad", "uniqGrad")
		for _, x := range []tensor.Tensor{table, out, ur, nu, ug} {
			h.g.Free(x)
		}
	}
	table, ug := h.g.Alloc(tensor.Float32, 4, 8), h.g.Alloc(tensor.Float32, 3, 8)
	bad := h.g.Alloc(tensor.Int32, 2, 8)
	h.g.EmbeddingBag(bad, table, rows.G, off.G, tensor.Sum)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrDType) || !strings.Contains(err.Error(), "out") {
		t.Errorf("int32 out: %v", err)
	}
	h.g.Reset()
	ur, nu := h.g.Alloc(tensor.Int32, 3), h.g.Alloc(tensor.Int32, 1)
	h.g.EmbeddingBagGrad(ur, ug, nu, bad, rows.G, off.G, tensor.Sum)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrDType) || !strings.Contains(err.Error(), "dOut") {
		t.Errorf("int32 dOut: %v", err)
	}
	h.g.Reset()
	for _, x := range []tensor.Tensor{table, ug, bad, ur, nu} {
		h.g.Free(x)
	}
	h.Free(rows, off)
}

// TestEmbTeamHalf (no GPU): 4-element accesses need every pointer aligned
// to 4 of its own elements (16 bytes of float32, 8 of halves), V % 4 == 0.
func TestEmbTeamHalf(t *testing.T) {
	f32 := func(p cuda.Ptr) embPtr { return embPtr{p, 4} }
	f16 := func(p cuda.Ptr) embPtr { return embPtr{p, 2} }
	for _, c := range []struct {
		v     int
		ptrs  []embPtr
		w, ts int
	}{
		{16, []embPtr{f32(256), f32(512)}, 4, 4},
		{16, []embPtr{f16(256 + 8), f32(512)}, 4, 4},  // halves 8-byte aligned
		{16, []embPtr{f16(256 + 4), f32(512)}, 1, 16}, // halves only 4-byte aligned
		{16, []embPtr{f16(256), f32(512 + 8)}, 1, 16}, // float32 8-byte aligned
		{128, []embPtr{f16(256), f32(256)}, 4, 32},
		{256, []embPtr{f16(256), f32(256)}, 4, 32},
		{7, []embPtr{f16(256), f32(256)}, 1, 8},
		{1, []embPtr{f16(256), f32(256)}, 1, 1},
		{12, []embPtr{f16(256 + 24), f32(256 + 48)}, 4, 4},
	} {
		if w, ts := embTeam(c.v, c.ptrs...); w != c.w || ts != c.ts {
			t.Errorf("embTeam(%d, %v) = %d, %d; want %d, %d", c.v, c.ptrs, w, ts, c.w, c.ts)
		}
	}
}

// TestEmbKernelsPerType (no GPU): every team kernel the dispatcher names
// for a float32, float16 or bfloat16 operand is stamped in embed.cu with
// that storage type and width.
func TestEmbKernelsPerType(t *testing.T) {
	src, err := kernelFS.ReadFile("kernels/embed.cu")
	if err != nil {
		t.Fatal(err)
	}
	storage := map[tensor.DType]string{tensor.Float32: "float", tensor.Float16: "half_t", tensor.BFloat16: "bf16_t"}
	for _, base := range []string{"emb_bag_fwd", "emb_grad_sum", "emb_grad_chunk"} {
		for dt, ty := range storage {
			for _, w := range []int{1, 4} {
				name := fmt.Sprintf("%s_v%d", embKernel(base, tensor.Tensor{DType: dt}), w)
				re := regexp.MustCompile(`(?m)^EMB_[A-Z_]+\(` + name + `, (\w+), (\d)\)$`)
				m := re.FindSubmatch(src)
				if m == nil {
					t.Errorf("%v: kernel %s not stamped in embed.cu", dt, name)
					continue
				}
				if string(m[1]) != ty || string(m[2]) != fmt.Sprint(w) {
					t.Errorf("%v: kernel %s stamped for %s, width %s (want %s, %d)", dt, name, m[1], m[2], ty, w)
				}
			}
		}
	}
}

// TestAUCHalf: half scores (and labels) give the CPU's AUC of the rounded
// values exactly (0/1 labels: every term exact), ties from the rounding,
// ±0, ±Inf (a float16 beyond 65504) and a NaN score included.
func TestAUCHalf(t *testing.T) {
	h := newHarness(t)
	for _, n := range []int{1, 3, 2049, 100000} {
		for _, dt := range embHalfDTypes {
			for _, mode := range []string{"normal", "zeros", "inf", "nan"} {
				s, l := make([]float64, n), make([]float64, n)
				for i := range s {
					s[i] = h.rng.NormFloat64()
					l[i] = float64(h.rng.IntN(2))
					switch mode {
					case "zeros":
						if h.rng.IntN(2) == 0 {
							s[i] = math.Copysign(0, s[i])
						}
					case "inf":
						if h.rng.IntN(10) == 0 {
							s[i] = float64(l[i]*2-1) * 1e5 // ±Inf in float16
						}
					}
				}
				if mode == "nan" {
					s[h.rng.IntN(n)] = math.NaN()
				}
				for _, ldt := range []tensor.DType{tensor.Float32, dt} {
					sc, lb := h.FloatsDT(dt, s, n), h.FloatsDT(ldt, l, n)
					g, err := h.g.AUC(sc.G, lb.G)
					if err != nil {
						t.Fatal(err)
					}
					c, err := h.c.AUC(sc.C, lb.C)
					if err != nil {
						t.Fatal(err)
					}
					if !(math.IsNaN(g) && math.IsNaN(c)) && g != c {
						t.Errorf("AUC n=%d %v scores, %v labels, %s: gpu %v, cpu %v", n, dt, ldt, mode, g, c)
					}
					if mode == "nan" && !math.IsNaN(g) {
						t.Errorf("AUC n=%d %v with a NaN score: %v, want NaN", n, dt, g)
					}
					h.Free(sc, lb)
				}
			}
		}
	}
}
