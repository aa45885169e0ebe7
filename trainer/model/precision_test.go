package model

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// halfFake is the CPU backend standing in for one that stores half
// tensors, so the builder's plan and the step's bookkeeping run on the
// CPU: a Float16 or BFloat16 Alloc gives a float32 tensor (the model then
// trains as fp32: conversions are copies), recorded with the dtype asked;
// Converts into the recorded half tensors are counted; it is a
// tensor.OverflowGuard that logs the step's calls and counts a step as
// skipped while overflow is set.
type halfFake struct {
	*cpu.Backend
	half     map[tensor.Storage]tensor.DType
	converts map[tensor.Storage]int // Converts into each half tensor
	events   []string               // begin, check, dense, sparse, end
	armed    bool
	overflow bool
	// overflowFrom > 0: the steps from this one (counting GuardBegins)
	// overflow.
	overflowFrom, begins int64
	skipped              int64
}

func newHalfFake(t testing.TB) *halfFake {
	return &halfFake{Backend: cpuBackend(t), half: map[tensor.Storage]tensor.DType{}, converts: map[tensor.Storage]int{}}
}

func (f *halfFake) Alloc(dt tensor.DType, shape ...int) tensor.Tensor {
	if !dt.IsHalf() {
		return f.Backend.Alloc(dt, shape...)
	}
	t := f.Backend.Alloc(tensor.Float32, shape...)
	f.half[t.Buf] = dt
	return t
}

func (f *halfFake) Convert(dst, src tensor.Tensor) {
	if _, ok := f.half[dst.Buf]; ok {
		f.converts[dst.Buf]++
	}
	f.Backend.Convert(dst, src)
}

func (f *halfFake) DenseUpdate(p tensor.OptParams, w, g, s1, s2 tensor.Tensor) {
	f.events = append(f.events, "dense")
	f.Backend.DenseUpdate(p, w, g, s1, s2)
}

func (f *halfFake) SparseUpdate(p tensor.OptParams, table, s1, s2, last, rows, grad, n tensor.Tensor) {
	f.events = append(f.events, "sparse")
	f.Backend.SparseUpdate(p, table, s1, s2, last, rows, grad, n)
}

func (f *halfFake) GuardBegin() {
	f.armed = true
	f.events = append(f.events, "begin")
	f.begins++
	if f.overflowFrom > 0 && f.begins >= f.overflowFrom {
		f.overflow = true
	}
}
func (f *halfFake) GuardCheck(t tensor.Tensor) {
	if !f.armed {
		panic("GuardCheck outside GuardBegin/GuardEnd")
	}
	f.events = append(f.events, "check")
}
func (f *halfFake) GuardEnd() {
	f.armed = false
	f.events = append(f.events, "end")
	if f.overflow {
		f.skipped++
	}
}
func (f *halfFake) GuardSkipped() (int64, error) { return f.skipped, nil }

// planned builds a reference model's graph and plans it.
func planned(t *testing.T, name string, p graph.Precision) (*graph.Config, precisionPlan) {
	t.Helper()
	cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 8, Width: 1.0 / 32})
	if err != nil {
		t.Fatal(err)
	}
	g := *cfg.Graph
	if err := g.AutoSlice(cfg.Optimizer); err != nil {
		t.Fatal(err)
	}
	info, err := g.Infer(cfg.Optimizer)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, planPrecision(&g, info, p)
}

