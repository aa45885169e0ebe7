package model

import (
	"fmt"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/graph"
)

// Overrides are a run's settings over a model file's sections (the
// command line's flags): a nil pointer or empty value keeps the file's.
type Overrides struct {
	// Train: a training run. Otherwise (evaluate, predict) the evaluation
	// covers all the data unless MaxEvalBatches is set, and there is no
	// optimizer, freezing or prediction export.
	Train bool
	// ConfigFile names the model file in messages.
	ConfigFile string

	BatchSize, MaxIter, NumEpochs, Display, EvalInterval, MaxEvalBatches, Snapshot *int
	SnapshotPrefix, ExportPredictionsPrefix                                        *string
	Seed                                                                           *uint64
	AUCThreshold                                                                   *float64
	I64InputKey, TF32, MixedPrecision                                              *bool
	// Precision, when set, changes the solver's precision and loss scale
	// after the other settings (the command line's precision flags).
	Precision       func(*graph.Solver)
	AlgorithmSearch *bool // the solver's algorithm_search
	CUDAGraph       *bool // the solver's cuda_graph

	LossWeights      map[string]float64
	FreezeDense      bool
	FreezeEmbeddings []string
	Optimizer        OptimizerOverrides
	DropIncomplete   *bool // Job.DropIncomplete (nil: the default)

	// LoadPrefix and LoadIter name a snapshot to start from (else the
	// solver's model files); LoadOptimizer, when training, loads its
	// optimizer states too.
	LoadPrefix    string
	LoadIter      *int64
	LoadOptimizer bool
	// DenseFrom: the dense network comes from another model file and
	// starts fresh, so only the embeddings' files are loaded.
	DenseFrom bool
}

// OptimizerOverrides are settings over the model file's optimizer; Type
// is sgd, momentum, nesterov, adagrad or adam, UpdateType local, global
// or lazyglobal (any case).
type OptimizerOverrides struct {
	Type, UpdateType                    *string
	LR, DecayPower, EndLR, Momentum     *float64
	WarmupSteps, DecayStart, DecaySteps *int64
}

// Apply returns base (nil: graph.DefaultOptimizer) with o applied; base is
// not modified. A new Type starts from that type's defaults, keeping the
// update type and learning rate.
func (o OptimizerOverrides) Apply(base *graph.Optimizer) (*graph.Optimizer, error) {
	opt := graph.DefaultOptimizer()
	if base != nil {
		cp := *base
		opt = &cp
	}
	if o.Type != nil {
		t := map[string]string{"sgd": "SGD", "momentum": "MomentumSGD", "nesterov": "Nesterov", "adagrad": "AdaGrad", "adam": "Adam"}[strings.ToLower(*o.Type)]
		if t == "" {
			return nil, fmt.Errorf("--optimizer: %q is not sgd, momentum, nesterov, adagrad or adam", *o.Type)
		}
		if t != opt.Type {
			d := graph.DefaultOptimizer()
			d.Type, d.UpdateType, d.LearningRate = t, opt.UpdateType, opt.LearningRate
			opt = d
		}
	}
	if o.UpdateType != nil {
		u := map[string]string{"local": "Local", "global": "Global", "lazyglobal": "LazyGlobal"}[strings.ToLower(*o.UpdateType)]
		if u == "" {
			return nil, fmt.Errorf("--update-type: %q is not local, global or lazyglobal", *o.UpdateType)
		}
		opt.UpdateType = u
	}
	setF := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
		}
	}
	setI := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	setF(&opt.LearningRate, o.LR)
	setI(&opt.WarmupSteps, o.WarmupSteps)
	setI(&opt.DecayStart, o.DecayStart)
	setI(&opt.DecaySteps, o.DecaySteps)
	setF(&opt.DecayPower, o.DecayPower)
	setF(&opt.EndLR, o.EndLR)
	setF(&opt.MomentumFactor, o.Momentum)
	return opt, nil
}

// Solver returns the solver of cfg (graph.DefaultSolver when it has none)
// with o applied: a flag wins over the file; --num-epochs alone selects
// epoch mode (max_iter 0) and --max-iter alone iteration mode; a file's
// max_eval_samples becomes max_eval_samples / batchsize_eval batches (the
// remainder truncated, as HugeCTR) unless MaxEvalBatches is given;
// evaluate and predict cover all the data unless it is given.
func (o *Overrides) Solver(cfg *graph.Config) graph.Solver {
	s := *graph.DefaultSolver()
	if cfg.Solver != nil {
		s = *cfg.Solver
	}
	setI := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setI(&s.BatchSize, o.BatchSize)
	setI(&s.MaxIter, o.MaxIter)
	setI(&s.NumEpochs, o.NumEpochs)
	setI(&s.Display, o.Display)
	setI(&s.EvalInterval, o.EvalInterval)
	setI(&s.MaxEvalBatches, o.MaxEvalBatches)
	if !o.Train && o.MaxEvalBatches == nil {
		s.MaxEvalBatches = 0
	}
	setI(&s.Snapshot, o.Snapshot)
	if o.NumEpochs != nil && o.MaxIter == nil {
		s.MaxIter = 0
	}
	if o.MaxIter != nil && o.NumEpochs == nil {
		s.NumEpochs = 0
	}
	if s.MaxEvalSamples > 0 && o.MaxEvalBatches == nil {
		s.MaxEvalBatches = s.MaxEvalSamples / max(s.BatchSizeEval, 1)
	}
	if o.SnapshotPrefix != nil {
		s.SnapshotPrefix = *o.SnapshotPrefix
	}
	if o.Seed != nil {
		s.Seed = *o.Seed
	}
	if o.AUCThreshold != nil {
		s.AUCThreshold = *o.AUCThreshold
	}
	setB := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setB(&s.I64InputKey, o.I64InputKey)
	setB(&s.EnableTF32, o.TF32)
	setB(&s.UseMixedPrecision, o.MixedPrecision)
	if o.AlgorithmSearch != nil {
		s.NoAlgorithmSearch = !*o.AlgorithmSearch
	}
	setB(&s.CUDAGraph, o.CUDAGraph)
	if o.Precision != nil {
		o.Precision(&s)
	}
	if o.Train && o.ExportPredictionsPrefix != nil {
		s.ExportPredictionsPrefix = *o.ExportPredictionsPrefix
	}
	return s
}

