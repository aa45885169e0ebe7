// Package criteo reads Criteo click-log text — the raw tab-separated logs of
// the Criteo Display Advertising Challenge and 1TB datasets, and
// comma-separated files with a header row — as formats.Batches, so they can
// be converted to Norm, Raw or Parquet.
//
// # Text layout
//
// One line is one sample; lines end in '\n' (a '\r' before it is ignored):
//
//	label SEP I1 SEP … SEP I13 SEP C1 SEP … SEP C26 '\n'      SEP = '\t' (TSV) or ',' (CSV)
//
//	label   a number: 0 or 1 (also "0.0", "1.0"); stored as float32
//	I1..    integers, possibly rendered as floats ("260.0") or negative;
//	        empty = missing
//	C1..    categorical values, 8 hex digits in Criteo's logs; empty = missing
//
// The column counts are Layout.NumDense and Layout.NumCat (default 13 and
// 26), so other Criteo-like files read too. Fields are not quoted; a '"' is
// an ordinary byte. When the first field of a file's first line is not a
// number, that line is a header: it must have the same number of columns,
// named label, I1.., C1.. (ASCII case ignored; Layout.AnyHeader accepts any
// names). With Format Auto each file's dialect is detected from its first
// line (a tab: TSV, else a comma: CSV). A UTF-8 byte-order mark at the
// start of a file is skipped. A line is at most one chunk: 1 MiB for the Reader,
// less for BuildVocab under small budgets (about 10 KiB at MinMemoryBudget);
// a longer line is an ErrSchema error. An empty line is a malformed line.
//
// # Values
//
// A label is parsed as a float64 and must be finite. An integer column x
// becomes formats.DenseFromInt32(x) = ln(max(x,0)+1) (SPEC §3.1), so a
// missing value (x = 0) and a negative one both give 0. A float rendering
// must be integral ("260.0", "2.6e2"); "2.5", "abc", "inf" are errors. A
// value outside the int32 range is clamped to it and counted
// (Stats.Clamped).
//
// A categorical field has a 64-bit value (CatValue): Missing for an empty
// field, the number itself for exactly 8 hex digits (< 2^32), else the FNV-1a
// 64 hash of its bytes with bit 63 set. Values become slot-local keys in one
// of two ways:
//
//   - Hashing (Options.Buckets, one entry ≥ 2 per slot): key = Hash(v,
//     Buckets[s]) = 0 for Missing, else 1 + SplitMix64(v) mod (Buckets[s]−1).
//     Buckets[s] is the slot's size.
//   - Vocabulary (Options.Vocab, from BuildVocab over the same or other
//     files): key 0 (IDMissing) for Missing, 1 (IDRare) for values seen
//     fewer than MinCount times (default 6, HugeCTR's preprocessing
//     threshold) or never seen, and 2, 3, … for the frequent values of the
//     slot in ascending value order — deterministic whatever the budget or
//     worker count. Vocab.SlotSizes() is 2 + the slot's frequent values.
//
// The batch schema is label_dim 1, dense_dim NumDense and NumCat one-hot
// slots C1.. (Hotness 1, MaxNNZ 1) whose Size is the bucket count or the
// vocabulary size, with the key type Options.KeyType. The bucket counts are
// not slot offsets: the keys stay slot-local unless
// formats.Options.SlotSizeArray is also given (typically the same sizes), which adds
// offset[s] = Σ_{j<s} SlotSizeArray[j] as every ctrkit reader does (SPEC §3.3).
// WriteSlotSizeJSON records the sizes used beside a converted output.
//
// # Errors
//
// A malformed line (wrong field count: formats.ErrSchema; bad label or
// dense number: formats.ErrValue) is an *formats.Error with Format
// "criteo", the file's Path, Offset = byte offset of the line's start and
// Record = 0-based index of the data line in its file (the header is not
// counted); the message names the column and quotes the field. With
// Layout.SkipBad such lines are skipped and counted (Stats.Skipped). Read
// returns the samples before the bad line first; the error is then sticky.
//
// # Pipeline
//
// Open starts one producer goroutine that reads the files in order with
// large sequential reads and cuts them into chunks of whole lines (1 MiB),
// numbered in order; Workers goroutines parse and map chunks concurrently;
// Read takes chunks strictly in cut order, waiting for each to be parsed,
// and copies their samples into the caller's batch. A fixed set of
// 2·Workers+2 chunks circulates (producer → workers → Read → producer), so
// memory is bounded and files of any size stream; the batches are the same
// for any worker count. Batches span chunks and files; in epoch mode the last
// may be short. Close cancels and waits for every goroutine. A Reader is not
// safe for concurrent use; a Vocab is.
//
// # Vocabulary building
//
// BuildVocab runs the same pipeline without mapping and counts (slot, value)
// pairs (Missing is not counted) in one open-addressing hash table of 16-byte
// entries (value, slot, saturating count). The table grows by doubling up to
// half the memory budget (the old and new arrays together); when it is full
// it is sorted by (slot, value) and spilled to a file in TempDir as a run of
// 16-byte records, and emptied. At the end the runs are merged k-way (in
// rounds when their read buffers would not fit in half the budget), counts of
// equal pairs summed, and the values with count ≥ MinCount collected. The
// parse buffers take at most a quarter of the budget (worst case, chunk size
// scaled down to fit). The budget covers the counting; the resulting Vocab
// itself holds 14–20 bytes per frequent value (sorted values and a hash
// index). VocabStats.PeakBytes reports the
// peak of the accounted bytes.
//
// # Vocabulary file
//
// Save writes (atomically, little-endian):
//
//	+-----------+----------+----------+------------------+---------------------+--------+
//	| "CTRKVOC1"| S uint32 | minCount | count[S] uint64  | values uint64 × Σ   | crc32c |
//	| 8 bytes   |          | uint32   | frequent / slot  | slot 0 first, asc.  | uint32 |
//	+-----------+----------+----------+------------------+---------------------+--------+
//
// The CRC-32C (Castagnoli) covers every byte before it. LoadVocab checks the
// sizes against the file before allocating, the CRC, and the order.
package criteo
