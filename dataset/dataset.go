// Package dataset opens a dataset of any format ctrkit knows from a path and
// the schema flags a user gives (HugeCTR's parameter names), detecting what
// the flags leave out, and creates writers for any output format. It is what
// the command line's convert, validate, inspect, keyset and bench commands
// share.
//
// A path is one of:
//
//	a file list (SPEC §1)           → Norm or Parquet, by the first data file
//	a directory                     → its _file_list.txt or file_list.txt
//	a .parquet file                 → Parquet, _metadata.json beside it
//	a text file with tabs or commas → Criteo TSV / CSV logs
//	any other file                  → Norm when its header parses, else Raw
package dataset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/criteo"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// Format is a dataset format.
type Format int

const (
	// Auto detects the format from the path.
	Auto Format = iota
	Norm
	Raw
	Parquet
	CriteoTSV
	CriteoCSV
)

var formatNames = map[Format]string{Auto: "auto", Norm: "norm", Raw: "raw", Parquet: "parquet", CriteoTSV: "criteo-tsv", CriteoCSV: "criteo-csv"}

func (f Format) String() string { return formatNames[f] }

// ParseFormat accepts the names String returns ("" is Auto).
func ParseFormat(s string) (Format, error) {
	s = strings.ToLower(s)
	for f, n := range formatNames {
		if s == n {
			return f, nil
		}
	}
	if s == "" {
		return Auto, nil
	}
	return 0, fmt.Errorf("unknown format %q (want norm, raw, parquet, criteo-tsv or criteo-csv)", s)
}

// Spec is what the user said about a dataset; zero fields are detected or
// defaulted.
type Spec struct {
	Format Format
	// LabelDim, DenseDim and NumSlot give the shape (0: from the Norm
	// header or Parquet metadata; Raw defaults to Criteo's 1, 13, 26).
	LabelDim, DenseDim, NumSlot int
	// KeyType with KeyTypeSet; otherwise detected (Norm) or i32.
	KeyType    formats.KeyType
	KeyTypeSet bool
	// Check with CheckSet; otherwise the Norm header's error_check.
	Check    norm.CheckMode
	CheckSet bool
	// SlotSizeArray: slot sizes. Readers add slot offsets with them when
	// Offsets is set; validate checks keys against them; Criteo text
	// hashes into them.
	SlotSizeArray []int64
	Offsets       bool
	// Keys is the key convention (KeysUnknown: from the dataset's sidecar,
	// else unknown). Key range checks of global keys allow slot s the
	// range [P_s, P_s + size_s).
	Keys KeyConvention
	// NNZ is the max nnz per slot (Norm, Parquet) or the hotness per slot
	// (Raw multi-hot).
	NNZ []int
	// FloatLabelDense: Raw label and dense values are float32 (else int32).
	FloatLabelDense bool
	// RawLayout is the Raw layout (one-hot unless NNZ has a value > 1).
	RawLayout    raw.Layout
	RawLayoutSet bool
	// LabelType of the Raw multi-hot layout (default int32, HugeCTR v25).
	LabelType    formats.ValueType
	LabelTypeSet bool
	// DenseType of Raw dense values, overriding FloatLabelDense.
	DenseType    formats.ValueType
	DenseTypeSet bool
	// Vocab maps Criteo text categoricals (instead of hashing).
	Vocab *criteo.Vocab
	// SkipCorrupt skips Norm records with a bad check byte.
	SkipCorrupt bool
}

// Dataset is a resolved dataset: its format, files and schema.
type Dataset struct {
	Path   string // what the user named
	List   string // the file list, when there is one
	Format Format
	Files  []string
	Schema formats.Schema
	Spec   Spec // with detected fields filled in
	// Samples is the sample count when the format records it, else -1.
	Samples int64
	// Bytes is the total size of the data files.
	Bytes int64
	// Notes say what was detected or assumed.
	Notes []string
	// KeyInfo is the dataset's sidecar (slot sizes, key convention), nil
	// when it has none.
	KeyInfo *KeyInfo
	meta    *parquet.Metadata
	// detected: the format of a single file was sniffed, not given.
	detected bool
}

