package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The overflow guard's tests (guard.go): a step whose checked tensors hold
// Inf or NaN (float32, float16, bfloat16) leaves weights, moments and last
// steps unchanged bit for bit and is counted; a clean guarded step equals an
// unguarded one bit for bit; both inside a CUDA graph's capture and replay.
// Each test has a backend of its own (the skip count is per backend).

var (
	guardDTypes = []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16}
	guardBad    = []float32{float32(math.Inf(1)), float32(math.NaN()), float32(math.Inf(-1))}
)

// guardOps is the test's view of a backend: uploads and bit-exact
// downloads of float32 and int32 tensors.
type guardOps struct {
	t  *testing.T
	be *Backend
}

func (o guardOps) up(dt tensor.DType, vals []float32, shape ...int) tensor.Tensor {
	x := o.be.Alloc(dt, shape...)
	o.be.Upload(x, vals)
	return x
}

func (o guardOps) ints(vals []int32, shape ...int) tensor.Tensor {
	x := o.be.Alloc(tensor.Int32, shape...)
	o.be.Upload(x, vals)
	return x
}

// bits are the stored words of a float32 or int32 tensor (nil for the zero
// tensor).
func (o guardOps) bits(x tensor.Tensor) []uint32 {
	o.t.Helper()
	if x.IsZero() {
		return nil
	}
	out := make([]uint32, x.Len())
	switch x.DType {
	case tensor.Float32:
		f := make([]float32, x.Len())
		if err := o.be.Download(f, x); err != nil {
			o.t.Fatal(err)
		}
		for i, v := range f {
			out[i] = math.Float32bits(v)
		}
	case tensor.Int32:
		s := make([]int32, x.Len())
		if err := o.be.Download(s, x); err != nil {
			o.t.Fatal(err)
		}
		for i, v := range s {
			out[i] = uint32(v)
		}
	default:
		o.t.Fatalf("bits of %v", x)
	}
	return out
}

func (o guardOps) skipped() int64 {
	o.t.Helper()
	n, err := o.be.GuardSkipped()
	if err != nil {
		o.t.Fatal(err)
	}
	return n
}

// sameBits fails when two sets of tensors differ in any bit.
func (o guardOps) sameBits(what string, a, b []tensor.Tensor) {
	o.t.Helper()
	for i := range a {
		x, y := o.bits(a[i]), o.bits(b[i])
		if d := slices.Compare(x, y); d != 0 {
			for j := range x {
				if x[j] != y[j] {
					o.t.Fatalf("%s: tensor %d element %d: %#08x, want %#08x", what, i, j, x[j], y[j])
				}
			}
		}
	}
}

// snapshot is the bits of every tensor of ts.
func (o guardOps) snapshot(ts ...tensor.Tensor) [][]uint32 {
	o.t.Helper()
	s := make([][]uint32, len(ts))
	for i, x := range ts {
		s[i] = o.bits(x)
	}
	return s
}

func (o guardOps) unchanged(what string, before [][]uint32, ts ...tensor.Tensor) {
	o.t.Helper()
	for i, x := range ts {
		if got := o.bits(x); !slices.Equal(got, before[i]) {
			for j := range got {
				if got[j] != before[i][j] {
					o.t.Fatalf("%s: tensor %d element %d changed: %#08x, was %#08x", what, i, j, got[j], before[i][j])
				}
			}
		}
	}
}

func randF32(rng *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	return v
}

// optSet is a DenseUpdate's or SparseUpdate's weights and states.
type optSet struct{ w, s1, s2, last tensor.Tensor }

func (s optSet) all() []tensor.Tensor { return []tensor.Tensor{s.w, s.s1, s.s2, s.last} }

