package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The primitives alone (scan, compaction, radix sort) against host
// references, compared exactly.

// primDo runs fn on the device goroutine and fails the test on any error.
func primDo(t *testing.T, be *Backend, fn func(c *cuda.Ctx) error) {
	t.Helper()
	be.do("prim_test", fn)
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
}

func primUpload32(t *testing.T, be *Backend, v []uint32) tensor.Tensor {
	t.Helper()
	x := be.Alloc(tensor.Uint32, max(len(v), 1))
	if len(v) > 0 {
		be.Upload(x.Prefix(len(v)), v)
	}
	return x
}

func primDownload32(t *testing.T, be *Backend, x tensor.Tensor, n int) []uint32 {
	t.Helper()
	v := make([]uint32, n)
	if n > 0 {
		if err := be.Download(v, x.Prefix(n)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func primDownload64(t *testing.T, be *Backend, x tensor.Tensor, n int) []uint64 {
	t.Helper()
	v := make([]int64, n)
	if n > 0 {
		if err := be.Download(v, x.Prefix(n)); err != nil {
			t.Fatal(err)
		}
	}
	u := make([]uint64, n)
	for i, x := range v {
		u[i] = uint64(x)
	}
	return u
}

var primSizes = []int{0, 1, 7, 255, 256, 2047, 2048, 2049, 5000, 65536, 1<<20 + 3}

func TestScanU32(t *testing.T) {
	be := gpuBackend(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range primSizes {
		for _, inPlace := range []bool{false, true} {
			in := make([]uint32, n)
			for i := range in {
				in[i] = uint32(rng.IntN(6))
			}
			want := make([]uint32, n+1)
			for i, v := range in {
				want[i+1] = want[i] + v
			}
			x := be.Alloc(tensor.Uint32, n+1)
			if n > 0 {
				be.Upload(x.Prefix(n), in)
			}
			out := x
			if !inPlace {
				out = be.Alloc(tensor.Uint32, n+1)
				be.Fill(out, 12345)
			}
			part := be.Alloc(tensor.Uint32, primScanPart(n))
			primDo(t, be, func(c *cuda.Ctx) error { return be.scan(c, primU32, Ptr(x), Ptr(out), n, Ptr(part)) })
			got := primDownload32(t, be, out, n+1)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("n=%d inPlace=%v: out[%d] = %d, want %d", n, inPlace, i, got[i], want[i])
				}
			}
			be.Free(x)
			if !inPlace {
				be.Free(out)
			}
			be.Free(part)
		}
	}
}

func TestScanF2D(t *testing.T) {
	be := gpuBackend(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range primSizes {
		for _, frac := range []bool{false, true} {
			in := make([]float32, n)
			for i := range in {
				if frac {
					in[i] = rng.Float32()
				} else {
					in[i] = float32(rng.IntN(2))
				}
			}
			want := make([]float64, n+1)
			for i, v := range in {
				want[i+1] = want[i] + float64(v)
			}
			x := be.Alloc(tensor.Float32, max(n, 1))
			if n > 0 {
				be.Upload(x.Prefix(n), in)
			}
			out := be.Alloc(tensor.Int64, n+1) // float64 bits
			part := be.Alloc(tensor.Int64, primScanPart(n))
			primDo(t, be, func(c *cuda.Ctx) error { return be.scan(c, primF2D, Ptr(x), Ptr(out), n, Ptr(part)) })
			bits := primDownload64(t, be, out, n+1)
			for i := range want {
				g := math.Float64frombits(bits[i])
				// 0/1 values are exact in any order; fractions differ by rounding.
				if tol := 1e-12 * want[n]; math.Abs(g-want[i]) > tol || (!frac && g != want[i]) {
					t.Fatalf("n=%d frac=%v: out[%d] = %v, want %v", n, frac, i, g, want[i])
				}
			}
			be.Free(x)
			be.Free(out)
			be.Free(part)
		}
	}
}

func TestCompact(t *testing.T) {
	be := gpuBackend(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range primSizes {
		for _, p := range []float64{0, 0.01, 0.5, 1} {
			flags := make([]uint32, n)
			var want []uint32
			for i := range flags {
				if rng.Float64() < p {
					flags[i] = 1
					want = append(want, uint32(i))
				}
			}
			f := primUpload32(t, be, flags)
			pos := be.Alloc(tensor.Uint32, n+1)
			out := be.Alloc(tensor.Uint32, max(n, 1))
			part := be.Alloc(tensor.Uint32, primScanPart(n))
			primDo(t, be, func(c *cuda.Ctx) error { return be.compact(c, Ptr(f), Ptr(pos), Ptr(out), n, Ptr(part)) })
			if cnt := primDownload32(t, be, pos, n+1)[n]; int(cnt) != len(want) {
				t.Fatalf("n=%d p=%v: %d kept, want %d", n, p, cnt, len(want))
			}
			got := primDownload32(t, be, out, len(want))
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("n=%d p=%v: out[%d] = %d, want %d", n, p, i, got[i], want[i])
				}
			}
			be.Free(f)
			be.Free(pos)
			be.Free(out)
			be.Free(part)
		}
	}
}

type primSortCase struct {
	name  string
	n     int
	wide  bool
	vals  bool
	bits  int
	limit int // device count; −1: none
	key   func(r *rand.Rand, i int) uint64
}

func primSortCases() []primSortCase {
	full32 := func(r *rand.Rand, _ int) uint64 { return uint64(r.Uint32()) }
	full64 := func(r *rand.Rand, _ int) uint64 { return r.Uint64() }
	few := func(r *rand.Rand, _ int) uint64 { return uint64(r.IntN(4)) }
	small := func(r *rand.Rand, _ int) uint64 { return uint64(r.IntN(1 << 20)) }
	high := func(r *rand.Rand, _ int) uint64 { return uint64(r.IntN(256)) << 24 }
	same := func(*rand.Rand, int) uint64 { return 77 }
	// Hot: one key in most places, as EmbeddingBagGrad sees it.
	hot := func(r *rand.Rand, _ int) uint64 {
		if r.Float64() < 0.7 {
			return 12345
		}
		return uint64(r.IntN(1 << 24))
	}
	// Signed int64 keys with the sign bit flipped (HashLookup).
	signed := func(r *rand.Rand, _ int) uint64 {
		k := int64(r.Uint64())
		if r.IntN(2) == 0 {
			k = int64(r.IntN(1000)) - 500
		}
		return uint64(k) ^ 1<<63
	}
	var cs []primSortCase
	for _, n := range primSizes {
		cs = append(cs, primSortCase{fmt.Sprintf("u32 full n=%d", n), n, false, true, 32, -1, full32})
	}
	cs = append(cs,
		primSortCase{"u32 few", 100000, false, true, 32, -1, few},
		primSortCase{"u32 few 8 bits", 100001, false, true, 8, -1, few},
		primSortCase{"u32 small", 200000, false, true, 32, -1, small},
		primSortCase{"u32 high byte", 50000, false, true, 32, -1, high},
		primSortCase{"u32 all equal", 10000, false, true, 32, -1, same},
		primSortCase{"u32 hot", 300000, false, true, 32, -1, hot},
		primSortCase{"u32 keys only", 70000, false, false, 32, -1, full32},
		primSortCase{"u64 full", 100000, true, true, 64, -1, full64},
		primSortCase{"u64 keys only", 100003, true, false, 64, -1, full64},
		primSortCase{"u64 signed", 150000, true, true, 64, -1, signed},
		primSortCase{"u64 count", 50000, true, true, 64, 12345, signed},
		primSortCase{"u64 count 0", 5000, true, false, 64, 0, signed},
		primSortCase{"u64 count 1", 5000, true, false, 64, 1, signed},
		primSortCase{"u64 count > n", 5000, true, true, 64, 9000, full64},
		primSortCase{"u32 count", 40000, false, true, 32, 39999, few},
	)
	return cs
}

func TestRadixSort(t *testing.T) {
	be := gpuBackend(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range primSortCases() {
		n := tc.n
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = tc.key(rng, i)
		}
		m := n
		if tc.limit >= 0 {
			m = min(tc.limit, n)
		}
		type kv struct {
			k uint64
			v uint32
		}
		want := make([]kv, m)
		for i := range want {
			want[i] = kv{keys[i], uint32(i)}
		}
		mask := uint64(math.MaxUint64)
		if tc.bits < 64 {
			mask = 1<<tc.bits - 1
		}
		sort.SliceStable(want, func(a, b int) bool { return want[a].k&mask < want[b].k&mask })

		ks := 4
		var kt tensor.Tensor
		if tc.wide {
			ks = 8
			k64 := make([]int64, n)
			for i, k := range keys {
				k64[i] = int64(k)
			}
			kt = be.Alloc(tensor.Int64, max(n, 1))
			if n > 0 {
				be.Upload(kt.Prefix(n), k64)
			}
		} else {
			k32 := make([]uint32, n)
			for i, k := range keys {
				k32[i] = uint32(k)
			}
			kt = primUpload32(t, be, k32)
		}
		idx := make([]uint32, n)
		for i := range idx {
			idx[i] = uint32(i)
		}
		vt := primUpload32(t, be, idx)
		var cnt tensor.Tensor
		if tc.limit >= 0 {
			cnt = primUpload32(t, be, []uint32{uint32(tc.limit)})
		}
		primDo(t, be, func(c *cuda.Ctx) error {
			var s primSort
			if err := be.primWorkspace(c, func(a *primArena) { s = newPrimSort(a, n, tc.wide, tc.vals) }); err != nil {
				return err
			}
			if n == 0 {
				_, err := s.run(be, c, Ptr(cnt), tc.bits)
				return err
			}
			if err := c.DtoD(s.keys[0], Ptr(kt), ks*n, be.s); err != nil {
				return err
			}
			if tc.vals {
				if err := c.DtoD(s.vals[0], Ptr(vt), 4*n, be.s); err != nil {
					return err
				}
			}
			i, err := s.run(be, c, Ptr(cnt), tc.bits)
			if err != nil {
				return err
			}
			if want := (tc.bits + 7) / 8 % 2; i != want {
				return fmt.Errorf("result in buffer %d, want %d", i, want)
			}
			if err := c.DtoD(Ptr(kt), s.keys[i], ks*n, be.s); err != nil {
				return err
			}
			if tc.vals {
				return c.DtoD(Ptr(vt), s.vals[i], 4*n, be.s)
			}
			return nil
		})
		var got []uint64
		if tc.wide {
			got = primDownload64(t, be, kt, m)
		} else {
			for _, k := range primDownload32(t, be, kt, m) {
				got = append(got, uint64(k))
			}
		}
		gv := primDownload32(t, be, vt, m)
		for i := range want {
			if got[i] != want[i].k {
				t.Fatalf("%s: key[%d] = %#x, want %#x", tc.name, i, got[i], want[i].k)
			}
			if tc.vals && gv[i] != want[i].v {
				t.Fatalf("%s: value[%d] = %d, want %d (not stable)", tc.name, i, gv[i], want[i].v)
			}
		}
		be.Free(kt)
		be.Free(vt)
		if tc.limit >= 0 {
			be.Free(cnt)
		}
	}
}
