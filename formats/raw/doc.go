// Package raw reads and writes HugeCTR's Raw dataset format (SPEC §3): no
// header, fixed-size samples stored back to back, every value little-endian.
// The number of samples is the file size divided by the sample size; a size
// that is not a multiple is an ErrSize error.
//
// # One-hot layout (HugeCTR Raw, RawAsync one-hot)
//
//	+----------------------+----------------------+------------------------+
//	| label[label_dim]     | dense[dense_dim]     | key[slot_num]          |
//	| int32 or float32     | int32 or float32     | uint32, one per slot   |
//	+----------------------+----------------------+------------------------+
//	  4·label_dim bytes      4·dense_dim bytes      4·slot_num bytes
//
// Criteo (1 label, 13 dense, 26 slots): 40 columns × 4 = 160 bytes. Keys are
// always 4 bytes on disk, whatever the schema's key type. HugeCTR reads them
// as int32 and casts; ctrkit reads them as uint32 and widens, so with the i64
// key type a stored 0xFFFFFFFF is key 4294967295, never -1 (no sign
// extension). Every slot of a one-hot schema holds exactly one key (Hotness 1,
// or Hotness 0 with MaxNNZ ≤ 1).
//
// # Multi-hot layout (HugeCTR v25 RawAsync, multi_hot_reader=True)
//
//	+----------------------+----------------------+------------------------------------+
//	| label[label_dim]     | dense[dense_dim]     | keys[Σ_s hotness_s]                |
//	| Schema.LabelType     | Schema.DenseType     | key type: 4 (i32) or 8 (i64) bytes |
//	+----------------------+----------------------+------------------------------------+
//	                                                slot 0's hotness_0 keys first,
//	                                                then slot 1's, …
//
// Hotness is fixed per slot by the schema (Slot.Hotness > 0); there are no
// nnz fields. HugeCTR v25 always writes int32 labels in this layout; ctrkit
// takes the label type from Schema.LabelType so both flavours are readable.
// MLPerf DLRM-DCNv2 (1 int32 label, 13 float32 dense, 26 slots of hotness
// [3 2 1 2 6 1 1 1 1 7 3 8 1 6 9 5 1 1 1 12 100 27 10 3 1 1], 214 i32 keys):
// (1 + 13 + 214) × 4 = 912 bytes.
//
// # Values
//
// A float32 label or dense value is read bit for bit (NaN included). An int32
// label x reads as float32(x). An int32 dense value x, read as signed, reads
// as ln(x+1) through formats.DenseFromInt32 (the shared table), with negative
// x clamped to 0 first; the Decoder and the Reader count the clamped values
// (Clamped) so validate can report them.
//
// The Writer inverts the int32 dense transform as x = round(exp(v) − 1).
// That is exact for every 0 ≤ x ≤ 1049557 (just above 2^20), which is
// precisely the range where float32(ln(x+1)) is injective: 1049558 is the
// first x whose value equals that of x−1, so no encoding can tell them
// apart. A negative or NaN dense value is an ErrValue error; an int32 label
// must be an integer value that fits int32.
//
// # Slot offsets (SPEC §3.3)
//
// Raw files hold slot-local keys. With Options.SlotSizeArray the reader adds
// offset[s] = Σ_{j<s} size[j] to every key of slot s, and a key ≥ size[s] is
// an ErrKeyRange error whose Offset is the byte offset of the key in the file
// and whose Record is the sample's index in the file.
//
// # Decoding and I/O
//
// Decoding is separate from I/O: a Decoder turns a byte slice of whole
// samples into a formats.Batch without allocating, so the async O_DIRECT
// reader can reuse it on its own buffers. HugeCTR's aligned_type Auto (dense
// padded in memory to a multiple of 8 with zeros, 13 → 16) is a Decoder
// option (SetDenseStride, AlignedDenseDim) that changes the in-memory dense
// stride only, the file layout being unchanged; the readers enable it with
// Options.AlignDense and AsyncOptions.Async.AlignedType, and their Schema
// then reports the padded DenseDim.
//
// The Reader reads batches of whole samples with pread (io.ReaderAt). With
// one worker it decodes straight into the caller's batch; with more, workers
// decode whole batches into a ring of Workers+2 batches and Read hands them
// out strictly in order (see Reader). Both readers' rings are one decode
// pipe (pipe.go) over internal/ordered.Ring, the primitive asyncio's
// completion table uses too. A Reader or Writer is not safe for concurrent
// use.
//
// The AsyncReader is HugeCTR's RawAsync reader: the asyncio engine reads
// each batch as one byte range (O_DIRECT, rounded out to the alignment, the
// partial head and tail trimmed, many requests in flight) and the same
// Decoder decodes it, so it returns exactly the Reader's batches in the
// Reader's order (shuffle included). Its Next lends a decoded ring batch
// instead of copying it into the caller's.
package raw
