// Package input is the trainer's input pipeline: from a formats.Reader
// (opened through dataset) to a network's input tensors on a
// tensor.Backend. A Feeder owns the inputs; a Prefetcher reads batches
// ahead of the training or evaluation loop and, on a backend that stages
// uploads (tensor.Stager, the GPU), also uploads them; an EvalCache keeps
// evaluation batches on the backend (HugeCTR's cache_eval_data). The
// dependency direction is model → input → dataset, formats.
//
// A prefetch goroutine reads batches ahead of
// the training loop; on a backend that stages uploads (tensor.Stager, the
// GPU) it also uploads them:
//
//	reader ──Next (lent) or Read──▶ batch (pinned) ──Stage──▶ staging slot (device)
//	                                                              │ Commit (compute stream):
//	training loop ◀── slot, key counts ──  labels, dense copied; SplitInputs from the staged keys
//
// The batch is the reader's own when it lends (Parquet, RawAsync: decoded
// into pinned memory from the model's allocator) or the prefetcher's
// pinned batch that Read fills (Norm, Raw): file → pinned batch → device,
// no other host copy. Keys are staged as decoded (32- or 64-bit, one CSR
// over every slot, slot-local); the device widens them, adds the slot
// offsets and splits them by input. The copy runs on the staging stream
// while the previous step computes; the training goroutine never waits for
// the host. Short batches stage the same way (Commit zeroes the padding).
//
// On the CPU the prefetcher only reads ahead: batches alternate between two
// buffers and the loop loads them synchronously.
//
// One Prefetcher serves a run. StartPasses runs pass after pass without
// a pause: it opens the second pass's reader with the first (so both
// readers' rings of pinned batches are made before the first step), and
// each later pass's reader a few batches before the pass ahead of it ends,
// from the buffers the Feeder's Recycler got back from the reader two
// passes before. Start/Stop serve one reader at a time; the staging slots
// and pinned batches are kept across them.
package input
