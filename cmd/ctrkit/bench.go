package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/bench"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/internal/progress"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "bench",
		Usage: "measure throughput: can this storage and format feed the GPU?",
		Subcommands: []*cli.Command{{
			Name:      "read",
			Usage:     "read a dataset at full speed and report samples/s, GB/s, batch latency and CPU use",
			ArgsUsage: "PATH",
			Description: `Reads PATH (any format) with the sync reader or, for Raw files, HugeCTR's RawAsync
reader (O_DIRECT, io_depth requests in flight per thread), for --epochs passes or
--duration, decoding every batch as training would. Says whether the page cache
served the data; --drop-cache evicts the files first.

Examples:
   ctrkit bench read data/file_list.txt --epochs 3
   ctrkit bench read train.bin --reader async --num-threads 16 --io-depth 4 --io-block-size 1048576 --json
   ctrkit bench read train.bin --reader async --io-only --drop-cache       # raw I/O only, like fio`,
			Flags: append(append(schemaFlags(true),
				vflag("reader", withValue("sync")),
				vflag("num-workers"),
				&cli.IntFlag{Name: "batchsize", Value: 65536, Usage: "samples per batch"},
				&cli.DurationFlag{Name: "duration", Usage: "read for this long (repeat mode) instead of --epochs"},
				&cli.IntFlag{Name: "epochs", Value: 1, Usage: "passes over the data"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of text"},
				&cli.BoolFlag{Name: "drop-cache", Usage: "evict the files from the page cache first (posix_fadvise)"},
				&cli.BoolFlag{Name: "io-only", Usage: "async: read the bytes without decoding (compare with fio)"},
				&cli.BoolFlag{Name: "shuffle", Usage: "shuffle the batch order (seeded by --seed)"},
				&cli.Uint64Flag{Name: "seed", Usage: "shuffle seed"},
				&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the run to `FILE` (go tool pprof)"},
			), asyncFlags()...),
			Action: func(c *cli.Context) error { return runBenchRead(c, c.App.Writer) },
		}},
	})
}

// benchReport is `bench read --json`'s object.
type benchReport struct {
	Path   string `json:"path"`
	Format string `json:"format"`
	Reader string `json:"reader"`
	Engine string `json:"engine,omitempty"`
	bench.ReadResult
	BatchSize       int     `json:"batch_size"`
	Workers         int     `json:"workers"`
	CachedBefore    float64 `json:"page_cache_fraction_before"`
	DirectIO        bool    `json:"direct_io"`
	Notice          string  `json:"notice,omitempty"`
	GBPerSecond     float64 `json:"gb_per_second"`
	DecodedBytesSec float64 `json:"decoded_bytes_per_second"`
}