// newOptSet uploads w and the states kind owns (random, v ≥ 0) and, with
// lastSteps, the LazyGlobal last steps.
func (o guardOps) newOptSet(rng *rand.Rand, kind tensor.OptKind, rows, v int, lastSteps []int32) optSet {
	n := rows * v
	s := optSet{w: o.up(tensor.Float32, randF32(rng, n, -1, 1), rows, v)}
	if kind != tensor.SGD {
		lo := -0.01
		if kind == tensor.AdaGrad {
			lo = 0
		}
		s.s1 = o.up(tensor.Float32, randF32(rng, n, lo, 0.01), rows, v)
	}
	if kind == tensor.Adam {
		s.s2 = o.up(tensor.Float32, randF32(rng, n, 0.001, 0.01), rows, v)
	}
	if lastSteps != nil {
		s.last = o.ints(lastSteps, rows)
	}
	return s
}

func (o guardOps) twin(s optSet) optSet {
	cp := func(x tensor.Tensor) tensor.Tensor {
		if x.IsZero() {
			return x
		}
		y := o.be.Alloc(x.DType, x.Shape...)
		o.be.Copy(y, x)
		return y
	}
	return optSet{cp(s.w), cp(s.s1), cp(s.s2), cp(s.last)}
}

func (o guardOps) free(ts ...tensor.Tensor) {
	for _, x := range ts {
		o.be.Free(x)
	}
}

// overflowing is a tensor of dt holding n finite values and bad at pos.
func (o guardOps) overflowing(rng *rand.Rand, dt tensor.DType, n, pos int, bad float32) tensor.Tensor {
	v := randF32(rng, n, -1000, 1000)
	v[pos] = bad
	return o.up(dt, v, n)
}

// TestGuardSkipHost: the update kernels' skip argument is null without a
// guard and while it is disarmed, the flag's address while a step is armed;
// GuardEnd of a disarmed guard queues nothing (this backend has no device).
func TestGuardSkipHost(t *testing.T) {
	be := hostGraphBackend()
	if p := be.guardSkip(); p != 0 {
		t.Fatalf("no guard: skip %#x", p)
	}
	be.guard = &guardState{mem: 0x200000}
	if p := be.guardSkip(); p != 0 {
		t.Fatalf("disarmed: skip %#x", p)
	}
	be.GuardEnd()
	be.guard.armed = true
	if p := be.guardSkip(); p != 0x200000+guardFlag {
		t.Fatalf("armed: skip %#x", p)
	}
	be.graph.deferring = true // GuardEnd keeps its work for the graph step instead of queuing it
	be.GuardEnd()
	if be.guard.armed || be.guardSkip() != 0 || len(be.graph.ops) != 1 || be.graph.ops[0].op != "guard_end" {
		t.Fatalf("after GuardEnd: armed %v, skip %#x, kept %v", be.guard.armed, be.guardSkip(), be.graph.ops)
	}
}