func (d *Dataset) note(format string, args ...any) {
	d.Notes = append(d.Notes, fmt.Sprintf(format, args...))
}

// Resolve finds the format, files and schema of the dataset at path.
func Resolve(path string, spec Spec) (*Dataset, error) {
	d := &Dataset{Path: path, Spec: spec, Samples: -1}
	f, list, files, note, err := locate(path, spec.Format)
	if err != nil {
		return nil, err
	}
	d.List, d.Files = list, files
	if note != "" {
		d.note("%s", note)
	}
	d.Format = f
	d.detected = spec.Format == Auto && list == ""
	sizes := map[string]int64{} // a file listed again is not stat'ed again
	for _, p := range d.Files {
		n, ok := sizes[p]
		if !ok {
			st, err := os.Stat(p)
			if err != nil {
				return nil, err
			}
			if err := regular(p, st); err != nil {
				return nil, err
			}
			n = st.Size()
			sizes[p] = n
		}
		d.Bytes += n
	}
	var fromSidecar []int64
	if f != CriteoTSV && f != CriteoCSV {
		ki, ok, err := FindKeyInfo(d.List, d.Files[0])
		if err != nil {
			return nil, err
		}
		if ok {
			d.KeyInfo = &ki
			if d.Spec.Keys == KeysUnknown {
				d.Spec.Keys = ki.Keys
			}
			if len(d.Spec.SlotSizeArray) == 0 && len(ki.SlotSizeArray) > 0 {
				fromSidecar = ki.SlotSizeArray
			}
			d.note("keys %s, %d slot sizes (from %s)", d.Spec.Keys.Phrase(), len(ki.SlotSizeArray), ki.File)
		}
	}
	if d.Spec.Offsets && d.Spec.Keys == KeysGlobal {
		src := "--slot-offsets"
		if d.KeyInfo != nil {
			src = d.KeyInfo.File
		}
		return nil, fmt.Errorf("%s: the keys are already global (%s says so): --slot-offsets would add the slot offsets twice", path, src)
	}
	switch f {
	case Norm:
		err = d.resolveNorm()
	case Raw:
		err = d.resolveRaw()
	case Parquet:
		err = d.resolveParquet()
	case CriteoTSV, CriteoCSV:
		err = d.resolveCriteo()
	default:
		err = fmt.Errorf("unknown format %d", f)
	}
	if err != nil {
		return nil, err
	}
	if fromSidecar != nil && f != CriteoTSV && f != CriteoCSV {
		if len(fromSidecar) != len(d.Schema.Slots) {
			return nil, fmt.Errorf("%s: %s holds %d slot sizes, the data %d slots: fix or remove it, or give --slot-size-array",
				path, d.KeyInfo.File, len(fromSidecar), len(d.Schema.Slots))
		}
		d.Spec.SlotSizeArray = fromSidecar
		for i := range d.Schema.Slots {
			d.Schema.Slots[i].Size = fromSidecar[i]
		}
	}
	if d.Spec.Offsets && len(d.Spec.SlotSizeArray) == 0 {
		return nil, fmt.Errorf("--slot-offsets needs the slot sizes: give --slot-size-array (or --slot-size-array @FILE); %s has no %s", path, KeyInfoName)
	}
	return d, nil
}

// DetectFormat returns the format Resolve would detect at path (f Auto) or
// that f forces, and the data files path names, without reading a schema.
// Commands use it to check format-specific flags (a vocabulary is built only
// for Criteo text) before resolving.
func DetectFormat(path string, f Format) (Format, []string, error) {
	f, _, files, _, err := locate(path, f)
	return f, files, err
}

// Detected is what Detect found at a path.
type Detected struct {
	// Format is the format detected (or the one given).
	Format Format
	// Path is what a reader opens: the file list (a directory's own) or
	// the data file.
	Path string
	// List is the file list, "" for a single data file.
	List string
	// Files are the data files.
	Files []string
	// Note says how the format was found ("" when it was given).
	Note string
}

