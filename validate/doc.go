// Package validate reads a whole dataset and reports every problem in it,
// not only the first (the `ctrkit validate` command). Readers stop at their
// first error, so validate walks the files itself with the format packages'
// own decoders and parsers (never a second decoder):
//
//   - File lists: every missing data file is reported (with its line); the
//     others are validated.
//   - Norm: each header is parsed and checked field by field against the
//     schema and the file size (a bad header is reported and the file
//     skipped); the records are decoded in chunks with norm.Decoder, each
//     record's byte offset known from the framing and nnz fields. In
//     checksum mode a bad check byte, a bad framed length or a bad nnz is
//     reported and the record skipped by its length prefix; in unframed
//     mode a structural error (nnz out of range) ends the file, since
//     nothing marks where the next record starts. A file shorter than its
//     header promises is reported as truncated at the offset where it ends
//     inside a record; bytes after the last record are a size problem.
//   - Raw: a size that is not a multiple of the sample size is reported and
//     the whole samples are validated; negative int32 dense values (clamped
//     to 0 by readers, SPEC §3.1) are reported one by one.
//   - Parquet: _metadata.json is checked against every footer (row counts,
//     col_name, missing columns) as each file is opened; a file that fails
//     is reported and skipped. The parquet reader stops at the first
//     decoding error of a file (a null, a corrupt page): that is reported
//     and the next file validated.
//   - Every decoded sample: NaN or ±Inf labels and dense values, labels
//     outside [0, 1], negative keys, keys ≥ the slot size (with a slot size
//     array), nnz above the --nnz-array maximum, each with the file, the
//     byte offset of the record or field (Norm, Raw) and the record index.
//
// Every problem is counted; the Report lists the first Options.MaxPerKind
// of each kind in each file.
package validate