// TestGPUGuardDenseUpdate: for every optimizer and every dtype of the
// checked tensor, a step with Inf or NaN leaves w and the moments as they
// were (with a float32 gradient that itself holds the bad value, so an
// applied update would have written NaN), the next clean guarded step
// equals an unguarded one bit for bit (GuardBegin cleared the flag), and
// an unguarded update after a skipped step applies (GuardEnd disarmed the
// raised flag). Every skipped step is counted, no clean one.
func TestGPUGuardDenseUpdate(t *testing.T) {
	o := guardOps{t, graphTestBackend(t, Options{})}
	be := o.be
	rng := rand.New(rand.NewPCG(3, 5))
	skips := int64(0)
	for _, kind := range optKinds {
		for di, dt := range guardDTypes {
			for bi, bad := range guardBad {
				n := []int{1, 1000, 4099, 70001}[(di+bi)%4]
				ref := o.newOptSet(rng, kind, n, 1, nil)
				gs := o.twin(ref)
				name := fmt.Sprintf("dense kind %d %v %v n %d", kind, dt, bad, n)
				p := optParams(kind, tensor.Local, int64(1+bi), 1024)
				grad := randF32(rng, n, -1024, 1024)
				pos := []int{0, n / 2, n - 1}[bi]
				g := o.up(tensor.Float32, grad, n)
				var x tensor.Tensor // the checked tensor holding bad
				if dt == tensor.Float32 {
					g2 := slices.Clone(grad)
					g2[pos] = bad
					x = o.up(tensor.Float32, g2, n)
				} else {
					x = o.overflowing(rng, dt, n, pos, bad)
				}
				before := o.snapshot(gs.w, gs.s1, gs.s2)
				clean := o.up(dt, randF32(rng, n, -1000, 1000), n)

				// The skipped step: its gradient is x for float32.
				be.GuardBegin()
				be.GuardCheck(clean)
				be.GuardCheck(x)
				if dt == tensor.Float32 {
					be.DenseUpdate(p, gs.w, x, gs.s1, gs.s2)
				} else {
					be.DenseUpdate(p, gs.w, g, gs.s1, gs.s2)
				}
				be.GuardEnd()
				o.unchanged(name+" skipped", before, gs.w, gs.s1, gs.s2)
				skips++
				if got := o.skipped(); got != skips {
					t.Fatalf("%s: %d steps skipped, want %d", name, got, skips)
				}

				// A clean guarded step equals an unguarded one.
				p.Step++
				be.DenseUpdate(p, ref.w, g, ref.s1, ref.s2)
				be.GuardBegin()
				be.GuardCheck(clean)
				be.GuardCheck(g)
				be.DenseUpdate(p, gs.w, g, gs.s1, gs.s2)
				be.GuardEnd()
				o.sameBits(name+" clean guarded step", gs.all(), ref.all())
				if slices.Equal(o.bits(gs.w), before[0]) {
					t.Fatalf("%s: the clean step changed nothing", name)
				}

				// A skipped step, then an unguarded update: it applies.
				be.GuardBegin()
				be.GuardCheck(x)
				be.GuardEnd()
				skips++
				p.Step++
				be.DenseUpdate(p, ref.w, g, ref.s1, ref.s2)
				be.DenseUpdate(p, gs.w, g, gs.s1, gs.s2)
				o.sameBits(name+" unguarded after a skipped step", gs.all(), ref.all())
				o.free(g, x, clean)
				o.free(ref.all()...)
				o.free(gs.all()...)
			}
		}
	}
	if got := o.skipped(); got != skips {
		t.Errorf("%d steps skipped, want %d", got, skips)
	}
}

// sparseIn is a SparseUpdate's batch: unique rows (ascending, distinct,
// one pad entry past the count), their gradients and the count.
type sparseIn struct{ rows, grad, num tensor.Tensor }

func (o guardOps) sparseBatch(rng *rand.Rand, tableRows, v int, scale float64, badAt int, bad float32) sparseIn {
	var rows []int32
	for r := 0; r < tableRows; r++ {
		if rng.Float64() < 0.4 || r == tableRows-1 {
			rows = append(rows, int32(r))
		}
	}
	nu := len(rows)
	rows = append(rows, 0)
	g := randF32(rng, (nu+1)*v, -scale, scale)
	if badAt >= 0 {
		g[badAt%(nu*v)] = bad
	}
	return sparseIn{o.ints(rows, nu+1), o.up(tensor.Float32, g, nu+1, v), o.ints([]int32{int32(nu)}, 1)}
}

func (s sparseIn) all() []tensor.Tensor { return []tensor.Tensor{s.rows, s.grad, s.num} }

