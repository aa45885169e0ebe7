// Package norm reads and writes HugeCTR's Norm dataset format (SPEC §1–2):
// a 64-byte header followed by variable-size samples, optionally framed with
// a per-record checksum.
//
// # Header
//
// Every value is little-endian. The header is HugeCTR's DataSetHeader:
//
//	 0       8                 16          24          32         40              64
//	+-------+-----------------+-----------+-----------+----------+---------------+
//	| error | number_of_      | label_dim | dense_dim | slot_num | reserved ×3   |
//	| check | records         |           |           |          | (written 0)   |
//	+-------+-----------------+-----------+-----------+----------+---------------+
//	 int64   int64             int64       int64       int64      int64 ×3
//
// error_check is 0 (CheckNone) or 1 (CheckSum). slot_num counts the slots of
// all sparse inputs together.
//
// # Sample payload
//
//	+----------------------+----------------------+--------------------------------+
//	| label[label_dim]     | dense[dense_dim]     | slot 0 | slot 1 | … | slot S−1 |
//	| float32 ×label_dim   | float32 ×dense_dim   |                                |
//	+----------------------+----------------------+--------------------------------+
//
//	slot s:  +-----------+---------------------------+
//	         | nnz int32 | key[nnz] uint32 or int64  |
//	         +-----------+---------------------------+
//
// nnz may be 0. The key width is not stored in the file: it is the schema's
// KeyType (i32 = uint32, i64 = int64); Detect finds it for an unknown file.
// Payload bytes = 4·(label_dim + dense_dim) + Σ_s (4 + key size·nnz_s): 264 B
// for a Criteo i32 sample (1 label, 13 dense, 26 one-hot slots), 368 B with
// i64 keys.
//
// # Checksum framing
//
// With error_check = 1 every record, the header included, is framed:
//
//	+--------------+-------------------+---------+
//	| length int32 | payload[length]   | check   |
//	+--------------+-------------------+---------+
//	                                     uint8 = Σ payload bytes mod 256
//
// Every payload byte counts, nnz fields included. So a checksum file starts
//
//	40 00 00 00 | 64 header bytes | check byte | first sample at byte 69 …
//
// and a framed Criteo i32 sample is 4 + 264 + 1 = 269 bytes. With
// error_check = 0 records are bare payloads and the first sample is at
// byte 64.
//
// # Frozen constants
//
// HeaderSize (64), FrameOverhead (5: the int32 length and the check byte),
// FramedHeaderSize (69), the field order above, the check byte definition and
// the little-endian byte order are fixed by HugeCTR and never change.
//
// # Checks
//
// The header's label_dim, dense_dim and slot_num must each equal the
// schema's (ErrHeader naming the field), error_check must equal the
// configured CheckMode, and number_of_records samples of the smallest
// possible size must fit in the file — all checked when the reader opens,
// before anything is allocated. While reading: a framed length that
// disagrees with the payload is ErrSize; a bad check byte is ErrChecksum
// (or, with SkipCorrupt, the sample is skipped and counted as HugeCTR
// does); nnz < 0 or above the slot's MaxNNZ is ErrNNZ; with a slot size array
// a key ≥ its slot size is ErrKeyRange, other keys get the slot offset
// added (SPEC §3.3; formats.Options.Validate ensures the sums fit the key
// type); a file shorter than its header promises is io.ErrUnexpectedEOF and
// bytes after the last record are ErrSize. Every error is a *formats.Error
// with the path, the byte offset of the record (of the field, for ErrNNZ and
// ErrKeyRange) and the record's index in its file.
//
// # Batches, order and parallelism
//
// Batches span files. In epoch mode the last batch may be short and is
// followed by io.EOF; in repeat mode the file list cycles forever. The order
// is the file list order, then the sample order; with Shuffle the files of
// epoch e are visited in the permutation drawn by rand.Shuffle from
// rand.NewPCG(Seed, e), so the same seed gives the same order. Samples are
// never reordered inside a file.
//
// The Reader streams each file through a bounded buffer (Options.BufferSize,
// by default 4 MiB or 1 MiB per worker, growing only for a record larger
// than itself, never beyond the file), refilled by up to Workers concurrent
// preads of at least 1 MiB each (one thread copies only 2–3 GB/s out of the
// page cache, less than the decoders take). With
// Workers > 1, Read first scans the run of whole records in the buffer,
// noting every 32nd record's byte offset and the samples and keys before it
// (cheap: one length per framed record, the nnz fields of an unframed one),
// then decodes contiguous parts of the run on up to Workers goroutines (an
// errgroup), each writing a disjoint range of the caller's batch, while one
// more goroutine reads the next part of the file into a second buffer. The
// batch and any error (the first in file order) are therefore identical for
// every Workers value. All goroutines are joined before Read returns; none
// outlives a call, so Close has only the file to close.
//
// # Concurrency
//
// A Reader or Writer is not safe for concurrent use. A Decoder holds no
// mutable state and may be shared by goroutines decoding into different
// batches (or disjoint parts of one).
package norm
