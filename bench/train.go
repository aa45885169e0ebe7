package bench

import (
	"fmt"
	"io"
	"math"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/model"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TrainOptions configure a training-throughput run.
type TrainOptions struct {
	// Model is a reference model name (graph.ReferenceModels; default dlrm).
	Model string
	// BatchSize per step (default 65536).
	BatchSize int
	// Warmup steps (untimed) and timed Steps (defaults 10 and 50).
	Warmup, Steps int
	// VecSize overrides the embedding width (0: the model's).
	VecSize int
	// Optimizer is "" for the reference model's own (DLRM SGD, WDL/DCN/
	// DeepFM Adam, DCNv2 AdaGrad) or "sgd" for plain SGD (the PyTorch
	// anchors' optimizer).
	Optimizer string
	// LearningRate overrides the optimizer's learning rate (0: the
	// reference model's; plain SGD: 0.01, like the PyTorch anchor).
	LearningRate float64
	// Resident also times the model on one batch loaded once (no input
	// pipeline), the ceiling the pipeline is compared with.
	Resident bool
	// Async reads a Raw dataset with HugeCTR's RawAsync engine (O_DIRECT
	// unless Async.Buffered) instead of the synchronous reader.
	Async *asyncio.Params
	// Workers is the reader's decoding goroutines (the data section's
	// num_workers; 0: the trainer's default).
	Workers int
	// Profile also profiles ProfileSteps steps (default 20) after
	// Warmup steps, through the pipeline and (Resident) on the resident
	// batch: per layer and phase, the pipeline's share (model.Profile).
	Profile      bool
	ProfileSteps int
	// CUDAGraph trains the steps as a CUDA graph where the backend can
	// (model.Options.CUDAGraph); the run says how many steps were.
	CUDAGraph bool
	// Precision is the arithmetic (model.Options.Precision; fp16 and bf16
	// need the GPU) and LossScale the static loss scale (0: none; fp16's
	// default is 1, HugeCTR's scaler).
	Precision graph.Precision
	LossScale float64
}

// TrainResult is what a training-throughput run measured.
type TrainResult struct {
	Backend string `json:"backend"`
	Model   string `json:"model"`
	Batch   int    `json:"batch"`
	// Optimizer is the optimizer trained with ("SGD lr 0.01").
	Optimizer string            `json:"optimizer"`
	Pipeline  model.Throughput  `json:"pipeline"`
	Resident  *model.Throughput `json:"resident,omitempty"`
	// PipelineLoss is 1 − pipeline/resident samples/s.
	PipelineLoss float64 `json:"pipeline_loss"`
	// Fused says the backend's fused InnerProduct kernels were on
	// (tensor.FusedDense: cuBLASLt epilogues, side-stream weight gradients).
	Fused bool `json:"fused"`
	// Profile and ResidentProfile are the profiles (Profile).
	Profile         *model.Profile `json:"profile,omitempty"`
	ResidentProfile *model.Profile `json:"resident_profile,omitempty"`
	// CUDAGraph says how the steps ran (TrainOptions.CUDAGraph): as the
	// graph or eagerly, and why eagerly.
	CUDAGraph model.GraphStats `json:"cuda_graph"`
	// Precision is the run's precision (fp32, tf32, fp16, bf16), LossScale
	// its loss scale and Skipped the steps fp16's overflow check skipped
	// (warm-up, timed and profiled steps together).
	Precision string  `json:"precision"`
	LossScale float64 `json:"loss_scale"`
	Skipped   int64   `json:"skipped_steps"`
}

// Train builds the reference model over the dataset's shape, with a
// one-hot embedding over d.Spec.SlotSizeArray (keys local to their slot;
// the embedding adds the offsets on the device), SGD, and times it on be:
// steps fed by the input pipeline from d's files, then (Resident) steps on
// one batch already on the device.
func Train(d *dataset.Dataset, be tensor.Backend, o TrainOptions, log io.Writer) (TrainResult, error) {
	o.defaults()
	if o.ProfileSteps <= 0 {
		o.ProfileSteps = 20
	}
	res := TrainResult{Backend: be.Name(), Model: o.Model, Batch: o.BatchSize, Fused: layers.FusedDense(be) != nil, Precision: o.Precision.String()}
	cfg, sizes, err := referenceConfig(d, o)
	if err != nil {
		return res, err
	}
	res.Optimizer = fmt.Sprintf("%s lr %g", cfg.Optimizer.Type, cfg.Optimizer.LearningRate)
	// The keys are slot-local (SPEC §3.3): the one-hot embedding adds the
	// offsets and the device checks each key against its slot's size.
	m, err := model.Build(cfg, be, model.Options{BatchSize: o.BatchSize, Seed: 1, Optimizer: cfg.Optimizer, SlotSizeArray: sizes, CUDAGraph: o.CUDAGraph,
		Precision: o.Precision, LossScale: o.LossScale, MixedPrecision: o.Precision == graph.FP16})
	if err != nil {
		return res, err
	}
	res.LossScale = m.LossScale()
	m.ReportPrecision(log)

	open := func() (formats.Reader, error) { return d.Open(formats.Options{BatchSize: o.BatchSize}) }
	pipe := open
	if src, ok := trainSource(d, o.Async); ok {
		src.SlotSizeArray, src.Workers = sizes, o.Workers
		// The trainer's own opener: lending readers decode into the
		// backend's pinned memory, RawAsync runs the O_DIRECT engine.
		pipe = func() (formats.Reader, error) { return m.Open(src) }
	} else if o.Async != nil {
		return res, fmt.Errorf("bench train: --reader async reads Raw files; %s is %s", d.Path, d.Format)
	}
	fused := "off"
	if res.Fused {
		fused = "on"
	}
	fmt.Fprintf(log, "%s on %s: batch %d, %s, fused dense kernels %s, %d warm-up + %d timed steps from %s\n", o.Model, be.Name(), o.BatchSize, res.Optimizer, fused, o.Warmup, o.Steps, d.Path)
	var g0 model.GraphStats // the notes of Build (no graphs on this backend) show with the first line
	if res.Pipeline, err = m.TrainThroughput(pipe, o.Warmup, o.Steps); err != nil {
		return res, err
	}
	if err := finiteLoss("pipeline", res.Pipeline); err != nil {
		return res, err
	}
	fmt.Fprintf(log, "pipeline: %s (%.2f ms/step), loss %.4f → %.4f\n",
		Rate(res.Pipeline.SamplesPerSec), res.Pipeline.StepMillis, res.Pipeline.LossFirst, res.Pipeline.LossLast)
	if w := res.Pipeline.Wait; w != nil {
		fmt.Fprintf(log, "pipeline: training waited %.3f ms a step for its batch (longest %.3f ms); %d waits of %.0f ms or more (%.1f ms in all)",
			w.MeanMs, w.MaxMs, w.Long, w.LongMs, w.LongTotalMs)
		if w.Turns > 0 {
			fmt.Fprintf(log, "; %.3f ms for each of %d passes' first batches", w.TurnMs, w.Turns)
		}
		fmt.Fprintln(log)
	}
	if res.Skipped, err = skippedLine(log, m, o.Precision); err != nil {
		return res, err
	}
	g0 = graphLine(log, o.CUDAGraph, "pipeline", g0, m.GraphStats())
	if o.Profile {
		p, err := m.ProfileTrain(pipe, o.Warmup, o.ProfileSteps)
		if err != nil {
			return res, fmt.Errorf("bench train: profiling: %w", err)
		}
		res.Profile = &p
		if err := WriteProfile(log, "profile through the pipeline", &p); err != nil {
			return res, err
		}
	}
	if !o.Resident {
		res.CUDAGraph = m.GraphStats()
		return res, nil
	}
	r, err := open()
	if err != nil {
		return res, err
	}
	b, err := formats.NewBatch(r.Schema(), o.BatchSize, nil)
	if err != nil {
		r.Close()
		return res, err
	}
	defer b.Free()
	n, err := r.Read(b)
	r.Close()
	if n != o.BatchSize {
		return res, fmt.Errorf("bench train: the data holds less than one batch (%d samples): %v", n, err)
	}
	rt, err := m.ResidentThroughput(b, o.Warmup, o.Steps)
	if err != nil {
		return res, err
	}
	if err := finiteLoss("resident", rt); err != nil {
		return res, err
	}
	res.Resident = &rt
	res.PipelineLoss = 1 - res.Pipeline.SamplesPerSec/rt.SamplesPerSec
	fmt.Fprintf(log, "resident: %s (%.2f ms/step); the pipeline costs %.1f%%\n",
		Rate(rt.SamplesPerSec), rt.StepMillis, 100*res.PipelineLoss)
	if res.Skipped, err = skippedLine(log, m, o.Precision); err != nil {
		return res, err
	}
	graphLine(log, o.CUDAGraph, "resident", g0, m.GraphStats())
	if o.Profile {
		p, err := m.ProfileResident(b, o.Warmup, o.ProfileSteps)
		if err != nil {
			return res, fmt.Errorf("bench train: profiling: %w", err)
		}
		res.ResidentProfile = &p
		if err := WriteProfile(log, "profile on the resident batch", &p); err != nil {
			return res, err
		}
	}
	res.CUDAGraph = m.GraphStats()
	return res, nil
}

// graphLine writes how the steps between two GraphStats ran, with the
// reasons for eager steps first noted between them, and returns now.
func graphLine(log io.Writer, asked bool, what string, was, now model.GraphStats) model.GraphStats {
	g, e := now.Graphed-was.Graphed, now.Eager-was.Eager
	switch {
	case !asked:
		fmt.Fprintf(log, "%s: CUDA graph off (--cuda-graph=false): eager steps\n", what)
	default:
		fmt.Fprintf(log, "%s: CUDA graph: %d of %d steps ran as the graph\n", what, g, g+e)
	}
	for _, n := range now.Notes[len(was.Notes):] {
		fmt.Fprintf(log, "  eager: %s\n", n)
	}
	return now
}

// finiteLoss refuses a run whose loss became NaN or Inf: its samples/s
// measure a diverged model (a learning rate too high for the data, a
// broken kernel), not training.
func finiteLoss(what string, t model.Throughput) error {
	for _, v := range []float64{t.LossFirst, t.LossLast} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("bench train: the %s run's loss is %v (first %v, last %v): the model diverged; try a smaller --lr", what, v, t.LossFirst, t.LossLast)
		}
	}
	return nil
}