// TestGPUGuardSparseUpdate: SparseUpdate Local, Global and LazyGlobal (the
// scalar and the 16-byte kernels) and LazyFlush skip when a checked tensor
// holds Inf or NaN: table, moments and last steps unchanged bit for bit;
// clean guarded steps equal unguarded ones bit for bit, the LazyGlobal
// rows' next catch-up included.
func TestGPUGuardSparseUpdate(t *testing.T) {
	o := guardOps{t, graphTestBackend(t, Options{})}
	be := o.be
	rng := rand.New(rand.NewPCG(11, 13))
	skips := int64(0)
	shapes := [][2]int{{37, 5}, {300, 128}}
	for _, kind := range optKinds {
		for _, up := range []tensor.UpdateType{tensor.Local, tensor.Global, tensor.LazyGlobal} {
			for si, sh := range shapes {
				dt := guardDTypes[(int(kind)+int(up)+si)%3]
				bad := guardBad[(int(kind)+si)%3]
				rows, v := sh[0], sh[1]
				name := fmt.Sprintf("sparse kind %d update %d table %dx%d %v %v", kind, up, rows, v, dt, bad)
				const step0 = 20
				last := make([]int32, rows)
				for i := range last {
					last[i] = int32(rng.IntN(step0))
				}
				ref := o.newOptSet(rng, kind, rows, v, last)
				gs := o.twin(ref)
				p := optParams(kind, up, step0, 256)

				// The skipped step.
				in := o.sparseBatch(rng, rows, v, 256, -1, 0)
				x := in.grad
				if dt != tensor.Float32 {
					x = o.overflowing(rng, dt, 999, 998, bad)
				} else {
					o.free(in.all()...)
					in = o.sparseBatch(rng, rows, v, 256, rng.IntN(1<<20), bad)
					x = in.grad
				}
				before := o.snapshot(gs.all()...)
				be.GuardBegin()
				be.GuardCheck(x)
				be.SparseUpdate(p, gs.w, gs.s1, gs.s2, gs.last, in.rows, in.grad, in.num)
				be.GuardEnd()
				o.unchanged(name+" skipped", before, gs.all()...)
				skips++
				if got := o.skipped(); got != skips {
					t.Fatalf("%s: %d steps skipped, want %d", name, got, skips)
				}
				if dt != tensor.Float32 {
					o.free(x)
				}
				o.free(in.all()...)

				// Two clean guarded steps equal unguarded ones (the second
				// catches LazyGlobal rows up over the skipped step).
				for k := int64(1); k <= 2; k++ {
					p = optParams(kind, up, step0+k, 256)
					in = o.sparseBatch(rng, rows, v, 256, -1, 0)
					be.SparseUpdate(p, ref.w, ref.s1, ref.s2, ref.last, in.rows, in.grad, in.num)
					be.GuardBegin()
					be.GuardCheck(in.grad)
					be.SparseUpdate(p, gs.w, gs.s1, gs.s2, gs.last, in.rows, in.grad, in.num)
					be.GuardEnd()
					o.sameBits(fmt.Sprintf("%s clean guarded step %d", name, k), gs.all(), ref.all())
					o.free(in.all()...)
				}

				if up == tensor.LazyGlobal && kind == tensor.Adam {
					x = o.overflowing(rng, dt, 64, 3, bad)
					p = optParams(kind, up, step0+5, 256)
					before = o.snapshot(gs.all()...)
					be.GuardBegin()
					be.GuardCheck(x)
					be.LazyFlush(p, gs.w, gs.s1, gs.s2, gs.last)
					be.GuardEnd()
					o.unchanged(name+" skipped flush", before, gs.all()...)
					skips++
					be.LazyFlush(p, ref.w, ref.s1, ref.s2, ref.last)
					be.GuardBegin()
					be.GuardCheck(gs.w)
					be.LazyFlush(p, gs.w, gs.s1, gs.s2, gs.last)
					be.GuardEnd()
					o.sameBits(name+" clean guarded flush", gs.all(), ref.all())
					if slices.Equal(o.bits(gs.last), before[3]) {
						t.Fatalf("%s: the flush changed no last step", name)
					}
					o.free(x)
				}
				o.free(ref.all()...)
				o.free(gs.all()...)
			}
		}
	}
	if got := o.skipped(); got != skips {
		t.Errorf("%d steps skipped, want %d", got, skips)
	}
}