// TestPrecisionPlan: in fp16 and bf16 the reference models run every
// layer in half but DeepFM's WeightMultiply, FmOrder2 and ReduceSum; fp32
// and tf32 plan nothing in half.
func TestPrecisionPlan(t *testing.T) {
	want := map[string][]string{"dlrm": nil, "wdl": nil, "dcn": nil, "dcnv2": nil,
		"deepfm": {"WeightMultiply weight_multiply1", "WeightMultiply weight_multiply2", "FmOrder2 fmorder2", "ReduceSum reducesum1", "ReduceSum reducesum2"}}
	for _, name := range graph.ReferenceModels {
		for _, p := range []graph.Precision{graph.FP32, graph.TF32, graph.FP16, graph.BF16} {
			_, pl := planned(t, name, p)
			if !p.Half() {
				if pl.Act != tensor.Invalid || slices.Contains(pl.Half, true) || pl.summary(0) != "" {
					t.Errorf("%s %s: planned half layers: %+v", name, p, pl)
				}
				continue
			}
			if dt := map[graph.Precision]tensor.DType{graph.FP16: tensor.Float16, graph.BF16: tensor.BFloat16}[p]; pl.Act != dt {
				t.Errorf("%s %s: activation dtype %v", name, p, pl.Act)
			}
			if !slices.Equal(pl.Float32, want[name]) {
				t.Errorf("%s %s: float32 layers %q, want %q", name, p, pl.Float32, want[name])
			}
		}
	}
	// Row-wise (3-D) InnerProducts and 3-D Concats stay float32.
	three := graph.LayerInfo{In: []graph.Shape{{Dims: []int{4, 8}}}}
	two := graph.LayerInfo{In: []graph.Shape{{Dims: []int{8}}}}
	for _, c := range []struct {
		l    graph.DenseLayer
		li   graph.LayerInfo
		half bool
	}{
		{graph.DenseLayer{Type: graph.InnerProduct}, two, true},
		{graph.DenseLayer{Type: graph.InnerProduct}, three, false},
		{graph.DenseLayer{Type: graph.Concat, Axis: 2}, three, false},
		{graph.DenseLayer{Type: graph.Concat, Axis: 1}, three, true},
		{graph.DenseLayer{Type: graph.BatchNorm}, two, false},
		{graph.DenseLayer{Type: graph.CrossEntropyLoss}, two, false},
		{graph.DenseLayer{Type: graph.MultiCross}, two, true},
	} {
		if got := halfLayer(c.l, c.li); got != c.half {
			t.Errorf("halfLayer(%s, %v) = %v", c.l.Type, c.li.In[0].Dims, got)
		}
	}
}

// convs lists the conversions the builder inserted, as "dtype" per
// conversion, in layer order.
func convs(m *Model) []string {
	var out []string
	for _, l := range m.dense {
		if c, ok := l.(*converted); ok {
			for _, cv := range c.convs {
				out = append(out, cv.DType().String())
			}
		}
	}
	return out
}