func runBenchRead(c *cli.Context, w io.Writer) error {
	d, err := resolveArg(c, "PATH")
	if err != nil {
		return err
	}
	stop, err := startCPUProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stop()
	defer setBenchGC(os.Getenv)()
	rep := benchReport{Path: d.Path, Format: d.Format.String(), Reader: c.String("reader"), BatchSize: c.Int("batchsize"), Workers: c.Int("num-workers")}
	// Several epochs are read through one reader in repeat mode, as a
	// training run does, so that opening (and allocating buffers) once per
	// epoch is not what is measured.
	steady := c.Duration("duration") == 0 && c.Int("epochs") > 1 && d.Samples > 0
	fo := formats.Options{BatchSize: rep.BatchSize, Workers: rep.Workers, Repeat: c.Duration("duration") > 0 || steady,
		Shuffle: c.Bool("shuffle"), Seed: c.Uint64("seed")}
	fo = fo.WithDefaults()
	rep.Workers = fo.Workers
	if c.Bool("drop-cache") {
		if err := bench.DropCache(d.Files); err != nil {
			return fmt.Errorf("--drop-cache: %w", err)
		}
	}
	rep.CachedBefore = bench.CachedFraction(d.Files)
	ro := bench.ReadOptions{Epochs: c.Int("epochs"), Duration: c.Duration("duration"), BatchSize: rep.BatchSize}
	if steady {
		ro.MaxSamples, ro.EpochSamples = int64(c.Int("epochs"))*d.Samples, d.Samples
	}
	var bar *progress.Bar
	if !c.Bool("json") {
		total := int64(-1)
		if ro.Duration == 0 && d.Samples > 0 {
			total = d.Samples * int64(ro.Epochs)
		}
		bar = progress.New(c.App.ErrWriter, total, "reading", "samples")
		ro.Progress = func(n int) { bar.Add(int64(n)) }
	}
	var open bench.Opener
	switch rep.Reader {
	case "sync":
		if err := refuseAsyncFlags(c, "io-only"); err != nil {
			return err
		}
		open = func() (formats.Reader, error) {
			r, err := d.Open(fo)
			if err != nil {
				return nil, err
			}
			return withContext(c.Context, r), nil
		}
	case "async":
		if d.Format != dataset.Raw {
			return &exitError{2, fmt.Errorf("--reader async reads Raw files; %s is %s", d.Path, d.Format)}
		}
		ao, err := asyncOptions(c, d, fo)
		if err != nil {
			return &exitError{2, err}
		}
		if c.Bool("io-only") {
			return benchIOOnly(c, w, d, ao, ro, &rep, bar)
		}
		open = func() (formats.Reader, error) {
			r, err := raw.OpenAsync(d.Files[0], &d.Schema, ao)
			if err != nil {
				return nil, err
			}
			rep.Engine, rep.Notice = r.Engine(), r.Notice()
			rep.DirectIO = r.Notice() == "" && !ao.Async.Buffered
			return withContext(c.Context, r), nil
		}
	default:
		return &exitError{2, fmt.Errorf("--reader: want sync or async, not %q", rep.Reader)}
	}
	res, err := bench.Read(open, d.BytesPerSample(), ro)
	bar.Finish()
	if c.Context.Err() != nil {
		return interrupted("")
	}
	if err != nil {
		return err
	}
	rep.ReadResult = res
	if (ro.Duration > 0 || steady) && d.Samples > 0 {
		rep.Epochs = float64(res.Samples) / float64(d.Samples)
	}
	return printBench(c, w, d, &rep)
}

func asyncOptions(c *cli.Context, d *dataset.Dataset, fo formats.Options) (raw.AsyncOptions, error) {
	p, err := asyncParams(c)
	if err != nil {
		return raw.AsyncOptions{}, err
	}
	p.Shuffle = c.Bool("shuffle")
	var kc raw.KeyCheck
	if d.Spec.Offsets {
		fo.SlotSizeArray = d.Spec.SlotSizeArray
	} else {
		// The same key checks as the sync reader's (dataset.Open).
		kc = raw.KeyCheck{Sizes: d.Spec.SlotSizeArray, Global: d.Spec.Keys == dataset.KeysGlobal}
	}
	return raw.AsyncOptions{Options: fo, Layout: d.Spec.RawLayout, KeyCheck: kc, Async: p}, nil
}

