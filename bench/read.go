package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ctrkit/ctrkit/formats"
)

// ReadOptions say how long to read.
type ReadOptions struct {
	// Epochs is the number of passes over the data (used when Duration is
	// 0; default 1). The opener is called once per epoch.
	Epochs int
	// Duration reads until this much time has passed; the opener should
	// then return a reader in repeat mode.
	Duration time.Duration
	// MaxSamples, when > 0, reads through one reader (which the opener
	// should open in repeat mode) until this many samples have been read:
	// the steady state of a training run, without re-opening (and
	// re-allocating the reader's buffers) every epoch.
	MaxSamples int64
	// EpochSamples, with MaxSamples, is the number of samples of one
	// epoch: the result then also gives the best epoch after the first
	// (the steady state, as a warm process sees it).
	EpochSamples int64
	// BatchSize is the capacity of the batch read into (default 65536).
	BatchSize int
	// Alloc supplies the batch buffers (nil: Go heap).
	Alloc formats.Allocator
	// Progress, when set, is called after every batch with its size.
	Progress func(samples int)
}

// ReadResult is what a read workload measured.
type ReadResult struct {
	Samples            int64   `json:"samples"`
	Batches            int64   `json:"batches"`
	Epochs             float64 `json:"epochs"`
	Seconds            float64 `json:"seconds"`
	SamplesPerSecond   float64 `json:"samples_per_second"`
	FileBytes          int64   `json:"file_bytes"`
	FileBytesPerSecond float64 `json:"file_bytes_per_second"`
	BatchP50Millis     float64 `json:"batch_latency_p50_ms"`
	BatchP99Millis     float64 `json:"batch_latency_p99_ms"`
	// CPUPercent is user+system CPU time over wall time, ×100 (200 = two
	// cores busy).
	CPUPercent float64 `json:"cpu_percent"`
	// BestEpochSamplesPerSecond is the fastest epoch after the first, at
	// batch granularity (ReadOptions.EpochSamples; 0 without it or with
	// fewer than two epochs).
	BestEpochSamplesPerSecond float64 `json:"best_epoch_samples_per_second,omitempty"`
}

// Opener opens a fresh reader (one per epoch).
type Opener func() (formats.Reader, error)

// Read runs the workload. bytesPerSample converts samples to file bytes
// (the dataset's size divided by its sample count).
func Read(open Opener, bytesPerSample float64, o ReadOptions) (ReadResult, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = 65536
	}
	if o.Epochs <= 0 {
		o.Epochs = 1
	}
	var res ReadResult
	lat := make([]time.Duration, 0, 1024)
	cpu0 := CPUTime()
	start := time.Now()
	var b *formats.Batch
	defer func() {
		if b != nil {
			b.Free()
		}
	}()
	deadline := time.Time{}
	if o.Duration > 0 {
		deadline = start.Add(o.Duration)
	}
	if o.MaxSamples > 0 {
		o.Epochs = 1
	}
	// Epoch boundaries of a steady run: samples and time at the last one.
	epoch, epochS, epochT := 0, int64(0), start
epochs:
	for e := 0; o.Duration > 0 || e < o.Epochs; e++ {
		r, err := open()
		if err != nil {
			return res, err
		}
		lender, _ := r.(formats.Lender) // what a trainer feeding pinned buffers uses
		if b == nil && lender == nil {  // a Lender's batches are its own
			if b, err = formats.NewBatch(r.Schema(), o.BatchSize, o.Alloc); err != nil {
				r.Close()
				return res, err
			}
		}
		for {
			t := time.Now()
			var n int
			if lender != nil {
				var lb *formats.Batch
				if lb, err = lender.Next(); lb != nil {
					n = lb.N
				}
			} else {
				n, err = r.Read(b)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Close()
				return res, err
			}
			lat = append(lat, time.Since(t))
			res.Samples += int64(n)
			res.Batches++
			if o.EpochSamples > 0 && o.MaxSamples > 0 && res.Samples >= int64(epoch+1)*o.EpochSamples {
				now := time.Now()
				if rate := float64(res.Samples-epochS) / now.Sub(epochT).Seconds(); epoch > 0 {
					res.BestEpochSamplesPerSecond = max(res.BestEpochSamplesPerSecond, rate)
				}
				epoch, epochS, epochT = epoch+1, res.Samples, now
			}
			if o.Progress != nil {
				o.Progress(n)
			}
			if (!deadline.IsZero() && time.Now().After(deadline)) || (o.MaxSamples > 0 && res.Samples >= o.MaxSamples) {
				r.Close()
				break epochs
			}
		}
		if err := r.Close(); err != nil {
			return res, err
		}
		res.Epochs = float64(e + 1)
		if !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		if res.Samples == 0 {
			return res, fmt.Errorf("the dataset holds no samples")
		}
	}
	wall := time.Since(start)
	res.Seconds = wall.Seconds()
	res.SamplesPerSecond = float64(res.Samples) / res.Seconds
	res.FileBytes = int64(float64(res.Samples) * bytesPerSample)
	res.FileBytesPerSecond = float64(res.FileBytes) / res.Seconds
	res.BatchP50Millis, res.BatchP99Millis = percentileMillis(lat, 0.50), percentileMillis(lat, 0.99)
	res.CPUPercent = 100 * (CPUTime() - cpu0).Seconds() / res.Seconds
	return res, nil
}

func percentileMillis(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return float64(s[i]) / 1e6
}