// Detect is the one detector every command uses: the format at path (f
// Auto: by content — file lists and directories by their first data file,
// Parquet by its magic, Criteo text by its first line, Norm by a header
// that passes its sanity checks, Raw otherwise), the file list a directory
// holds, and the data files. f not Auto is taken as given, but text under
// Raw is refused.
func Detect(path string, f Format) (Detected, error) {
	f, list, files, note, err := locate(path, f)
	d := Detected{Format: f, Path: path, List: list, Files: files, Note: note}
	if list != "" {
		d.Path = list
	}
	return d, err
}

// locate finds the file list (if any), the data files and the format (f
// unless Auto) of the dataset at path, with a note saying how the format
// was detected. A file list names Norm, Parquet or Criteo text files (the
// format of the first one); any other file is one data file.
func locate(path string, f Format) (Format, string, []string, string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return f, "", nil, "", err
	}
	if !st.IsDir() {
		if err := regular(path, st); err != nil {
			return f, "", nil, "", err
		}
	}
	if st.IsDir() {
		dir := path
		for _, n := range []string{parquet.FileListName, "file_list.txt"} {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				path = filepath.Join(dir, n)
				break
			}
		}
		if path == dir {
			return f, "", nil, "", fmt.Errorf("%s is a directory without %s or file_list.txt", dir, parquet.FileListName)
		}
	}
	if err := checkRegular(path); err != nil {
		return f, "", nil, "", err
	}
	head, err := ReadHead(path, 4096)
	if err != nil {
		return f, "", nil, "", err
	}
	if f == Raw && isText(head) {
		return f, "", nil, "", notDataset(path, "Raw data is binary, this is text (a file list or Criteo text?); its first line is %q", firstLine(head))
	}
	if !LooksLikeFileList(head) || f == Raw {
		if f != Auto {
			return f, "", []string{path}, "", nil
		}
		if f, err = sniff(path, head); err != nil {
			return f, "", nil, "", err
		}
		return f, "", []string{path}, fmt.Sprintf("format %s (detected)", f), nil
	}
	files, err := formats.ReadFileList(path)
	if err != nil {
		return f, "", nil, "", err
	}
	if len(files) == 0 {
		return f, "", nil, "", fmt.Errorf("file list %s names no files", path)
	}
	if f != Auto {
		return f, path, files, "", nil
	}
	first, err := ReadHead(files[0], 4096)
	if err != nil {
		return f, "", nil, "", err
	}
	f = Norm
	if bytes.HasPrefix(first, []byte("PAR1")) {
		f = Parquet
	} else if t := sniffText(first); t != Auto {
		f = t
	} else if _, nerr := norm.Detect(files[0]); nerr != nil && !isText(first) {
		// Neither Parquet, text nor a Norm header: most likely Raw data,
		// which HugeCTR reads as one file, never through a file list.
		return f, "", nil, "", notDataset(path, "a file list whose first file %s is neither Norm (%v) nor Parquet nor Criteo text; "+
			"a Raw dataset is one file: give that file's path (with --from raw or --format raw)", files[0], nerr)
	}
	return f, path, files, fmt.Sprintf("format %s (from the first file of the list)", f), nil
}

// regular refuses a path that is not a regular file (a FIFO, socket or
// device): datasets are read by offset and their size is checked, and
// opening a FIFO with no writer would block forever.
func regular(path string, st os.FileInfo) error {
	if st.Mode().IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch {
	case st.IsDir():
		kind = "a directory, not a data file"
	case st.Mode()&os.ModeNamedPipe != 0:
		kind = "a FIFO (named pipe), not a regular file"
	case st.Mode()&os.ModeSocket != 0:
		kind = "a socket, not a regular file"
	case st.Mode()&os.ModeDevice != 0:
		kind = "a device, not a regular file"
	}
	return fmt.Errorf("%s is %s (%w): ctrkit reads datasets by offset and checks their size; copy the data to a file first", path, kind, ErrNotDataset)
}

