// Package formats holds what every ctrkit dataset format shares: the Schema of
// a CTR dataset, the Batch the trainer uploads, the reader grammar, reader
// Options, typed errors with location, file lists (SPEC §1) and slot offsets
// (SPEC §3.3).
//
// # Batch layout
//
// A Batch holds up to Cap samples in the layout the trainer uploads, all
// sample-major:
//
//	Labels  float32 [N × LabelDim]
//	Dense   float32 [N × DenseDim]
//	Offsets int32   [N × S + 1]      row r = sample·S + slot
//	Keys    uint32 or int64 [Offsets[N·S]]
//
// The keys of slot s of sample i are Keys[Offsets[i·S+s] : Offsets[i·S+s+1]]
// (CSR). Exactly one of Keys32 (KeyU32) or Keys64 (KeyI64) is used, chosen by
// the schema's key type. The buffers come from an Allocator, so a trainer can
// hand pinned host memory that uploads without a staging copy.
//
// # Reader grammar
//
// Every format's reader implements Reader: Read(b) fills b with the next
// samples and returns how many; io.EOF is returned only at a clean end of
// data, with n == 0; a file that ends inside a record is an
// io.ErrUnexpectedEOF wrapped in an *Error naming path, byte offset and
// record. The first error is sticky: every later Read returns it. A Reader is
// not safe for concurrent use; its internal workers are stopped by Close.
//
// # Dependencies
//
// formats is the data model; the helpers it is built on live below it:
//
//	cmd/ctrkit, trainer, dataset, datagen, validate, inspect, keysets
//	  → formats/{norm,raw,parquet,criteo} → formats → internal/{hostmem,atomicfile}
//	formats/raw → asyncio → internal/hostmem
//	formats/raw → internal/ordered
//
// Aligned, huge-page-backed memory and the memory budget are
// internal/hostmem; outputs written under temporary names and committed as
// a unit are internal/atomicfile. A package that needs only those imports
// them, not formats.
package formats