// TestGPUGuardSkippedRangeError: a skipped SparseUpdate still checks its
// rows and count (Local, Global, LazyGlobal): ErrRange at the next Sync, as
// an applied step reports it, and the table stays unchanged.
func TestGPUGuardSkippedRangeError(t *testing.T) {
	o := guardOps{t, graphTestBackend(t, Options{})}
	be := o.be
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, v = 10, 4
	for _, up := range []tensor.UpdateType{tensor.Local, tensor.Global, tensor.LazyGlobal} {
		for _, num := range []int32{3, 4} { // a row outside the table; a count above the capacity
			s := o.newOptSet(rng, tensor.Adam, rows, v, make([]int32, rows))
			ur := o.ints([]int32{1, 4, rows}, 3)
			ug := o.up(tensor.Float32, randF32(rng, 3*v, -1, 1), 3, v)
			nu := o.ints([]int32{num}, 1)
			x := o.overflowing(rng, tensor.Float16, 8, 0, float32(math.Inf(1)))
			before := o.snapshot(s.all()...)
			be.GuardBegin()
			be.GuardCheck(x)
			be.SparseUpdate(optParams(tensor.Adam, up, 1, 1), s.w, s.s1, s.s2, s.last, ur, ug, nu)
			be.GuardEnd()
			if err := be.Sync(); !errors.Is(err, tensor.ErrRange) {
				t.Errorf("update %d count %d: skipped step: %v, want ErrRange", up, num, err)
			}
			be.Reset()
			o.unchanged(fmt.Sprintf("update %d count %d", up, num), before, s.all()...)
			o.free(ur, ug, nu, x)
			o.free(s.all()...)
		}
	}
}

// TestGPUGuardCheck: guard_check finds one Inf or NaN at any position of
// float32, float16 and bfloat16 tensors of many lengths and start offsets
// within a 16-byte line (views into a larger buffer), in a tensor spanning
// many grid strides, and never on finite extremes (the largest finite,
// subnormals, −0). A later check of a step whose flag is raised changes
// nothing; int tensors are refused.
func TestGPUGuardCheck(t *testing.T) {
	o := guardOps{t, graphTestBackend(t, Options{})}
	be := o.be
	rng := rand.New(rand.NewPCG(17, 19))
	finite := map[tensor.DType][]float32{
		tensor.Float32:  {math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 1},
		tensor.Float16:  {65504, -65504, 1.0 / (1 << 24), float32(math.Copysign(0, -1)), 65519},
		tensor.BFloat16: {3.3895314e38, -3.3895314e38, 9.2e-41, float32(math.Copysign(0, -1)), 1},
	}
	found := func(x tensor.Tensor) bool {
		t.Helper()
		n0 := o.skipped()
		be.GuardBegin()
		be.GuardCheck(x)
		be.GuardEnd()
		return o.skipped() > n0
	}
	for _, dt := range guardDTypes {
		es := dt.Size()
		base := be.Alloc(dt, 64)
		for off := 0; off < 16/es; off++ {
			for _, n := range []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 40} {
				if off+n > 64 {
					continue
				}
				view := tensor.Tensor{DType: dt, Shape: []int{n}, Buf: &store{be: be, p: Ptr(base).Add(off * es), n: n}}
				vals := make([]float32, 64)
				for i := range vals {
					vals[i] = finite[dt][rng.IntN(len(finite[dt]))]
				}
				// Bad values outside the view must not count.
				for i := range vals {
					if i < off || i >= off+n {
						vals[i] = float32(math.NaN())
					}
				}
				be.Upload(base, vals)
				if found(view) {
					t.Fatalf("%v offset %d n %d: finite values flagged", dt, off, n)
				}
				for pos := 0; pos < n; pos++ {
					w := slices.Clone(vals)
					w[off+pos] = guardBad[pos%3]
					be.Upload(base, w)
					if !found(view) {
						t.Fatalf("%v offset %d n %d: %v at %d not found", dt, off, n, w[off+pos], pos)
					}
				}
			}
		}
		be.Free(base)

		const n = 2_500_003
		big := make([]float32, n)
		for i := range big {
			big[i] = float32(rng.NormFloat64())
		}
		x := o.up(dt, big, n)
		if found(x) {
			t.Fatalf("%v n %d: finite values flagged", dt, n)
		}
		big[n-1] = float32(math.NaN())
		be.Upload(x, big)
		if !found(x) {
			t.Fatalf("%v n %d: the last element's NaN not found", dt, n)
		}
		be.Free(x)
	}
	// Several checks in a step: one bad tensor among clean ones counts once.
	a, b := o.up(tensor.Float16, []float32{1, 2, 3}, 3), o.up(tensor.BFloat16, []float32{float32(math.Inf(1))}, 1)
	n0 := o.skipped()
	be.GuardBegin()
	be.GuardCheck(a)
	be.GuardCheck(b)
	be.GuardCheck(a)
	be.GuardCheck(b)
	be.GuardEnd()
	be.GuardEnd() // disarmed: no second count
	if got := o.skipped(); got != n0+1 {
		t.Errorf("one bad step counted %d times", got-n0)
	}
	bad := o.ints([]int32{1}, 1)
	be.GuardCheck(bad)
	if err := be.Sync(); !errors.Is(err, tensor.ErrDType) {
		t.Errorf("int32 tensor: %v, want ErrDType", err)
	}
	be.Reset()
	be.GuardCheck(tensor.Tensor{}) // absent: nothing to check
	if err := be.Sync(); err != nil {
		t.Errorf("absent tensor: %v", err)
	}
	o.free(a, b, bad)
}

