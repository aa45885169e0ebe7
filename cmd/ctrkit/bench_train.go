package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/bench"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/model"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

func init() {
	for _, c := range commands {
		if c.Name != "bench" {
			continue
		}
		c.Subcommands = append(c.Subcommands, &cli.Command{
			Name:      "train",
			Usage:     "time training steps of a reference model through the input pipeline, and on resident batches",
			ArgsUsage: "PATH",
			Description: `Builds a reference model (default DLRM: 128-wide one-hot embeddings over
--slot-size-array, bottom MLP 512-256-128, dot interaction, top MLP 1024-1024-512-256-1,
its own optimizer, --optimizer sgd for plain SGD) and trains it on PATH's shape: --warmup untimed steps, then --steps timed steps
fed by the input pipeline (pinned batches, uploads on a copy stream), then with
--resident the same steps on one batch already on the device. The difference is
what the pipeline costs.

--profile then profiles --profile-steps steps (after --warmup more) through the
pipeline, and with --resident on the resident batch: a table of each layer's
forward, backward and update milliseconds per step (CUDA events on the GPU's
compute stream; the host clock on the CPU), its share of the measured step, the
GEMM TFLOP/s of InnerProduct, MLP, MultiCross and Interaction layers, the
device's idle time between steps and the pipeline's Commit (staged batch into
the inputs, SplitInputs), then the pipeline's host side: the training
goroutine's wait for the next batch, the reader's wait and rate, the check and
key counts, Stage and the staging copies on the copy stream. --json includes
the tables as "profile" and "resident_profile".

Example (MLPerf DLRM shape, 26 slots of 10⁶ rows, power-law keys):
   ctrkit gen --format raw --out-source dlrm.bin --num-samples 4194304 --slot-size-array 1000000 --alpha 1.2
   ctrkit bench train dlrm.bin --slot-size-array 1000000 --device gpu --tf32 --resident`,
			Flags: append(append(append(schemaFlags(false),
				&cli.StringFlag{Name: "model", Value: "dlrm", Usage: "reference model: dlrm | wdl | dcn | dcnv2 | deepfm"},
				&cli.IntFlag{Name: "batchsize", Value: 65536, Usage: "samples per step"},
				&cli.IntFlag{Name: "warmup", Value: 10, Usage: "untimed steps"},
				&cli.IntFlag{Name: "steps", Value: 50, Usage: "timed steps"},
				&cli.IntFlag{Name: "vec-size", Usage: "embedding width (default: the model's)"},
				&cli.StringFlag{Name: "optimizer", Usage: "sgd: plain SGD lr 0.01 (the PyTorch anchors'); default: the reference model's own"},
				&cli.Float64Flag{Name: "lr", Usage: "learning rate (default: the optimizer's)"},
				&cli.BoolFlag{Name: "resident", Usage: "also time steps on one batch already on the device"},
				&cli.BoolFlag{Name: "profile", Usage: "also profile steps: per-layer forward/backward/update ms, the pipeline's share, GEMM TFLOP/s"},
				&cli.IntFlag{Name: "profile-steps", Value: 20, Usage: "steps to profile (with --profile)"},
				&cli.StringFlag{Name: "device", Value: model.DeviceAuto, Usage: "auto | gpu | gpu:N | cpu"},
				&cli.BoolFlag{Name: "fused", Usage: "fused InnerProduct kernels on the GPU (cuBLASLt ReLU/bias-gradient epilogues, weight gradients on a side stream; off by default: slower than the separate kernels on the H200 so far); CTRKIT_FUSED=1 turns them on for any command"},
				algorithmSearchFlag(""),
				&cli.BoolFlag{Name: "cuda-graph", Value: true, Usage: "train the steps as a CUDA graph on the GPU (HugeCTR's use_cuda_graph); --cuda-graph=false: eager steps"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
				vflag("reader", withValue("sync")),
				vflag("num-workers"),
				&cli.StringFlag{Name: "gpus", Usage: "train over these GPUs of this process, e.g. 0,1 (one rank each, NCCL; with --device cpu that many CPU ranks) and report samples/s in all and per rank, and the time in collectives"},
				&cli.DurationFlag{Name: "timeout", Value: collective.DefaultTimeout, Usage: "--gpus: how long a rank waits for another rank or process"},
				&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the run (reader, pipeline and host side of the steps) to `FILE` (go tool pprof)"},
			), precisionFlags("fp32", true)...), asyncFlags()...),
			Action: runBenchTrain,
		})
	}
}

func runBenchTrain(c *cli.Context) error {
	d, err := resolveArg(c, "PATH")
	if err != nil {
		return err
	}
	if c.IsSet("profile-steps") && !c.Bool("profile") {
		return &exitError{2, fmt.Errorf("--profile-steps sets how many steps --profile profiles: give --profile too")}
	}
	if c.Int("profile-steps") <= 0 {
		return &exitError{2, fmt.Errorf("--profile-steps %d: give at least 1", c.Int("profile-steps"))}
	}
	var async *asyncio.Params
	switch r := c.String("reader"); r {
	case "sync":
		if err := refuseAsyncFlags(c); err != nil {
			return err
		}
	case "async":
		p, err := asyncParams(c)
		if err != nil {
			return &exitError{2, err}
		}
		async = &p
	default:
		return &exitError{2, fmt.Errorf("--reader: want sync or async, not %q", r)}
	}
	pc, err := readPrecision(c)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	s := graph.Solver{NoAlgorithmSearch: !c.Bool("algorithm-search"), Scaler: 1}
	pc.apply(&s)
	if l, _ := collective.FromEnv(nil); c.IsSet("gpus") || l.Size > 1 {
		return benchTrainRanks(c, d, s)
	}
	stop, err := startCPUProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stop()
	be, err := model.OpenBackend(c.String("device"), s, c.App.ErrWriter)
	if err != nil {
		return err
	}
	defer model.CloseBackend(be)
	if f, ok := be.(interface{ SetUnfused(bool) }); ok && c.IsSet("fused") {
		f.SetUnfused(!c.Bool("fused"))
	}
	log := c.App.Writer
	if c.Bool("json") {
		log = c.App.ErrWriter
	}
	res, err := bench.Train(d, be, bench.TrainOptions{
		Model: c.String("model"), BatchSize: c.Int("batchsize"), Warmup: c.Int("warmup"), Steps: c.Int("steps"),
		VecSize: c.Int("vec-size"), Optimizer: c.String("optimizer"), LearningRate: c.Float64("lr"), Resident: c.Bool("resident"), Async: async, Workers: c.Int("num-workers"),
		Profile: c.Bool("profile"), ProfileSteps: c.Int("profile-steps"), CUDAGraph: c.Bool("cuda-graph"),
		Precision: s.Precision(), LossScale: s.LossScale(),
	}, log)
	if err != nil {
		return err
	}
	printAlgoSearch(log, be)
	if f, ok := be.(interface {
		FusesDense() bool
		FusedStats() gpu.FusedStats
	}); ok && f.FusesDense() {
		fmt.Fprintf(log, "fused InnerProduct calls issued (eager and captured steps): %v\n", f.FusedStats())
	}
	if c.Bool("json") {
		e := json.NewEncoder(c.App.Writer)
		e.SetIndent("", "  ")
		return e.Encode(res)
	}
	fmt.Fprintf(c.App.Writer, "%s %s batch %d: %s through the pipeline\n", res.Model, res.Backend, res.Batch, bench.Rate(res.Pipeline.SamplesPerSec))
	return nil
}

// algorithmSearchFlag is --algorithm-search (the solver's algorithm_search);
// defaultText is its help's default ("": true; train's: the config's, else
// true).
func algorithmSearchFlag(defaultText string) cli.Flag {
	return &cli.BoolFlag{Name: "algorithm-search", Value: true, DefaultText: defaultText, Usage: "on the GPU, time cuBLASLt's candidate algorithms for each GEMM shape once (in the first step) and keep the fastest; =false takes the heuristic's first choice (the solver's algorithm_search, default true as in HugeCTR)"}
}

// printAlgoSearch prints what a GPU backend's algorithm search cost (or
// that it was off).
func printAlgoSearch(w io.Writer, be any) {
	s, ok := be.(interface {
		AlgorithmSearch() bool
		AlgoSearch() cuda.AlgoSearchStats
	})
	switch {
	case !ok:
	case !s.AlgorithmSearch():
		fmt.Fprintf(w, "algorithm search: off (cuBLASLt's heuristic's first choice, cuBLAS's own GEMM)\n")
	default:
		fmt.Fprintf(w, "algorithm search (in the first steps): %v\n", s.AlgoSearch())
	}
}
