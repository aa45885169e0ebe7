package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/input"
	"github.com/ctrkit/ctrkit/trainer/model"
)

func init() {
	commands = append(commands,
		&cli.Command{
			Name:  "train",
			Usage: "train a model (HugeCTR JSON config or a reference model) on Norm, Raw or Parquet data",
			Description: "The model comes from --config FILE (HugeCTR graph JSON or JSON config; its solver,\n" +
				"optimizer and data sections are used when present) or --model dlrm|wdl|dcn|dcnv2|deepfm.\n" +
				"Flags override the file. Prints one line per --display iterations (iteration, loss,\n" +
				"lr, samples/s) and one per evaluation (AUC); --out-metrics writes them as JSON lines.",
			Flags:  withSchemaFlags(append(append(append(append(modelFlags(), dataFlags(true)...), solverFlags(true)...), optimizerFlags()...), rankFlags()...)),
			Action: runTrain,
		},
		&cli.Command{
			Name:  "evaluate",
			Usage: "evaluate saved model files on Norm, Raw or Parquet data (AUC, loss)",
			Description: "The model comes from --config FILE or --model as for train; its weights from\n" +
				"--load-prefix/--load-iter (files train wrote) or the config's solver model files.\n" +
				"Reads all of --eval-source (or the config's eval_source) once, unless\n" +
				"--max-eval-batches says less, and prints the AUC and loss.\n\n" +
				"Example:\n" +
				"  ctrkit evaluate --config model.json --load-prefix snap/wdl --load-iter 1000 --eval-source data/file_list_test.txt",
			Flags: withSchemaFlags(append(append(append(modelFlags(), dataFlags(false)...), solverFlags(false)...),
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object (auc, loss, hit_rate, samples, batches; tasks of a multi-task model) instead of the line"},
				lossWeightsFlag)),
			Action: runEvaluate,
		},
		&cli.Command{
			Name:  "predict",
			Usage: "write the predictions of saved model files on Norm, Raw or Parquet data",
			Description: "Loads the model as evaluate does and writes one line per sample of --eval-source\n" +
				"(or the config's eval_source) to --out-predictions.\n\n" +
				"Example:\n" +
				"  ctrkit predict --config model.json --load-prefix snap/wdl --load-iter 1000 --eval-source data/file_list_test.txt -o pred.txt",
			Flags: withSchemaFlags(append(append(append(modelFlags(), dataFlags(false)...), solverFlags(false)...),
				&cli.StringFlag{Name: "out-predictions", Aliases: []string{"o"}, Usage: "predictions `FILE` (one line per sample; required)"},
				renamed("output", "out-predictions"))),
			Action: runPredict,
		},
	)
}

func dataFlags(train bool) []cli.Flag {
	fs := []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "data format: norm | raw | raw-async | parquet (default: the config's, else detected from the data)"},
		vflag("reader"),
		vflag("eval-source"),
		&cli.StringFlag{Name: "data-slot-size-array", Usage: "slot sizes the reader turns into key offsets, or @FILE (default: the config's; with --model, --slot-size-array for raw and parquet and for data whose sidecar says slot-local keys)"},
		vflag("num-workers"),
		&cli.StringFlag{Name: "load-prefix", Usage: "load `PREFIX`_dense_<iter>.model, PREFIX<i>_sparse_<iter>.model… first"},
		&cli.Int64Flag{Name: "load-iter", Usage: "iteration of the files to load (training continues from it)"},
	}
	if train {
		fs = append(fs,
			&cli.BoolFlag{Name: "load-optimizer", Value: true, Usage: "load the optimizer state with --load-prefix (false: start it fresh)"},
			vflag("source"),
			renamed("metrics-out", "out-metrics"),
			&cli.StringFlag{Name: "out-metrics", Usage: "write display and eval records as JSON lines to `FILE`"},
			renamed("plot", "out-plot"),
			&cli.StringFlag{Name: "out-plot", Usage: "write a PNG of loss and AUC against iterations to `FILE`"},
			renamed("graph-out", "out-graph"),
			&cli.StringFlag{Name: "out-graph", Usage: "write the model's graph JSON (HugeCTR graph_to_json) to `FILE`"},
			&cli.BoolFlag{Name: "freeze-dense", Usage: "do not update the dense network (HugeCTR freeze_dense)"},
			&cli.StringSliceFlag{Name: "freeze-embedding", Usage: "do not update the embedding `NAME` (its top, e.g. sparse_embedding1; repeatable)"},
			&cli.StringFlag{Name: "export-predictions-prefix", Usage: "write each evaluation's scores and labels to `PREFIX`_pred_<iter> and PREFIX_label_<iter>"},
		)
	}
	return fs
}