// TestGPUGuardGraph: guarded steps (dense Adam and LazyGlobal Adam rows,
// checks of a float16 and a float32 tensor) captured into a CUDA graph at
// the first graph step and replayed after, with clean and overflowing
// gradients uploaded between steps into the same buffers: every step
// replays (an armed step's launches hash equal), equals the same step run
// eagerly bit for bit, the overflowing ones change nothing, and the skip
// count is the eager and the graph steps' skips.
func TestGPUGuardGraph(t *testing.T) {
	o := guardOps{t, graphTestBackend(t, Options{})}
	be := o.be
	rng := rand.New(rand.NewPCG(23, 29))
	const n, rows, v = 4099, 500, 16
	type set struct {
		dense, emb optSet
		g, ug, h16 tensor.Tensor
		ur, num    tensor.Tensor
	}
	var ur []int32
	for r := 0; r < rows; r += 3 {
		ur = append(ur, int32(r))
	}
	mk := func() set {
		s := set{dense: o.newOptSet(rand.New(rand.NewPCG(1, 1)), tensor.Adam, n, 1, nil),
			emb: o.newOptSet(rand.New(rand.NewPCG(2, 2)), tensor.Adam, rows, v, make([]int32, rows))}
		s.g, s.ug, s.h16 = be.Alloc(tensor.Float32, n), be.Alloc(tensor.Float32, len(ur), v), be.Alloc(tensor.Float16, 777)
		s.ur, s.num = o.ints(ur, len(ur)), o.ints([]int32{int32(len(ur))}, 1)
		return s
	}
	eager, graphed := mk(), mk()
	sched := tensor.Schedule{BaseLR: 0.01, WarmupSteps: 3, DecayStart: 5, DecaySteps: 6, DecayPower: 2, EndLR: 1e-4}
	step := func(s set, k int64) {
		p := tensor.OptParams{Kind: tensor.Adam, Update: tensor.LazyGlobal, LR: sched.LR(k), Step: k,
			Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, LossScale: 1024, Schedule: sched}
		be.GuardBegin()
		be.GuardCheck(s.h16)
		be.GuardCheck(s.g)
		be.GuardCheck(s.ug)
		be.DenseUpdate(p, s.dense.w, s.g, s.dense.s1, s.dense.s2)
		be.SparseUpdate(p, s.emb.w, s.emb.s1, s.emb.s2, s.emb.last, s.ur, s.ug, s.num)
		be.GuardEnd()
	}
	// The inputs of step k: an Inf in the float16 tensor at step 4, a NaN
	// in the float32 dense gradient at step 6, an Inf in the row gradients
	// at step 7.
	inputs := func(k int64) {
		g, ug, h := randF32(rng, n, -1024, 1024), randF32(rng, len(ur)*v, -1024, 1024), randF32(rng, 777, -100, 100)
		switch k {
		case 4:
			h[300] = float32(math.Inf(1))
		case 6:
			g[n-1] = float32(math.NaN())
		case 7:
			ug[5] = float32(math.Inf(-1))
		}
		for _, s := range []set{eager, graphed} {
			be.Upload(s.g, g)
			be.Upload(s.ug, ug)
			be.Upload(s.h16, h)
		}
	}
	all := func(s set) []tensor.Tensor { return append(s.dense.all(), s.emb.all()...) }
	inputs(1)
	step(eager, 1)
	step(graphed, 1) // the warm-up step, eager
	skips := int64(0)
	for k := int64(2); k <= 9; k++ {
		inputs(k)
		before := o.snapshot(all(graphed)...)
		step(eager, k)
		if err := be.BeginGraphStep(); err != nil {
			t.Fatal(err)
		}
		step(graphed, k)
		r := be.EndGraphStep(false)
		if r.Why != "" || !r.Replayed || r.Captured != (k == 2) {
			t.Fatalf("step %d: %+v", k, r)
		}
		o.sameBits(fmt.Sprintf("step %d graph vs eager", k), all(graphed), all(eager))
		if k == 4 || k == 6 || k == 7 {
			o.unchanged(fmt.Sprintf("overflowing step %d", k), before, all(graphed)...)
			skips += 2
		} else if slices.Equal(o.bits(graphed.dense.w), before[0]) {
			t.Fatalf("clean step %d changed nothing", k)
		}
		if got := o.skipped(); got != skips {
			t.Fatalf("after step %d: %d steps skipped, want %d", k, got, skips)
		}
	}
	if be.GraphReplays() != 8 {
		t.Errorf("%d replays, want 8", be.GraphReplays())
	}
}

