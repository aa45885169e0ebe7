package model

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
	"github.com/ctrkit/ctrkit/internal/progress"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/input"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// Job is a complete training, evaluation or prediction run: the model, the
// solver and optimizer settings (already merged from file and flags), the
// data, and optional starting weights.
type Job struct {
	Config    *graph.Config
	Solver    graph.Solver
	Optimizer *graph.Optimizer
	Train     Source // Fit only
	Eval      Source // Fit (optional) and Evaluate/Predict
	// Init loads starting weights (snapshot files; empty paths skipped).
	Init Files
	// Resume, when its Prefix is set, loads a snapshot after Init
	// (LoadSnapshot): training continues from its iteration; evaluation
	// and prediction read its weights only.
	Resume Snapshot
	// Notes receives one-line notes (a snapshot without a manifest); nil:
	// none.
	Notes io.Writer
	// Progress, when a terminal, shows a progress bar of RunEvaluate and
	// RunPredict (Train: TrainOutput.Progress).
	Progress io.Writer
	// Backend runs the model; nil is the CPU backend.
	Backend tensor.Backend
	// Ranks is the plan of the run's ranks (PlanRanks); World, when it
	// spans several ranks, the opened ranks Train trains on (one Model
	// each) instead of Backend.
	Ranks RankPlan
	World *collective.World
	// FreezeDense and FreezeEmbeddings (embedding names) keep those parts
	// of the model fixed in Train (HugeCTR freeze_dense, freeze_embedding).
	FreezeDense      bool
	FreezeEmbeddings []string
	// LossWeights weight a multi-task model's losses by label name
	// (HugeCTR compile(loss_names, loss_weights); Options.LossWeights).
	LossWeights map[string]float64
	// DropIncomplete is HugeCTR's drop_incomplete_batch for Train and the
	// session (FitOptions.DropIncomplete).
	DropIncomplete *bool
	// DataShard is how Train's ranks share the reading of Train and Eval
	// (--data-shard, input.OpenShard; docs/MULTI_GPU.md): ShardNone, every
	// rank reads all of the data.
	DataShard input.DataShard
}

// Snapshot names a snapshot to load: <Prefix>…_<Iter>.model files.
type Snapshot struct {
	Prefix string
	Iter   int64
	// FreshOptimizer starts the optimizer state fresh (LoadOptions).
	FreshOptimizer bool
}

func (j *Job) build(train bool) (*Model, error) {
	be := j.Backend
	if be == nil {
		c, err := cpu.New(cpu.Options{})
		if err != nil {
			return nil, err
		}
		be = c
	}
	cfg, err := j.runConfig(1)
	if err != nil {
		return nil, err
	}
	m, err := Build(cfg, be, j.options())
	if err != nil {
		return nil, err
	}
	return m, j.loadStart(m, train, true)
}

// options are the Build options of the job's model.
func (j *Job) options() Options {
	sizes := j.Train.SlotSizeArray
	if sizes == nil {
		sizes = j.Eval.SlotSizeArray
	}
	return Options{BatchSize: j.Solver.BatchSize, Seed: j.Solver.Seed,
		Optimizer: j.Optimizer, SlotSizeArray: sizes, LossScale: j.Solver.LossScale(), LossWeights: j.LossWeights,
		MixedPrecision: j.Solver.UseMixedPrecision, Precision: j.Solver.Precision(), CUDAGraph: j.Solver.CUDAGraph}
}

// loadStart loads the job's starting weights into m (Init, then Resume);
// first is false for the other ranks of a process, which leave checking the
// snapshot's checksums to its first rank.
func (j *Job) loadStart(m *Model, train, first bool) error {
	if j.Init.Dense != "" || j.Init.DenseOpt != "" || len(j.Init.Sparse) > 0 {
		if err := m.LoadFiles(j.Init); err != nil {
			return fmt.Errorf("loading initial weights: %w", err)
		}
	}
	if r := j.Resume; r.Prefix != "" {
		notes := j.Notes
		if m.Rank() != 0 {
			notes = nil
		}
		o := LoadOptions{FreshOptimizer: r.FreshOptimizer, WeightsOnly: !train, Log: notes, sizesOnly: !first}
		if err := m.LoadSnapshot(r.Prefix, r.Iter, o); err != nil {
			return fmt.Errorf("loading the snapshot of %s at iteration %d: %w", r.Prefix, r.Iter, err)
		}
	}
	return nil
}

