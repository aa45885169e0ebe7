package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/model"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// RanksResult is what a training-throughput run over several ranks
// measured (TrainRanks).
type RanksResult struct {
	Backend   string `json:"backend"`
	Model     string `json:"model"`
	Batch     int    `json:"batch"` // the global batch
	Ranks     int    `json:"ranks"`
	Processes int    `json:"processes"`
	Optimizer string `json:"optimizer"`
	// Pipeline is rank 0's timed run: SamplesPerSec counts the global
	// batch, the whole group's rate.
	Pipeline model.Throughput `json:"pipeline"`
	// PerRank is Pipeline's samples/s divided by the rank count.
	PerRank float64 `json:"per_rank_samples_per_sec"`
	// Collectives is rank 0's time in collectives per step (ms, over the
	// warm-up and timed steps), by collective, and its share of the step.
	CollectiveMillis map[string]float64 `json:"collective_ms_per_step"`
	CollectiveShare  float64            `json:"collective_share"`
}

// TrainRanks is Train over the ranks of w (each its reference model built
// as one rank of the group, the global batch split over them, the
// embedding sharded): every rank trains through its own input pipeline
// (the whole global batch: every rank pools its rows for all samples), and
// rank 0's timing is reported with the time its collectives took. On NCCL
// ranks each collective is timed with the backend synchronised before
// (not counted) and after (counted), which the run's samples/s include.
func TrainRanks(d *dataset.Dataset, w *collective.World, o TrainOptions, log io.Writer) (RanksResult, error) {
	o.defaults()
	res := RanksResult{Model: o.Model, Batch: o.BatchSize, Ranks: w.Group.World, Processes: w.Group.Processes, Backend: w.Backends[0].Name()}
	if o.Resident || o.Async != nil {
		return res, fmt.Errorf("bench train over several ranks: --resident and --reader async are for one device")
	}
	cfg, sizes, err := referenceConfig(d, o)
	if err != nil {
		return res, err
	}
	res.Optimizer = fmt.Sprintf("%s lr %g", cfg.Optimizer.Type, cfg.Optimizer.LearningRate)
	timed := make([]*timedComm, len(w.Comms))
	comms := make([]collective.Comm, len(w.Comms))
	for i, c := range w.Comms {
		timed[i] = &timedComm{Comm: c, sync: w.Kind == "nccl", ms: map[string]time.Duration{}}
		comms[i] = timed[i]
	}
	g, err := model.NewGroup(cfg, comms, model.Options{BatchSize: o.BatchSize, Seed: 1, Optimizer: cfg.Optimizer, SlotSizeArray: sizes})
	if err != nil {
		return res, err
	}
	if w.Group.Process == 0 {
		fmt.Fprintf(log, "%s on %d ranks (%s) in %d process(es): global batch %d (%d a rank), %s, %d warm-up + %d timed steps from %s\n",
			o.Model, res.Ranks, w.Kind, res.Processes, o.BatchSize, o.BatchSize/res.Ranks, res.Optimizer, o.Warmup, o.Steps, d.Path)
	}
	tps := make([]model.Throughput, len(g.Models))
	err = g.Run(context.Background(), func(_ context.Context, m *model.Model) error {
		open := func() (formats.Reader, error) { return d.Open(formats.Options{BatchSize: o.BatchSize}) }
		if src, ok := trainSource(d, nil); ok {
			src.SlotSizeArray = sizes
			open = func() (formats.Reader, error) { return m.Open(src) }
		}
		tp, err := m.TrainThroughput(open, o.Warmup, o.Steps)
		for i, x := range g.Models {
			if x == m {
				tps[i] = tp
			}
		}
		return err
	})
	if err != nil {
		return res, err
	}
	res.Pipeline = tps[0]
	if err := finiteLoss("pipeline", res.Pipeline); err != nil {
		return res, err
	}
	res.PerRank = res.Pipeline.SamplesPerSec / float64(res.Ranks)
	steps := float64(o.Warmup + o.Steps)
	res.CollectiveMillis = map[string]float64{}
	var total time.Duration
	for op, d := range timed[0].ms {
		res.CollectiveMillis[op] = d.Seconds() * 1000 / steps
		total += d
	}
	res.CollectiveShare = total.Seconds() * 1000 / steps / res.Pipeline.StepMillis
	if w.Group.Process == 0 {
		fmt.Fprintf(log, "pipeline: %s in all (%s a rank, %.2f ms/step), loss %.4f → %.4f; collectives %.2f ms/step (%.1f%%)\n",
			Rate(res.Pipeline.SamplesPerSec), Rate(res.PerRank), res.Pipeline.StepMillis, res.Pipeline.LossFirst, res.Pipeline.LossLast,
			total.Seconds()*1000/steps, 100*res.CollectiveShare)
	}
	return res, nil
}