// solverFlags are the solver's flags; evaluate and predict (train false)
// take only those that change a pass over the eval data.
func solverFlags(train bool) []cli.Flag {
	fs := []cli.Flag{
		&cli.IntFlag{Name: "batchsize", Usage: "batch size (default: the config's or model's)"},
		&cli.IntFlag{Name: "max-eval-batches", Usage: "batches of batchsize_eval per evaluation (0: all; train: default the config's, evaluate/predict: all)"},
		&cli.StringFlag{Name: "device", Value: model.DeviceAuto, Usage: "where to run: auto (the GPU when a CUDA driver loads) | gpu | gpu:N | cpu"},
		algorithmSearchFlag("the config's, else true"),
	}
	fs = append(fs, precisionFlags("the config's solver: mixed_precision is fp16, enable_tf32_compute tf32, else fp32", train)...)
	if !train {
		return fs
	}
	return append(fs,
		&cli.IntFlag{Name: "max-iter", Usage: "iterations (non-epoch mode)"},
		&cli.IntFlag{Name: "num-epochs", Usage: "epochs (epoch mode)"},
		&cli.IntFlag{Name: "display", Usage: "print a line every N iterations"},
		&cli.IntFlag{Name: "eval-interval", Usage: "evaluate every N iterations"},
		&cli.IntFlag{Name: "snapshot", Usage: "save model files every N iterations"},
		&cli.StringFlag{Name: "snapshot-prefix", Usage: "model file `PREFIX` (also the final save)"},
		&cli.IntFlag{Name: "keep-snapshots", Usage: "keep the newest `K` snapshots, deleting older ones", DefaultText: "all"},
		&cli.Uint64Flag{Name: "seed", Usage: "initializer and dropout seed"},
		&cli.Float64Flag{Name: "auc-threshold", Usage: "stop once eval AUC reaches it"},
		&cli.BoolFlag{Name: "drop-incomplete-batch", Usage: "HugeCTR's drop_incomplete_batch: true skips short training batches, false trains them", DefaultText: "epoch mode trains the short last batch, max_iter mode skips it"},
		&cli.BoolFlag{Name: "cuda-graph", Value: true, Usage: "train each step as a CUDA graph on the GPU (the solver's cuda_graph, HugeCTR's use_cuda_graph; --cuda-graph=false: eager steps)", DefaultText: "the config's, else true"},
		lossWeightsFlag,
	)
}

// lossWeightsFlag is HugeCTR's compile(loss_names, loss_weights) for
// train and evaluate (the weighted loss).
var lossWeightsFlag = &cli.StringFlag{Name: "loss-weights", Usage: "weights of a multi-task model's losses by label name, `LABEL=W,…` (HugeCTR compile(loss_names, loss_weights); the loss is Σ W·loss; unnamed: 1)"}