// ConfigGPUs is the number of GPUs the solver's gpu list names (every
// node's), at least 1.
func ConfigGPUs(s *graph.Solver) int {
	n := 0
	for _, node := range s.GPU {
		n += len(node)
	}
	return max(n, 1)
}

// runConfig is the config as ctrkit runs it on ranks ranks: on fewer
// ranks than the solver's GPUs, the embedding capacity HugeCTR would have
// on all of them (its max_vocabulary_size_per_gpu × the GPU count) spread
// over the ranks (each rank's max_vocabulary_size_per_gpu: that total /
// ranks, rounded up); on as many or more, each rank has the per-GPU
// capacity, as each of HugeCTR's GPUs. And a dense input padded to a
// multiple of 8 for RawAsync's dense.aligned Auto.
func (j *Job) runConfig(ranks int) (*graph.Config, error) {
	gpus := ConfigGPUs(&j.Solver)
	ranks = max(ranks, 1)
	align := j.Train.AlignDense || j.Eval.AlignDense
	if gpus <= ranks && !align {
		return j.Config, nil
	}
	cfg := *j.Config
	g := *cfg.Graph
	cfg.Graph = &g
	if align {
		g.Input.DenseDim = (g.Input.DenseDim + 7) / 8 * 8
	}
	if gpus > ranks {
		opt := j.Optimizer
		if opt == nil {
			opt = cfg.Optimizer
		}
		if opt == nil {
			opt = graph.DefaultOptimizer()
		}
		g.Embeddings = append([]graph.SparseEmbedding(nil), g.Embeddings...)
		for i := range g.Embeddings {
			e := &g.Embeddings[i]
			if e.OneHot() || (e.WorkspaceMB == 0 && e.MaxVocabPerGPU == 0) {
				continue // sized by slot_size_array, not per GPU
			}
			o := e.Optimizer
			if o == nil {
				o = opt
			}
			per := e.VocabPerGPU(o)
			if per > (1<<62)/int64(gpus) {
				return nil, fmt.Errorf("embedding %d: %d rows per GPU × %d GPUs overflows", i, per, gpus)
			}
			e.MaxVocabPerGPU = (per*int64(gpus) + int64(ranks) - 1) / int64(ranks)
		}
	}
	return &cfg, nil
}

// DeviceNote is the line Train prints when ctrkit runs the config
// differently from HugeCTR: on fewer ranks than the solver's gpu list's
// GPUs (one device: device names it), with the embedding capacity of all
// of them; Ranks.Hint (the flag or launcher that would run it as listed)
// follows. "" when it runs on as many ranks or more.
func (j *Job) DeviceNote(device string, ranks int, capacityRows int64) string {
	gpus := ConfigGPUs(&j.Solver)
	ranks = max(ranks, 1)
	if gpus <= ranks {
		return ""
	}
	on := fmt.Sprintf("one device (%s)", device)
	if ranks > 1 {
		on = fmt.Sprintf("%d ranks (%s)", ranks, device)
	}
	what := fmt.Sprintf("lists %d GPUs", gpus)
	if gpus == 1 {
		what = "lists 1 GPU"
	}
	note := fmt.Sprintf("note: the config's solver.gpu %s; ctrkit runs on %s with the global batch %d "+
		"and the embedding capacity of all %d (workspace_size_per_gpu_in_mb × %d: %d rows)",
		what, on, j.Solver.BatchSize, gpus, gpus, capacityRows)
	if j.Ranks.Hint != "" {
		note += "; " + j.Ranks.Hint
	}
	return note
}

