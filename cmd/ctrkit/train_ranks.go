package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/bench"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/model"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// rankFlags are train's flags for several ranks (docs/MULTI_GPU.md).
func rankFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "gpus", Usage: "this process's GPU ordinals, comma-separated, e.g. 0,1 (one rank each; default: the config's solver.gpu " +
			"when this machine has those GPUs); with --device cpu that many in-process CPU ranks"},
		&cli.DurationFlag{Name: "timeout", Value: collective.DefaultTimeout, Usage: "how long a rank waits for another rank or process (rendezvous, collectives)"},
		&cli.StringFlag{Name: "data-shard", Value: "none", Usage: "how the ranks (processes, GPUs) share the reading of the data: none (every rank reads all of it) | " +
			"samples (each its part of every global batch, Raw or RawAsync files; trains exactly as none) | files (each its own files of the list; another sample order)"},
	}
}

// openDevices opens the run's backend (j.Backend), or for a run over
// several ranks its world (j.World: --gpus, the config's solver.gpu, the
// launcher's processes).
func openDevices(c *cli.Context, j *model.Job, train bool) error {
	if !train || c.Command.Name != "train" {
		var err error
		j.Backend, err = model.OpenBackend(c.String("device"), j.Solver, c.App.ErrWriter)
		return err
	}
	return openRanksFor(c, j, false)
}

// openRanksFor is openDevices for a command with --gpus; groupOnly leaves
// j.World nil (and opens nothing) when the plan is one device.
func openRanksFor(c *cli.Context, j *model.Job, groupOnly bool) error {
	device := c.String("device")
	req := model.RankRequest{ConfigFile: c.String("config")}
	if c.IsSet("gpus") {
		var err error
		if req.GPUs, err = parseDevices(c.String("gpus")); err != nil {
			return &exitError{exitUsage, err}
		}
		if device != model.DeviceAuto && device != model.DeviceGPU && device != model.DeviceCPU {
			return &exitError{exitUsage, fmt.Errorf("--device %s with --gpus: give the GPUs with --gpus alone (--device auto, gpu or cpu)", device)}
		}
	}
	l, err := collective.FromEnv(nil)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	req.Launch = l
	oneDevice := device != model.DeviceAuto && device != model.DeviceGPU && device != model.DeviceCPU
	if oneDevice && l.Size > 1 {
		return &exitError{exitUsage, fmt.Errorf("--device %s in a run of %d processes (%s): give each process its GPUs with --gpus (e.g. --gpus 0)", device, l.Size, l.From)}
	}
	if req.GPUs == nil && oneDevice {
		// --device gpu:N: that one device, whatever the config lists.
		j.Ranks.Hint = fmt.Sprintf("--device %s picks one device (--gpus picks several)", device)
		if groupOnly {
			return nil
		}
		j.Backend, err = model.OpenBackend(device, j.Solver, c.App.ErrWriter)
		return err
	}
	switch device {
	case model.DeviceCPU:
		req.CPU = true
	case model.DeviceAuto, model.DeviceGPU:
		n, err := cuda.DeviceCount()
		switch {
		case err == nil && (n > 0 || device == model.DeviceGPU):
			req.GPUCount = n
		case err == nil: // a driver without GPUs: auto trains on the CPU
			req.CPU = true
		case device == model.DeviceAuto && errors.Is(err, cuda.ErrNoDriver):
			req.CPU = true
			if req.GPUs != nil || l.Size > 1 {
				fmt.Fprintf(c.App.ErrWriter, "device: no CUDA driver found: training on CPU ranks (--device gpu says why)\n")
			}
		case req.GPUs != nil:
			return err
		}
	}
	plan, err := model.PlanRanks(&j.Solver, req)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	j.Ranks = plan
	if !plan.Group() && groupOnly {
		return nil
	}
	if !plan.Group() {
		if len(plan.Devices) == 1 && !plan.CPU {
			device = fmt.Sprintf("gpu:%d", plan.Devices[0])
		}
		if plan.CPU && device == model.DeviceAuto {
			device = model.DeviceCPU
		}
		j.Backend, err = model.OpenBackend(device, j.Solver, c.App.ErrWriter)
		return err
	}
	if p := j.Solver.Precision(); p.Half() {
		return &exitError{exitUsage, fmt.Errorf("precision %s trains on one GPU: a group of ranks (--gpus, solver.gpu) trains fp32 or tf32; pick one GPU (--gpus 0) or --precision tf32", p)}
	}
	math := model.GEMMMath(j.Solver.Precision())
	w, err := collective.Open(c.Context, collective.Setup{CPU: plan.CPU, Devices: plan.Devices, GPU: gpu.Options{Math: math, NoAlgorithmSearch: j.Solver.NoAlgorithmSearch},
		Launch: plan.Launch, Options: collective.Options{Timeout: c.Duration("timeout")}})
	if err != nil {
		return err
	}
	j.World = w
	fmt.Fprintf(c.App.ErrWriter, "ranks: %s\n", worldText(w))
	return nil
}

