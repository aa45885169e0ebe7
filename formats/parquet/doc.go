// Package parquet reads and writes CTR datasets in the Parquet layout of
// NVTabular and HugeCTR (SPEC §4), on the low-level column API of
// github.com/apache/arrow-go/v18/parquet.
//
// # Dataset layout
//
// A dataset is a directory of Parquet files, a file list (SPEC §1) and a
// _metadata.json, all written side by side by DatasetWriter:
//
//	dataset/
//	├── _file_list.txt      2                      count, then one path per line,
//	│                       part_0.parquet         relative to the list's directory
//	│                       part_1.parquet
//	├── _metadata.json      (below)
//	├── part_0.parquet
//	└── part_1.parquet
//
// _metadata.json lives in the directory of the first data file of the list:
//
//	{"file_stats": [{"file_name": "part_0.parquet", "num_rows": 131072}, ...],
//	 "labels": [{"col_name": "label", "index": 0}],
//	 "conts":  [{"col_name": "I1", "index": 1}, ..., {"col_name": "I13", "index": 13}],
//	 "cats":   [{"col_name": "C1", "index": 14}, ..., {"col_name": "C26", "index": 39}]}
//
// A file is matched to its file_stats entry by base name (file_name may carry
// a directory, which is ignored); the footer's row count must equal num_rows
// (ErrMetadata). HugeCTR's own generator writes gen_<k>.parquet but lists it
// as <k>.parquet; when the base name has no entry, the name without its
// leading non-digits is tried.
//
// Footers are read lazily: the first file's when the reader opens (the
// schema comes from or is checked against it), every other one when the
// reader reaches its file, where a bad footer or a layout that differs is
// an error naming the file; a footer is dropped once its row groups are
// decoded, so memory does not grow with the length of the list. Before
// arrow-go parses a footer, its Thrift bytes are walked and every count
// checked against what the footer and the file can hold (footer.go).
//
// # Column selection
//
// Index is the 0-based position of a top-level field of the file schema; only
// the selected columns are read, and dropping an entry drops the column. Each
// group is sorted by index (as HugeCTR does), so labels, dense values and
// slots appear in the batch in file order. col_name must equal the file's
// name for that field (ErrSchema naming file, index and both names) — except
// that cudf's default name _col<index>, which HugeCTR's generator leaves on
// its columns, agrees with any col_name. An index past the last field is
// ErrSchema.
//
// Column kinds:
//
//	labels, conts  FLOAT, DOUBLE, INT32, INT64 (converted by value to
//	               float32), scalar, or a list of them of fixed width
//	cats           INT32 / INT64, signed or unsigned (Int logical type or
//	               UINT_* converted type), scalar (one key) or list (0..n
//	               keys), 2- or 3-level list encoding
//
// Optional columns are accepted; a null value, a null list or a null list
// element is ErrNull with the file, column and row. A key that does not fit
// the schema's key type (negative or above 2³²−1 for KeyU32, a uint64 above
// 2⁶³−1 for KeyI64) is ErrKeyRange. With Options.SlotSizeArray (SPEC §3.3) a
// key outside [0, size) is ErrKeyRange, otherwise the slot offset is added.
// A list row longer than its slot's MaxNNZ is ErrNNZ. A fixed-width list
// label/dense row of another width is ErrSchema. Error Record is the row
// within its file, Offset the file offset of the column chunk at fault (−1
// where no chunk is involved).
//
// # Schema
//
// OpenList and OpenFiles take the schema to decode into, or nil to derive it
// from the metadata and the first file: LabelDim (DenseDim) is the number of
// label (cont) columns, a fixed-width list column counting its width (taken
// from its first row); one slot per cat column, named by col_name, with
// MaxNNZ = Hotness = 1 for a scalar column and 0 (unbounded) for a list;
// KeyType from Options.KeyType. With a schema, the widths of list label/dense
// columns are what the dims leave after the scalar columns, shared equally.
//
// # Mapping to formats.Batch
//
// Row r of the dataset becomes sample r of the stream: Labels[i·LabelDim+j]
// is label column value j (list columns expanded in place), Dense likewise,
// and the keys of slot s are the cat column s values, CSR as in package
// formats. Batches span row groups and files. In epoch mode the last batch
// may be short and is followed by io.EOF; with Repeat the file list cycles
// forever. With Shuffle the file order of epoch e is
// rand.New(rand.NewPCG(Seed, e)).Perm(len(files)) (math/rand/v2); rows
// within a file keep their order.
//
// # Concurrency
//
// A producer goroutine walks the row groups in hand-out order, across files,
// and cuts each into pieces of about a batch (at batch ends, at least 32768
// rows; a row group with a list column that is not streamed is one piece). For each piece it
// takes a buffer from a fixed set of 2·Workers+Prefetch (the memory bound:
// at most that many decoded pieces exist; made only when a worker would
// otherwise wait), queues it, and hands it to the
// tasks of its row group, started with its first piece; a task decodes its
// columns of every piece in turn (its column readers going on across
// pieces), holding one of Workers slots while its next piece has a buffer
// (readers given one formats.Recycler as Options.Alloc, as a training
// run's passes are, share their slots: the next pass's reader, opened
// ahead, never adds decoders to the current one's),
// so row groups of one file and of different files decode in parallel and
// a fresh reader touches a few batch-sized buffers rather than a few row
// groups' worth. Buffers go to pieces in hand-out order only, so the piece
// the consumer waits for has its buffer. When a row group fails, the
// batches of its pieces before the failing one are handed out first (a
// row group decoded whole fails at its first batch); the error is the
// same. A row group is split over Workers/2 tasks at column bounds that balance the
// columns' uncompressed bytes (Reader.split), or over ⌈2·Workers/R⌉ in a
// dataset of R < Workers row groups: whole row groups, each decoded by one
// core among Workers busy ones, would reach the consumer in steps of
// Workers row groups (a conversion's writer stalling between them), and a
// file of one row group would decode on one core. A task
// opens its selected column chunks and decodes the scalar columns 1024 rows
// at a time, all columns of those rows before the next rows, so that the
// sample-major label/dense/key arrays being filled stay in the core's cache
// (one column at a time over a whole row group writes every 26th key of a
// 27 MB array, and 16 cores doing that run out of memory bandwidth). A
// task that decodes every column of a one-hot row group (one task per row
// group: Workers ≤ 3) goes further: it decodes 128 rows at a time into a
// staging block that stays in the first-level cache and copies each block
// into the piece with non-temporal stores (hostmem.StreamCopy, amd64), so
// the piece's memory is written once and never read first. A
// required scalar column of PLAIN pages (what the Writer writes),
// uncompressed or snappy, is read page by page
// through a 256 KiB window refilled with pread (page headers parsed here):
// its values are converted, range-checked, offset and scattered straight
// from the window or from the decompressed page. A list column chunk of
// PLAIN pages without a dictionary, uncompressed or snappy, is streamed
// too (lists.go): each page read whole, its repetition and definition
// levels (RLE/bit-packed hybrid, data page v1 or v2) decoded here 4096 at
// a time, and a run of levels that all hold a value emitted at once (keys
// converted and range-checked in one pass over the page's values, row
// ends found from the repetition levels eight at a time); any other run
// (empty, null or over-long lists, a bad key) is walked level by level by
// the code arrow-go's path uses, so the errors are the same. Both kinds
// are streamed dictionary-encoded too (dict.go; what pyarrow, cudf and so
// NVTabular write by default): the chunk's dictionary page (PLAIN values)
// is read into the decoder's own buffer, and each RLE_DICTIONARY or
// PLAIN_DICTIONARY data page (a byte of bit width ≤ 32, then indices in the
// RLE/bit-packed hybrid) is decoded 2048 indices at a time (a list page:
// those of each chunk of levels), every index checked against the
// dictionary's size and replaced by its value, so the code above sees
// PLAIN values; PLAIN pages after a dictionary that outgrew its limit are
// read as PLAIN. A dictionary index outside the dictionary is ErrCorrupt
// at its record. An OPTIONAL scalar column (pyarrow writes every column so
// unless told not null) is streamed the same way (optional.go): each
// page's definition levels (v1: a 4-byte length, then RLE/bit-packed
// hybrid levels at the start of the page's data; v2: before the
// compressed body) are checked to be all the maximum, a run of it at
// once, and dropped; a null is ErrNull at its row, as on arrow-go's path.
// A snappy page may be up to 5n+5 bytes for n bytes of data (the format's
// bound: the C++ library writes an incompressible page as one literal a
// 64 KiB fragment, past s2's single-literal bound). Other column chunks go through the typed ReadBatch of arrow-go into reused value and
// level buffers. List columns are decoded piece by piece when streamed
// (a piece ends before the level that starts the next piece's first row),
// else whole; one after the other. Read takes pieces from the queue in order,
// waits for each to be complete, and copies rows into the caller's batch
// (memcpy for labels, dense and one-hot keys, split over up to Workers
// goroutines). The output, and which error is reported (the lowest row of
// the first failing row group, then the first column), never depend on
// Workers. Close cancels the producer, waits for it and every task (a task
// stops between chunks of rows); no goroutine outlives it. A Reader is not
// safe for concurrent use.
//
// Column chunks read by arrow-go go through a 64 KiB buffer; windows,
// decompressed pages and arrow-go's page buffers come from a pooling
// allocator (recycled without clearing; from 64 KiB on cut from huge
// pages), so steady-state reading allocates a few hundred small objects per
// row group and no per-row memory. Options.MemoryLimit bounds the decoded
// pieces (counted as whole row groups), pages and windows by running fewer
// workers.
//
// # Writer
//
// Writer writes one file in NVTabular's layout: columns label (label, label1,
// …, label<L−1> when LabelDim > 1), I1..I<DenseDim> as required FLOAT, then
// C1..C<S>: a required scalar when the slot has Hotness 1, or Hotness 0 and
// MaxNNZ 1 (a sample with another key count is then ErrNNZ), else a required
// list<required element> (3-level LIST encoding). Cats are INT64 by default,
// or INT32/UINT32/UINT64 (WriterOptions.CatType); a key that does not fit is
// ErrKeyRange. Pages are data page v1 of at most 128 KiB of values, snappy
// by default: PLAIN, or, with WriterOptions.Dictionary (`gen`'s and
// `convert`'s default, as pyarrow, cudf and NVTabular write), a dictionary
// page and RLE_DICTIONARY data pages for each column chunk whose dictionary
// pays for itself (dictwriter.go). ctrkit encodes the files itself
// (chunks.go draws the file; thrift.go writes the compact-protocol page
// headers and footer), columns in parallel, row groups in the background.
// DatasetWriter splits the rows into files of RowsPerFile
// and writes _file_list.txt and _metadata.json on Close. Every file goes
// through atomicfile.Create: nothing appears under its final name until
// Close succeeds.
package parquet