// ReadHead returns the first n bytes of the file at path (fewer when the
// file is shorter).
func ReadHead(path string, n int) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regular(path, st); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	return buf[:k], nil
}

// ErrNotDataset is the class of errors for a path whose content is no
// dataset ctrkit can read: not a regular file, an empty file, binary bytes
// under a text name, bytes no format's checks accept. The message says what
// was seen.
var ErrNotDataset = errors.New("not a dataset")

func notDataset(path, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", path, ErrNotDataset, fmt.Sprintf(format, args...))
}

// checkRegular refuses what cannot hold a dataset: a device, a pipe, a
// socket (/dev/urandom has size 0 and endless bytes), an empty file.
func checkRegular(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return notDataset(path, "not a regular file (%s)", st.Mode().Type())
	}
	if st.Size() == 0 {
		return notDataset(path, "empty file (0 bytes)")
	}
	return nil
}

// LooksLikeFileList reports whether the first bytes of a file are to be
// read as a file list (SPEC §1): text (printable lines) whose first line has
// no tab or comma (which would make it Criteo text). A first line that is
// not a count is the file list's error to report ("abc", "-1"): text is
// never Raw or Norm data.
func LooksLikeFileList(head []byte) bool {
	if bytes.HasPrefix(head, []byte("PAR1")) {
		return false // a Parquet file, whatever follows its magic
	}
	if len(head) > 0 && isText(head) && sniffText(head) == Auto {
		return true
	}
	nl := bytes.IndexByte(head, '\n')
	if nl <= 0 {
		return false
	}
	first := bytes.TrimSpace(head[:nl])
	if len(first) == 0 {
		return false
	}
	for _, c := range first {
		if c < '0' || c > '9' {
			return false
		}
	}
	return isText(head[nl+1:]) && !bytes.ContainsAny(head[nl+1:], "\t,")
}

func firstLine(head []byte) string {
	line, _, _ := bytes.Cut(head, []byte("\n"))
	if len(line) > 60 {
		return string(line[:60]) + "…"
	}
	return string(line)
}

func isText(b []byte) bool {
	for _, c := range b {
		if c < 0x09 || (c > 0x0d && c < 0x20) || c == 0x7f {
			return false
		}
	}
	return true
}

// textExt are the names of text files: binary content under one is not a
// dataset.
var textExt = []string{".tsv", ".csv", ".txt"}

func sniff(path string, head []byte) (Format, error) {
	ext := strings.ToLower(filepath.Ext(path))
	if bytes.HasPrefix(head, []byte("PAR1")) || ext == ".parquet" {
		return Parquet, nil // the Parquet reader reports a missing magic
	}
	if t := sniffText(head); t != Auto {
		return t, nil
	}
	for _, e := range textExt {
		if ext == e && !isText(head) {
			i := 0
			for i < len(head) && isText(head[i:i+1]) {
				i++
			}
			return Auto, notDataset(path, "named %s, but holds binary bytes (%#02x at offset %d)", e, head[i], i)
		}
	}
	if _, err := norm.Detect(path); err == nil {
		return Norm, nil
	}
	return Raw, nil
}

// plausibleRaw checks the first samples of a file whose format was
// detected as Raw only because nothing else matched: their labels must be
// 0 or 1 (int32) or in [0, 1] (float32), and the bytes not all zero.
func plausibleRaw(path string, s *formats.Schema, sampleSize int) error {
	head, err := ReadHead(path, 4096)
	if err != nil {
		return err
	}
	hint := "; give --from raw (and its shape) to read it as Raw anyway"
	if bytes.Count(head, []byte{0}) == len(head) {
		return notDataset(path, "the first %d bytes are all zero (no Norm header, no Parquet magic, no text)%s", len(head), hint)
	}
	for i := 0; (i+1)*sampleSize <= len(head); i++ {
		for j := 0; j < s.LabelDim; j++ {
			bits := binary.LittleEndian.Uint32(head[i*sampleSize+4*j:])
			ok := bits <= 1
			v := any(int32(bits))
			if s.LabelType == formats.Float32 {
				f := math.Float32frombits(bits)
				ok, v = f >= 0 && f <= 1, f
			}
			if !ok {
				return notDataset(path, "no Norm header, no Parquet magic, no text; read as Raw (sample of %d bytes), sample %d's label %d is %v, not 0 or 1%s",
					sampleSize, i, j, v, hint)
			}
		}
	}
	return nil
}

