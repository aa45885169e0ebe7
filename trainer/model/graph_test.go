package model

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// fakeGraphs is the CPU backend posing as one with CUDA graphs: it runs
// every operation at once (so a "graph step" computes what an eager one
// does) and answers EndGraphStep from a script, to test the model's
// decisions without a GPU.
type fakeGraphs struct {
	*cpu.Backend
	begins, drops int
	ends          []bool // the failed argument of each EndGraphStep
	why           map[int]string
	differs       bool // a Why is a difference from the captured step
	captured      bool
}

func (f *fakeGraphs) BeginGraphStep() error { f.begins++; return nil }

func (f *fakeGraphs) EndGraphStep(failed bool) tensor.GraphStep {
	f.ends = append(f.ends, failed)
	n := len(f.ends)
	if w := f.why[n]; w != "" {
		f.captured = false
		return tensor.GraphStep{Why: w, Differs: f.differs}
	}
	c := !f.captured
	f.captured = true
	return tensor.GraphStep{Captured: c, Replayed: true}
}

func (f *fakeGraphs) DropGraph() { f.drops++; f.captured = false }

func graphTestConfig(t *testing.T, sizes []int64) *graph.Config {
	t.Helper()
	opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 8, Width: 1.0 / 16, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestGraphStepDecisions trains two epochs of 4 full batches and a short
// one on a backend with (fake) graphs: the first step runs eagerly (the
// warm-up), the next full steps as the graph (one capture), each short
// batch eagerly, noted once in the log; the losses equal eager training.
func TestGraphStepDecisions(t *testing.T) {
	sizes := []int64{50, 60, 70}
	const batch = 64
	data := newPlanted(3, 4*batch+10, 13, sizes)
	cfg := graphTestConfig(t, sizes)
	fit := func(be tensor.Backend, on bool) (*Model, FitResult, string) {
		m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 7, CUDAGraph: on})
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		res, err := m.Fit(t.Context(), FitOptions{
			OpenTrain: func() (formats.Reader, error) { return data.reader(batch), nil },
			NumEpochs: 2, Display: 1, Log: &log,
		})
		if err != nil {
			t.Fatal(err)
		}
		return m, res, log.String()
	}
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGraphs{Backend: c}
	m, res, log := fit(f, true)
	if res.Iters != 10 {
		t.Fatalf("%d iterations", res.Iters)
	}
	st := m.GraphStats()
	if f.begins != 7 || len(f.ends) != 7 || st.Graphed != 7 || st.Eager != 3 || st.Captures != 1 || !st.Enabled || f.drops != 1 {
		t.Errorf("begins %d ends %d, stats %+v", f.begins, len(f.ends), st)
	}
	for i, failed := range f.ends {
		if failed {
			t.Errorf("graph step %d reported failed", i+1)
		}
	}
	const short = "a short batch (10 of 64 samples) trains eagerly"
	if len(st.Notes) != 1 || st.Notes[0] != short {
		t.Errorf("notes %q", st.Notes)
	}
	if strings.Count(log, "note: CUDA graph: "+short+"\n") != 1 ||
		strings.Count(log, "note: CUDA graph: iteration 2 captured the training step; full batches replay it") != 1 {
		t.Errorf("log:\n%s", log)
	}
	c2, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m2, res2, log2 := fit(c2, false)
	if len(res.History) != len(res2.History) {
		t.Fatalf("%d and %d points", len(res.History), len(res2.History))
	}
	for i := range res.History {
		if a, b := res.History[i].Loss, res2.History[i].Loss; (a == nil) != (b == nil) || (a != nil && *a != *b) {
			t.Errorf("point %d: loss %v with graphs, %v without", i, a, b)
		}
	}
	if st := m2.GraphStats(); st.Enabled || st.Graphed != 0 || st.Eager != 0 || len(st.Notes) != 0 {
		t.Errorf("CUDAGraph off: stats %+v", st)
	}
	if strings.Contains(log2, "CUDA graph") {
		t.Errorf("CUDAGraph off logged:\n%s", log2)
	}
}