// TestGPUGuardFlag: GuardFlag is the step's flag: 0 after GuardBegin, 1
// after a check that found Inf; a flag raised through it (as an all-reduce
// with another rank's would) skips the step's updates and counts it.
func TestGPUGuardFlag(t *testing.T) {
	o := guardOps{t, graphTestBackend(t, Options{})}
	be := o.be
	rng := rand.New(rand.NewPCG(31, 37))
	flag := be.GuardFlag()
	read := func() int32 {
		t.Helper()
		v := make([]int32, 1)
		if err := be.Download(v, flag); err != nil {
			t.Fatal(err)
		}
		return v[0]
	}
	x := o.overflowing(rng, tensor.BFloat16, 100, 50, float32(math.Inf(1)))
	be.GuardBegin()
	be.GuardCheck(x)
	if f := read(); f != 1 {
		t.Fatalf("flag %d after an Inf, want 1", f)
	}
	be.GuardEnd()
	be.GuardBegin()
	if f := read(); f != 0 {
		t.Fatalf("flag %d after GuardBegin, want 0", f)
	}
	s := o.newOptSet(rng, tensor.MomentumSGD, 64, 1, nil)
	g := o.up(tensor.Float32, randF32(rng, 64, -1, 1), 64)
	before := o.snapshot(s.all()...)
	be.GuardCheck(g)
	be.Fill(flag, 1)
	be.DenseUpdate(optParams(tensor.MomentumSGD, tensor.Local, 1, 1), s.w, g, s.s1, s.s2)
	be.GuardEnd()
	o.unchanged("a flag raised from outside", before, s.all()...)
	if n := o.skipped(); n != 2 {
		t.Errorf("%d steps skipped, want 2", n)
	}
	o.free(x, g)
	o.free(s.all()...)
}

// BenchmarkGuardCheck times a guarded step's scan of one finite tensor
// (GuardBegin, GuardCheck, GuardEnd), the calls queued back to back and
// synchronised once at the end, so ns/op is the device time per step;
// SetBytes is the tensor's size (MB/s reads against the H200's ≈ 4 TB/s).
// Run on the GPU machine:
//
//	gpu.test -test.run '^$' -test.bench 'GuardCheck' -test.benchtime 200x
func BenchmarkGuardCheck(b *testing.B) {
	be := gpuBackend(b)
	for _, dt := range guardDTypes {
		for _, n := range []int{1 << 16, 1 << 20, 1 << 24} {
			b.Run(fmt.Sprintf("%v/%d", dt, n), func(b *testing.B) {
				x := be.Alloc(dt, n)
				be.Fill(x, 1)
				defer be.Free(x)
				b.SetBytes(int64(n * dt.Size()))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					be.GuardBegin()
					be.GuardCheck(x)
					be.GuardEnd()
				}
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