// defaults fills Train's defaults.
func (o *TrainOptions) defaults() {
	if o.Model == "" {
		o.Model = "dlrm"
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 65536
	}
	if o.Warmup <= 0 {
		o.Warmup = 10
	}
	if o.Steps <= 0 {
		o.Steps = 50
	}
}

// referenceConfig is Train's model: the reference model over d's shape
// with a one-hot embedding over the slot sizes, and those sizes.
func referenceConfig(d *dataset.Dataset, o TrainOptions) (*graph.Config, []int64, error) {
	sizes := d.Spec.SlotSizeArray
	if len(sizes) != d.Schema.NumSlots() {
		return nil, nil, fmt.Errorf("bench train: give the slot sizes (%d slots, %d sizes)", d.Schema.NumSlots(), len(sizes))
	}
	if d.Spec.Offsets {
		return nil, nil, fmt.Errorf("bench train: read keys without slot offsets (the one-hot embedding adds them)")
	}
	var opt *graph.Optimizer
	switch o.Optimizer {
	case "":
	case "sgd":
		opt = graph.DefaultOptimizer()
		opt.Type, opt.LearningRate, opt.WarmupSteps = "SGD", 0.01, 0
	default:
		return nil, nil, fmt.Errorf("bench train: optimizer %q (want sgd, or none for the model's own)", o.Optimizer)
	}
	nnz := make([]int, d.Schema.NumSlots())
	for i, sl := range d.Schema.Slots {
		nnz[i] = max(sl.MaxNNZ, sl.Hotness, 1)
	}
	cfg, err := graph.Reference(o.Model, graph.RefOptions{DenseDim: d.Schema.DenseDim, SlotSizes: sizes, NNZPerSlot: nnz,
		VecSize: o.VecSize, EmbeddingType: graph.LocalizedOneHot, Optimizer: opt})
	if err != nil {
		return nil, nil, err
	}
	if o.LearningRate > 0 {
		cfg.Optimizer.LearningRate = float32(o.LearningRate)
	}
	return cfg, sizes, nil
}

// timedComm adds up the time each collective of a rank takes (sync: with
// the backend synchronised before and after, for NCCL's asynchronous
// calls).
type timedComm struct {
	collective.Comm
	sync    bool
	mu      sync.Mutex
	ms      map[string]time.Duration
	inGroup bool // inside Group: the group is timed as one
}

func (c *timedComm) time(op string, fn func() error) error {
	if c.inGroup {
		return fn()
	}
	be := c.Backend()
	if c.sync {
		if err := be.Sync(); err != nil {
			return err
		}
	}
	t0 := time.Now()
	err := fn()
	if c.sync && err == nil {
		err = be.Sync()
	}
	c.mu.Lock()
	c.ms[op] += time.Since(t0)
	c.mu.Unlock()
	return err
}

func (c *timedComm) AllReduce(buf tensor.Tensor, r collective.Reduction) error {
	return c.time("all_reduce", func() error { return c.Comm.AllReduce(buf, r) })
}

func (c *timedComm) ReduceScatter(dst, src tensor.Tensor, r collective.Reduction) error {
	return c.time("reduce_scatter", func() error { return c.Comm.ReduceScatter(dst, src, r) })
}

func (c *timedComm) AllGather(dst, src tensor.Tensor) error {
	return c.time("all_gather", func() error { return c.Comm.AllGather(dst, src) })
}

func (c *timedComm) AllToAllV(dst tensor.Tensor, recv []int, src tensor.Tensor, send []int) error {
	return c.time("all_to_all", func() error { return c.Comm.AllToAllV(dst, recv, src, send) })
}

func (c *timedComm) Broadcast(buf tensor.Tensor, root int) error {
	return c.time("broadcast", func() error { return c.Comm.Broadcast(buf, root) })
}

func (c *timedComm) Group(fn func() error) error {
	return c.time("grouped", func() error {
		c.inGroup = true
		defer func() { c.inGroup = false }()
		return c.Comm.Group(fn)
	})
}