// sniffText returns CriteoTSV or CriteoCSV when head is text whose first
// line has a tab or a comma, else Auto.
func sniffText(head []byte) Format {
	if len(head) == 0 || !isText(head) {
		return Auto
	}
	line, _, _ := bytes.Cut(head, []byte("\n"))
	switch {
	case bytes.Contains(line, []byte("\t")):
		return CriteoTSV
	case bytes.Contains(line, []byte(",")):
		return CriteoCSV
	}
	return Auto
}

func (d *Dataset) resolveNorm() error {
	det, err := norm.Detect(d.Files[0])
	if err != nil && !d.Spec.KeyTypeSet {
		return fmt.Errorf("detecting key width and check mode of %s: %w", d.Files[0], err)
	}
	sp := &d.Spec
	if !sp.CheckSet {
		if err != nil {
			return err
		}
		sp.Check, sp.CheckSet = det.Check, true
		d.note("check mode %s (from the header)", det.Check)
	}
	if !sp.KeyTypeSet {
		kt, ok := det.KeyType()
		if !ok {
			return fmt.Errorf("%s: the key width is ambiguous (%v fit); give --i64-input-key or not explicitly", d.Files[0], det.KeyTypes)
		}
		sp.KeyType, sp.KeyTypeSet = kt, true
		d.note("key type %s (detected)", kt)
	}
	r, err := norm.OpenFiles(d.Files, nil, norm.Options{Check: sp.Check, KeyType: sp.KeyType})
	if err != nil {
		return err
	}
	defer r.Close()
	d.Schema = r.Schema().Clone()
	d.Samples = 0
	for i := range d.Files {
		d.Samples += r.Header(i).NumRecords
	}
	return d.applyShape()
}

// applyShape checks the user's shape against the detected schema and adds
// the slot sizes and max nnz.
func (d *Dataset) applyShape() error {
	s, sp := &d.Schema, &d.Spec
	if sp.LabelDim > 0 && sp.LabelDim != s.LabelDim || sp.DenseDim > 0 && sp.DenseDim != s.DenseDim || sp.NumSlot > 0 && sp.NumSlot != len(s.Slots) {
		return fmt.Errorf("%s holds label_dim %d, dense_dim %d, %d slots; the flags say %d, %d, %d",
			d.Path, s.LabelDim, s.DenseDim, len(s.Slots), sp.LabelDim, sp.DenseDim, sp.NumSlot)
	}
	if err := sp.ForSlots(len(s.Slots)); err != nil {
		return fmt.Errorf("%s: %w", d.Path, err)
	}
	if n := len(sp.SlotSizeArray); n > 0 {
		for i := range s.Slots {
			s.Slots[i].Size = sp.SlotSizeArray[i]
		}
	}
	if n := len(sp.NNZ); n > 0 {
		for i := range s.Slots {
			s.Slots[i].MaxNNZ = sp.NNZ[i]
		}
	}
	return nil
}