// worldText describes an opened world for the log.
func worldText(w *collective.World) string {
	s := fmt.Sprintf("%d ranks", w.Group.World)
	if w.Group.Processes > 1 {
		s += fmt.Sprintf(" in %d processes (this is process %d, ranks %d–%d)", w.Group.Processes, w.Group.Process, w.Group.Base, w.Group.Base+w.Group.Local-1)
	}
	kind := "CPU ranks, host collectives"
	if w.Kind == "nccl" {
		kind = "GPUs, NCCL"
		if v, err := cuda.NCCLVersion(); err == nil {
			kind += " " + v
		}
	}
	return s + " (" + kind + ")"
}

// closeDevices releases what openDevices opened.
func closeDevices(j *model.Job) error {
	if j.World != nil {
		return j.World.Close()
	}
	return model.CloseBackend(j.Backend)
}

// benchTrainRanks is bench train over the ranks of --gpus (and the
// launcher's processes).
func benchTrainRanks(c *cli.Context, d *dataset.Dataset, s graph.Solver) error {
	if c.Bool("resident") || c.String("reader") != "sync" {
		return &exitError{exitUsage, fmt.Errorf("--gpus: --resident and --reader async time one device; leave them out")}
	}
	j := model.Job{Solver: s}
	if err := openRanksFor(c, &j, true); err != nil {
		return err
	}
	defer closeDevices(&j)
	if j.World == nil {
		return &exitError{exitUsage, fmt.Errorf("--gpus %s: one rank; bench train without --gpus times one device", c.String("gpus"))}
	}
	log := c.App.Writer
	if c.Bool("json") || j.World.Group.Process != 0 {
		log = c.App.ErrWriter
	}
	if c.IsSet("cuda-graph") && c.Bool("cuda-graph") {
		fmt.Fprintln(log, "note: --cuda-graph: the ranks of a group train eagerly (collectives run between their steps)")
	}
	res, err := bench.TrainRanks(d, j.World, bench.TrainOptions{
		Model: c.String("model"), BatchSize: c.Int("batchsize"), Warmup: c.Int("warmup"), Steps: c.Int("steps"),
		VecSize: c.Int("vec-size"), Optimizer: c.String("optimizer"), LearningRate: c.Float64("lr"),
	}, log)
	if err != nil || j.World.Group.Process != 0 {
		return err
	}
	if c.Bool("json") {
		e := json.NewEncoder(c.App.Writer)
		e.SetIndent("", "  ")
		return e.Encode(res)
	}
	fmt.Fprintf(c.App.Writer, "%s %s ×%d batch %d: %s in all, %s a rank through the pipeline\n", res.Model, res.Backend, res.Ranks, res.Batch,
		bench.Rate(res.Pipeline.SamplesPerSec), bench.Rate(res.PerRank))
	return nil
}
