package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// parData is a small Norm dataset from datagen for the rank-count tests.
type parData struct {
	train, eval Source
	sizes       []int64
	nnz         []int
}

// newParData writes samples training and 1024 evaluation samples: 6 slots
// with nnz (nil: one-hot), one label.
func newParData(t *testing.T, samples int, nnz []int) parData {
	return newParDataLabels(t, samples, nnz, 1)
}

func newParDataLabels(t *testing.T, samples int, nnz []int, labels int) parData {
	t.Helper()
	dir := t.TempDir()
	p := datagen.DefaultParams()
	p.Format = datagen.Norm
	p.LabelDim = labels
	p.DenseDim = 4
	p.NumSlot = 6
	p.SlotSizeArray = []int64{40, 60, 20, 80, 30, 50}
	p.NNZArray = nnz
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 1, 1, samples
	p.Seed = 5
	if _, err := datagen.Generate(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	// The eval file holds samples too: evaluations read its first 1024.
	return parData{
		train: Source{Format: dataset.Norm, Path: p.Source, Check: norm.CheckSum},
		eval:  Source{Format: dataset.Norm, Path: p.EvalSource, Check: norm.CheckSum},
		sizes: p.SlotSizeArray, nnz: nnz,
	}
}

// parRun is what one training over W ranks gave.
type parRun struct {
	losses []float64
	auc    float64
	iters  int64
	pred   []float32
}

// hostWorld opens W in-process CPU ranks with the host collectives.
func hostWorld(t *testing.T, w int) *collective.World {
	t.Helper()
	wo, err := collective.Open(context.Background(), collective.Setup{CPU: true, Devices: make([]int, w)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wo.Close() })
	return wo
}

// trainRanks trains cfg over w ranks (Fit over a group; 20 steps, or
// epochs when epochs > 0) and evaluates and predicts.
func trainRanks(t *testing.T, cfg *graph.Config, d parData, w, batch, epochs int) parRun {
	return trainRanksWith(t, cfg, d, w, Options{BatchSize: batch, Seed: 7}, epochs)
}

func trainRanksWith(t *testing.T, cfg *graph.Config, d parData, w int, o Options, epochs int, prep ...func(m *Model) error) parRun {
	t.Helper()
	wo := hostWorld(t, w)
	batch := o.BatchSize
	g, err := NewGroup(cfg, wo.Comms, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range prep {
		if err := g.Run(context.Background(), func(_ context.Context, m *Model) error { return f(m) }); err != nil {
			t.Fatal(err)
		}
	}
	m0 := g.Models[0]
	open := func(s Source) func() (formats.Reader, error) {
		return func() (formats.Reader, error) { return m0.Open(s) }
	}
	// Two evaluations, the second from the cached first batches.
	fo := FitOptions{OpenTrain: open(d.train), OpenEval: open(d.eval), Display: 1, MaxEvalBatches: 1024 / batch, CacheEvalBatches: 2}
	if epochs > 0 {
		fo.NumEpochs = epochs
	} else {
		fo.MaxIter, fo.EvalInterval = 20, 10
	}
	res, err := g.Fit(context.Background(), fo)
	if err != nil {
		t.Fatal(err)
	}
	sameDense(t, g)
	run := parRun{auc: res.LastAUC, iters: res.Iters}
	for _, p := range res.History {
		if p.Loss != nil {
			run.losses = append(run.losses, *p.Loss)
		}
	}
	if run.pred, err = g.PredictSamples(context.Background(), nil, open(d.eval), 300); err != nil {
		t.Fatal(err)
	}
	ev, err := g.EvaluateSamples(context.Background(), open(d.eval), int64(fo.MaxEvalBatches*batch))
	if err != nil {
		t.Fatal(err)
	}
	if ev.AUC != res.LastAUC {
		t.Errorf("%d ranks: Evaluate's AUC %v, the last of Fit %v", w, ev.AUC, res.LastAUC)
	}
	return run
}

// compareRuns checks a run over several ranks against one rank's.
func compareRuns(t *testing.T, w int, got, want parRun) {
	t.Helper()
	if len(got.losses) != len(want.losses) || len(got.losses) == 0 || got.iters != want.iters {
		t.Fatalf("%d ranks: %d losses over %d iterations, 1 rank %d over %d", w, len(got.losses), got.iters, len(want.losses), want.iters)
	}
	worst := 0.0
	for i := range got.losses {
		d := math.Abs(got.losses[i]-want.losses[i]) / math.Abs(want.losses[i])
		if !(d <= 1e-5) {
			t.Errorf("%d ranks, step %d: loss %.8f, 1 rank %.8f (relative %.2e)", w, i+1, got.losses[i], want.losses[i], d)
		}
		worst = max(worst, d)
	}
	// The scores agree to float32 rounding; a pair of near-tied scores
	// may swap (measured: |ΔAUC| ≤ 3e-6).
	if !(math.Abs(got.auc-want.auc) <= 1e-4) {
		t.Errorf("%d ranks: eval AUC %.7f, 1 rank %.7f", w, got.auc, want.auc)
	}
	if len(got.pred) != len(want.pred) {
		t.Fatalf("%d ranks: %d predictions, 1 rank %d", w, len(got.pred), len(want.pred))
	}
	for i := range got.pred {
		if d := math.Abs(float64(got.pred[i] - want.pred[i])); !(d <= 1e-5) {
			t.Fatalf("%d ranks: prediction %d is %v, 1 rank %v", w, i, got.pred[i], want.pred[i])
		}
	}
	t.Logf("%d ranks: %d steps, loss %.5f → %.5f, worst relative difference %.2e, AUC %.6f (1 rank %.6f)", w, len(got.losses), got.losses[0], got.losses[len(got.losses)-1], worst, got.auc, want.auc)
}

var sgd = &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 1}

// TestParallelRanksMatchOne: DLRM, WDL and Localized-embedding models
// trained over 2 and 4 in-process CPU ranks (host collectives) give every
// step's loss of one rank within 1e-5 relative, the same eval AUC and the
// same predictions (issue #19 acceptance 1).
func TestParallelRanksMatchOne(t *testing.T) {
	multi := newParData(t, 4096, []int{2, 1, 3, 1, 2, 1})
	one := newParData(t, 4096, nil)
	cases := []struct {
		name string
		d    parData
		cfg  func(d parData) (*graph.Config, error)
	}{
		{"dlrm", multi, func(d parData) (*graph.Config, error) {
			return graph.Reference("dlrm", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, NNZPerSlot: d.nnz, VecSize: 8, Width: 1.0 / 64, Optimizer: sgd})
		}},
		{"wdl", multi, func(d parData) (*graph.Config, error) {
			// The wide input (one slot: fewer slots than ranks) LocalizedSlot,
			// the deep one (5 slots) DistributedSlot.
			cfg, err := graph.Reference("wdl", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, NNZPerSlot: d.nnz, VecSize: 8, Width: 1.0 / 64, Optimizer: sgd})
			if err == nil {
				cfg.Graph.Embeddings[0].Type = graph.LocalizedHash
			}
			return cfg, err
		}},
		{"deepfm-localized-hash", multi, func(d parData) (*graph.Config, error) {
			return graph.Reference("deepfm", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, NNZPerSlot: d.nnz, VecSize: 5, Width: 1.0 / 64, Optimizer: sgd,
				EmbeddingType: graph.LocalizedHash})
		}},
		{"dcn-onehot", one, func(d parData) (*graph.Config, error) {
			return graph.Reference("dcn", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, VecSize: 4, Width: 1.0 / 64, Optimizer: sgd,
				EmbeddingType: graph.LocalizedOneHot})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := c.cfg(c.d)
			if err != nil {
				t.Fatal(err)
			}
			want := trainRanks(t, cfg, c.d, 1, 128, 0)
			for _, w := range []int{2, 4} {
				compareRuns(t, w, trainRanks(t, cfg, c.d, w, 128, 0), want)
			}
		})
	}
}

