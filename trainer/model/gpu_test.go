package model

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/metrics"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// gpuOrSkip opens GPU 0 or skips the test when there is no CUDA driver
// (CTRKIT_REQUIRE_GPU=1 makes that a failure, for the GPU machine's runs).
func gpuOrSkip(t *testing.T, o gpu.Options) *gpu.Backend {
	t.Helper()
	be, err := gpu.New(o)
	if err != nil {
		if errors.Is(err, cuda.ErrNoDriver) && os.Getenv("CTRKIT_REQUIRE_GPU") == "" {
			t.Skipf("GPU test skipped: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// TestGPUMatchesCPU trains DLRM, WDL, DCN and DeepFM for 50 steps on the same data on
// the GPU (FP32) and on the CPU backend (float32): every step's loss must
// agree within 1e-3 relative. The hash embeddings insert keys as they come,
// so this also checks the device hash table's row assignment. SGD, as in
// the reference DLRM: Adam's m/√v turns float32 rounding differences in
// near-zero gradients into full-size steps, so two correct backends drift
// apart after ~20 steps (measured on the H200: 9e-3 at step 45 with Adam).
func TestGPUMatchesCPU(t *testing.T) {
	g := gpuOrSkip(t, gpu.Options{})
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 2000
	}
	const batch, steps = 1024, 50
	data := newPlanted(3, batch*steps, 13, sizes)
	for _, name := range []string{"dlrm", "wdl", "dcn", "deepfm"} {
		t.Run(name, func(t *testing.T) {
			opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
			cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 16, Width: 1.0 / 8, Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			c, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			lc := trainLosses(t, cfg, c, data, batch, steps)
			lg := trainLosses(t, cfg, g, data, batch, steps)
			worst := 0.0
			for i := range lc {
				d := math.Abs(lg[i]-lc[i]) / math.Abs(lc[i])
				if !(d <= 1e-3) {
					t.Errorf("step %d: GPU loss %.7f, CPU %.7f (relative %.2e)", i+1, lg[i], lc[i], d)
				}
				worst = max(worst, d)
			}
			t.Logf("%s: %d steps, loss %.5f → %.5f, worst relative difference %.2e", name, steps, lc[0], lc[steps-1], worst)
		})
	}
}

func trainLosses(t *testing.T, cfg *graph.Config, be tensor.Backend, data *planted, batch, steps int) []float64 {
	t.Helper()
	m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	r := data.reader(batch)
	b, err := formats.NewBatch(r.Schema(), batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for i := 0; i < steps; i++ {
		if _, err := r.Read(b); err != nil && i < steps-1 {
			t.Fatal(err)
		}
		if err := m.TrainStep(b); err != nil {
			t.Fatalf("%s step %d: %v", be.Name(), i+1, err)
		}
		l, err := m.Loss()
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	return losses
}

// TestGPUPipelineFit runs Fit (the prefetching, pinned, copy-stream input
// pipeline) on the GPU and checks its losses against TrainStep's on the
// CPU: the pipeline must deliver the same batches in the same order.
func TestGPUPipelineFit(t *testing.T) {
	g := gpuOrSkip(t, gpu.Options{})
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 500
	}
	const batch, steps = 512, 20
	data := newPlanted(5, batch*steps, 13, sizes)
	opt := graph.DefaultOptimizer()
	opt.LearningRate = 0.01
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 16, Width: 1.0 / 8, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := trainLosses(t, cfg, c, data, batch, steps)
	m, err := Build(cfg, g, Options{BatchSize: batch, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Fit(t.Context(), FitOptions{
		OpenTrain: func() (formats.Reader, error) { return data.reader(batch), nil },
		MaxIter:   steps, Display: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, p := range res.History {
		if p.Loss != nil {
			got = append(got, *p.Loss)
		}
	}
	if len(got) != steps {
		t.Fatalf("%d losses, want %d", len(got), steps)
	}
	for i := range got {
		if d := math.Abs(got[i]-want[i]) / want[i]; !(d <= 1e-3) {
			t.Errorf("step %d: pipeline loss %.7f, CPU %.7f", i+1, got[i], want[i])
		}
	}
	fmt.Fprintf(os.Stderr, "pipeline fit: %d steps match the CPU\n", steps)
}

// TestGPUEvaluateAUC checks that evaluation on the GPU (AUC by the device
// radix sort) gives the host's exact AUC of the same scores.
func TestGPUEvaluateAUC(t *testing.T) {
	g := gpuOrSkip(t, gpu.Options{})
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 300
	}
	const batch = 4096
	data := newPlanted(9, 20*batch, 13, sizes)
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 16, Width: 1.0 / 8})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, g, Options{BatchSize: batch, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := m.EvaluateSamples(data.reader(batch), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Samples < deviceAUCMin {
		t.Fatalf("%d samples: the device path was not taken", ev.Samples)
	}
	scores, err := m.PredictSamples(nil, data.reader(batch), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := metrics.AUC(scores, data.labels)
	if ev.AUC != want {
		t.Fatalf("device AUC %.17g, host %.17g", ev.AUC, want)
	}
	t.Logf("eval AUC %.6f over %d samples on the device = host", ev.AUC, ev.Samples)
}

// TestGPUHugeCTRConfigs builds every HugeCTR model config of the shared
// fixtures that ctrkit reads (CTRKIT_HUGECTR_JSON names their folder on a
// machine without ../shared) on the GPU with batch 512, trains 3 steps on
// random data of the model's input shape and requires finite losses; when
// the embedding tables are small (≤ 1 GiB) it also requires the first
// step's loss to equal the CPU backend's within 1e-4. Configs whose
// embeddings exceed 8 GiB (MLPerf's 188M rows) are left out.
func TestGPUHugeCTRConfigs(t *testing.T) {
	dir := os.Getenv("CTRKIT_HUGECTR_JSON")
	if dir == "" {
		dir = "../../../shared/data/hugectr-json"
	}
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if len(paths) == 0 {
		t.Skipf("no HugeCTR configs under %s", dir)
	}
	g := gpuOrSkip(t, gpu.Options{})
	const batch = 512
	built := 0
	for _, p := range paths {
		name := strings.TrimPrefix(p, dir+"/")
		cfg, err := graph.ReadFile(p)
		if err != nil || cfg.Graph == nil {
			t.Logf("%s: not a model ctrkit reads: %v", name, err)
			continue
		}
		info, err := cfg.Graph.Infer(cfg.Optimizer)
		if err != nil {
			t.Logf("%s: not a model ctrkit trains: %v", name, err)
			continue
		}
		rows := embRows(info)
		if rows*128*4 > 8<<30 {
			t.Logf("%s: %d embedding rows: too big for this test", name, rows)
			continue
		}
		m, err := Build(cfg, g, Options{BatchSize: batch, Seed: 1})
		if err != nil {
			t.Logf("%s: does not build: %v", name, err)
			continue
		}
		s := m.Schema(formats.KeyI64)
		sizes := make([]int64, s.NumSlots())
		for i := range sizes {
			sizes[i] = 1000
		}
		var nnz []int
		for _, sl := range s.Slots {
			nnz = append(nnz, sl.MaxNNZ)
		}
		// An input may allow fewer keys a sample than its slots' nnz sum
		// (max_feature_num_per_sample): then draw one key per slot there.
		for k, in := range m.feed.Parts {
			sum := 0
			for _, v := range nnz[in.First : in.First+in.Slots] {
				sum += v
			}
			if sum > m.feed.CapKeys[k]/batch {
				for j := in.First; j < in.First+in.Slots; j++ {
					nnz[j] = 1
				}
			}
		}
		s = formats.NewSchema(s.LabelDim, s.DenseDim, nnz, sizes, formats.KeyI64)
		d := formatstest.NewDataset(rand.New(rand.NewPCG(1, uint64(built))), s, 3*batch, 1, formatstest.IntegerValued)
		bs, err := d.Batches(batch)
		if err != nil {
			t.Fatal(err)
		}
		if m.Inference() {
			// An inference graph (no loss layer) predicts; the
			// conformance test checks it against trained weights.
			scores, err := m.PredictSamples(nil, &batchesReader{s: &s, bs: bs}, 0)
			if err != nil || len(scores) == 0 {
				t.Errorf("%s: predict: %d scores, %v", name, len(scores), err)
			}
			built++
			t.Logf("%s: inference graph: %d GPU predictions", name, len(scores))
			continue
		}
		var first float64
		for i, b := range bs {
			if err := m.TrainStep(b); err != nil {
				t.Errorf("%s: step %d: %v", name, i+1, err)
				break
			}
			l, err := m.Loss()
			if err != nil || math.IsNaN(l) || math.IsInf(l, 0) {
				t.Errorf("%s: step %d: loss %v, %v", name, i+1, l, err)
				break
			}
			if i == 0 {
				first = l
			}
		}
		built++
		msg := fmt.Sprintf("%s: 3 GPU steps, first loss %.6f", name, first)
		if rows > 0 && rows*128*4 <= 1<<30 {
			c, _ := cpu.New(cpu.Options{})
			mc, err := Build(cfg, c, Options{BatchSize: batch, Seed: 1})
			if err == nil && mc.TrainStep(bs[0]) == nil {
				lc, _ := mc.Loss()
				if d := math.Abs(lc-first) / math.Max(math.Abs(lc), 1e-12); !(d <= 1e-4) {
					t.Errorf("%s: first loss GPU %.7f, CPU %.7f", name, first, lc)
				}
				msg += fmt.Sprintf(", CPU %.6f", lc)
			}
		}
		t.Log(msg)
	}
	if built == 0 {
		t.Fatal("no config built")
	}
	t.Logf("%d of %d configs trained on the GPU", built, len(paths))
}

// TestGPULossScaleAUC is TestLossScaleAUC on the GPU in real mixed
// precision: SGD in fp16 (HugeCTR's use_mixed_precision, scaler 1024)
// reaches the FP32 run's eval AUC within 0.005.
func TestGPULossScaleAUC(t *testing.T) {
	gpuOrSkip(t, gpu.Options{}) // skip before generating data
	fp32, mixed := lossScaleAUC(t, func(mp bool) tensor.Backend {
		o := gpu.Options{}
		if mp {
			o.Math = GEMMMath(graph.FP16)
		}
		return gpuOrSkip(t, o)
	}, func(s *graph.Solver) { s.UseMixedPrecision, s.Scaler = true, 1024 })
	t.Logf("GPU eval AUC after 160 SGD steps: FP32 %.4f, fp16 with scaler 1024 %.4f", fp32, mixed)
	if math.IsNaN(fp32) || fp32 < 0.6 || !(math.Abs(fp32-mixed) <= 0.005) {
		t.Errorf("GPU eval AUC FP32 %.4f, fp16 with scaler 1024 %.4f", fp32, mixed)
	}
}

// TestGPUEpochShortBatch runs Fit in epoch mode on the GPU over data that
// ends in a short batch (loaded synchronously, its padding masked out of
// the loss) and checks every step's loss, the short one included, against
// the CPU's.
func TestGPUEpochShortBatch(t *testing.T) {
	g := gpuOrSkip(t, gpu.Options{})
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 500
	}
	const batch = 512
	data := newPlanted(5, 10*batch+100, 13, sizes)
	opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.1}
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 16, Width: 1.0 / 8, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var losses [2][]float64
	for k, be := range []tensor.Backend{c, g} {
		m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.Fit(t.Context(), FitOptions{
			OpenTrain: func() (formats.Reader, error) { return data.reader(batch), nil },
			NumEpochs: 2, Display: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Iters != 22 || res.Samples != 2*(10*batch+100) {
			t.Fatalf("%s: %d iterations, %d samples", be.Name(), res.Iters, res.Samples)
		}
		for _, p := range res.History {
			if p.Loss != nil {
				losses[k] = append(losses[k], *p.Loss)
			}
		}
	}
	for i := range losses[0] {
		if d := math.Abs(losses[1][i]-losses[0][i]) / losses[0][i]; !(d <= 1e-3) {
			t.Errorf("step %d: GPU loss %.7f, CPU %.7f", i+1, losses[1][i], losses[0][i])
		}
	}
}

// batchesReader serves batches already in memory as a formats.Reader.
type batchesReader struct {
	s  *formats.Schema
	bs []*formats.Batch
}

func (r *batchesReader) Schema() *formats.Schema { return r.s }

func (r *batchesReader) Read(b *formats.Batch) (int, error) {
	if len(r.bs) == 0 {
		return 0, io.EOF
	}
	src := r.bs[0]
	r.bs = r.bs[1:]
	b.SetLen(0)
	for i := range src.N {
		if err := b.CopySample(src, i); err != nil {
			return 0, err
		}
	}
	return b.N, nil
}

func (r *batchesReader) Close() error { return nil }
