package gpu

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

var optKinds = []tensor.OptKind{tensor.SGD, tensor.MomentumSGD, tensor.Nesterov, tensor.AdaGrad, tensor.Adam}

// optSched has a warmup and a decay within the tests' few steps.
var optSched = tensor.Schedule{BaseLR: 0.01, WarmupSteps: 3, DecayStart: 6, DecaySteps: 5, DecayPower: 2, EndLR: 1e-4}

func optParams(kind tensor.OptKind, up tensor.UpdateType, step int64, lossScale float64) tensor.OptParams {
	return tensor.OptParams{Kind: kind, Update: up, LR: optSched.LR(step), Step: step, Momentum: 0.9,
		Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, LossScale: lossScale, Schedule: optSched}
}

// optStates are optimizer states for n weights: random (v ≥ 0 where it is
// a sum of squares), or zero as a fresh model's.
func (h *harness) optStates(kind tensor.OptKind, n int, zero bool) (s1, s2 pair) {
	if zero && kind != tensor.SGD {
		s1, s2 = h.Floats(make([]float64, n), n), h.Zero()
		if kind == tensor.Adam {
			s2 = h.Floats(make([]float64, n), n)
		}
		return s1, s2
	}
	switch kind {
	case tensor.SGD:
		return h.Zero(), h.Zero()
	case tensor.AdaGrad:
		return h.Rand(0, 0.01, n), h.Zero()
	case tensor.Adam:
		return h.Rand(-0.1, 0.1, n), h.Rand(0.001, 0.01, n)
	}
	return h.Rand(-0.01, 0.01, n), h.Zero()
}

func (h *harness) checkStates(name string, kind tensor.OptKind, s1, s2 pair) {
	h.t.Helper()
	if kind != tensor.SGD {
		h.Check(name+" s1", s1, optTol(s1))
	}
	if kind == tensor.Adam {
		h.Check(name+" s2", s2, optTol(s2))
	}
}

// optTol is tolFP32, loosened for operands of fewer than 100 elements: there
// one float32 cancellation (Adam's m = β1·m + (1−β1)·g with opposite signs)
// can dominate the norm.
func optTol(p pair) float64 {
	if p.C.Len() < 100 {
		return 1e-4
	}
	return tolFP32
}

func TestDenseUpdate(t *testing.T) {
	h := newHarness(t)
	for _, kind := range optKinds {
		for _, n := range []int{1, 7, 1000, 70001, 2_500_003} {
			for _, ls := range []float64{0, 1024} {
				w := h.Rand(-1, 1, n)
				s1, s2 := h.optStates(kind, n, ls != 0)
				for step := int64(1); step <= 3; step++ {
					scale := max(ls, 1)
					g := h.Rand(-scale, scale, n)
					p := optParams(kind, tensor.Local, step, ls)
					h.g.DenseUpdate(p, w.G, g.G, s1.G, s2.G)
					h.c.DenseUpdate(p, w.C, g.C, s1.C, s2.C)
					name := fmt.Sprintf("dense kind %d n %d scale %v step %d", kind, n, ls, step)
					h.Check(name+" w", w, optTol(w))
					h.checkStates(name, kind, s1, s2)
					h.Free(g)
				}
				h.Free(w, s1, s2)
			}
		}
	}
}

// sparseStep is one SparseUpdate on both backends from a host list of
// distinct ascending rows; uniqRows/uniqGrad get pad garbage entries past
// the count (out-of-range rows, huge gradients) that must not be read.
func (h *harness) sparseStep(p tensor.OptParams, tab, s1, s2, last pair, v int, rows []int64, pad int) {
	h.t.Helper()
	nu := len(rows)
	capacity := nu + pad
	ur := append(slices.Clone(rows), make([]int64, pad)...)
	for i := nu; i < capacity; i++ {
		ur[i] = int64(1<<30 + i)
	}
	scale := max(p.LossScale, 1)
	ug := make([]float64, capacity*v)
	for i := range ug {
		if i < nu*v {
			ug[i] = scale * (2*h.rng.Float64() - 1)
		} else {
			ug[i] = 1e30
		}
	}
	uRows := h.Ints(tensor.Int32, ur, capacity)
	uGrad := h.Floats(ug, capacity, v)
	num := h.Ints(tensor.Int32, []int64{int64(nu)}, 1)
	h.g.SparseUpdate(p, tab.G, s1.G, s2.G, last.G, uRows.G, uGrad.G, num.G)
	h.c.SparseUpdate(p, tab.C, s1.C, s2.C, last.C, uRows.C, uGrad.C, num.C)
	h.Sync()
	h.Free(uRows, uGrad, num)
}