// benchIOOnly reads the Raw file's batches with the async engine and no
// decoding: the figure to hold against fio.
func benchIOOnly(c *cli.Context, w io.Writer, d *dataset.Dataset, ao raw.AsyncOptions, ro bench.ReadOptions, rep *benchReport, bar *progress.Bar) error {
	ssize := int64(d.BytesPerSample())
	blen := int64(ao.BatchSize) * ssize
	size := d.Bytes
	start, cpu0 := time.Now(), bench.CPUTime()
	deadline := time.Time{}
	if ro.Duration > 0 {
		deadline = start.Add(ro.Duration)
	}
	var total int64
	epochs := 0
	for e := 0; ro.Duration > 0 || e < max(ro.Epochs, 1); e++ {
		f, notice, err := asyncio.OpenFile(d.Files[0], !ao.Async.Buffered)
		if err != nil {
			return err
		}
		rep.Notice, rep.DirectIO = notice, f.Direct()
		off := int64(0)
		src := func() (asyncio.Range, bool) {
			if off >= size || (!deadline.IsZero() && time.Now().After(deadline)) {
				return asyncio.Range{}, false
			}
			r := asyncio.Range{Off: off, Len: min(blen, size-off)}
			off += r.Len
			return r, true
		}
		r, err := asyncio.NewReader(f, src, blen, ao.Async)
		if err != nil {
			f.Close()
			return err
		}
		rep.Engine = r.Engine()
		for {
			if err := c.Context.Err(); err != nil {
				r.Close()
				return interrupted("")
			}
			buf, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return err
			}
			total += int64(len(buf.Data))
			rep.Batches++
			r.Release(buf)
			bar.Add(int64(len(buf.Data)) / ssize)
		}
		r.Close()
		epochs = e + 1
		if !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
	}
	bar.Finish()
	secs := time.Since(start).Seconds()
	rep.Epochs = float64(epochs)
	rep.Seconds = secs
	rep.CPUPercent = 100 * (bench.CPUTime() - cpu0).Seconds() / secs
	rep.FileBytes = total
	rep.Samples = total / ssize
	rep.SamplesPerSecond = float64(rep.Samples) / secs
	rep.FileBytesPerSecond = float64(total) / secs
	rep.Reader = "async-io-only"
	return printBench(c, w, d, rep)
}

func printBench(c *cli.Context, w io.Writer, d *dataset.Dataset, rep *benchReport) error {
	rep.GBPerSecond = rep.FileBytesPerSecond / 1e9
	s := &d.Schema
	decoded := 4*(s.LabelDim+s.DenseDim) + s.KeyType.Size()*max(s.MaxKeysPerSample(), len(s.Slots))
	rep.DecodedBytesSec = rep.SamplesPerSecond * float64(decoded)
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		return enc.Encode(rep)
	}
	fmt.Fprintf(w, "%s (%s, %s reader", d.Path, d.Format, rep.Reader)
	if rep.Engine != "" {
		fmt.Fprintf(w, ", %s engine, direct I/O %v", rep.Engine, rep.DirectIO)
	}
	fmt.Fprintf(w, ", batch %d, %d workers)\n", rep.BatchSize, rep.Workers)
	fmt.Fprintf(w, "  %d samples in %d batches, %.2f epochs, %.2f s\n", rep.Samples, rep.Batches, rep.Epochs, rep.Seconds)
	fmt.Fprintf(w, "  %.0f samples/s   %.3f GB/s of file bytes\n", rep.SamplesPerSecond, rep.GBPerSecond)
	if rep.BestEpochSamplesPerSecond > 0 {
		fmt.Fprintf(w, "  best epoch after the first: %.0f samples/s\n", rep.BestEpochSamplesPerSecond)
	}
	if rep.BatchP50Millis > 0 {
		fmt.Fprintf(w, "  batch latency p50 %.2f ms, p99 %.2f ms\n", rep.BatchP50Millis, rep.BatchP99Millis)
	}
	fmt.Fprintf(w, "  CPU %.0f%% (100%% = one core busy)\n", rep.CPUPercent)
	switch {
	case rep.Notice != "":
		fmt.Fprintf(w, "  note: %s\n", rep.Notice)
	case rep.DirectIO:
		fmt.Fprintf(w, "  note: O_DIRECT reads bypass the page cache: this is the storage's speed\n")
	case rep.CachedBefore >= 0.9:
		fmt.Fprintf(w, "  note: %.0f%% of the data was in the page cache before the run: this measures memory and decoding, not the disk (use --drop-cache)\n", 100*rep.CachedBefore)
	case rep.CachedBefore >= 0:
		fmt.Fprintf(w, "  note: %.0f%% of the data was in the page cache before the run\n", 100*rep.CachedBefore)
	}
	return nil
}