// parseLossWeights reads --loss-weights: LABEL=W pairs separated by commas.
func parseLossWeights(v string) (map[string]float64, error) {
	if v == "" {
		return nil, nil
	}
	ws := map[string]float64{}
	for _, kv := range strings.Split(v, ",") {
		k, w, ok := strings.Cut(strings.TrimSpace(kv), "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
		if !ok || k == "" || err != nil {
			return nil, fmt.Errorf("--loss-weights %q: want LABEL=WEIGHT pairs separated by commas (e.g. click=1,buy=0.5)", v)
		}
		if _, dup := ws[k]; dup {
			return nil, fmt.Errorf("--loss-weights %q: label %q given twice", v, k)
		}
		ws[k] = f
	}
	return ws, nil
}

func optimizerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "optimizer", Usage: "sgd | momentum | nesterov | adagrad | adam (default: the config's or model's)"},
		&cli.StringFlag{Name: "update-type", Usage: "embedding update: local | global | lazyglobal"},
		&cli.Float64Flag{Name: "lr", Usage: "learning rate"},
		&cli.Int64Flag{Name: "warmup-steps", Usage: "LR warmup steps"},
		&cli.Int64Flag{Name: "decay-start", Usage: "LR decay start"},
		&cli.Int64Flag{Name: "decay-steps", Usage: "LR decay steps"},
		&cli.Float64Flag{Name: "decay-power", Usage: "LR decay power"},
		&cli.Float64Flag{Name: "end-lr", Usage: "final LR"},
		&cli.Float64Flag{Name: "momentum", Usage: "momentum factor (momentum, nesterov)"},
	}
}

// buildJob merges the model file's sections with the flags
// (model.NewJob's policy), the data section with the data flags, and
// opens the backend.
func buildJob(c *cli.Context, train bool) (model.Job, *graph.Config, error) {
	cfg, err := loadModel(c)
	if err != nil {
		return model.Job{}, nil, err
	}
	o, err := jobOverrides(c, train)
	if err != nil {
		return model.Job{}, nil, err
	}
	j, err := model.NewJob(cfg, o, func(j *model.Job) error { return dataFromConfigAndFlags(c, j, cfg, train) })
	if err != nil {
		return j, nil, err
	}
	j.Notes = c.App.ErrWriter
	j.Progress = c.App.ErrWriter
	if err := openDevices(c, &j, train); err != nil {
		return j, nil, err
	}
	return j, cfg, nil
}

// jobOverrides reads the solver, optimizer and starting-weight flags.
func jobOverrides(c *cli.Context, train bool) (model.Overrides, error) {
	o := model.Overrides{Train: train, ConfigFile: c.String("config"), DenseFrom: c.IsSet("dense-from"),
		LoadPrefix: c.String("load-prefix"), LoadOptimizer: c.Bool("load-optimizer")}
	for name, dst := range map[string]**int{"batchsize": &o.BatchSize, "max-iter": &o.MaxIter, "num-epochs": &o.NumEpochs,
		"display": &o.Display, "eval-interval": &o.EvalInterval, "max-eval-batches": &o.MaxEvalBatches, "snapshot": &o.Snapshot} {
		if c.IsSet(name) {
			v := c.Int(name)
			*dst = &v
		}
	}
	for name, dst := range map[string]**string{"snapshot-prefix": &o.SnapshotPrefix, "export-predictions-prefix": &o.ExportPredictionsPrefix} {
		if c.IsSet(name) {
			v := c.String(name)
			*dst = &v
		}
	}
	pc, err := readPrecision(c)
	if err != nil {
		return o, &exitError{exitUsage, err}
	}
	o.Precision = pc.apply
	for name, dst := range map[string]**bool{"i64-input-key": &o.I64InputKey, "algorithm-search": &o.AlgorithmSearch, "cuda-graph": &o.CUDAGraph} {
		if c.IsSet(name) {
			v := c.Bool(name)
			*dst = &v
		}
	}
	if c.IsSet("seed") {
		v := c.Uint64("seed")
		o.Seed = &v
	}
	if c.IsSet("drop-incomplete-batch") {
		v := c.Bool("drop-incomplete-batch")
		o.DropIncomplete = &v
	}
	if c.IsSet("auc-threshold") {
		v := c.Float64("auc-threshold")
		o.AUCThreshold = &v
	}
	if c.IsSet("load-iter") {
		v := c.Int64("load-iter")
		o.LoadIter = &v
	}
	if c.IsSet("loss-weights") {
		var err error
		if o.LossWeights, err = parseLossWeights(c.String("loss-weights")); err != nil {
			return o, err
		}
	}
	if train {
		o.FreezeDense, o.FreezeEmbeddings = c.Bool("freeze-dense"), c.StringSlice("freeze-embedding")
		o.Optimizer = optimizerOverrides(c)
	}
	return o, nil
}