// uniqSet picks the distinct rows of a step: cycling through random
// subsets, all rows, one row and none.
func (h *harness) uniqSet(step int64, rows int) []int64 {
	var out []int64
	switch step % 4 {
	case 1:
		for r := 0; r < rows; r++ {
			if h.rng.Float64() < 0.3 {
				out = append(out, int64(r))
			}
		}
	case 2:
		for r := 0; r < rows; r++ {
			out = append(out, int64(r))
		}
	case 3:
		out = append(out, int64(h.rng.IntN(rows)))
	}
	return out
}

func TestSparseUpdate(t *testing.T) {
	h := newHarness(t)
	shapes := [][2]int{{1, 1}, {37, 5}, {300, 128}, {1000, 33}, {3000, 16}}
	for _, kind := range optKinds {
		for _, up := range []tensor.UpdateType{tensor.Local, tensor.Global, tensor.LazyGlobal} {
			for _, sh := range shapes {
				rows, v := sh[0], sh[1]
				ls := 1.0
				if rows%2 == 1 {
					ls = 256
				}
				tab := h.Rand(-1, 1, rows, v)
				s1, s2 := h.optStates(kind, rows*v, rows%2 == 0)
				last := h.Ints(tensor.Int32, make([]int64, rows), rows)
				const steps = 13
				for step := int64(1); step <= steps; step++ {
					p := optParams(kind, up, step, ls)
					h.sparseStep(p, tab, s1, s2, last, v, h.uniqSet(step, rows), int(step%3))
					name := fmt.Sprintf("sparse kind %d update %d table %dx%d step %d", kind, up, rows, v, step)
					h.Check(name+" table", tab, optTol(tab))
					h.checkStates(name, kind, s1, s2)
					if up == tensor.LazyGlobal && kind == tensor.Adam {
						h.Check(name+" lastStep", last, 0)
					}
				}
				if up == tensor.LazyGlobal {
					for _, to := range []int64{steps, steps + 4} {
						p := optParams(kind, up, to, ls)
						h.g.LazyFlush(p, tab.G, s1.G, s2.G, last.G)
						h.c.LazyFlush(p, tab.C, s1.C, s2.C, last.C)
						name := fmt.Sprintf("flush kind %d table %dx%d to %d", kind, rows, v, to)
						h.Check(name+" table", tab, optTol(tab))
						h.checkStates(name, kind, s1, s2)
						h.Check(name+" lastStep", last, 0)
					}
				}
				h.Free(tab, s1, s2, last)
			}
		}
	}
}

// TestSparseUpdateLarge covers tables larger than one grid (grid-stride
// loops) for the two kinds whose Global update moves every row.
func TestSparseUpdateLarge(t *testing.T) {
	h := newHarness(t)
	for _, kind := range []tensor.OptKind{tensor.MomentumSGD, tensor.Adam} {
		for _, up := range []tensor.UpdateType{tensor.Local, tensor.Global, tensor.LazyGlobal} {
			for _, sh := range [][2]int{{40000, 128}, {1 << 21, 1}} {
				rows, v := sh[0], sh[1]
				tab := h.Rand(-1, 1, rows, v)
				s1, s2 := h.optStates(kind, rows*v, true)
				last := h.Ints(tensor.Int32, make([]int64, rows), rows)
				for step := int64(1); step <= 3; step++ {
					p := optParams(kind, up, step, 64)
					h.sparseStep(p, tab, s1, s2, last, v, h.uniqSet(step, rows), 1)
					name := fmt.Sprintf("large kind %d update %d table %dx%d step %d", kind, up, rows, v, step)
					h.Check(name+" table", tab, optTol(tab))
					h.checkStates(name, kind, s1, s2)
				}
				if up == tensor.LazyGlobal {
					p := optParams(kind, up, 5, 64)
					h.g.LazyFlush(p, tab.G, s1.G, s2.G, last.G)
					h.c.LazyFlush(p, tab.C, s1.C, s2.C, last.C)
					h.Check(fmt.Sprintf("large flush %dx%d table", rows, v), tab, tolFP32)
					h.checkStates("large flush", kind, s1, s2)
				}
				h.Free(tab, s1, s2, last)
			}
		}
	}
}