// TestParallelMultiTask: a two-task model (two losses weighted 1 and
// 0.5, an L2 regularizer, one-hot embedding) over 2 and 4 ranks trains
// as on one: the weighted losses' gradients, the regularizer's term and
// gradient counted once, and both tasks' predictions gathered.
func TestParallelMultiTask(t *testing.T) {
	d := newParDataLabels(t, 4096, nil, 2)
	cfg := multiTaskConfig(t, 4, d.sizes)
	for i := range cfg.Graph.Layers {
		if l := &cfg.Graph.Layers[i]; l.Type == graph.BinaryCrossEntropyLoss {
			l.Regularizer, l.Lambda = "L2", 0.05
		}
	}
	cfg.Optimizer = sgd
	o := Options{BatchSize: 64, Seed: 3, LossWeights: map[string]float64{"click": 1, "buy": 0.5}}
	want := trainRanksWith(t, cfg, d, 1, o, 0)
	for _, w := range []int{2, 4} {
		compareRuns(t, w, trainRanksWith(t, cfg, d, w, o, 0), want)
	}
}

// TestParallelShortBatch: an epoch whose last batch leaves some ranks
// without samples (4136 = 32·128 + 40: with 4 ranks of 32, rank 1 gets 8
// and ranks 2, 3 none) trains as on one rank.
func TestParallelShortBatch(t *testing.T) {
	d := newParData(t, 4136, []int{2, 1, 3, 1, 2, 1})
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, NNZPerSlot: d.nnz, VecSize: 8, Width: 1.0 / 64, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	want := trainRanks(t, cfg, d, 1, 128, 1)
	if want.iters != 33 {
		t.Fatalf("%d iterations, want 33", want.iters)
	}
	compareRuns(t, 4, trainRanks(t, cfg, d, 4, 128, 1), want)
}

