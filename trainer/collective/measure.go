package collective

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Bandwidth is one measured collective at one size, as nccl-tests reports
// it: algorithm bandwidth = bytes / time; bus bandwidth scales it by the
// share of the data that crosses links (all-reduce 2(n−1)/n, all-gather,
// reduce-scatter and all-to-all (n−1)/n), comparable across rank counts.
type Bandwidth struct {
	Op       string  `json:"op"`
	Ranks    int     `json:"ranks"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"` // median time of one call, slowest rank
	AlgGBps  float64 `json:"alg_gb_per_s"`
	BusGBps  float64 `json:"bus_gb_per_s"`
	Checked  bool    `json:"checked"` // the result was verified
	Warmups  int     `json:"warmups"`
	Measured int     `json:"measured"`
}

// MeasureOps are the collectives Measure times.
var MeasureOps = []string{"all_reduce", "all_to_all", "all_gather", "reduce_scatter"}

// Measure times each of ops (MeasureOps names) at each size in bytes
// (float32 elements, rounded down to a multiple of 4·ranks) on comms, the
// ranks of this process, running each rank on its own goroutine. Every
// result is checked once against the expected values, so a broken
// transport fails the measurement instead of reporting a figure.
func Measure(comms []Comm, ops []string, sizes []int64, iters int) ([]Bandwidth, error) {
	if len(comms) == 0 {
		return nil, fmt.Errorf("collective: no ranks to measure")
	}
	if iters < 1 {
		iters = 1
	}
	world := comms[0].Size()
	var out []Bandwidth
	for _, o := range ops {
		for _, size := range sizes {
			n := int(size/4) / world * world
			if n < world {
				n = world
			}
			times := make([][]time.Duration, len(comms))
			errs := make([]error, len(comms))
			var wg sync.WaitGroup
			for i, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					times[i], errs[i] = measureRank(c, o, n, iters)
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return out, err
			}
			// The slowest rank's median call.
			var med time.Duration
			for _, t := range times {
				sort.Slice(t, func(a, b int) bool { return t[a] < t[b] })
				med = max(med, t[len(t)/2])
			}
			b := Bandwidth{Op: o, Ranks: world, Bytes: int64(n) * 4, Seconds: med.Seconds(), Checked: true, Warmups: 1, Measured: iters}
			if med > 0 {
				b.AlgGBps = float64(b.Bytes) / med.Seconds() / 1e9
			}
			f := float64(world-1) / float64(world)
			if o == "all_reduce" {
				f *= 2
			}
			b.BusGBps = b.AlgGBps * f
			out = append(out, b)
		}
	}
	return out, nil
}

// measureRank runs one rank: a checked warm-up call, then iters timed
// calls (each followed by a device sync, so the time is the transfer's).
func measureRank(c Comm, o string, n, iters int) ([]time.Duration, error) {
	be, w, r := c.Backend(), c.Size(), c.Rank()
	x := be.Alloc(tensor.Float32, n)
	y := be.Alloc(tensor.Float32, n)
	defer be.Free(x)
	defer be.Free(y)
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(r + 1)
	}
	counts := make([]int, w)
	for j := range counts {
		counts[j] = n / w
	}
	call := func() error {
		switch o {
		case "all_reduce":
			return c.AllReduce(x, Sum)
		case "all_to_all":
			return c.AllToAllV(y, counts, x, counts)
		case "all_gather":
			return c.AllGather(y, x.Prefix(n/w))
		case "reduce_scatter":
			return c.ReduceScatter(y.Prefix(n/w), x, Sum)
		}
		return fmt.Errorf("collective: unknown collective %q (want one of %v)", o, MeasureOps)
	}
	be.Upload(x, host)
	if err := call(); err != nil {
		return nil, err
	}
	got := make([]float32, n)
	src := y
	if o == "all_reduce" {
		src = x
	}
	if err := be.Download(got, src); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		var want float32
		switch o {
		case "all_reduce":
			want = float32(w * (w + 1) / 2)
		case "all_to_all", "all_gather":
			want = float32(i/(n/w) + 1)
		case "reduce_scatter":
			if i >= n/w {
				continue
			}
			want = float32(w * (w + 1) / 2)
		}
		if got[i] != want {
			return nil, fmt.Errorf("collective: %s on rank %d: element %d is %v, want %v", o, r, i, got[i], want)
		}
	}
	times := make([]time.Duration, iters)
	for k := range times {
		t0 := time.Now()
		if err := call(); err != nil {
			return nil, err
		}
		if err := be.Sync(); err != nil {
			return nil, err
		}
		times[k] = time.Since(t0)
	}
	return times, nil
}