// TrainOutput are the writers and files a training run reports to.
type TrainOutput struct {
	Log     io.Writer // display and eval lines
	Metrics io.Writer // one JSON object per line, or nil
	// Progress shows a progress bar when it is a terminal (FitOptions).
	Progress io.Writer
	// SaveFinal writes a snapshot with Solver.SnapshotPrefix at the last
	// iteration (unless one was just written).
	SaveFinal bool
	// KeepSnapshots keeps the newest K snapshots (FitOptions).
	KeepSnapshots int
}

// Train builds the model, loads Init, fits it (HugeCTR fit with the
// solver's num_epochs or max_iter, display, eval_interval, snapshot) and
// returns it.
func Train(ctx context.Context, j Job, out TrainOutput) (*Model, FitResult, error) {
	if err := j.CheckShard(); err != nil {
		return nil, FitResult{}, err
	}
	if j.World != nil && j.World.Group.World > 1 {
		return trainGroup(ctx, j, out)
	}
	m, err := j.build(true)
	if err != nil {
		return nil, FitResult{}, err
	}
	res, err := j.fit(ctx, m, out)
	return m, res, err
}

// fit is Train after the build: the freezes, Fit, the final save. Every
// rank of a group runs it (trainGroup), the others' output discarded.
func (j *Job) fit(ctx context.Context, m *Model, out TrainOutput) (FitResult, error) {
	if out.Log == nil {
		out.Log = io.Discard
	}
	if j.FreezeDense {
		m.FreezeDense()
	}
	for _, name := range j.FreezeEmbeddings {
		if err := m.FreezeEmbedding(name); err != nil {
			return FitResult{}, fmt.Errorf("--freeze-embedding: %w", err)
		}
	}
	s := j.Solver
	fo := FitOptions{
		OpenTrain:      j.trainOpener(m),
		NumEpochs:      s.NumEpochs,
		MaxIter:        s.MaxIter,
		Display:        s.Display,
		EvalInterval:   s.EvalInterval,
		Snapshot:       s.Snapshot,
		SnapshotPrefix: s.SnapshotPrefix,
		KeepSnapshots:  out.KeepSnapshots,
		MaxEvalBatches: s.MaxEvalBatches,
		EvalBatchSize:  s.BatchSizeEval,
		AUCThreshold:   s.AUCThreshold,
		DropIncomplete: j.DropIncomplete,
		EvalMetrics:    SolverMetrics(&s),

		ExportPredictionsPrefix: s.ExportPredictionsPrefix,
		Log:                     out.Log,
		Metrics:                 out.Metrics,
		Progress:                out.Progress,
	}
	if j.Eval.Path != "" {
		fo.OpenEval = j.shardOpener(m, 2, func() (formats.Reader, error) { return m.Open(j.Eval) }, func(uint32) Source { return j.Eval })
		if j.Eval.CacheBatches > 0 {
			if err := checkEvalCache(m, j.Eval.CacheBatches, EvalSamples(s.MaxEvalBatches, s.BatchSizeEval, m.batch)); err != nil {
				return FitResult{}, err
			}
			fo.CacheEvalBatches = j.Eval.CacheBatches
		}
	}
	if out.SaveFinal && s.SnapshotPrefix != "" {
		if err := m.CheckSave(s.SnapshotPrefix); err != nil {
			return FitResult{}, err
		}
	}
	info := m.Info
	if note := j.DeviceNote(m.be.Name(), m.World(), embRows(info)); note != "" {
		fmt.Fprintln(out.Log, note)
	}
	if d := fo.EvalMetrics.Describe(); d != "" {
		fmt.Fprintln(out.Log, d)
	}
	w := m.World()
	if w > 1 {
		fmt.Fprintf(out.Log, "model: %d layers, %d dense parameters, %d embeddings (%d rows capacity a rank); global batch %d over %d ranks (%d a rank) on %s\n",
			len(m.Graph.Layers), info.DenseParams, len(m.embs), embRows(info), m.batch, w, m.LocalBatch(), m.be.Name())
	} else {
		fmt.Fprintf(out.Log, "model: %d layers, %d dense parameters, %d embeddings (%d rows capacity); batch %d on %s\n",
			len(m.Graph.Layers), info.DenseParams, len(m.embs), embRows(info), m.batch, m.be.Name())
	}
	m.ReportPrecision(out.Log) // fp16/bf16: the layers left in float32
	if j.DataShard != input.ShardNone && w > 1 {
		fmt.Fprintf(out.Log, "data: --data-shard %s: %s\n", j.DataShard, shardText(j.DataShard, w, m.batch))
	}
	t0 := time.Now()
	res, err := m.Fit(ctx, fo)
	if err != nil {
		return res, err
	}
	fmt.Fprintln(out.Log, trainSummary(res, time.Since(t0)))
	if out.SaveFinal && s.SnapshotPrefix != "" && res.Iters > res.First && (s.Snapshot == 0 || res.Iters%int64(s.Snapshot) != 0) {
		if err := m.Save(s.SnapshotPrefix, res.Iters); err != nil {
			return res, err
		}
		if err := m.PruneSnapshots(s.SnapshotPrefix, out.KeepSnapshots); err != nil {
			return res, err
		}
		fmt.Fprintf(out.Log, "saved %s at iter %d\n", s.SnapshotPrefix, res.Iters)
	}
	return res, nil
}