// TestLazyCatchUpLong: rows skipped for hundreds of steps through the
// warmup and decay of a longer schedule: the series' early stop with the
// default β's, none when β1/√β2 ≥ 1 (β2 0.6, fewer steps so v stays in
// float32 range).
func TestLazyCatchUpLong(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		b2       float64
		step, to int64
		sched    tensor.Schedule
	}{
		{0.999, 1000, 1300, tensor.Schedule{BaseLR: 0.003, WarmupSteps: 100, DecayStart: 500, DecaySteps: 400, DecayPower: 1.5, EndLR: 1e-5}},
		{0.6, 100, 130, tensor.Schedule{BaseLR: 0.003, WarmupSteps: 10, DecayStart: 50, DecaySteps: 60, DecayPower: 2, EndLR: 1e-5}},
	} {
		rows, v := 500, 40
		tab := h.Rand(-1, 1, rows, v)
		s1, s2 := h.optStates(tensor.Adam, rows*v, false)
		lv := make([]int64, rows)
		for i := range lv {
			lv[i] = int64(h.rng.IntN(int(tc.step)))
		}
		last := h.Ints(tensor.Int32, lv, rows)
		p := tensor.OptParams{Kind: tensor.Adam, Update: tensor.LazyGlobal, LR: tc.sched.LR(tc.step), Step: tc.step,
			Beta1: 0.9, Beta2: tc.b2, Epsilon: 1e-7, LossScale: 8, Schedule: tc.sched}
		var sel []int64
		for r := 0; r < rows; r += 3 {
			sel = append(sel, int64(r))
		}
		h.sparseStep(p, tab, s1, s2, last, v, sel, 0)
		name := fmt.Sprintf("long catch-up β2 %v", tc.b2)
		h.Check(name+" table", tab, optTol(tab))
		h.checkStates(name, tensor.Adam, s1, s2)
		h.Check(name+" lastStep", last, 0)
		p.Step, p.LR = tc.to, tc.sched.LR(tc.to)
		h.g.LazyFlush(p, tab.G, s1.G, s2.G, last.G)
		h.c.LazyFlush(p, tab.C, s1.C, s2.C, last.C)
		h.Check(name+" flush table", tab, tolFP32)
		h.checkStates(name+" flush", tensor.Adam, s1, s2)
		h.Check(name+" flush lastStep", last, 0)
		h.Free(tab, s1, s2, last)
	}
}

func TestOptimErrors(t *testing.T) {
	h := newHarness(t)
	g := h.g
	expect := func(name string, sentinel error) {
		t.Helper()
		if err := g.Sync(); !errors.Is(err, sentinel) {
			t.Errorf("%s: got %v, want %v", name, err, sentinel)
		}
		g.Reset()
	}
	const rows, v = 10, 4
	p := optParams(tensor.Adam, tensor.Local, 1, 1)
	tab := g.Alloc(tensor.Float32, rows, v)
	s1 := g.Alloc(tensor.Float32, rows, v)
	s2 := g.Alloc(tensor.Float32, rows, v)
	last := g.Alloc(tensor.Int32, rows)
	ur := g.Alloc(tensor.Int32, 3)
	ug := g.Alloc(tensor.Float32, 3, v)
	num := g.Alloc(tensor.Int32, 1)
	g.Upload(ur, []int32{1, 4, rows})
	for _, up := range []tensor.UpdateType{tensor.Local, tensor.Global, tensor.LazyGlobal} {
		p.Update = up
		g.Upload(num, []int32{3})
		g.SparseUpdate(p, tab, s1, s2, last, ur, ug, num)
		expect(fmt.Sprintf("row outside the table, update %d", up), tensor.ErrRange)
		g.Upload(num, []int32{4})
		g.SparseUpdate(p, tab, s1, s2, last, ur, ug, num)
		expect(fmt.Sprintf("count above capacity, update %d", up), tensor.ErrRange)
		g.Upload(num, []int32{-1})
		g.SparseUpdate(p, tab, s1, s2, last, ur, ug, num)
		expect(fmt.Sprintf("negative count, update %d", up), tensor.ErrRange)
	}
	g.Upload(num, []int32{2})
	p.Update = tensor.Local
	g.SparseUpdate(p, tab, s1, s2, last, ur, ug, num)
	if err := g.Sync(); err != nil {
		t.Errorf("valid prefix: %v", err)
	}

	wide := g.Alloc(tensor.Float32, 3, v+1)
	g.SparseUpdate(p, tab, s1, s2, last, ur, wide, num)
	expect("gradient width", tensor.ErrShape)
	g.SparseUpdate(p, tab, s1, tensor.Tensor{}, last, ur, ug, num)
	expect("missing Adam v", tensor.ErrShape)
	p.Update = tensor.LazyGlobal
	short := g.Alloc(tensor.Int32, rows-1)
	g.SparseUpdate(p, tab, s1, s2, short, ur, ug, num)
	expect("short lastStep", tensor.ErrShape)
	g.LazyFlush(p, tab, s1, s2, short)
	expect("flush short lastStep", tensor.ErrShape)
	g.SparseUpdate(p, tab, s1, s2, last, ur, ug, s1)
	expect("float count", tensor.ErrShape)
	itab := g.Alloc(tensor.Int32, rows, v)
	g.SparseUpdate(p, itab, s1, s2, last, ur, ug, num)
	expect("int table", tensor.ErrDType)
	g.DenseUpdate(p, tab, ug, s1, s2)
	expect("dense lengths", tensor.ErrShape)
	g.DenseUpdate(p, tab, itab, s1, s2)
	expect("dense dtype", tensor.ErrDType)
	for _, x := range []tensor.Tensor{tab, s1, s2, last, ur, ug, num, wide, short, itab} {
		g.Free(x)
	}
}