// NewJob merges cfg's sections with o into a Job: the solver
// (Overrides.Solver), the loss weights, for training the optimizer and
// what to freeze, then data (which sets j.Train and j.Eval and may read
// j.Solver; nil: none), then the starting weights: a snapshot
// (LoadPrefix, which needs LoadIter), else the solver's model files
// (checked against the model's embeddings), else — for evaluate and
// predict — an error. The backend, notes and progress are the caller's.
func NewJob(cfg *graph.Config, o Overrides, data func(j *Job) error) (Job, error) {
	j := Job{Config: cfg, Solver: o.Solver(cfg), LossWeights: o.LossWeights}
	if o.Train {
		j.FreezeDense, j.FreezeEmbeddings = o.FreezeDense, o.FreezeEmbeddings
		j.DropIncomplete = o.DropIncomplete
		var err error
		if j.Optimizer, err = o.Optimizer.Apply(cfg.Optimizer); err != nil {
			return j, err
		}
	}
	if data != nil {
		if err := data(&j); err != nil {
			return j, err
		}
	}
	s, embs := &j.Solver, len(cfg.Graph.Embeddings)
	switch {
	case o.LoadPrefix != "":
		if o.LoadIter == nil {
			return j, fmt.Errorf("--load-prefix needs --load-iter (the iteration of the files)")
		}
		j.Resume = Snapshot{Prefix: o.LoadPrefix, Iter: *o.LoadIter, FreshOptimizer: o.Train && !o.LoadOptimizer}
	case s.DenseModelFile != "" || len(s.SparseModelFiles) > 0 || s.DenseOptStatesFile != "" || len(s.SparseOptStatesFiles) > 0:
		var err error
		if j.Init, err = SolverFiles(s, embs, o.ConfigFile, o.Train); err != nil {
			return j, err
		}
	case !o.Train:
		return j, fmt.Errorf("no model files: give --load-prefix and --load-iter")
	}
	if o.DenseFrom {
		j.sparseFilesOnly(embs, o.Train && o.LoadOptimizer)
	}
	return j, nil
}

// SolverFiles are the starting files a config's solver names
// (dense_model_file, dense_opt_states_file, sparse_model_file,
// sparse_opt_states_file; the optimizer states only when training),
// checked against the model's n embeddings; file names the config in
// messages.
func SolverFiles(s *graph.Solver, n int, file string, train bool) (Files, error) {
	f := Files{Dense: s.DenseModelFile, Sparse: s.SparseModelFiles}
	if train {
		f.DenseOpt, f.SparseOpt = s.DenseOptStatesFile, s.SparseOptStatesFiles
	}
	if len(f.Sparse) > 0 && len(f.Sparse) != n {
		return f, fmt.Errorf("%s: solver.sparse_model_file names %d files for %d embeddings", file, len(f.Sparse), n)
	}
	if len(f.SparseOpt) > 0 {
		if len(f.SparseOpt) != n {
			return f, fmt.Errorf("%s: solver.sparse_opt_states_file names %d files for %d embeddings", file, len(f.SparseOpt), n)
		}
		if len(f.Sparse) == 0 {
			return f, fmt.Errorf("%s: solver.sparse_opt_states_file needs sparse_model_file (the states belong to those rows)", file)
		}
	}
	if f.DenseOpt != "" && f.Dense == "" {
		return f, fmt.Errorf("%s: solver.dense_opt_states_file needs dense_model_file", file)
	}
	return f, nil
}

// sparseFilesOnly makes j load the embeddings' files only (the dense
// network comes from another file and starts fresh, as after HugeCTR's
// load_sparse_weights): a Resume snapshot becomes its sparse files (their
// optimizer states when opt), the solver's dense files are dropped.
func (j *Job) sparseFilesOnly(embeddings int, opt bool) {
	if r := j.Resume; r.Prefix != "" {
		j.Init = SnapshotFiles(r.Prefix, r.Iter, embeddings)
		j.Resume = Snapshot{}
	}
	j.Init.Dense, j.Init.DenseOpt = "", ""
	if !opt {
		j.Init.SparseOpt = nil
	}
}
