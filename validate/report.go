package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/ctrkit/ctrkit/formats"
)

// Kind names a class of problem.
type Kind string

// Problem kinds, in the order the summary lists them.
const (
	KindMissingFile Kind = "missing-file" // a file list names a file that does not exist
	KindEmpty       Kind = "empty"        // the dataset holds no sample
	KindHeader      Kind = "header"       // a Norm header field is invalid or disagrees with the others, the file size or the schema
	KindChecksum    Kind = "checksum"     // a Norm check byte disagrees with its payload
	KindTruncated   Kind = "truncated"    // a file ends inside a record
	KindSize        Kind = "size"         // a file's size disagrees with its sample size or record count, or a framed length is wrong
	KindNNZ         Kind = "nnz"          // a slot's nnz is negative or above its maximum (--nnz-array)
	KindKeyRange    Kind = "key-range"    // a key is ≥ its slot size (--slot-size-array), negative, or does not fit the key type
	KindNonFinite   Kind = "non-finite"   // a label or dense value is NaN or ±Inf
	KindLabelRange  Kind = "label-range"  // a label is outside [0, 1]
	KindClamped     Kind = "clamped"      // a negative int32 Raw dense value, read as 0 (SPEC §3.1)
	KindMetadata    Kind = "metadata"     // _metadata.json or a file list disagrees with the data
	KindNull        Kind = "null"         // a Parquet value is null
	KindSchema      Kind = "schema"       // a file's layout does not match the dataset's schema
	KindCorrupt     Kind = "corrupt"      // other undecodable content
	KindIO          Kind = "io"           // the file could not be read
)

var kindOrder = []Kind{KindMissingFile, KindEmpty, KindHeader, KindChecksum, KindTruncated, KindSize, KindNNZ, KindKeyRange,
	KindNonFinite, KindLabelRange, KindClamped, KindMetadata, KindNull, KindSchema, KindCorrupt, KindIO}

// kindOf classifies an error from a format package.
func kindOf(err error) Kind {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return KindTruncated
	case errors.Is(err, formats.ErrChecksum):
		return KindChecksum
	case errors.Is(err, formats.ErrHeader):
		return KindHeader
	case errors.Is(err, formats.ErrNNZ):
		return KindNNZ
	case errors.Is(err, formats.ErrKeyRange):
		return KindKeyRange
	case errors.Is(err, formats.ErrSize):
		return KindSize
	case errors.Is(err, formats.ErrNull):
		return KindNull
	case errors.Is(err, formats.ErrMetadata):
		return KindMetadata
	case errors.Is(err, formats.ErrSchema):
		return KindSchema
	case errors.Is(err, formats.ErrValue):
		return KindNonFinite
	case errors.Is(err, fs.ErrNotExist):
		return KindMissingFile
	case errors.Is(err, formats.ErrCorrupt):
		return KindCorrupt
	}
	return KindIO
}

// Problem is one fault found in the data.
type Problem struct {
	Kind Kind   `json:"kind"`
	File string `json:"file"`
	// Offset is the byte offset in File of the record or field at fault,
	// -1 when unknown (Parquet values, whole-file problems).
	Offset int64 `json:"offset"`
	// Record is the 0-based index of the sample in File, -1 when the
	// problem is not in a sample (a header, a missing file); for a file
	// list entry it is the 1-based line.
	Record  int64  `json:"record"`
	Message string `json:"message"`
}

// String formats p as one line: FILE: offset O: record R: KIND: message.
func (p Problem) String() string {
	var sb strings.Builder
	sb.WriteString(p.File)
	if p.Offset >= 0 {
		fmt.Fprintf(&sb, ": offset %d", p.Offset)
	}
	if p.Record >= 0 {
		if p.Kind == KindMissingFile {
			fmt.Fprintf(&sb, ": line %d", p.Record)
		} else {
			fmt.Fprintf(&sb, ": record %d", p.Record)
		}
	}
	fmt.Fprintf(&sb, ": %s: %s", p.Kind, p.Message)
	return sb.String()
}

// Omitted counts the problems of one kind in one file beyond the listed ones.
type Omitted struct {
	Kind  Kind   `json:"kind"`
	File  string `json:"file"`
	Count int64  `json:"count"`
}