// TestParallelBatchNotDivisible: a global batch the ranks cannot split
// equally is refused by name, and so is a model on another rank's backend.
func TestParallelBatchNotDivisible(t *testing.T) {
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 8, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	wo := hostWorld(t, 4)
	_, err = NewGroup(cfg, wo.Comms, Options{BatchSize: 130, Seed: 1})
	if err == nil || !strings.Contains(err.Error(), "batch size 130 does not split over 4 ranks") || !strings.Contains(err.Error(), "multiple of 4") {
		t.Fatalf("err = %v", err)
	}
	_, err = Build(cfg, wo.Backends[1], Options{BatchSize: 130, Parallel: &Parallel{Comm: wo.Comms[1]}})
	if err == nil || !strings.Contains(err.Error(), "does not split") {
		t.Fatalf("Build: err = %v", err)
	}
	_, err = Build(cfg, wo.Backends[0], Options{BatchSize: 128, Parallel: &Parallel{Comm: wo.Comms[1]}})
	if err == nil || !strings.Contains(err.Error(), "another backend") {
		t.Fatalf("Build on another rank's backend: err = %v", err)
	}
}

// rankFailReader fails after some batches.
type rankFailReader struct {
	formats.Reader
	left int
}

var errInjected = errors.New("injected read failure")

func (r *rankFailReader) Read(b *formats.Batch) (int, error) {
	if r.left == 0 {
		return 0, errInjected
	}
	r.left--
	return r.Reader.Read(b)
}