// trainSource is d as the trainer's source (model.Source): false for data
// it does not open that way (a Parquet or Norm file without a file list,
// Criteo text).
func trainSource(d *dataset.Dataset, async *asyncio.Params) (model.Source, bool) {
	sp := &d.Spec
	src := model.Source{Format: d.Format, Path: d.List, Check: sp.Check, SkipCorrupt: sp.SkipCorrupt,
		I64Keys: sp.KeyType == formats.KeyI64, FloatLabelDense: sp.FloatLabelDense,
		Layout: sp.RawLayout, LayoutSet: sp.RawLayoutSet, LabelType: sp.LabelType, LabelTypeSet: sp.LabelTypeSet,
		DenseType: sp.DenseType, DenseTypeSet: sp.DenseTypeSet}
	switch d.Format {
	case dataset.Raw:
		src.Path, src.Async = d.Files[0], async
	case dataset.Norm, dataset.Parquet:
		if d.List == "" {
			return src, false
		}
	default:
		return src, false
	}
	return src, async == nil || d.Format == dataset.Raw
}

// Rate prints samples/s with a unit that keeps three digits: "7.031 M
// samples/s", "12.4 k samples/s", "183 samples/s".
func Rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3f M samples/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k samples/s", v/1e3)
	}
	return fmt.Sprintf("%.0f samples/s", v)
}

// skippedLine writes, in fp16 and bf16, the precision, loss scale and the
// steps fp16's overflow check has skipped so far.
func skippedLine(log io.Writer, m *model.Model, p graph.Precision) (int64, error) {
	if !p.Half() {
		return 0, nil
	}
	n, err := m.SkippedSteps()
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(log, "precision %s, loss scale %g: %d %s skipped for overflow\n", p, m.LossScale(), n, map[bool]string{true: "step", false: "steps"}[n == 1])
	return n, nil
}
