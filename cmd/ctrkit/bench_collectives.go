package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/cuda"
)

func init() {
	for _, c := range commands {
		if c.Name != "bench" {
			continue
		}
		c.Subcommands = append(c.Subcommands, &cli.Command{
			Name:  "collectives",
			Usage: "time all-reduce and all-to-all between the ranks of a run (like nccl-tests), before a long multi-GPU run",
			Description: `Opens one rank per GPU of --gpus (NCCL) or, with --device cpu, that many in-process
CPU ranks (the host collectives), joins the other processes when a launcher started
several (mpirun, srun, torchrun, or CTRKIT_RANK/CTRKIT_WORLD_SIZE/CTRKIT_MASTER_ADDR),
checks each collective's result once, then times --iters calls per size and prints
the median time, the algorithm bandwidth (bytes/time) and the bus bandwidth
(all-reduce ×2(n−1)/n, the others ×(n−1)/n), the figures nccl-tests prints.

Examples:
   ctrkit bench collectives --gpus 0,1
   ctrkit bench collectives --device cpu --gpus 0,1,2,3 --sizes 64K,1M
   CTRKIT_RANK=0 CTRKIT_WORLD_SIZE=2 CTRKIT_MASTER_ADDR=node0 ctrkit bench collectives --gpus 0   # on node0
   CTRKIT_RANK=1 CTRKIT_WORLD_SIZE=2 CTRKIT_MASTER_ADDR=node0 ctrkit bench collectives --gpus 0   # on node1`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "device", Value: "gpu", Usage: "gpu (NCCL) | cpu (in-process CPU ranks)"},
				&cli.StringFlag{Name: "gpus", Value: "0", Usage: "this process's GPU ordinals, comma-separated (cpu: one rank per entry)"},
				&cli.StringFlag{Name: "sizes", Usage: "message sizes, comma-separated (default: 1MiB,16MiB,128MiB on GPUs, 64KiB,1MiB,8MiB on the CPU)"},
				&cli.StringFlag{Name: "ops", Value: "all_reduce,all_to_all", Usage: "collectives: " + strings.Join(collective.MeasureOps, ", ")},
				&cli.IntFlag{Name: "iters", Value: 20, Usage: "timed calls per size"},
				&cli.DurationFlag{Name: "timeout", Value: collective.DefaultTimeout, Usage: "how long to wait for another rank or process"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
			},
			Action: runBenchCollectives,
		})
	}
}

// parseDevices reads "0,1,3" (ordinals ≥ 0, no repeats).
func parseDevices(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--gpus %q: %q is not a device ordinal (want e.g. 0,1)", s, f)
		}
		if seen[n] {
			return nil, fmt.Errorf("--gpus %q lists device %d twice", s, n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

type collectivesReport struct {
	Kind      string                 `json:"kind"`
	Ranks     int                    `json:"ranks"`
	Processes int                    `json:"processes"`
	NCCL      string                 `json:"nccl_version,omitempty"`
	Results   []collective.Bandwidth `json:"results"`
}

func runBenchCollectives(c *cli.Context) error {
	devs, err := parseDevices(c.String("gpus"))
	if err != nil {
		return &exitError{exitUsage, err}
	}
	cpuRanks := false
	switch c.String("device") {
	case "cpu":
		cpuRanks = true
	case "gpu":
	default:
		return &exitError{exitUsage, fmt.Errorf("--device %q: want gpu or cpu", c.String("device"))}
	}
	sizesFlag := c.String("sizes")
	if sizesFlag == "" {
		sizesFlag = "1MiB,16MiB,128MiB"
		if cpuRanks {
			sizesFlag = "64KiB,1MiB,8MiB"
		}
	}
	var sizes []int64
	for _, f := range strings.Split(sizesFlag, ",") {
		n, err := parseSize(f)
		if err != nil {
			return &exitError{exitUsage, fmt.Errorf("--sizes: %v", err)}
		}
		sizes = append(sizes, n)
	}
	ops := strings.Split(c.String("ops"), ",")
	for _, o := range ops {
		if !contains(collective.MeasureOps, o) {
			return &exitError{exitUsage, fmt.Errorf("--ops: unknown collective %q%s", o, didYouMean(o, collective.MeasureOps, ""))}
		}
	}
	l, err := collective.FromEnv(nil)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	w, err := collective.Open(c.Context, collective.Setup{CPU: cpuRanks, Devices: devs, Launch: l, Options: collective.Options{Timeout: c.Duration("timeout")}})
	if err != nil {
		return err
	}
	defer w.Close()
	res, err := collective.Measure(w.Comms, ops, sizes, c.Int("iters"))
	if err != nil {
		return err
	}
	rep := collectivesReport{Kind: w.Kind, Ranks: w.Group.World, Processes: w.Group.Processes, Results: res}
	if !cpuRanks {
		rep.NCCL, _ = cuda.NCCLVersion()
	}
	if w.Group.Process != 0 {
		return nil // process 0 reports for the world
	}
	out := c.App.Writer
	if c.Bool("json") {
		e := json.NewEncoder(out)
		e.SetIndent("", "  ")
		return e.Encode(rep)
	}
	what := fmt.Sprintf("%d ranks in %d process(es), %s", rep.Ranks, rep.Processes, rep.Kind)
	if rep.NCCL != "" {
		what += " " + rep.NCCL
	}
	fmt.Fprintf(out, "collectives: %s; every result checked\n", what)
	fmt.Fprintf(out, "%-15s %12s %12s %12s %12s\n", "collective", "bytes", "time", "alg GB/s", "bus GB/s")
	for _, b := range res {
		fmt.Fprintf(out, "%-15s %12d %12s %12.2f %12.2f\n", b.Op, b.Bytes, time.Duration(b.Seconds*1e9).Round(time.Microsecond), b.AlgGBps, b.BusGBps)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
