package optim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

func TestSchedule(t *testing.T) {
	s := Schedule{BaseLR: 1, WarmupSteps: 4, DecayStart: 10, DecaySteps: 5, DecayPower: 2, EndLR: 0.1}
	for n, want := range map[int64]float64{1: 0.25, 2: 0.5, 4: 1, 5: 1, 10: 1, 11: 0.64, 12: 0.36, 14: 0.1, 15: 0.1, 16: 0.1, 1000: 0.1} {
		if got := s.LR(n); math.Abs(got-want) > 1e-15 {
			t.Errorf("LR(%d) = %v, want %v", n, got, want)
		}
	}
	d := DefaultSchedule()
	if d.LR(1) != 0.001 || d.LR(2) != 0.001 || d.LR(1e6) != 0.001 {
		t.Errorf("default schedule: %v %v", d.LR(1), d.LR(2))
	}
	if c := DefaultConfig(tensor.Adam); c.Beta1 != 0.9 || c.Beta2 != 0.999 || c.Epsilon != 1e-7 {
		t.Errorf("Adam defaults %+v", c)
	}
}

func backend(t *testing.T) *cpu.Backend {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestDenseHandComputed: w = 1, g = 0.5 every step, lr 0.1.
func TestDenseHandComputed(t *testing.T) {
	const eps = 1e-7
	adam := func() []float64 { // SPEC §8 recurrence by hand
		w, m, v := 1.0, 0.0, 0.0
		var out []float64
		for n := 1; n <= 3; n++ {
			m = 0.9*m + 0.1*0.5
			v = 0.999*v + 0.001*0.25
			w -= 0.1 * math.Sqrt(1-math.Pow(0.999, float64(n))) / (1 - math.Pow(0.9, float64(n))) * m / (math.Sqrt(v) + eps)
			out = append(out, w)
		}
		return out
	}()
	cases := []struct {
		kind tensor.OptKind
		want []float64
	}{
		{tensor.SGD, []float64{0.95, 0.9, 0.85}},
		{tensor.MomentumSGD, []float64{0.95, 0.855, 0.7195}},
		{tensor.Nesterov, []float64{0.905, 0.7695, 0.59755}},
		{tensor.AdaGrad, []float64{1 - 0.05/(0.5+eps), 1 - 0.05/(0.5+eps) - 0.05/(math.Sqrt(0.5)+eps),
			1 - 0.05/(0.5+eps) - 0.05/(math.Sqrt(0.5)+eps) - 0.05/(math.Sqrt(0.75)+eps)}},
		{tensor.Adam, adam},
	}
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		for _, c := range cases {
			be := backend(t)
			cfg := DefaultConfig(c.kind)
			cfg.Momentum = 0.9
			o, err := New(be, cfg, Schedule{BaseLR: 0.1, WarmupSteps: 1, DecaySteps: 1})
			if err != nil {
				t.Fatal(err)
			}
			p := layers.Param{Value: be.Alloc(dt, 1), Grad: be.Alloc(dt, 1)}
			be.Fill(p.Value, 1)
			o.AddDense(p)
			for n, want := range c.want {
				be.Fill(p.Grad, 0.5)
				o.Update()
				got := make([]float64, 1)
				if dt == tensor.Float64 {
					be.Download(got, p.Value)
				} else {
					g32 := make([]float32, 1)
					be.Download(g32, p.Value)
					got[0] = float64(g32[0])
				}
				tol := 1e-13
				if dt == tensor.Float32 {
					tol = 5e-6 // float32 rounding of m, v and w
				}
				if math.Abs(got[0]-want) > tol {
					t.Errorf("%v kind %d step %d: w = %.10g, want %.10g", dt, c.kind, n+1, got[0], want)
				}
			}
			if err := be.Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sparseRun trains a 5-row table for len(touch) steps; touch[s] lists the
// rows with a gradient at step s+1 (gradients from a fixed random source);
// a nil touch[s] skips the step (Skip, a frozen table).
func sparseRun(t *testing.T, kind tensor.OptKind, up tensor.UpdateType, sched Schedule, touch [][]int32, check func(step int, table []float64)) []float64 {
	return sparseRunFlush(t, kind, up, sched, touch, check, false)
}

func sparseRunFlush(t *testing.T, kind tensor.OptKind, up tensor.UpdateType, sched Schedule, touch [][]int32, check func(step int, table []float64), flush bool) []float64 {
	const rows, vec = 5, 3
	be := backend(t)
	cfg := DefaultConfig(kind)
	cfg.Update, cfg.Momentum = up, 0.8
	o, err := New(be, cfg, sched)
	if err != nil {
		t.Fatal(err)
	}
	e := &layers.SparseEmbedding{Table: be.Alloc(tensor.Float64, rows, vec),
		UniqRows: be.Alloc(tensor.Int32, rows), UniqGrad: be.Alloc(tensor.Float64, rows, vec), NumUniq: be.Alloc(tensor.Int32, 1)}
	init := make([]float64, rows*vec)
	for i := range init {
		init[i] = float64(i%7) * 0.1
	}
	be.Upload(e.Table, init)
	o.AddEmbedding(e)
	r := rand.New(rand.NewPCG(5, 5))
	for s, rs := range touch {
		if rs == nil { // frozen: the step passes without an update
			o.Skip()
			if check != nil {
				check(s+1, cpu.Data[float64](e.Table))
			}
			continue
		}
		g := make([]float64, rows*vec)
		for i := range g {
			g[i] = r.NormFloat64()
		}
		ur := make([]int32, rows)
		copy(ur, rs)
		be.Upload(e.UniqRows, ur)
		be.Upload(e.UniqGrad, g)
		be.Upload(e.NumUniq, []int32{int32(len(rs))})
		o.Update()
		if check != nil {
			check(s+1, cpu.Data[float64](e.Table))
		}
	}
	if flush {
		o.Flush()
	}
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
	return cpu.Data[float64](e.Table)
}

// reference replays the same run with SPEC §8 scalar recurrences: every row
// steps when touched (Local) or every step (Global).
func reference(kind tensor.OptKind, global bool, sched Schedule, touch [][]int32) []float64 {
	const rows, vec = 5, 3
	w := make([]float64, rows*vec)
	for i := range w {
		w[i] = float64(i%7) * 0.1
	}
	m, v := make([]float64, rows*vec), make([]float64, rows*vec)
	r := rand.New(rand.NewPCG(5, 5))
	for s, rs := range touch {
		n := float64(s + 1)
		lr := sched.LR(int64(s + 1))
		g := make([]float64, rows*vec)
		for i := range g {
			g[i] = r.NormFloat64()
		}
		gr := make([]float64, rows*vec) // per table row
		on := make([]bool, rows)
		for u, row := range rs {
			on[row] = true
			copy(gr[int(row)*vec:int(row+1)*vec], g[u*vec:(u+1)*vec])
		}
		for row := 0; row < rows; row++ {
			if !on[row] && !global {
				continue
			}
			for j := 0; j < vec; j++ {
				i := row*vec + j
				x := gr[i]
				switch kind {
				case tensor.SGD:
					w[i] -= lr * x
				case tensor.MomentumSGD:
					m[i] = 0.8*m[i] - lr*x
					w[i] += m[i]
				case tensor.Nesterov:
					a := m[i]
					m[i] = 0.8*a - lr*x
					w[i] += -0.8*a + 1.8*m[i]
				case tensor.AdaGrad:
					m[i] += x * x
					w[i] -= lr * x / (math.Sqrt(m[i]) + 1e-7)
				case tensor.Adam:
					m[i] = 0.9*m[i] + 0.1*x
					v[i] = 0.999*v[i] + 0.001*x*x
					w[i] -= lr * math.Sqrt(1-math.Pow(0.999, n)) / (1 - math.Pow(0.9, n)) * m[i] / (math.Sqrt(v[i]) + 1e-7)
				}
			}
		}
	}
	return w
}

var touches = [][]int32{{0, 2}, {2}, {}, {0, 1, 4}, {0, 2}, {3}, {1, 2, 3}}

func TestSparseLocalGlobal(t *testing.T) {
	sched := Schedule{BaseLR: 0.05, WarmupSteps: 3, DecayStart: 4, DecaySteps: 3, DecayPower: 2, EndLR: 0.01}
	for kind := tensor.SGD; kind <= tensor.Adam; kind++ {
		for _, up := range []tensor.UpdateType{tensor.Local, tensor.Global} {
			got := sparseRun(t, kind, up, sched, touches, nil)
			// SGD and AdaGrad: Global equals Local (zero-gradient step is
			// the identity).
			want := reference(kind, up == tensor.Global, sched, touches)
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-12 {
					t.Fatalf("kind %d update %d: w[%d] = %v, want %v", kind, up, i, got[i], want[i])
				}
			}
		}
	}
	// Untouched row 4 after step 4 and row 3 before step 6: Local leaves
	// them, Global moves them (momentum).
	l := sparseRun(t, tensor.MomentumSGD, tensor.Local, sched, touches[:3], nil)
	g := sparseRun(t, tensor.MomentumSGD, tensor.Global, sched, touches[:3], nil)
	if l[1*3] != float64(3)*0.1 || g[0] == l[0] && g[1] == l[1] {
		t.Fatalf("Local must not touch row 1 (%v); Global must keep moving row 0", l[3])
	}
}

// TestLazyGlobal: a row's state right after it is touched equals stepwise
// Global (closed-form catch-up of the skipped steps), including a gap of
// hundreds of steps across warmup and decay.
func TestLazyGlobal(t *testing.T) {
	sched := Schedule{BaseLR: 0.05, WarmupSteps: 3, DecayStart: 4, DecaySteps: 300, DecayPower: 2, EndLR: 0.001}
	long := append([][]int32{}, touches...)
	for i := 0; i < 400; i++ {
		long = append(long, []int32{int32(i % 2)}) // rows 2,3,4 skip 400 steps
	}
	long = append(long, []int32{0, 1, 2, 3, 4})
	for _, tc := range [][][]int32{touches, long} {
		var global [][]float64
		sparseRun(t, tensor.Adam, tensor.Global, sched, tc, func(_ int, w []float64) {
			global = append(global, append([]float64(nil), w...))
		})
		sparseRun(t, tensor.Adam, tensor.LazyGlobal, sched, tc, func(step int, w []float64) {
			for _, row := range tc[step-1] {
				for j := 0; j < 3; j++ {
					i := int(row)*3 + j
					want := global[step-1][i]
					if d := math.Abs(w[i] - want); d > 1e-12*math.Max(1, math.Abs(want)) {
						t.Fatalf("step %d row %d: lazy %v, stepwise global %v", step, row, w[i], want)
					}
				}
			}
		})
	}
}

// TestLazyFlush: after Flush every row equals stepwise Global.
func TestLazyFlush(t *testing.T) {
	sched := Schedule{BaseLR: 0.05, WarmupSteps: 3, DecayStart: 4, DecaySteps: 30, DecayPower: 2, EndLR: 0.001}
	tc := append(append([][]int32{}, touches...), []int32{1}, []int32{}, []int32{1})
	global := sparseRun(t, tensor.Adam, tensor.Global, sched, tc, nil)
	lazy := sparseRunFlush(t, tensor.Adam, tensor.LazyGlobal, sched, tc, nil, false)
	flushed := sparseRunFlush(t, tensor.Adam, tensor.LazyGlobal, sched, tc, nil, true)
	same := true
	for i := range global {
		if d := math.Abs(flushed[i] - global[i]); d > 1e-12*math.Max(1, math.Abs(global[i])) {
			t.Fatalf("w[%d]: flushed lazy %v, global %v", i, flushed[i], global[i])
		}
		same = same && lazy[i] == global[i]
	}
	if same {
		t.Fatal("without Flush the lazy table should lag behind Global on skipped rows")
	}
}

// TestSkip: skipped (frozen) steps change nothing, count for the schedule,
// and LazyGlobal does not catch the skipped steps up later: after a flush
// it equals Global, which updates nothing while skipping either.
func TestSkip(t *testing.T) {
	sched := Schedule{BaseLR: 0.05, WarmupSteps: 3, DecayStart: 4, DecaySteps: 30, DecayPower: 2, EndLR: 0.001}
	tc := append(append([][]int32{}, touches...), nil, nil, nil, []int32{1}, nil, []int32{0, 2})
	for _, up := range []tensor.UpdateType{tensor.Global, tensor.LazyGlobal} {
		var prev []float64
		sparseRunFlush(t, tensor.Adam, up, sched, tc, func(step int, w []float64) {
			// (LazyGlobal's first skip brings the lagging rows up to date.)
			if tc[step-1] == nil && (up == tensor.Global || tc[step-2] == nil) && !slices.Equal(prev, w) {
				t.Errorf("update %d: skipped step %d changed the table", up, step)
			}
			prev = append(prev[:0], w...)
		}, false)
	}
	global := sparseRunFlush(t, tensor.Adam, tensor.Global, sched, tc, nil, true)
	lazy := sparseRunFlush(t, tensor.Adam, tensor.LazyGlobal, sched, tc, nil, true)
	for i := range global {
		if d := math.Abs(lazy[i] - global[i]); d > 1e-12*math.Max(1, math.Abs(global[i])) {
			t.Fatalf("w[%d]: lazy with skips %v, global %v", i, lazy[i], global[i])
		}
	}
	o, _ := New(backend(t), DefaultConfig(tensor.SGD), sched)
	o.Skip()
	o.Skip()
	if o.Step() != 2 || o.LR() != sched.LR(3) {
		t.Errorf("after two skips: step %d, LR %v", o.Step(), o.LR())
	}
}
