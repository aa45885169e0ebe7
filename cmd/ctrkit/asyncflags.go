package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/asyncio"
)

// asyncFlags are the RawAsync engine's settings (HugeCTR's AsyncParam but
// shuffle, which each command words for itself), the same for every
// command that reads with --reader async: bench read and bench train.
func asyncFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "num-threads", Usage: "async: I/O threads (default GOMAXPROCS)"},
		&cli.IntFlag{Name: "num-batches-per-thread", Value: 4, Usage: "async: batches buffered per thread"},
		&cli.IntFlag{Name: "io-block-size", Value: 512 << 10, Usage: "async: bytes per read request"},
		&cli.IntFlag{Name: "io-depth", Value: 4, Usage: "async: requests in flight per thread"},
		&cli.IntFlag{Name: "io-alignment", Value: 512, Usage: "async: alignment of offsets and buffers (raised to the device's block size)"},
		&cli.StringFlag{Name: "aligned-type", Value: "none", Usage: "async: none | auto (pad dense to a multiple of 8 in memory)"},
		&cli.BoolFlag{Name: "buffered", Usage: "async: read through the page cache instead of O_DIRECT"},
		&cli.StringFlag{Name: "io-engine", Usage: "async: io_uring | pread (default: io_uring for O_DIRECT when the kernel has it)"},
	}
}

// asyncParams reads asyncFlags (Shuffle left false).
func asyncParams(c *cli.Context) (asyncio.Params, error) {
	at, err := asyncio.ParseAlignedType(c.String("aligned-type"))
	if err != nil {
		return asyncio.Params{}, fmt.Errorf("--aligned-type: %w", err)
	}
	return asyncio.Params{
		NumThreads: c.Int("num-threads"), NumBatchesPerThread: c.Int("num-batches-per-thread"),
		IOBlockSize: c.Int("io-block-size"), IODepth: c.Int("io-depth"), IOAlignment: c.Int("io-alignment"),
		AlignedType: at, Buffered: c.Bool("buffered"), Engine: c.String("io-engine"),
	}, nil
}

// refuseAsyncFlags is the usage error for an async setting given with the
// sync reader (extra: more flags of the command that need --reader async).
func refuseAsyncFlags(c *cli.Context, extra ...string) error {
	for _, f := range asyncFlags() {
		extra = append(extra, f.Names()[0])
	}
	for _, name := range extra {
		if c.IsSet(name) {
			return &exitError{2, fmt.Errorf("--%s is a setting of the async reader: give --reader async too", name)}
		}
	}
	return nil
}