// trainOpener opens the training data for each pass. A shuffled source
// draws its order from the solver's seed (unless the source has its own),
// a different one each pass: pass p reads with seed+p, so every run with
// the same seed sees the same orders.
func (j *Job) trainOpener(m *Model) func() (formats.Reader, error) {
	src := j.Train
	if src.Seed == 0 {
		src.Seed = j.Solver.Seed
	}
	var pass uint64
	return j.shardOpener(m, 1, func() (formats.Reader, error) {
		s := src
		s.Seed += pass
		pass++
		return m.Open(s)
	}, func(k uint32) Source {
		s := src
		s.Seed += uint64(k)
		return s
	})
}

// shardText says what each rank reads with mode over w ranks.
func shardText(mode input.DataShard, w, batch int) string {
	if mode == input.ShardSamples {
		return fmt.Sprintf("each of the %d ranks reads its %d samples of every global batch of %d, and the ranks exchange them", w, batch/w, batch)
	}
	return fmt.Sprintf("each of the %d ranks reads its own files of the list in batches of %d; a global batch is theirs in rank order", w, batch/w)
}

// CheckShard refuses a DataShard (--data-shard) that the sources cannot
// honour (input.CheckShard), before anything is built; Train calls it.
func (j *Job) CheckShard() error {
	if j.DataShard == input.ShardNone {
		return nil
	}
	ranks := 1
	if j.World != nil {
		ranks = j.World.Group.World
	}
	if err := input.CheckShard(&j.Train, j.DataShard, ranks); err != nil {
		return err
	}
	if j.Eval.Path != "" {
		if err := input.CheckShard(&j.Eval, j.DataShard, ranks); err != nil {
			return fmt.Errorf("eval_source: %w", err)
		}
	}
	return nil
}

// shardOpener is open, or with --data-shard over several ranks a reader of
// each rank's share (input.OpenShard) of source(k) for the k-th opening
// (from 0; a failed one does not count, so a rank that retries an opening
// stays in step). Each opening gets its own exchange stream: kind (1
// training, 2 evaluation) + 2k, the same on every rank since every rank
// opens its readers in the same order.
func (j *Job) shardOpener(m *Model, kind uint32, open func() (formats.Reader, error), source func(k uint32) Source) func() (formats.Reader, error) {
	if j.DataShard == input.ShardNone || m.World() == 1 || j.World == nil {
		return open
	}
	g := j.World.Group
	where := func(r int) string {
		if g.Processes > 1 {
			return fmt.Sprintf("process %d (rank %d)", g.ProcessOf(r), r)
		}
		return fmt.Sprintf("rank %d", r)
	}
	var k uint32
	return func() (formats.Reader, error) {
		x, err := g.Gatherer(m.Rank(), kind+2*k)
		if err != nil {
			return nil, err
		}
		r, err := input.OpenShard(source(k), &m.Graph.Input, m.batch, input.Shard{Mode: j.DataShard, X: x, Where: where})
		if err != nil {
			// x is dropped, not closed: closing would drop the peers'
			// parts on this stream, which a retry (same k) reads.
			return nil, err
		}
		k++
		return r, nil
	}
}

