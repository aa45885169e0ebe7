package asyncio

import (
	"fmt"
	"runtime"
)

// AlignedType is HugeCTR's Alignment_t: whether the dense part of a Raw
// sample is padded in memory to a multiple of 8 floats.
type AlignedType int

const (
	// AlignNone keeps the dense width as in the file.
	AlignNone AlignedType = iota
	// AlignAuto pads the in-memory dense width to a multiple of 8 with
	// zeros (13 → 16); the file is never padded.
	AlignAuto
)

// ParseAlignedType accepts "none" and "auto".
func ParseAlignedType(s string) (AlignedType, error) {
	switch s {
	case "none", "None", "":
		return AlignNone, nil
	case "auto", "Auto":
		return AlignAuto, nil
	}
	return 0, fmt.Errorf("unknown aligned type %q (want none or auto)", s)
}

func (a AlignedType) String() string {
	if a == AlignAuto {
		return "auto"
	}
	return "none"
}

// Params are HugeCTR's AsyncParam. The I/O engine uses NumThreads,
// NumBatchesPerThread, IOBlockSize, IODepth and IOAlignment; Shuffle and
// AlignedType are carried for the readers built on it.
type Params struct {
	// NumThreads is the number of I/O threads (default GOMAXPROCS).
	NumThreads int
	// NumBatchesPerThread × NumThreads is how many ranges (batches) the
	// reader buffers: read ahead, in flight or waiting to be taken
	// (default 4 per thread).
	NumBatchesPerThread int
	// IOBlockSize is the size of one read request in bytes (default
	// 512 KiB); it is rounded up to the alignment.
	IOBlockSize int
	// IODepth is the number of requests each thread keeps in flight
	// (default 4).
	IODepth int
	// IOAlignment is the minimum alignment of offsets, lengths and buffers
	// (default 512); the device's logical block size raises it.
	IOAlignment int
	// Shuffle asks the reader above for a seeded random batch order.
	Shuffle bool
	// AlignedType is the dense padding of the reader above.
	AlignedType AlignedType
	// Buffered disables O_DIRECT (reads go through the page cache).
	Buffered bool
	// Engine is the I/O engine: "io_uring" (one ring per thread, IODepth
	// reads in flight, Linux 5.6+), "pread" (IODepth goroutines per thread
	// blocking in pread), or "" for io_uring on O_DIRECT files when the
	// kernel allows it and pread otherwise.
	Engine string
}

// WithDefaults fills zero fields with their defaults.
func (p Params) WithDefaults() Params {
	if p.NumThreads <= 0 {
		p.NumThreads = runtime.GOMAXPROCS(0)
	}
	if p.NumBatchesPerThread <= 0 {
		p.NumBatchesPerThread = 4
	}
	if p.IOBlockSize <= 0 {
		p.IOBlockSize = 512 << 10
	}
	if p.IODepth <= 0 {
		p.IODepth = 4
	}
	if p.IOAlignment <= 0 {
		p.IOAlignment = 512
	}
	return p
}

// Validate reports parameters the engine cannot use.
func (p *Params) Validate() error {
	if p.IOAlignment&(p.IOAlignment-1) != 0 {
		return fmt.Errorf("io_alignment %d must be a power of two", p.IOAlignment)
	}
	if p.NumThreads > 1024 || p.IODepth > 1024 || p.NumBatchesPerThread > 1<<16 {
		return fmt.Errorf("num_threads %d, io_depth %d or num_batches_per_thread %d too large",
			p.NumThreads, p.IODepth, p.NumBatchesPerThread)
	}
	if p.Engine != "" && p.Engine != "io_uring" && p.Engine != "pread" {
		return fmt.Errorf("engine %q: want io_uring or pread", p.Engine)
	}
	if p.IOBlockSize > 1<<30 {
		return fmt.Errorf("io_block_size %d too large", p.IOBlockSize)
	}
	return nil
}
