// Package quickstart runs ctrkit's main job end to end on built-in defaults:
// generate a small planted dataset, validate it, read it back at speed, train
// a small DLRM on it and compare the eval AUC with the AUC the generator
// planted. `ctrkit quickstart` is the README's first command.
package quickstart

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/ctrkit/ctrkit/bench"
	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/model"
	"github.com/ctrkit/ctrkit/validate"
)

// Options size the run; the zero value is the default quickstart.
type Options struct {
	// Dir receives the dataset and model files (default: a new temporary
	// directory, removed at the end unless Keep).
	Dir  string
	Keep bool
	// Samples per train file (default 65536; 4 train files, 1 eval file).
	SamplesPerFile int
	// Epochs of training (default 1: a second epoch over this little data overfits the embeddings).
	Epochs int
	// Seed of the generator and the model (default 1).
	Seed uint64
	// Device trains on: auto (default: the GPU when a CUDA driver loads),
	// gpu, gpu:N or cpu.
	Device string
}

// DatasetParams are the generator parameters of the quickstart's dataset in
// dir: Norm with checksums, 13 dense, 26 slots of 200 keys (power law),
// planted labels, 4 train files and 1 eval file.
func DatasetParams(dir string, o Options) datagen.Params {
	p := datagen.DefaultParams()
	p.Format = datagen.Norm
	p.NumSlot = 26
	p.SlotSizeArray = make([]int64, p.NumSlot)
	for i := range p.SlotSizeArray {
		p.SlotSizeArray[i] = 200
	}
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 4, 1, o.SamplesPerFile
	if p.NumSamplesPerFile <= 0 {
		p.NumSamplesPerFile = 65536
	}
	p.Seed = max(o.Seed, 1)
	return p
}

// Result is what the run measured.
type Result struct {
	Dir             string
	PlantedAUC      float64
	EvalAUC         float64
	ReadSamplesPerS float64
	Problems        int64
	Backend         string
	Elapsed         time.Duration
}

// Run runs the quickstart, narrating to w.
func Run(ctx context.Context, w io.Writer, o Options) (*Result, error) {
	start := time.Now()
	if o.SamplesPerFile <= 0 {
		o.SamplesPerFile = 65536
	}
	if o.Epochs <= 0 {
		o.Epochs = 1
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	res := &Result{Dir: o.Dir}
	if res.Dir == "" {
		d, err := os.MkdirTemp("", "ctrkit-quickstart-")
		if err != nil {
			return nil, err
		}
		res.Dir = d
		if !o.Keep {
			defer os.RemoveAll(d)
		}
	}

	// 1. Generate.
	p := DatasetParams(res.Dir, o)
	fmt.Fprintf(w, "1. generate: a planted Norm dataset in %s (26 slots of 200 keys, power law α %.1f, seed %d)\n", res.Dir, p.EffectiveAlpha(), p.Seed)
	gen, err := datagen.Generate(ctx, p, nil)
	if err != nil {
		return nil, fmt.Errorf("generating: %w", err)
	}
	res.PlantedAUC = gen.PlantedAUC
	fmt.Fprintf(w, "   %d files, %d samples, %.1f MB in %.2f s; the hidden model's AUC (the best any model can do) is %.4f\n",
		len(gen.Files), gen.Samples, float64(gen.Bytes)/1e6, gen.Elapsed.Seconds(), gen.PlantedAUC)

	// 2. Validate.
	fmt.Fprintf(w, "2. validate: every header, check byte, nnz and value of %s\n", filepath.Base(p.Source))
	rep, err := validate.Run(p.Source, dataset.Spec{}, validate.Options{})
	if err != nil {
		return nil, fmt.Errorf("validating: %w", err)
	}
	res.Problems = rep.Total
	fmt.Fprintf(w, "   %s\n", rep.Summary())
	if !rep.Clean() {
		rep.WriteText(w)
		return res, fmt.Errorf("the generated dataset has %d problems", rep.Total)
	}

	// 3. Read back at speed.
	d, err := dataset.Resolve(p.Source, dataset.Spec{})
	if err != nil {
		return nil, err
	}
	rr, err := bench.Read(func() (formats.Reader, error) { return d.Open(formats.Options{BatchSize: 16384}) },
		d.BytesPerSample(), bench.ReadOptions{Epochs: 5, BatchSize: 16384})
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	res.ReadSamplesPerS = rr.SamplesPerSecond
	fmt.Fprintf(w, "3. read: %d samples (5 epochs) at %.2f M samples/s, %.0f MB/s of file bytes (page cache), CPU %.0f%%\n",
		rr.Samples, rr.SamplesPerSecond/1e6, rr.FileBytesPerSecond/1e6, rr.CPUPercent)

	// 4. Train.
	be, err := model.OpenBackend(o.Device, graph.Solver{}, w)
	if err != nil {
		return nil, err
	}
	defer model.CloseBackend(be)
	res.Backend = be.Name()
	fmt.Fprintf(w, "4. train: a small DLRM (embeddings 16 wide, MLPs at 1/8 of the reference DLRM's widths) for %d epochs on the %s backend\n", o.Epochs, res.Backend)
	opt := graph.DefaultOptimizer()
	opt.LearningRate = 0.02
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: p.DenseDim, SlotSizes: p.SlotSizeArray, VecSize: 16, Width: 1.0 / 8, Optimizer: opt})
	if err != nil {
		return nil, err
	}
	s := graph.DefaultSolver()
	s.BatchSize, s.NumEpochs, s.MaxIter, s.Seed = 512, o.Epochs, 0, o.Seed
	s.Display, s.EvalInterval = 0, 0
	s.SnapshotPrefix = filepath.Join(res.Dir, "dlrm")
	// Norm keys from the generator are global already (SPEC §5): no offsets.
	src := model.Source{Format: dataset.Norm, Path: p.Source, Check: norm.CheckSum}
	eval := src
	eval.Path = p.EvalSource
	job := model.Job{Config: cfg, Solver: *s, Optimizer: opt, Train: src, Eval: eval, Backend: be}
	t0 := time.Now()
	m, fit, err := model.Train(ctx, job, model.TrainOutput{Log: io.Discard})
	if err != nil {
		return nil, fmt.Errorf("training: %w", err)
	}
	er, err := m.Open(eval)
	if err != nil {
		return nil, err
	}
	ev, err := m.Evaluate(er, 0)
	er.Close()
	if err != nil {
		return nil, fmt.Errorf("evaluating: %w", err)
	}
	res.EvalAUC = ev.AUC
	secs := time.Since(t0).Seconds()
	fmt.Fprintf(w, "   %d iterations in %.1f s (%.0f samples/s); eval loss %.4f on %d samples\n",
		fit.Iters, secs, float64(fit.Iters)*float64(s.BatchSize)/secs, ev.Loss, ev.Samples)

	res.Elapsed = time.Since(start)
	fmt.Fprintf(w, "\neval AUC %.4f against the planted %.4f (gap %.4f) — done in %.1f s\n",
		res.EvalAUC, res.PlantedAUC, math.Abs(res.PlantedAUC-res.EvalAUC), res.Elapsed.Seconds())
	if o.Keep || o.Dir != "" {
		fmt.Fprintf(w, "files kept in %s: try `ctrkit inspect %s` or `ctrkit train --model dlrm --source %s`\n", res.Dir, p.Source, p.Source)
	}
	return res, nil
}