func embRows(info *graph.Info) int64 {
	var n int64
	for _, e := range info.Embeddings {
		n += e.Rows
	}
	return n
}

// RunEvaluate builds the model, loads Init and evaluates it on Eval over up
// to Solver.MaxEvalBatches batches (0: all), writing one line to w.
func RunEvaluate(j Job, w io.Writer) (EvalResult, error) {
	m, err := j.build(false)
	if err != nil {
		return EvalResult{}, err
	}
	r, err := m.Open(j.Eval)
	if err != nil {
		return EvalResult{}, err
	}
	defer r.Close()
	limit := EvalSamples(j.Solver.MaxEvalBatches, j.Solver.BatchSizeEval, j.Solver.BatchSize)
	m.bar = j.newBar(limit, "evaluating")
	res, err := m.EvaluateSamples(r, limit)
	m.bar.Finish()
	if err != nil {
		return res, err
	}
	fmt.Fprintf(w, "eval: AUC %.6f, loss %.6f, hit rate %.6f, %d %s in %d %s%s\n", res.AUC, res.Loss, res.HitRate,
		res.Samples, plural(int64(res.Samples), "sample", "samples"), res.Batches, plural(int64(res.Batches), "batch", "batches"), res.TasksText())
	return res, nil
}

// RunPredict builds the model, loads Init, and writes the scores of Eval
// (up to Solver.MaxEvalBatches batches; 0: all) to path atomically: one
// line per sample, the prediction width's values separated by spaces, as
// %.9g (float32 round-trips). It returns the number of samples.
func RunPredict(j Job, path string) (int, error) {
	m, err := j.build(false)
	if err != nil {
		return 0, err
	}
	r, err := m.Open(j.Eval)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	limit := EvalSamples(j.Solver.MaxEvalBatches, j.Solver.BatchSizeEval, j.Solver.BatchSize)
	m.bar = j.newBar(limit, "predicting")
	scores, err := m.PredictSamples(nil, r, limit)
	m.bar.Finish()
	if err != nil {
		return 0, err
	}
	t := m.PredictionWidth()
	b := predictionText(scores, t)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	return len(scores) / t, atomicfile.WriteFile(path, []byte(b.String()))
}

// newBar is the samples bar of RunEvaluate and RunPredict on j.Progress:
// to limit samples (with an ETA), or counting only when limit is 0 (all).
func (j *Job) newBar(limit int64, desc string) *progress.Bar {
	if limit <= 0 {
		limit = -1
	}
	return progress.New(j.Progress, limit, desc, "samples")
}

// trainSummary is Train's last line: what Fit did in how long.
func trainSummary(res FitResult, d time.Duration) string {
	it := res.Iters - res.First
	s := fmt.Sprintf("trained %d %s (%d %s", it, plural(it, "iteration", "iterations"), res.Samples, plural(res.Samples, "sample", "samples"))
	if n := int64(len(res.EpochSamples)); n > 0 {
		s += fmt.Sprintf(", %d %s", n, plural(n, "epoch", "epochs"))
	}
	s += fmt.Sprintf(") in %.1f s, to iteration %d", d.Seconds(), res.Iters)
	if !math.IsNaN(res.LastAUC) {
		s += fmt.Sprintf("; last eval AUC %.6f", res.LastAUC)
	}
	if res.Stopped {
		s += " (the AUC threshold was reached)"
	}
	if res.Skipped > 0 {
		s += fmt.Sprintf("; %d %s skipped for fp16 overflow", res.Skipped, plural(res.Skipped, "step", "steps"))
	}
	return s
}

// predictionText is the predictions file of scores, width per sample: one
// line a sample, its values %.9g separated by spaces.
func predictionText(scores []float32, width int) *strings.Builder {
	var b strings.Builder
	for i := 0; i < len(scores); i += width {
		for k := range width {
			if k > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.9g", scores[i+k])
		}
		b.WriteByte('\n')
	}
	return &b
}