// PerSlot expands a per-slot array flag's values to slots entries: one
// value means every slot, otherwise there must be one value per slot. An
// empty array stays empty (the flag was not given). flag names the flag in
// the error ("--slot-size-array"). Every command parses its per-slot flags
// (--slot-size-array, --nnz-array) through it, so they mean the same.
func PerSlot[T any](flag string, a []T, slots int) ([]T, error) {
	switch {
	case len(a) == 0 || len(a) == slots || slots < 0: // (the shape's own check names a negative count)
		return a, nil
	case len(a) == 1:
		out := make([]T, slots)
		for i := range out {
			out[i] = a[0]
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s has %d values, the data %d slots: give one value (every slot) or one per slot", flag, len(a), slots)
}

// ForSlots expands SlotSizeArray and NNZ to slots entries (PerSlot).
func (sp *Spec) ForSlots(slots int) error {
	var err error
	if sp.SlotSizeArray, err = PerSlot("--slot-size-array", sp.SlotSizeArray, slots); err != nil {
		return err
	}
	sp.NNZ, err = PerSlot("--nnz-array", sp.NNZ, slots)
	return err
}

// RawSchema builds the schema and layout of a Raw file from the flags alone
// (Raw files have no header): Criteo's shape (1, 13, 26 one-hot slots) when
// no shape is given, which the returned note says; the multi-hot layout
// when some slot's nnz is not 1 unless a layout is given; int32 or float32
// values by FloatLabelDense, the multi-hot label int32 unless LabelType.
func RawSchema(sp Spec) (s formats.Schema, layout raw.Layout, note string, err error) {
	l, dd, ns := sp.LabelDim, sp.DenseDim, sp.NumSlot
	if l == 0 && dd == 0 && ns == 0 {
		l, dd, ns = 1, 13, 26
		note = "raw shape not given: assuming Criteo's label_dim 1, dense_dim 13, 26 slots"
	}
	if ns == 0 {
		ns = max(len(sp.NNZ), len(sp.SlotSizeArray))
	}
	for _, f := range []struct {
		flag string
		v    int
	}{{"--label-dim", l}, {"--dense-dim", dd}, {"--num-slot", ns}} {
		if f.v < 0 || f.v > formats.MaxDim {
			return s, 0, note, fmt.Errorf("%s %d: want 0..%d", f.flag, f.v, formats.MaxDim)
		}
	}
	for i, n := range sp.NNZ {
		if n < 0 || n > formats.MaxDim {
			return s, 0, note, fmt.Errorf("--nnz-array entry %d is %d: want 0..%d", i, n, formats.MaxDim)
		}
	}
	nnz, err := PerSlot("--nnz-array", sp.NNZ, ns)
	if err != nil {
		return s, 0, note, err
	}
	if nnz == nil {
		nnz = make([]int, ns)
		for i := range nnz {
			nnz[i] = 1
		}
	}
	sizes, err := PerSlot("--slot-size-array", sp.SlotSizeArray, ns)
	if err != nil {
		return s, 0, note, err
	}
	layout = sp.RawLayout
	if !sp.RawLayoutSet {
		layout = raw.OneHot
		for _, n := range nnz {
			if n != 1 {
				layout = raw.MultiHot
			}
		}
	}
	s = formats.NewSchema(l, dd, nnz, sizes, sp.KeyType)
	for i := range s.Slots {
		s.Slots[i].Hotness = nnz[i]
	}
	s.LabelType, s.DenseType = formats.Int32, formats.Int32
	if sp.FloatLabelDense {
		s.LabelType, s.DenseType = formats.Float32, formats.Float32
	}
	if layout == raw.MultiHot {
		s.LabelType = formats.Int32
	}
	if sp.LabelTypeSet {
		s.LabelType = sp.LabelType
	}
	if sp.DenseTypeSet {
		s.DenseType = sp.DenseType
	}
	return s, layout, note, nil
}

func (d *Dataset) resolveRaw() error {
	sp := &d.Spec
	s, layout, note, err := RawSchema(*sp)
	if note != "" {
		d.note("%s", note)
	}
	if err != nil {
		return err
	}
	sp.RawLayout, sp.RawLayoutSet = layout, true
	d.Schema = s
	size, err := raw.SampleSize(&d.Schema, layout)
	if err != nil {
		return err
	}
	if d.detected {
		if err := plausibleRaw(d.Files[0], &s, size); err != nil {
			return err
		}
	}
	if d.Bytes%int64(size) != 0 {
		return formats.Errorf("raw", d.Files[0], d.Bytes/int64(size)*int64(size), d.Bytes/int64(size), formats.ErrSize,
			"file size %d is not a multiple of the %d-byte sample of the given shape (label %d, dense %d, %d slots, %s)",
			d.Bytes, size, s.LabelDim, s.DenseDim, len(s.Slots), layout)
	}
	d.Samples = d.Bytes / int64(size)
	return d.applyShape()
}

func (d *Dataset) resolveParquet() error {
	dir := filepath.Dir(d.Files[0])
	meta, err := parquet.ReadMetadata(filepath.Join(dir, parquet.MetadataName))
	if err != nil {
		return err
	}
	d.meta = meta
	r, err := parquet.OpenFiles(d.Files, meta, nil, parquet.Options{KeyType: d.Spec.KeyType})
	if err != nil {
		return err
	}
	defer r.Close()
	d.Schema = r.Schema().Clone()
	d.Samples = r.NumRows()
	return d.applyShape()
}

func (d *Dataset) resolveCriteo() error {
	o, err := d.criteoOptions(formats.Options{})
	if err != nil {
		return err
	}
	r, err := criteo.Open(d.Files, o)
	if err != nil {
		return err
	}
	defer r.Close()
	d.Schema = r.Schema().Clone()
	return nil
}

func (d *Dataset) criteoOptions(fo formats.Options) (criteo.Options, error) {
	sp := &d.Spec
	o := criteo.Options{Options: fo, KeyType: sp.KeyType, Vocab: sp.Vocab}
	o.Format = criteo.TSV
	if d.Format == CriteoCSV {
		o.Format = criteo.CSV
	}
	if sp.DenseDim > 0 {
		o.NumDense = sp.DenseDim
	}
	if sp.NumSlot > 0 {
		o.NumCat = sp.NumSlot
	}
	if sp.Vocab == nil {
		if len(sp.SlotSizeArray) == 0 {
			return o, fmt.Errorf("criteo text needs --slot-size-array (hash buckets per slot) or --vocab")
		}
		ncat := criteo.DefaultNumCat
		if sp.NumSlot > 0 {
			ncat = sp.NumSlot
		}
		var err error
		if sp.SlotSizeArray, err = PerSlot("--slot-size-array", sp.SlotSizeArray, ncat); err != nil {
			return o, err
		}
		o.Buckets = sp.SlotSizeArray
	}
	if !sp.Offsets {
		o.SlotSizeArray = nil
	}
	return o, nil
}

// Open opens a reader over the whole dataset. With Spec.Offsets, readers
// add slot offsets from Spec.SlotSizeArray.
func (d *Dataset) Open(o formats.Options) (formats.Reader, error) {
	sp := &d.Spec
	if sp.Offsets {
		o.SlotSizeArray = sp.SlotSizeArray
	} else {
		o.SlotSizeArray = nil
	}
	s := d.Schema.Clone()
	var r formats.Reader
	var err error
	switch d.Format {
	case Norm:
		r, err = norm.OpenFiles(d.Files, &s, norm.Options{Options: o, Check: sp.Check, SkipCorrupt: sp.SkipCorrupt})
	case Raw:
		// Without offsets the Raw reader's workers check the keys against
		// the slot sizes as they decode (--slot-size-array promises key
		// range checks), not the consumer's goroutine afterwards.
		ro := raw.Options{Options: o, Layout: sp.RawLayout}
		if !sp.Offsets {
			ro.KeyCheck = raw.KeyCheck{Sizes: sp.SlotSizeArray, Global: sp.Keys == KeysGlobal}
		}
		if r, err = raw.Open(d.Files[0], &s, ro); r != nil || err != nil {
			return r, err
		}
	case Parquet:
		po := parquet.Options{Options: o}
		if !sp.Offsets && len(sp.SlotSizeArray) > 0 && len(sp.SlotSizeArray) == len(s.Slots) {
			// The decoding workers check the ranges (see checkKeys).
			k := newKeyChecker(nil, "", "", sp.SlotSizeArray, sp.Keys == KeysGlobal)
			for i, n := range k.sizes {
				po.KeyRanges = append(po.KeyRanges, parquet.KeyRange{Lo: k.lo[i], Size: n})
			}
			po.KeyRangeHint = "--slot-size-array, keys " + k.Keys()
		}
		r, err = parquet.OpenFiles(d.Files, d.meta, &s, po)
		if err != nil || po.KeyRanges != nil {
			return r, err
		}
	}
	if r != nil || err != nil {
		if err != nil || sp.Offsets || len(sp.SlotSizeArray) == 0 {
			return r, err
		}
		// Without offsets the readers pass keys through: the slot sizes
		// are checked here (--slot-size-array promises key range checks).
		return checkKeys(r, d.Format.String(), d.Path, sp.SlotSizeArray, sp.Keys == KeysGlobal), nil
	}
	switch d.Format {
	case CriteoTSV, CriteoCSV: // keys hashed into the slot sizes
		co, err := d.criteoOptions(o)
		if err != nil {
			return nil, err
		}
		return criteo.Open(d.Files, co)
	}
	return nil, fmt.Errorf("cannot open format %s", d.Format)
}

// checkKeys wraps r so that every key is checked against its slot's size,
// an ErrKeyRange error naming the sample otherwise. A Lender stays one.
// (Parquet readers check them while decoding, on every worker: a pass over
// each lent batch here cost a quarter of a 2-core read's CPU.)
func checkKeys(r formats.Reader, format, path string, sizes []int64, global bool) formats.Reader {
	k := newKeyChecker(r, format, path, sizes, global)
	if l, ok := r.(formats.Lender); ok {
		return &lendingKeyChecker{keyChecker: k, l: l}
	}
	return k
}

func newKeyChecker(r formats.Reader, format, path string, sizes []int64, global bool) *keyChecker {
	k := &keyChecker{Reader: r, format: format, path: path, sizes: sizes, lo: make([]int64, len(sizes))}
	if global { // slot s holds [P_s, P_s + size_s)
		var o int64
		for i, n := range sizes {
			k.lo[i], o = o, o+n
		}
	}
	return k
}

type keyChecker struct {
	formats.Reader
	format, path string
	sizes        []int64
	lo           []int64 // each slot's first key: 0, or its offset for global keys
	read         int64   // samples handed out before the current batch
}

func (k *keyChecker) Read(b *formats.Batch) (int, error) {
	n, err := k.Reader.Read(b)
	if n > 0 {
		if cerr := k.check(b); cerr != nil {
			return 0, cerr
		}
	}
	return n, err
}

func (k *keyChecker) check(b *formats.Batch) error {
	S := len(k.sizes)
	first := k.read
	k.read += int64(b.N)
	for r := 0; r < b.N; r++ {
		for s := 0; s < S; s++ {
			lo, hi := b.Offsets[r*S+s], b.Offsets[r*S+s+1]
			for i := lo; i < hi; i++ {
				var key int64
				if b.Keys64 != nil {
					key = b.Keys64[i]
				} else {
					key = int64(b.Keys32[i])
				}
				if key < k.lo[s] || key >= k.lo[s]+k.sizes[s] {
					return formats.Errorf(k.format, k.path, -1, first+int64(r), formats.ErrKeyRange,
						"slot %d key %d outside [%d, %d) (--slot-size-array, keys %s)", s, key, k.lo[s], k.lo[s]+k.sizes[s], k.Keys())
				}
			}
		}
	}
	return nil
}

// Keys names the convention checked.
func (k *keyChecker) Keys() string {
	if len(k.lo) > 1 && k.lo[len(k.lo)-1] > 0 {
		return "global"
	}
	return "slot-local"
}

type lendingKeyChecker struct {
	*keyChecker
	l formats.Lender
}

func (k *lendingKeyChecker) Next() (*formats.Batch, error) {
	b, err := k.l.Next()
	if b != nil && err == nil {
		if cerr := k.check(b); cerr != nil {
			return nil, cerr
		}
	}
	return b, err
}

// BytesPerSample is the dataset's size divided by its sample count (0 when
// the count is unknown).
func (d *Dataset) BytesPerSample() float64 {
	if d.Samples <= 0 {
		return 0
	}
	return float64(d.Bytes) / float64(d.Samples)
}
