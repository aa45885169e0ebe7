package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/metrics"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// scaledRun trains cfg for steps TrainSteps with loss scale scale and
// returns every step's loss and the final dense and embedding weights.
func scaledRun(t *testing.T, cfg *graph.Config, be tensor.Backend, data *planted, batch, steps int, scale float64) (losses []float64, weights []float32) {
	t.Helper()
	m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 7, LossScale: scale})
	if err != nil {
		t.Fatal(err)
	}
	r := data.reader(batch)
	b, err := formats.NewBatch(r.Schema(), batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < steps; i++ {
		if _, err := r.Read(b); err != nil && i < steps-1 {
			t.Fatal(err)
		}
		if err := m.TrainStep(b); err != nil {
			t.Fatal(err)
		}
		l, err := m.Loss()
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	for _, o := range m.optimizers() {
		o.Flush()
	}
	for _, p := range m.params {
		v, _ := m.download(p.Value)
		weights = append(weights, v...)
	}
	for _, e := range m.embs {
		v, _ := m.download(e.layer.Table)
		weights = append(weights, v...)
	}
	return losses, weights
}

// TestLossScaleExact: a power-of-two loss scale (HugeCTR's mixed_precision
// scaler) multiplies the loss gradient and is divided out in the dense and
// sparse updates, so on the CPU every loss and every final weight equals the
// unscaled run's bit for bit, for every optimizer and with a regularizer.
// Before the fix the scale only divided the gradients: steps were 1024×
// too small.
func TestLossScaleExact(t *testing.T) {
	const batch, steps = 64, 12
	data := newPlanted(4, batch*steps, 4, smallSlots)
	cases := []struct {
		model, opt, update, reg string
	}{
		{"wdl", "SGD", "Local", ""},
		{"dlrm", "Adam", "Global", ""},
		{"dcn", "MomentumSGD", "Global", "L2"},
		{"deepfm", "AdaGrad", "Local", "L1"},
		{"dlrm", "Adam", "LazyGlobal", ""},
	}
	for _, c := range cases {
		t.Run(c.model+"/"+c.opt+"/"+c.update+c.reg, func(t *testing.T) {
			opt := graph.DefaultOptimizer()
			opt.Type, opt.UpdateType, opt.LearningRate = c.opt, c.update, 0.01
			if c.opt == "MomentumSGD" {
				opt.MomentumFactor = 0.9
			}
			cfg, err := graph.Reference(c.model, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64, Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			if c.reg != "" {
				l := &cfg.Graph.Layers[len(cfg.Graph.Layers)-1]
				l.Regularizer, l.Lambda = c.reg, 0.05
			}
			l0, w0 := scaledRun(t, cfg, cpuBackend(t), data, batch, steps, 0)
			l1, w1 := scaledRun(t, cfg, cpuBackend(t), data, batch, steps, 1024)
			if !slices.Equal(l0, l1) {
				t.Errorf("losses differ with loss scale 1024:\n%v\n%v", l0, l1)
			}
			if !slices.Equal(w0, w1) {
				n := 0
				for i := range w0 {
					if w0[i] != w1[i] {
						n++
					}
				}
				t.Errorf("%d of %d weights differ with loss scale 1024", n, len(w0))
			}
		})
	}
}

// lossScaleAUC trains WDL with SGD on planted datagen data for 160 steps
// twice on backends from newBE, in FP32 and with the mixed-precision
// scaler 1024 (newBE(true) may switch the GEMMs to BF16), and returns both
// eval AUCs.
func lossScaleAUC(t *testing.T, newBE func(mixed bool) tensor.Backend, mixedSolver func(*graph.Solver)) (fp32, mixed float64) {
	t.Helper()
	dir := t.TempDir()
	p := datagen.DefaultParams()
	p.Format = datagen.Norm
	p.DenseDim = 4
	p.NumSlot = 8
	p.SlotSizeArray = []int64{40, 60, 20, 80, 30, 50, 10, 70}
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 2, 1, 8192
	p.Seed = 5
	if _, err := datagen.Generate(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	run := func(mp bool) float64 {
		opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.5}
		cfg, err := graph.Reference("wdl", graph.RefOptions{DenseDim: p.DenseDim, SlotSizes: p.SlotSizeArray, VecSize: 8, Width: 1.0 / 32, Optimizer: opt})
		if err != nil {
			t.Fatal(err)
		}
		s := *graph.DefaultSolver()
		s.BatchSize, s.MaxIter, s.Seed = 128, 160, 3
		s.MaxEvalBatches, s.EvalInterval, s.Display = 0, 160, 0
		if mp {
			mixedSolver(&s)
		}
		j := Job{Config: cfg, Solver: s, Optimizer: opt, Backend: newBE(mp),
			Train: Source{Format: dataset.Norm, Path: p.Source, Check: norm.CheckSum},
			Eval:  Source{Format: dataset.Norm, Path: p.EvalSource, Check: norm.CheckSum}}
		_, res, err := Train(context.Background(), j, TrainOutput{})
		if err != nil {
			t.Fatal(err)
		}
		return res.LastAUC
	}
	return run(false), run(true)
}

// TestLossScaleAUC is the acceptance check of the scaler on the CPU: SGD
// with mixed_precision 1024 reaches the FP32 run's eval AUC within 0.005
// (before the fix: 0.565 against 0.752 on data like this).
func TestLossScaleAUC(t *testing.T) {
	// The loss scale alone: the CPU trains fp32 (fp16 itself is
	// TestGPULossScaleAUC's).
	fp32, mixed := lossScaleAUC(t, func(bool) tensor.Backend { return cpuBackend(t) },
		func(s *graph.Solver) { s.Scaler, s.ScalerSet = 1024, true })
	t.Logf("eval AUC after 160 SGD steps: FP32 %.4f, scaler 1024 %.4f", fp32, mixed)
	if math.IsNaN(fp32) || fp32 < 0.6 || !(math.Abs(fp32-mixed) <= 0.005) {
		t.Errorf("eval AUC FP32 %.4f, with scaler 1024 %.4f", fp32, mixed)
	}
}

// TestFitStopsOnNaN: a diverging run (SGD at lr 1e8) stops with an error
// naming the first iteration whose loss is not finite (the one a step-by-step
// run sees), and an evaluation or prediction of a model with NaN weights
// is an error naming the sample, not a hang in the AUC.
func TestFitStopsOnNaN(t *testing.T) {
	data := newPlanted(1, 4096, 4, smallSlots)
	opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 1e8}
	cfg, err := graph.Reference("wdl", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	losses, _ := scaledRun(t, cfg, cpuBackend(t), data, 64, 64, 0)
	first := int64(0)
	for i, l := range losses {
		if math.IsNaN(l) || math.IsInf(l, 0) {
			first = int64(i + 1)
			break
		}
	}
	if first == 0 {
		t.Fatalf("lr 1e8 did not diverge in 64 steps: %v", losses)
	}
	for _, display := range []int{0, 5} {
		m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.Fit(context.Background(), FitOptions{
			OpenTrain: func() (formats.Reader, error) { return data.reader(64), nil },
			OpenEval:  func() (formats.Reader, error) { return data.reader(64), nil },
			MaxIter:   1000, Display: display, EvalInterval: 100,
		})
		var nf *NonFiniteError
		if !errors.As(err, &nf) || nf.Iter != first || !strings.Contains(err.Error(), fmt.Sprintf("iteration %d:", first)) {
			t.Fatalf("display %d: Fit after %d iterations: %v; want a non-finite loss at iteration %d", display, res.Iters, err, first)
		}
		if res.Iters >= first+lossWatchSteps {
			t.Errorf("stopped at iteration %d, %d after the first NaN", res.Iters, res.Iters-first)
		}
		t.Logf("display %d: %v (stopped at %d)", display, err, res.Iters)
		// The diverged model's predictions are NaN: errors, no hang.
		if _, err := m.Evaluate(data.reader(64), 0); !errors.As(err, &nf) || nf.Sample != 0 {
			t.Errorf("Evaluate of a diverged model: %v", err)
		}
		if _, err := m.PredictSamples(nil, data.reader(64), 0); !errors.As(err, &nf) || !strings.Contains(err.Error(), "sample 0:") {
			t.Errorf("Predict of a diverged model: %v", err)
		}
	}
}

// lossVariant is DCN with a T-wide last layer and another loss: "CE"
// (CrossEntropyLoss, T = 2) or "MultiCE" (MultiCrossEntropyLoss over two
// labels with target weights 1 and 3).
func lossVariant(t *testing.T, kind string) *graph.Config {
	t.Helper()
	opt := graph.DefaultOptimizer()
	opt.LearningRate = 0.01
	cfg, err := graph.Reference("dcn", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 8, Width: 1.0 / 32, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Graph
	n := len(g.Layers)
	g.Layers[n-2].NumOutput = 2
	switch kind {
	case "CE":
		g.Layers[n-1].Type = graph.CrossEntropyLoss
	case "MultiCE":
		g.Layers[n-1].Type = graph.MultiCrossEntropyLoss
		g.Layers[n-1].TargetWeight = []float32{1, 3}
		g.Input.LabelDims = []int{2}
	}
	return cfg
}

// TestEvalLossMetrics: CrossEntropyLoss is evaluated on P(class 1) (before
// the fix on P(class 0): AUC 1 − the true one) with a finite loss (before:
// NaN); MultiCrossEntropyLoss's eval loss is HugeCTR's Σ w_t·bce / (B·T)
// (before: the unweighted sum over columns) and its AUC the mean of the
// columns' AUCs. Each eval loss of one full batch must equal the loss
// layer's own (device) value of that batch.
func TestEvalLossMetrics(t *testing.T) {
	train := newPlanted(1, 16384, 4, smallSlots)
	eval := newPlanted(2, 4096, 4, smallSlots)
	for _, kind := range []string{"CE", "MultiCE"} {
		t.Run(kind, func(t *testing.T) {
			tr, ev := train, eval
			if kind == "MultiCE" {
				tr, ev = train.twoLabels(), eval.twoLabels()
			}
			m, err := Build(lossVariant(t, kind), cpuBackend(t), Options{BatchSize: 256, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Fit(context.Background(), FitOptions{
				OpenTrain: func() (formats.Reader, error) { return tr.reader(256), nil },
				OpenEval:  func() (formats.Reader, error) { return ev.reader(256), nil },
				NumEpochs: 2,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: eval AUC %.4f, planted %.4f", kind, res.LastAUC, eval.auc)
			if !(math.Abs(res.LastAUC-eval.auc) <= 0.05) {
				t.Errorf("eval AUC %.4f, planted %.4f", res.LastAUC, eval.auc)
			}
			one, err := m.Evaluate(ev.reader(256), 1)
			if err != nil {
				t.Fatal(err)
			}
			dev, err := m.Loss() // the loss layer's value of the same batch
			if err != nil {
				t.Fatal(err)
			}
			if !(math.Abs(one.Loss-dev) <= 1e-5*dev) {
				t.Errorf("eval loss of one batch %.7f, the loss layer's %.7f", one.Loss, dev)
			}
			if kind == "MultiCE" {
				p, err := m.PredictSamples(nil, ev.reader(256), 0)
				if err != nil {
					t.Fatal(err)
				}
				var want float64
				for c := 0; c < 2; c++ {
					s, y := make([]float32, len(p)/2), make([]float32, len(p)/2)
					for i := range s {
						s[i], y[i] = p[2*i+c], ev.labels[2*i+c]
					}
					want += metrics.AUC(s, y) / 2
				}
				all, err := m.Evaluate(ev.reader(256), 0)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(all.AUC-want) > 1e-12 {
					t.Errorf("MultiCE AUC %.6f, mean of the columns' %.6f", all.AUC, want)
				}
			}
		})
	}
}

// TestShortLastBatch: epoch mode trains the short last batch (HugeCTR
// does) and logs how many samples an epoch used; the padding adds nothing:
// a step on 40 samples in a model of batch 64 equals the step of a model of
// batch 40 on them (dropout off: its masks depend on the batch size). A repeating reader (max_iter mode) trains full batches.
func TestShortLastBatch(t *testing.T) {
	data := newPlanted(1, 1000, 4, smallSlots)
	for _, name := range []string{"dlrm", "wdl"} {
		t.Run(name, func(t *testing.T) {
			opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.5}
			cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64, Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			for i := range cfg.Graph.Layers {
				if cfg.Graph.Layers[i].Type == graph.Dropout {
					cfg.Graph.Layers[i].Rate = 0 // its masks depend on the batch size
				}
			}
			short := newPlanted(9, 40, 4, smallSlots)
			var loss [2]float64
			var weights [2][]float32
			for k, batch := range []int{64, 40} {
				m, err := Build(cfg, cpuBackend(t), Options{BatchSize: batch, Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				r := short.reader(batch)
				b, _ := formats.NewBatch(r.Schema(), batch, nil)
				if n, _ := r.Read(b); n != 40 {
					t.Fatalf("read %d", n)
				}
				if err := m.TrainStep(b); err != nil {
					t.Fatal(err)
				}
				if loss[k], err = m.Loss(); err != nil {
					t.Fatal(err)
				}
				for _, p := range m.params {
					v, _ := m.download(p.Value)
					weights[k] = append(weights[k], v...)
				}
			}
			if math.Abs(loss[0]-loss[1]) > 1e-6*loss[1] {
				t.Errorf("loss of 40 samples padded to 64: %.7f, in a batch of 40: %.7f", loss[0], loss[1])
			}
			for i := range weights[0] {
				if d := math.Abs(float64(weights[0][i] - weights[1][i])); d > 1e-6*max(1, math.Abs(float64(weights[1][i]))) {
					t.Fatalf("weight %d after a padded step %v, unpadded %v", i, weights[0][i], weights[1][i])
				}
			}
			m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			res, err := m.Fit(context.Background(), FitOptions{
				OpenTrain: func() (formats.Reader, error) { return data.reader(64), nil },
				NumEpochs: 2, Log: &log,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Iters != 32 || res.Samples != 2000 || !slices.Equal(res.EpochSamples, []int64{1000, 1000}) ||
				!strings.Contains(log.String(), "epoch 1 done at iter 16: 1000 samples (last batch 40 of 64)") {
				t.Errorf("epoch mode: %d iterations, %d samples %v, log:\n%s", res.Iters, res.Samples, res.EpochSamples, log.String())
			}
			// MaxIter counts the model's iterations: from the 32 above, 20 more.
			res, err = m.Fit(context.Background(), FitOptions{
				OpenTrain: func() (formats.Reader, error) { return data.reader(64), nil },
				MaxIter:   52,
			})
			if err != nil || res.Iters != 52 || res.Samples != 20*64 {
				t.Errorf("max_iter mode: %v, %d iterations, %d samples", err, res.Iters, res.Samples)
			}
		})
	}
}

// TestMultiCrossEntropyMaskedLabels: a MultiCrossEntropyLoss label below
// −0.5 masks its entry (HugeCTR loss.cu: loss 0, still counted in B·T) in
// the loss layer and in the evaluation's loss alike (before: −1 was taken
// as a label, which gives a larger loss and pulls the logit up).
func TestMultiCrossEntropyMaskedLabels(t *testing.T) {
	ev := newPlanted(2, 512, 4, smallSlots).twoLabels()
	for i := 1; i < len(ev.labels); i += 6 {
		ev.labels[i] = -1 // every third sample's second label is missing
	}
	m, err := Build(lossVariant(t, "MultiCE"), cpuBackend(t), Options{BatchSize: 256, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	one, err := m.Evaluate(ev.reader(256), 1)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := m.Loss()
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.PredictSamples(nil, ev.reader(256), 256)
	if err != nil {
		t.Fatal(err)
	}
	w := [2]float64{1, 3}
	var want float64
	for i, pv := range p {
		y := float64(ev.labels[i])
		if y < -0.5 {
			continue
		}
		q := math.Min(math.Max(float64(pv), 1e-7), 1-1e-7)
		want -= w[i%2] * (y*math.Log(q) + (1-y)*math.Log(1-q))
	}
	want /= float64(len(p))
	if !(math.Abs(one.Loss-want) <= 1e-4*want) || !(math.Abs(dev-want) <= 1e-4*want) {
		t.Errorf("eval loss %.7f, loss layer %.7f, want %.7f (masked entries add 0)", one.Loss, dev, want)
	}
}