// optimizerOverrides reads the optimizer flags.
func optimizerOverrides(c *cli.Context) model.OptimizerOverrides {
	var o model.OptimizerOverrides
	for name, dst := range map[string]**string{"optimizer": &o.Type, "update-type": &o.UpdateType} {
		if c.IsSet(name) {
			v := c.String(name)
			*dst = &v
		}
	}
	for name, dst := range map[string]**float64{"lr": &o.LR, "decay-power": &o.DecayPower, "end-lr": &o.EndLR, "momentum": &o.Momentum} {
		if c.IsSet(name) {
			v := c.Float64(name)
			*dst = &v
		}
	}
	for name, dst := range map[string]**int64{"warmup-steps": &o.WarmupSteps, "decay-start": &o.DecayStart, "decay-steps": &o.DecaySteps} {
		if c.IsSet(name) {
			v := c.Int64(name)
			*dst = &v
		}
	}
	return o
}

func optimizerFromFlags(c *cli.Context, base *graph.Optimizer) (*graph.Optimizer, error) {
	return optimizerOverrides(c).Apply(base)
}

func runTrain(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("train takes no arguments, got %q", c.Args().First())
	}
	j, cfg, err := buildJob(c, true)
	if err != nil {
		return err
	}
	defer closeDevices(&j)
	if j.DataShard, err = input.ParseDataShard(c.String("data-shard")); err != nil {
		return &exitError{exitUsage, err}
	}
	if err := j.CheckShard(); err != nil {
		return &exitError{exitUsage, err}
	}
	if j.Solver.MaxIter <= 0 && j.Solver.NumEpochs <= 0 {
		j.Solver.NumEpochs = 1
	}
	// In a run of several processes, process 0 writes the outputs (the
	// others would overwrite its files on a shared file system).
	lead := j.World == nil || j.World.Group.Process == 0
	if g := c.String("out-graph"); g != "" && lead {
		if err := cfg.Graph.WriteFile(g, graph.WriteOptions{Optimizer: j.Optimizer}); err != nil {
			return err
		}
	}
	out := model.TrainOutput{Log: c.App.Writer, Progress: c.App.ErrWriter, SaveFinal: true, KeepSnapshots: c.Int("keep-snapshots")}
	if out.KeepSnapshots < 0 {
		return fmt.Errorf("--keep-snapshots %d: give K ≥ 1 (or leave it out to keep all)", out.KeepSnapshots)
	}
	var mf *os.File
	if p := c.String("out-metrics"); p != "" && lead {
		if mf, err = os.Create(p); err != nil {
			return err
		}
		defer mf.Close()
		out.Metrics = mf
	}
	_, res, err := model.Train(c.Context, j, out)
	if err != nil {
		return err
	}
	if mf != nil {
		if err := mf.Close(); err != nil {
			return err
		}
	}
	if p := c.String("out-plot"); p != "" && lead {
		if err := plotHistory(p, plotSource(&j), res.History); err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "wrote %s\n", p)
	}
	return nil
}

func runEvaluate(c *cli.Context) error {
	j, _, err := buildJob(c, false)
	if err != nil {
		return err
	}
	defer model.CloseBackend(j.Backend)
	if c.Bool("json") {
		return evaluateJSON(c.App.Writer, j)
	}
	_, err = model.RunEvaluate(j, c.App.Writer)
	return err
}

func runPredict(c *cli.Context) error {
	if c.String("out-predictions") == "" {
		return &exitError{2, fmt.Errorf("predict: --out-predictions FILE (-o) is required")}
	}
	j, _, err := buildJob(c, false)
	if err != nil {
		return err
	}
	defer model.CloseBackend(j.Backend)
	n, err := model.RunPredict(j, c.String("out-predictions"))
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %d predictions to %s\n", n, c.String("out-predictions"))
	return nil
}
