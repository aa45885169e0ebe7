// Package asyncio reads byte ranges of a file with O_DIRECT, many requests
// in flight, into aligned buffers, and hands them back in order. It is the
// I/O engine of ctrkit's RawAsync reader (HugeCTR's AsyncReader) and knows
// nothing about samples.
//
// # What one range becomes
//
// A range [Off, Off+Len) is rounded out to the alignment A =
// max(IOAlignment, the device's logical block size), read into an A-aligned
// buffer in blocks of IOBlockSize bytes, and returned as a Buffer whose Data
// is the requested bytes with the partial head and tail trimmed:
//
//	file   ... | A | A | A | A | A | ...
//	             ^ Off&^(A-1)        ^ roundup(Off+Len, A) (or EOF)
//	buffer     [ head |      Data       | tail ]
//	                   ^ Off            ^ Off+Len
//
// # Concurrency
//
// A dispatcher goroutine takes ranges from the caller's Source in order and
// numbers them 0, 1, …; one feeder cuts them, in that order, into blocks of
// IOBlockSize bytes on a queue that all NumThreads I/O threads share, each
// keeping IODepth block requests in flight — NumThreads × IODepth in all,
// the shape of fio's numjobs=NumThreads, iodepth=IODepth. Since the queue
// is in stream order, the requests in flight are always the oldest blocks
// not yet read: the range the consumer waits for next gets the whole
// device. (HugeCTR gives range seq to thread seq mod NumThreads, each
// thread reading its own ranges; then the NumThreads ranges in flight
// finish at about the same time and the first batch of a pass waits for
// the reads of NumThreads batches.) Two engines issue the requests
// (Params.Engine): io_uring, one ring and one goroutine per thread
// (IORING_OP_READ; the default for O_DIRECT files where the kernel allows
// io_uring), and pread, IODepth goroutines per thread each blocking in
// pread (the default otherwise, and for files without a descriptor such as
// MemFile).
// NumThreads × NumBatchesPerThread buffers exist, which bounds the ranges
// read ahead; Close hands those not lent to a caller to a pool that the
// next Reader of the same buffer size takes them from (a training run's
// next pass over the file), so they are allocated and faulted in once. The goroutine that reads a range's last block publishes the
// buffer in a completion table indexed by that number, an ordered.Ring (no
// allocation, no channel per range). Consumers fetch buffers by number: Get(seq) may be called by many
// goroutines at once, each waiting only for its own range, so completed
// ranges can be decoded in parallel while later ones are still being read;
// Next is Get(0), Get(1), … for a single consumer. Release gives a buffer
// back for reuse from any goroutine. Close stops every goroutine, wakes the
// callers waiting in Get, and waits for them; no goroutine outlives it.
//
// # Errors
//
// A pread error (EIO, …) or a file that ends before a range does is
// returned by Next as an *Error (errors.As) naming the operation, the path,
// the byte offset where the request failed and the bytes it still wanted,
// and unwrapping to the cause; the error is sticky. A short read
// that returns some bytes is legal (signals, network file systems) and the
// rest is read again; a read that returns no byte before the range's end is
// an io.ErrUnexpectedEOF.
//
// # Files
//
// The File seam (OpenFile, or any File, such as a fault-injecting one in
// tests) lets tests inject short reads and I/O errors. OpenFile uses
// O_DIRECT where the file system allows it and falls back to buffered reads
// with a Notice where it refuses (tmpfs, some overlay file systems).
//
// # Dependencies
//
// asyncio imports internal/hostmem (aligned buffers) and internal/ordered
// (the completion table), nothing of the data model: formats/raw's
// AsyncReader imports it.
package asyncio
