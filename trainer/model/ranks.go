package model

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// RankPlan is which ranks this process trains on (docs/MULTI_GPU.md,
// "Command line"): its devices, and the launcher's view of the processes.
type RankPlan struct {
	// CPU: in-process CPU ranks with the host collectives, one per entry
	// of Devices; else one GPU rank per ordinal, with NCCL.
	CPU bool
	// Devices are this process's GPU ordinals (CPU: their count is the
	// rank count). Nil: one device, opened as --device says (OpenBackend).
	Devices []int
	// Launch describes the processes (collective.FromEnv).
	Launch collective.Launch
	// Hint ends the note (Job.DeviceNote) of a config whose gpu list is
	// not run as listed: why, and the flag or launcher that would run it.
	Hint string
}

// Group reports whether the plan trains over a group of ranks (several
// devices or several processes) rather than on one device.
func (p RankPlan) Group() bool { return len(p.Devices) > 1 || p.Launch.Size > 1 }

// RankRequest is what PlanRanks decides from.
type RankRequest struct {
	// GPUs is the --gpus list (nil: not given).
	GPUs []int
	// CPU: the run is on the CPU (--device cpu, or auto without a driver).
	CPU bool
	// GPUCount is the number of GPUs present (ignored on the CPU).
	GPUCount int
	// Launch is the launcher's view (collective.FromEnv).
	Launch collective.Launch
	// ConfigFile names the model file in messages.
	ConfigFile string
}

// PlanRanks decides this process's ranks from --gpus, else the solver's gpu
// list (HugeCTR's "gpu": [0, 1] for one node, [[0, 1], [0, 1]] — vvgpu —
// for one list per node, the node being this process's launcher rank):
//
//   - --gpus wins: those GPUs (ordinals checked against the machine), or
//     on the CPU that many in-process CPU ranks;
//   - the config's list runs as listed when this machine has those GPUs; a
//     config of several nodes needs as many processes (a launcher) or one
//     list for all;
//   - otherwise — on the CPU, a list naming GPUs the machine lacks, a
//     multi-node config started as one process — ctrkit trains on one
//     device with the capacity of all the listed GPUs, as before, and Hint
//     says why and which flag picks the GPUs.
func PlanRanks(s *graph.Solver, r RankRequest) (RankPlan, error) {
	l := r.Launch
	if l.Size == 0 {
		l.Size = 1
	}
	p := RankPlan{CPU: r.CPU, Launch: l}
	if r.GPUs != nil {
		if len(r.GPUs) == 0 {
			return p, fmt.Errorf("--gpus: no devices")
		}
		if !r.CPU {
			for _, d := range r.GPUs {
				if d >= r.GPUCount {
					return p, fmt.Errorf("--gpus %s: GPU %d does not exist (this machine has %s)", intList(r.GPUs), d, gpuCountText(r.GPUCount))
				}
			}
		}
		p.Devices = r.GPUs
		return p, nil
	}
	nodes := s.GPU
	if len(nodes) == 0 {
		nodes = [][]int{{0}}
	}
	file := r.ConfigFile
	if file == "" {
		file = "the config"
	}
	node := nodes[0]
	switch {
	case l.Size > 1 && len(nodes) > 1 && len(nodes) != l.Size:
		return p, fmt.Errorf("%s: solver.gpu lists %d nodes, but %s started %d processes (one per node); give each process its GPUs with --gpus",
			file, len(nodes), launcherName(l), l.Size)
	case l.Size > 1 && len(nodes) > 1:
		node = nodes[l.Rank]
	case len(nodes) > 1:
		p.Hint = fmt.Sprintf("its %d nodes need one process each (mpirun, srun, or CTRKIT_RANK/CTRKIT_WORLD_SIZE/CTRKIT_MASTER_ADDR), "+
			"and --gpus picks this machine's GPUs", len(nodes))
		return p, nil
	}
	if r.CPU {
		if l.Size > 1 {
			p.Devices = []int{0}
		}
		if len(node) > 1 {
			p.Hint = fmt.Sprintf("--device cpu --gpus %s runs %d in-process CPU ranks", intList(node), len(node))
		}
		return p, nil
	}
	for _, d := range node {
		if d >= r.GPUCount && l.Size > 1 {
			return p, fmt.Errorf("%s: solver.gpu lists GPUs %s for process %d, this machine has %s; give this process its GPUs with --gpus (e.g. --gpus 0)",
				file, intList(node), l.Rank, gpuCountText(r.GPUCount))
		}
		if d >= r.GPUCount {
			p.Hint = fmt.Sprintf("this machine has %s (--gpus picks its GPUs, e.g. --gpus 0)", gpuCountText(r.GPUCount))
			return p, nil
		}
	}
	p.Devices = node
	if !p.Group() {
		p.Devices = nil
	}
	return p, nil
}

// launcherName names the launcher variables of l for messages.
func launcherName(l collective.Launch) string {
	if l.From == "" {
		return "the launcher"
	}
	return "the launcher (" + strings.SplitN(l.From, ",", 2)[0] + ")"
}

func gpuCountText(n int) string {
	switch n {
	case 0:
		return "no GPU"
	case 1:
		return "1 GPU, ordinal 0"
	}
	return fmt.Sprintf("%d GPUs, ordinals 0–%d", n, n-1)
}

func intList(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// trainGroup is Train over j.World's ranks: one Model a rank of this
// process (NewGroup), each loading the starting files (the rows it owns;
// the process's first rank checks a snapshot's checksums),
// then Job.fit on every rank at once — Fit, the snapshots and the final
// save are collective. Only global rank 0 writes the log, metrics and
// progress. It returns this process's first rank's model and result (every
// rank's result is the same).
func trainGroup(ctx context.Context, j Job, out TrainOutput) (*Model, FitResult, error) {
	w := j.World
	cfg, err := j.runConfig(w.Group.World)
	if err != nil {
		return nil, FitResult{}, err
	}
	g, err := NewGroup(cfg, w.Comms, j.options())
	if err != nil {
		return nil, FitResult{}, err
	}
	res := make([]FitResult, len(g.Models))
	err = g.Run(ctx, func(ctx context.Context, m *Model) error {
		if err := j.loadStart(m, true, m == g.Models[0]); err != nil {
			return err
		}
		o := out
		if m.Rank() != 0 {
			o.Log, o.Metrics, o.Progress = io.Discard, nil, nil
		}
		r, err := j.fit(ctx, m, o)
		for i, x := range g.Models {
			if x == m {
				res[i] = r
			}
		}
		return err
	})
	return g.Models[0], res[0], err
}