// TestParallelRankFailure: a rank whose data fails mid-training makes the
// others return at once (closing its communicator: the host collectives
// would otherwise wait an hour here, past the test's deadline), and the
// group reports the failure itself with its rank, not a peer's
// consequence.
func TestParallelRankFailure(t *testing.T) {
	data := newPlanted(1, 4096, 4, smallSlots)
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 8, Width: 1.0 / 64, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	world := func() *Group {
		wo, err := collective.Open(context.Background(), collective.Setup{CPU: true, Devices: make([]int, 3), Options: collective.Options{Timeout: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { wo.Close() })
		g, err := NewGroup(cfg, wo.Comms, Options{BatchSize: 96, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// Rank 2 fails after 5 batches (Group.Run with a reader per rank).
	fit := func(m *Model, fail bool) FitOptions {
		return FitOptions{MaxIter: 30, OpenTrain: func() (formats.Reader, error) {
			if fail {
				return &rankFailReader{Reader: data.reader(96), left: 5}, nil
			}
			return data.reader(96), nil
		}}
	}
	err = world().Run(context.Background(), func(ctx context.Context, m *Model) error {
		_, err := m.Fit(ctx, fit(m, m.Rank() == 2))
		return err
	})
	if !errors.Is(err, errInjected) || !strings.HasPrefix(err.Error(), "rank 2: ") || errors.Is(err, collective.ErrPeer) {
		t.Fatalf("err = %v", err)
	}
	// FitGroup: the data's second and third openings fail. Each rank opens
	// its first pass and, right after it, its second (StartPasses), so of
	// any rank's two openings one is its first pass's: the second and third
	// in all include a first pass that some rank reads.
	var opens atomic.Int32
	_, err = world().Fit(context.Background(), FitOptions{MaxIter: 30, OpenTrain: func() (formats.Reader, error) {
		r := data.reader(96)
		if n := opens.Add(1); n == 2 || n == 3 {
			return &rankFailReader{Reader: r, left: 5}, nil
		}
		return r, nil
	}})
	if !errors.Is(err, errInjected) || !strings.HasPrefix(err.Error(), "rank ") || errors.Is(err, collective.ErrPeer) {
		t.Fatalf("FitGroup: err = %v", err)
	}
}

// TestParallelOneRankExchange: a group of one rank trains with the
// single-device step, and with the exchange forced (the sharded step's
// code with one rank: the CPU twin of TestGPUParallelWorld1) it trains as
// the model without Parallel.
func TestParallelOneRankExchange(t *testing.T) {
	data := newPlanted(1, 2048, 4, smallSlots)
	cfg, err := graph.Reference("wdl", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 8, Width: 1.0 / 64, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Graph.Embeddings[1].Type = graph.LocalizedHash
	losses := func(p func(c collective.Comm) *Parallel) []float64 {
		wo := hostWorld(t, 1)
		par := p(wo.Comms[0])
		m, err := Build(cfg, wo.Backends[0], Options{BatchSize: 64, Seed: 2, Parallel: par})
		if err != nil {
			t.Fatal(err)
		}
		if sharded := par != nil && par.exchange; (m.par != nil) != sharded {
			t.Fatalf("sharded step %v, want %v", m.par != nil, sharded)
		}
		return trainLossesOf(t, m, data, 64, 20)
	}
	plain := losses(func(collective.Comm) *Parallel { return nil })
	for name, p := range map[string]func(c collective.Comm) *Parallel{
		"one rank":            func(c collective.Comm) *Parallel { return &Parallel{Comm: c} },
		"the exchange forced": func(c collective.Comm) *Parallel { return &Parallel{Comm: c, exchange: true} },
	} {
		got := losses(p)
		for i := range plain {
			if d := math.Abs(got[i]-plain[i]) / math.Abs(plain[i]); !(d <= 1e-6) {
				t.Errorf("%s, step %d: loss %.8f, %.8f without Parallel", name, i+1, got[i], plain[i])
			}
		}
	}
}

// trainLossesOf trains m for steps full batches of data and returns each
// step's loss.
func trainLossesOf(t *testing.T, m *Model, data *planted, batch, steps int) []float64 {
	t.Helper()
	r := data.reader(batch)
	b, err := formats.NewBatch(r.Schema(), batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for i := 0; i < steps; i++ {
		if n, err := r.Read(b); err != nil && err != io.EOF || n != batch {
			t.Fatalf("read: %d, %v", n, err)
		}
		if err := m.TrainStep(b); err != nil {
			t.Fatal(fmt.Errorf("step %d: %w", i+1, err))
		}
		l, err := m.Loss()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestParallelInferenceGraph: a graph without a loss layer predicts and
// evaluates over 2 ranks as on one, the short last batch (100 = 12·8 + 4:
// rank 1 without samples) included.
func TestParallelInferenceGraph(t *testing.T) {
	cfg, err := graph.Read(strings.NewReader(inferenceJSON), "inference.json")
	if err != nil {
		t.Fatal(err)
	}
	data := newPlanted(4, 100, 2, []int64{5, 7, 3})
	open := func() (formats.Reader, error) { return data.reader(8), nil }
	one, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	want, err := one.PredictSamples(nil, data.reader(8), 0)
	if err != nil {
		t.Fatal(err)
	}
	wantEv, err := one.EvaluateSamples(data.reader(8), 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroup(cfg, hostWorld(t, 2).Comms, Options{BatchSize: 8, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := g.PredictSamples(context.Background(), nil, open, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := g.EvaluateSamples(context.Background(), open, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 || len(want) != 100 {
		t.Fatalf("%d predictions over 2 ranks, %d on one", len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > 1e-6 {
			t.Fatalf("prediction %d: %v over 2 ranks, %v on one", i, got[i], want[i])
		}
	}
	if ev.Samples != 100 || math.Abs(ev.AUC-wantEv.AUC) > 1e-9 || math.Abs(ev.Loss-wantEv.Loss) > 1e-6 {
		t.Errorf("evaluation over 2 ranks %+v, on one %+v", ev, wantEv)
	}
}

// TestParallelOptimizers: the stateful optimizers over 4 ranks (each
// rank updating its own rows: Adam with LazyGlobal's catch-up of skipped
// rows, AdaGrad Global, Nesterov) train as on one.
func TestParallelOptimizers(t *testing.T) {
	d := newParData(t, 4096, []int{2, 1, 3, 1, 2, 1})
	for _, c := range [][2]string{{"Adam", "LazyGlobal"}, {"AdaGrad", "Global"}, {"Nesterov", "Local"}} {
		t.Run(c[0], func(t *testing.T) {
			opt := graph.DefaultOptimizer()
			opt.Type, opt.UpdateType, opt.LearningRate = c[0], c[1], 0.01
			cfg, err := graph.Reference("dcn", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, NNZPerSlot: d.nnz, VecSize: 8, Width: 1.0 / 64,
				Optimizer: opt, EmbeddingType: graph.LocalizedHash})
			if err != nil {
				t.Fatal(err)
			}
			compareRuns(t, 4, trainRanks(t, cfg, d, 4, 128, 0), trainRanks(t, cfg, d, 1, 128, 0))
		})
	}
}

// denseValues downloads every dense parameter of m.
func denseValues(t *testing.T, m *Model) [][]float32 {
	t.Helper()
	var vs [][]float32
	for _, p := range m.params {
		v := make([]float32, p.Value.Len())
		if err := m.be.Download(v, p.Value); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

// sameDense checks that every rank holds the same dense weights, bit for
// bit (the all-reduced gradients are the same on every rank).
func sameDense(t *testing.T, g *Group) {
	t.Helper()
	want := denseValues(t, g.Models[0])
	for r, m := range g.Models[1:] {
		for i, v := range denseValues(t, m) {
			for j := range v {
				if math.Float32bits(v[j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("rank %d: dense parameter %s[%d] is %v, rank 0's %v", r+1, m.params[i].Name, j, v[j], want[i][j])
				}
			}
		}
	}
}

// TestParallelBatchNorm: BatchNorm over 2 ranks normalises with each
// rank's own batch statistics and keeps its own running statistics
// (HugeCTR's behaviour, docs/MULTI_GPU.md), while the dense weights stay
// the same on every rank.
func TestParallelBatchNorm(t *testing.T) {
	d := newParData(t, 4096, []int{2, 1, 3, 1, 2, 1})
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, NNZPerSlot: d.nnz, VecSize: 8, Width: 1.0 / 64, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Graph
	for i, l := range g.Layers {
		if l.Type == graph.ReLU && l.Bottom[0] == "fc1" {
			g.Layers[i].Bottom = []string{"bn1"}
			bn := graph.DenseLayer{Type: graph.BatchNorm, Bottom: []string{"fc1"}, Top: []string{"bn1"}, Factor: 0.1, Eps: 1e-5}
			g.Layers = append(g.Layers[:i], append([]graph.DenseLayer{bn}, g.Layers[i:]...)...)
			break
		}
	}
	one := trainRanks(t, cfg, d, 1, 128, 0)
	wo := hostWorld(t, 2)
	grp, err := NewGroup(cfg, wo.Comms, Options{BatchSize: 128, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	res, err := grp.Fit(context.Background(), FitOptions{MaxIter: 20, Display: 1, OpenTrain: func() (formats.Reader, error) { return grp.Models[0].Open(d.train) }})
	if err != nil {
		t.Fatal(err)
	}
	sameDense(t, grp)
	var mean [2][]float32
	for r, m := range grp.Models {
		bns := m.batchNorms()
		if len(bns) != 1 {
			t.Fatalf("%d BatchNorm layers", len(bns))
		}
		mean[r] = make([]float32, bns[0].RunMean.Len())
		if err := m.be.Download(mean[r], bns[0].RunMean); err != nil {
			t.Fatal(err)
		}
	}
	differ := false
	for j := range mean[0] {
		differ = differ || mean[0][j] != mean[1][j]
	}
	if !differ {
		t.Errorf("the ranks' running means are the same: %v", mean[0])
	}
	last := *res.History[len(res.History)-1].Loss
	if math.IsNaN(last) || math.Abs(last-one.losses[len(one.losses)-1]) > 0.1 {
		t.Errorf("loss %v over 2 ranks, %v on one", last, one.losses[len(one.losses)-1])
	}
}

// TestParallelFrozen: with the dense network frozen (no all-reduce) or
// one embedding frozen, 2 ranks train as one.
func TestParallelFrozen(t *testing.T) {
	d := newParData(t, 4096, []int{2, 1, 3, 1, 2, 1})
	cfg, err := graph.Reference("wdl", graph.RefOptions{DenseDim: 4, SlotSizes: d.sizes, NNZPerSlot: d.nnz, VecSize: 8, Width: 1.0 / 64, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Graph.Embeddings[0].Type = graph.LocalizedHash
	o := Options{BatchSize: 128, Seed: 7}
	for name, f := range map[string]func(m *Model) error{
		"dense":     func(m *Model) error { m.FreezeDense(); return nil },
		"embedding": func(m *Model) error { return m.FreezeEmbedding("sparse_embedding1") },
	} {
		t.Run(name, func(t *testing.T) {
			compareRuns(t, 2, trainRanksWith(t, cfg, d, 2, o, 0, f), trainRanksWith(t, cfg, d, 1, o, 0, f))
		})
	}
}