// Report is the outcome of a validation.
type Report struct {
	Path   string `json:"path"`
	Format string `json:"format"`
	// Files is the number of data files named; Checked how many were read.
	Files   int   `json:"files"`
	Checked int   `json:"files_checked"`
	Samples int64 `json:"samples_checked"`
	// Notes say what was detected or assumed.
	Notes []string `json:"notes,omitempty"`
	// Problems lists the first MaxPerKind problems of each kind in each file.
	Problems []Problem `json:"problems"`
	// Omitted counts the problems left out of Problems.
	Omitted []Omitted `json:"omitted,omitempty"`
	// Counts is the number of problems of each kind, listed or not.
	Counts map[Kind]int64 `json:"counts"`
	// Total is the number of problems.
	Total int64 `json:"total"`

	max     int
	perFile map[fileKind]int64
}

type fileKind struct {
	file string
	kind Kind
}

func newReport(path string, maxPerKind int) *Report {
	return &Report{Path: path, Problems: []Problem{}, Counts: map[Kind]int64{}, max: maxPerKind, perFile: map[fileKind]int64{}}
}

// Clean reports whether no problem was found.
func (r *Report) Clean() bool { return r.Total == 0 }

// add records a problem (listing it if its kind and file are under the cap).
func (r *Report) add(k Kind, file string, off, rec int64, format string, args ...any) {
	r.Total++
	r.Counts[k]++
	fk := fileKind{file, k}
	r.perFile[fk]++
	if r.perFile[fk] <= int64(r.max) {
		r.Problems = append(r.Problems, Problem{Kind: k, File: file, Offset: off, Record: rec, Message: fmt.Sprintf(format, args...)})
	}
}

// addErr records the problem an error from a format package describes,
// with extra appended to its message.
func (r *Report) addErr(file string, err error, extra string) {
	var fe *formats.Error
	off, rec := int64(-1), int64(-1)
	msg := err.Error()
	if errors.As(err, &fe) {
		off, rec = fe.Offset, fe.Record
		if fe.Path != "" {
			file = fe.Path
		}
		msg = fe.Err.Error()
		if fe.Op != "" {
			msg = fe.Op + ": " + msg
		}
	}
	r.add(kindOf(err), file, off, rec, "%s%s", msg, extra)
}

func (r *Report) finish() {
	r.Omitted = nil
	for fk, n := range r.perFile {
		if n > int64(r.max) {
			r.Omitted = append(r.Omitted, Omitted{Kind: fk.kind, File: fk.file, Count: n - int64(r.max)})
		}
	}
	sort.Slice(r.Omitted, func(i, j int) bool {
		a, b := r.Omitted[i], r.Omitted[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return kindIndex(a.Kind) < kindIndex(b.Kind)
	})
}

func kindIndex(k Kind) int {
	for i, x := range kindOrder {
		if x == k {
			return i
		}
	}
	return len(kindOrder)
}

// Summary returns the last line of the text report.
func (r *Report) Summary() string {
	files := fmt.Sprintf("%d of %d %s checked, %d %s", r.Checked, r.Files, pluralS(int64(r.Files), "file"), r.Samples, pluralS(r.Samples, "sample"))
	if r.Clean() {
		return "ok: no problems; " + files
	}
	var parts []string
	for _, k := range kindOrder {
		if n := r.Counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	s := "s"
	if r.Total == 1 {
		s = ""
	}
	return fmt.Sprintf("FAILED: %d problem%s (%s); %s", r.Total, s, strings.Join(parts, ", "), files)
}

// WriteText writes the notes, one line per listed problem, a line per
// (file, kind) with more problems than listed, and the summary.
func (r *Report) WriteText(w io.Writer) error {
	var sb strings.Builder
	for _, n := range r.Notes {
		fmt.Fprintf(&sb, "note: %s\n", n)
	}
	for _, p := range r.Problems {
		sb.WriteString(p.String())
		sb.WriteByte('\n')
	}
	for _, o := range r.Omitted {
		s := "s"
		if o.Count == 1 {
			s = ""
		}
		fmt.Fprintf(&sb, "%s: … and %d more %s problem%s\n", o.File, o.Count, o.Kind, s)
	}
	sb.WriteString(r.Summary())
	sb.WriteByte('\n')
	_, err := io.WriteString(w, sb.String())
	return err
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	type out struct {
		*Report
		Clean bool `json:"clean"`
	}
	data, err := json.MarshalIndent(out{r, r.Clean()}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// pluralS is word, with an s unless n is 1.
func pluralS(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