// TestGraphDroppedOnce: a step the backend could not replay (EndGraphStep's
// Why) drops the graph: the reason is noted once with the iteration, the
// backend's graph is freed and every later step runs eagerly.
func TestGraphDroppedOnce(t *testing.T) {
	sizes := []int64{50, 60, 70}
	const batch = 32
	data := newPlanted(4, 6*batch, 13, sizes)
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGraphs{Backend: c, why: map[int]string{2: "the step differs from the captured one at call 7 (axpby: kernel dense_axpby)"}}
	m, err := Build(graphTestConfig(t, sizes), f, Options{BatchSize: batch, Seed: 7, CUDAGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if _, err := m.Fit(t.Context(), FitOptions{
		OpenTrain: func() (formats.Reader, error) { return data.reader(batch), nil }, NumEpochs: 1, Log: &log,
	}); err != nil {
		t.Fatal(err)
	}
	st := m.GraphStats()
	if f.begins != 2 || f.drops != 2 || st.Enabled || st.Graphed != 1 || st.Eager != 5 { // at Build and at the drop
		t.Errorf("begins %d drops %d, stats %+v", f.begins, f.drops, st)
	}
	want := "iteration 3: the step differs from the captured one at call 7 (axpby: kernel dense_axpby): the graph is dropped, steps run eagerly"
	if len(st.Notes) != 1 || st.Notes[0] != want {
		t.Errorf("notes %q", st.Notes)
	}
	if strings.Count(log.String(), "note: CUDA graph: ") != 2 {
		t.Errorf("log:\n%s", log.String())
	}
}

// TestGraphRecaptures: a step that differs from the captured one (Differs:
// e.g. a workspace an evaluation grew) runs eagerly and the next full step
// captures again, up to maxRecaptures times; one more drops the graph.
func TestGraphRecaptures(t *testing.T) {
	sizes := []int64{50, 60, 70}
	const batch = 32
	data := newPlanted(4, 12*batch, 13, sizes)
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Graph steps 2, 4, 6 and 8 differ (iterations 3, 5, 7, 9).
	f := &fakeGraphs{Backend: c, differs: true, why: map[int]string{2: "d", 4: "d", 6: "d", 8: "d"}}
	m, err := Build(graphTestConfig(t, sizes), f, Options{BatchSize: batch, Seed: 7, CUDAGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Fit(t.Context(), FitOptions{
		OpenTrain: func() (formats.Reader, error) { return data.reader(batch), nil }, NumEpochs: 1,
	}); err != nil {
		t.Fatal(err)
	}
	st := m.GraphStats()
	// Iteration 1 eager; 2 captures; 3 differs; 4 captures; 5 differs; 6
	// captures; 7 differs; 8 captures; 9 differs a fourth time: dropped;
	// 10-12 eager.
	if f.begins != 8 || st.Enabled || st.Captures != 4 || st.Graphed != 4 || st.Eager != 8 {
		t.Errorf("begins %d, stats %+v", f.begins, st)
	}
	want := []string{
		"iteration 3: d: the step ran eagerly; the next full step captures again",
		"iteration 5: d: the step ran eagerly; the next full step captures again",
		"iteration 7: d: the step ran eagerly; the next full step captures again",
		"iteration 9: d: the graph is dropped, steps run eagerly",
	}
	if strings.Join(st.Notes, "|") != strings.Join(want, "|") {
		t.Errorf("notes %q", st.Notes)
	}
}

// refusingLayer is a layer that declares its step not capturable.
type refusingLayer struct{ layers.Layer }

func (refusingLayer) GraphRefusal() string { return "layer x reads its output on the host" }

// TestGraphRefusals: a backend without graphs (the CPU), a layer that
// declares its step not capturable, and profiled steps train eagerly and
// say why; a CPU run stays quiet in Fit's log (a HugeCTR config asks for
// graphs by default).
func TestGraphRefusals(t *testing.T) {
	sizes := []int64{50, 60, 70}
	const batch = 32
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(graphTestConfig(t, sizes), c, Options{BatchSize: batch, Seed: 7, CUDAGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	st := m.GraphStats()
	if st.Enabled || len(st.Notes) != 1 || st.Notes[0] != "the cpu backend has no CUDA graphs: steps run eagerly" {
		t.Errorf("CPU: %+v", st)
	}
	var log bytes.Buffer
	m.reportGraph(&log)
	if log.Len() != 0 {
		t.Errorf("CPU reported %q", log.String())
	}

	f := &fakeGraphs{Backend: c}
	m, err = Build(graphTestConfig(t, sizes), f, Options{BatchSize: batch, Seed: 7, CUDAGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	m.dense = append(m.dense, refusingLayer{m.dense[0]})
	sg := newStepGraph(m)
	if sg.g != nil || sg.stats.Enabled || len(sg.stats.Notes) != 1 || sg.stats.Notes[0] != "layer x reads its output on the host: steps run eagerly" {
		t.Errorf("refusing layer: %+v", sg.stats)
	}
	m.dense = m.dense[:len(m.dense)-1]

	if why := m.graphWhy(batch); why != "" {
		t.Errorf("a full step: %q", why)
	}
	m.prof = &profiler{}
	if why := m.graphWhy(batch); !strings.Contains(why, "--profile") {
		t.Errorf("a profiled step: %q", why)
	}
	m.prof = nil
	if why := m.graphWhy(batch - 1); !strings.Contains(why, "short batch (31 of 32") {
		t.Errorf("a short step: %q", why)
	}
}

// TestGPUGraphMatchesEager trains the reference DLRM (SGD with warm-up: a
// new learning rate every step), WDL (Adam, Dropout), DCNv2 unfused and
// fused (AdaGrad, Global; the fused path's side stream), DCN (Adam) and a
// DLRM with LazyGlobal Adam embeddings for two epochs of 10 full batches
// and a short one, evaluating every 4 iterations (the evaluation's work
// runs between graph steps), eagerly and with CUDA graphs, from the same
// data and seed: every step's loss, every evaluation's AUC and the final
// dense weights and embedding tables must be equal. The graph replays the very kernels of the eager step with
// the same arguments, and the per-step scalars it reads from the device
// are the float32 values eager passes as arguments, so equal means bit
// for bit; a 1e-6 relative allowance covers a cuBLAS that picks another
// algorithm under capture (the log says whether they were bit-equal).
func TestGPUGraphMatchesEager(t *testing.T) {
	gpuOrSkip(t, gpu.Options{})
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 2000
	}
	const batch = 512
	data := newPlanted(11, 10*batch+100, 13, sizes)
	lazyAdam := &graph.Optimizer{Type: "Adam", UpdateType: "LazyGlobal", Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, LearningRate: 0.001}
	for _, tc := range []struct {
		name, ref string
		fused     bool
		opt       *graph.Optimizer // nil: the reference model's own
	}{
		{"dlrm", "dlrm", false, nil}, {"wdl", "wdl", false, nil}, {"dcnv2", "dcnv2", false, nil},
		{"dcnv2-fused", "dcnv2", true, nil}, {"dcn", "dcn", false, nil}, {"dlrm-lazy-adam", "dlrm", false, lazyAdam},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := graph.Reference(tc.ref, graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 16, Width: 1.0 / 8, Optimizer: tc.opt})
			if err != nil {
				t.Fatal(err)
			}
			type run struct {
				m      *Model
				be     *gpu.Backend
				losses []float64
				aucs   []float64
			}
			var runs [2]run
			for k, on := range []bool{false, true} {
				// No algorithm search: two backends would time their own
				// candidates and may keep different algorithms (other bits).
				be := gpuOrSkip(t, gpu.Options{Fused: tc.fused, NoAlgorithmSearch: true})
				m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 7, CUDAGraph: on})
				if err != nil {
					t.Fatal(err)
				}
				var log bytes.Buffer
				res, err := m.Fit(t.Context(), FitOptions{
					OpenTrain: func() (formats.Reader, error) { return data.reader(batch), nil },
					OpenEval:  func() (formats.Reader, error) { return data.reader(batch), nil },
					NumEpochs: 2, Display: 1, EvalInterval: 4, MaxEvalBatches: 3, Log: &log,
				})
				if on {
					t.Logf("graph run's log:\n%s", log.String())
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Iters != 22 {
					t.Fatalf("%d iterations", res.Iters)
				}
				runs[k] = run{m: m, be: be}
				for _, p := range res.History {
					if p.Loss != nil {
						runs[k].losses = append(runs[k].losses, *p.Loss)
					}
					if p.EvalAUC != nil {
						runs[k].aucs = append(runs[k].aucs, *p.EvalAUC)
					}
				}
			}
			st := runs[1].m.GraphStats()
			// 22 steps: the warm-up and 2 short batches eager, 19 as the
			// graph (less a step per recapture, if an evaluation grew a
			// workspace the step uses).
			if !st.Enabled || st.Captures < 1 || st.Graphed+st.Captures-1 != 19 || st.Graphed+st.Eager != 22 {
				t.Errorf("graph stats %+v", st)
			}
			if runs[0].m.GraphStats().Graphed != 0 {
				t.Errorf("CUDAGraph off ran graphs")
			}
			bitEqual, worst := true, 0.0
			cmp := func(what string, a, b []float64) {
				for i := range a {
					if a[i] != b[i] {
						bitEqual = false
					}
				}
				d := relErr(b, a)
				if !(d <= 1e-6) {
					t.Errorf("%s: graph differs from eager by %.2e relative", what, d)
				}
				worst = max(worst, d)
			}
			if len(runs[0].losses) != 22 || len(runs[1].losses) != 22 {
				t.Fatalf("%d and %d losses", len(runs[0].losses), len(runs[1].losses))
			}
			for i := range runs[0].losses {
				cmp("loss of step "+strconv.Itoa(i+1), runs[0].losses[i:i+1], runs[1].losses[i:i+1])
			}
			if len(runs[0].aucs) < 5 || len(runs[0].aucs) != len(runs[1].aucs) {
				t.Fatalf("%d and %d evaluations", len(runs[0].aucs), len(runs[1].aucs))
			}
			cmp("evaluation AUCs", runs[0].aucs, runs[1].aucs)
			f64 := func(r run, x tensor.Tensor) []float64 {
				v := downloadF32(t, r.be, x)
				out := make([]float64, len(v))
				for i, y := range v {
					out[i] = float64(y)
				}
				return out
			}
			for i, p := range runs[0].m.params {
				cmp("parameter "+p.Name, f64(runs[0], p.Value), f64(runs[1], runs[1].m.params[i].Value))
			}
			for i, e := range runs[0].m.embs {
				cmp("embedding "+e.g.Top, f64(runs[0], e.layer.Table), f64(runs[1], runs[1].m.embs[i].layer.Table))
			}
			t.Logf("%s: loss %.5f → %.5f; graph stats %+v; bit-equal %v (worst relative %.2e)",
				tc.name, runs[0].losses[0], runs[0].losses[21], st, bitEqual, worst)
		})
	}
}

// TestJobCUDAGraph: the job's solver cuda_graph reaches the model's
// Options (ctrkit train, the Python fit).
func TestJobCUDAGraph(t *testing.T) {
	for _, on := range []bool{true, false} {
		j := Job{Solver: graph.Solver{BatchSize: 8, CUDAGraph: on}}
		if j.options().CUDAGraph != on {
			t.Errorf("solver cuda_graph %v: Options.CUDAGraph %v", on, !on)
		}
	}
}