// TestHalfBuild builds models in fp16 on the fake: half blobs where the
// plan says, a half operand copy for each GEMM weight (no bias), each copy
// written once after initialisation, conversions at the region borders
// only, and the summary line.
func TestHalfBuild(t *testing.T) {
	for _, c := range []struct {
		name  string
		prec  graph.Precision
		convs int // the dense input's, plus DeepFM's border crossings
	}{
		{"dlrm", graph.FP16, 1}, {"dcnv2", graph.BF16, 1}, {"wdl", graph.FP16, 1}, {"dcn", graph.FP16, 1},
		// DeepFM: the dense input to its half Slice; the Slices' outputs
		// to the two WeightMultiplys (float32) and their outputs back to
		// the Concats; the Slice to FmOrder2, the Concat to a ReduceSum;
		// FmOrder2's and the ReduceSums' outputs back to the Concat and
		// the Add.
		{"deepfm", graph.FP16, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, pl := planned(t, c.name, c.prec)
			f := newHalfFake(t)
			m, err := Build(cfg, f, Options{BatchSize: 16, Seed: 1, Precision: c.prec, LossScale: 1024})
			if err != nil {
				t.Fatal(err)
			}
			if got := convs(m); len(got) != c.convs {
				t.Errorf("%d conversions %v, want %d", len(got), got, c.convs)
			}
			// Each conversion crosses a border: half to float32 or back.
			for i, l := range m.dense {
				if cl, ok := l.(*converted); ok {
					for _, cv := range cl.convs {
						_, fromHalf := f.half[cv.Input().Value.Buf]
						_, toHalf := f.half[cv.Outputs()[0].Value.Buf]
						if fromHalf == toHalf || toHalf != cv.DType().IsHalf() || toHalf != pl.Half[i] {
							t.Errorf("layer %d (%s): conversion to %v from half %v (layer half %v)", i, m.Graph.Layers[i].Type, cv.DType(), fromHalf, pl.Half[i])
						}
					}
				}
			}
			halves, weights := 0, 0
			for i, l := range m.dense {
				if u, ok := l.(interface{ Unwrap() layers.Layer }); ok {
					l = u.Unwrap()
				}
				for _, b := range l.Outputs()[:1] {
					_, half := f.half[b.Value.Buf]
					if _, loss := l.(*layers.Loss); !loss && half != pl.Half[i] {
						t.Errorf("layer %d (%s): half output %v, plan %v", i, m.Graph.Layers[i].Type, half, pl.Half[i])
					}
				}
				for _, p := range l.Params() {
					_, vHalf := f.half[p.Value.Buf]
					_, gHalf := f.half[p.Grad.Buf]
					if vHalf || gHalf {
						t.Errorf("layer %d: param %s master or gradient in half", i, p.Name)
					}
					if p.Half.IsZero() {
						continue
					}
					halves++
					if p.Name == "bias" || !pl.Half[i] {
						t.Errorf("layer %d (%s): %s has a half copy", i, m.Graph.Layers[i].Type, p.Name)
					}
					if n := f.converts[p.Half.Buf]; n != 1 {
						t.Errorf("layer %d: %s's copy written %d times after Build", i, p.Name, n)
					}
				}
				switch m.Graph.Layers[i].Type {
				case graph.InnerProduct, graph.MultiCross:
					weights++
				}
			}
			if halves < weights {
				t.Errorf("%d half weight copies for %d GEMM layers", halves, weights)
			}
			for _, e := range m.embs {
				if _, ok := f.half[e.layer.Outputs()[0].Value.Buf]; !ok {
					t.Errorf("embedding %s: pooled output not half", e.g.Top)
				}
				if _, ok := f.half[e.layer.Table.Buf]; ok {
					t.Errorf("embedding %s: table in half", e.g.Top)
				}
			}
			sum := m.PrecisionSummary()
			if !strings.HasPrefix(sum, c.prec.String()+": ") || c.name == "deepfm" && !strings.Contains(sum, "5 layers in float32 with conversions (9): WeightMultiply weight_multiply1") {
				t.Errorf("summary %q", sum)
			}
			// The fake trains as fp32: a step must run and stay finite.
			if err := trainSteps(m, 2); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// trainSteps trains n steps on planted batches of m's shape.
func trainSteps(m *Model, n int) error {
	data := newPlanted(3, m.batch*n, 4, smallSlots)
	r := data.reader(m.batch)
	b, err := formats.NewBatch(r.Schema(), m.batch, nil)
	if err != nil {
		return err
	}
	defer b.Free()
	for i := 0; i < n; i++ {
		if k, err := r.Read(b); k != m.batch {
			return fmt.Errorf("read %d: %v", k, err)
		}
		if err := m.TrainStep(b); err != nil {
			return err
		}
	}
	l, err := m.Loss()
	if err == nil && !(l == l) {
		err = fmt.Errorf("loss %v", l)
	}
	return err
}

// TestHalfStep: an fp16 step checks every dense gradient and each
// embedding's row gradient between GuardBegin and GuardEnd, updates
// inside them, then refreshes each half copy once; a frozen dense network
// is neither checked nor refreshed; bf16 runs no guard.
func TestHalfStep(t *testing.T) {
	cfg, _ := planned(t, "dlrm", graph.FP16)
	f := newHalfFake(t)
	m, err := Build(cfg, f, Options{BatchSize: 16, Seed: 1, Precision: graph.FP16, LossScale: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.embs {
		if !e.layer.ZeroRowGrad {
			t.Error("fp16: an embedding's row gradient is not zeroed before the guard checks it")
		}
	}
	f.events = nil
	if err := trainSteps(m, 1); err != nil {
		t.Fatal(err)
	}
	var want []string
	want = append(want, "begin")
	for range len(m.params) + len(m.embs) {
		want = append(want, "check")
	}
	for range m.opt.NumDense() {
		want = append(want, "dense")
	}
	for range m.embs {
		want = append(want, "sparse")
	}
	want = append(want, "end")
	if !slices.Equal(f.events, want) {
		t.Errorf("step events %v\nwant %v", f.events, want)
	}
	for _, p := range m.params {
		if !p.Half.IsZero() && f.converts[p.Half.Buf] != 2 {
			t.Errorf("%s: copy written %d times (build + 1 step)", p.Name, f.converts[p.Half.Buf])
		}
	}
	m.FreezeDense()
	f.events = nil
	if err := trainSteps(m, 1); err != nil {
		t.Fatal(err)
	}
	checks := 0
	for _, e := range f.events {
		if e == "check" {
			checks++
		}
	}
	if checks != len(m.embs) {
		t.Errorf("frozen dense: %d checks, want %d (the embeddings')", checks, len(m.embs))
	}
	for _, p := range m.params {
		if !p.Half.IsZero() && f.converts[p.Half.Buf] != 2 {
			t.Errorf("frozen dense: %s's copy rewritten (%d)", p.Name, f.converts[p.Half.Buf])
		}
	}
	// Loading weights refreshes the copies.
	dir := t.TempDir()
	files := Files{Dense: dir + "/dense.model"}
	if err := m.SaveFiles(files); err != nil {
		t.Fatal(err)
	}
	if err := m.LoadFiles(files); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.params {
		if !p.Half.IsZero() && f.converts[p.Half.Buf] != 3 {
			t.Errorf("after LoadFiles: %s's copy written %d times, want 3", p.Name, f.converts[p.Half.Buf])
		}
	}

	fb := newHalfFake(t)
	mb, err := Build(cfg, fb, Options{BatchSize: 16, Seed: 1, Precision: graph.BF16})
	if err != nil {
		t.Fatal(err)
	}
	fb.events = nil
	if err := trainSteps(mb, 1); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(fb.events, "begin") || mb.guard != nil {
		t.Errorf("bf16 ran the overflow guard: %v", fb.events)
	}
}

// TestHalfSkippedReport: Fit reports skipped fp16 steps at its checks with
// the loss scale and the key to lower, counts them in the result, and
// stops once every step of guardRun or more in a row overflowed.
func TestHalfSkippedReport(t *testing.T) {
	data := newPlanted(1, 4096, 4, smallSlots)
	run := func(overflowFrom int64, maxIter int) (FitResult, string, error) {
		cfg, _ := planned(t, "dlrm", graph.FP16)
		f := newHalfFake(t)
		m, err := Build(cfg, f, Options{BatchSize: 64, Seed: 1, Precision: graph.FP16, LossScale: 1024})
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		fo := FitOptions{MaxIter: maxIter, Display: 5, Log: &log, OpenTrain: func() (formats.Reader, error) { return data.reader(64), nil }}
		f.overflowFrom = overflowFrom // the fake's GuardEnd counts these steps
		res, err := m.Fit(context.Background(), fo)
		return res, log.String(), err
	}
	res, log, err := run(8, 10) // steps 8, 9, 10 overflow
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 3 || !strings.Contains(log, "fp16: 3 of the last 5 steps overflowed (to iteration 10) and were skipped, 3 in all, at loss scale 1024") ||
		!strings.Contains(log, "mixed_precision, --loss-scale") {
		t.Errorf("skipped %d, log:\n%s", res.Skipped, log)
	}
	_, log, err = run(1, 100)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("overflowed in every one of the last %d steps (to iteration %d) at loss scale 1024", guardRun, guardRun)) ||
		!strings.Contains(err.Error(), "lower the solver's scaler (mixed_precision, --loss-scale)") {
		t.Errorf("persistent overflow: %v\n%s", err, log)
	}
}

// TestHalfRefusals: fp16 and bf16 are refused on the CPU naming the
// flags, and with several ranks; a backend without an overflow guard
// cannot train fp16.
func TestHalfRefusals(t *testing.T) {
	cfg, _ := planned(t, "dlrm", graph.FP16)
	f := newHalfFake(t)
	for p, flag := range map[graph.Precision]string{graph.FP16: "--mixed-precision", graph.BF16: "--bf16"} {
		_, err := Build(cfg, cpuBackend(t), Options{BatchSize: 16, Precision: p})
		if err == nil || !strings.Contains(err.Error(), "precision "+p.String()) || !strings.Contains(err.Error(), flag) ||
			!strings.Contains(err.Error(), "CPU backend trains fp32") {
			t.Errorf("%s on the CPU: %v", p, err)
		}
		var s graph.Solver
		s.SetPrecision(p)
		if _, err := OpenBackend(DeviceCPU, s, nil); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("OpenBackend cpu in %s: %v", p, err)
		}
	}
	if _, err := Build(cfg, noGuard{f.Backend, f}, Options{BatchSize: 16, Precision: graph.FP16}); err == nil || !strings.Contains(err.Error(), "no overflow check") {
		t.Errorf("fp16 without a guard: %v", err)
	}
	o := Options{BatchSize: 16, Precision: graph.BF16, Parallel: &Parallel{}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "trains on one device") {
		t.Errorf("bf16 over ranks: %v", err)
	}
	if err := (&Options{BatchSize: 1, Precision: graph.BF16 + 1}).Validate(); err == nil {
		t.Error("an unknown precision validated")
	}
}

// noGuard is a half-storing backend without tensor.OverflowGuard.
type noGuard struct {
	*cpu.Backend
	f *halfFake
}

func (n noGuard) Alloc(dt tensor.DType, shape ...int) tensor.Tensor { return n.f.Alloc(dt, shape...) }
func (n noGuard) Convert(dst, src tensor.Tensor)                    { n.f.Convert(dst, src) }

// TestHalfJob: a job whose solver says mixed_precision trains in fp16 with
// the scaler as loss scale (on the fake), logs the plan's line, reports
// the skipped steps at display with that scale and counts them in the
// final line.
func TestHalfJob(t *testing.T) {
	dir := t.TempDir()
	p := datagen.DefaultParams()
	p.Format = datagen.Norm
	p.DenseDim, p.NumSlot = 4, len(smallSlots)
	p.SlotSizeArray = smallSlots
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 1, 1, 2048
	p.Seed = 5
	if _, err := datagen.Generate(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := graph.Reference("wdl", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 8, Width: 1.0 / 32})
	if err != nil {
		t.Fatal(err)
	}
	s := *graph.DefaultSolver()
	s.BatchSize, s.MaxIter, s.Display, s.EvalInterval, s.MaxEvalBatches = 64, 10, 5, 0, 0
	s.UseMixedPrecision, s.Scaler = true, 512
	f := newHalfFake(t)
	f.overflowFrom = 6
	j := Job{Config: cfg, Solver: s, Optimizer: cfg.Optimizer, Backend: f,
		Train: Source{Format: dataset.Norm, Path: p.Source, Check: norm.CheckSum}}
	var log bytes.Buffer
	m, res, err := Train(context.Background(), j, TrainOutput{Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if m.Precision() != graph.FP16 || m.LossScale() != 512 || m.guard == nil || !m.half {
		t.Errorf("precision %s, loss scale %g, guard %v, Cast rounding %v", m.Precision(), m.LossScale(), m.guard != nil, m.half)
	}
	for _, want := range []string{"fp16: all 12 dense layers and the embeddings' outputs in fp16, 1 conversions (the dense input)",
		"fp16: 5 of the last 5 steps overflowed (to iteration 10) and were skipped, 5 in all, at loss scale 512",
		"; 5 steps skipped for fp16 overflow"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	if res.Skipped != 5 {
		t.Errorf("%d steps skipped", res.Skipped)
	}
}
