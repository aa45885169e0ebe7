package dataset

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// Output says how to write a dataset.
type Output struct {
	Format Format // Norm, Raw or Parquet
	// KeyType of the output (Norm keys, Raw multi-hot keys, the schema of
	// batches handed to the writer).
	KeyType formats.KeyType
	// Check is the Norm check mode.
	Check norm.CheckMode
	// RawLayout, FloatLabelDense and LabelType encode Raw values.
	RawLayout       raw.Layout
	RawLayoutSet    bool
	FloatLabelDense bool
	LabelType       formats.ValueType
	LabelTypeSet    bool
	// Parquet writer options.
	Compression  string
	RowGroupSize int
	CatType      string
	Dictionary   bool
	// SamplesPerFile rolls Norm and Parquet output over to a new file.
	SamplesPerFile int64
	// Force replaces an existing output (else it is a atomicfile.ErrExists
	// error); NoSync skips the fsync before the final rename (scratch
	// data). See atomicfile.Stage.
	Force, NoSync bool
	// Sidecars are files written with the output and committed with it,
	// by name (see SidecarPath).
	Sidecars []Sidecar
	// Inputs are the files being converted: an output that would replace
	// a directory holding one of them is refused.
	Inputs []string
	// Open, when set, opens the output files (tests inject faults).
	Open atomicfile.OpenFunc
}

// Sidecar is a file that describes an output (slot_size_array.json).
type Sidecar struct {
	Name string
	Data []byte
}

// SidecarPath is where the sidecar name of the output dst of format f
// lives: in the dataset's directory (Norm, Parquet), or beside a Raw file
// as "<dst>.<name>", so that two outputs never share one.
func SidecarPath(dst string, f Format, name string) string {
	if f == Raw {
		return dst + "." + name
	}
	return filepath.Join(OutputDir(dst, f), name)
}

// OutputDir is the directory a Norm or Parquet output at dst is written to
// (and replaced as a unit); for Raw the directory of the file.
func OutputDir(dst string, f Format) string {
	if f == Raw || strings.HasSuffix(dst, ".txt") {
		return filepath.Dir(dst)
	}
	return dst
}

// partName matches the data files ctrkit's writers name.
var partName = regexp.MustCompile(`^part_[0-9]+\.(data|parquet)$`)

// ownedName reports whether rel (relative to an output directory) is a
// file of a dataset ctrkit writes there: index, metadata, data file or
// sidecar. Files named by its file lists are owned too (stageOptions).
func ownedName(rel, list string) bool {
	switch rel {
	case list, "file_list.txt", parquet.FileListName, parquet.MetadataName, "slot_size_array.json":
		return true
	}
	return partName.MatchString(rel)
}

// OutputSchema returns the schema batches must have for the writer, derived
// from the input schema.
func OutputSchema(in formats.Schema, o Output) (formats.Schema, error) {
	s := in.Clone()
	s.KeyType = o.KeyType
	if o.Format != Raw {
		return s, nil
	}
	layout := o.RawLayout
	if !o.RawLayoutSet {
		layout = raw.OneHot
		for _, sl := range s.Slots {
			if max(sl.Hotness, sl.MaxNNZ) != 1 {
				layout = raw.MultiHot
			}
		}
	}
	for i := range s.Slots {
		sl := &s.Slots[i]
		if sl.Hotness == 0 {
			sl.Hotness = sl.MaxNNZ
		}
		if layout == raw.OneHot && sl.Hotness != 1 {
			return s, fmt.Errorf("slot %d (%s) holds up to %d keys; the Raw one-hot layout holds exactly 1 (use --raw-layout multihot with fixed hotness)", i, sl.Name, max(sl.Hotness, sl.MaxNNZ))
		}
		if sl.Hotness <= 0 {
			return s, fmt.Errorf("slot %d (%s) has no fixed hotness; the Raw multi-hot layout needs one per slot (give --nnz-array)", i, sl.Name)
		}
		sl.MaxNNZ = sl.Hotness
	}
	s.LabelType, s.DenseType = formats.Int32, formats.Int32
	if o.FloatLabelDense {
		s.LabelType, s.DenseType = formats.Float32, formats.Float32
	}
	if layout == raw.MultiHot {
		s.LabelType = formats.Int32
		if o.LabelTypeSet {
			s.LabelType = o.LabelType
		}
	}
	return s, nil
}

// Create starts writing a dataset at dst in the output format, for batches
// of schema s (from OutputSchema):
//
//	Norm     dst is the file list path (or a directory: dst/file_list.txt);
//	         data files part_<k>.data beside it
//	Parquet  dst is a directory (or its _file_list.txt path): part_<k>.parquet,
//	         _file_list.txt and _metadata.json
//	Raw      dst is the one output file
//
// The output is committed as a unit by the writer's Close (atomicfile.Stage):
// nothing of it is visible before, a previous dataset at dst (replaced only
// with o.Force) stays whole until then, and Abort or a failed Close leaves
// it as it was. Norm and Parquet outputs are written in a temporary
// directory beside dst's directory, swapped in on Close.
func Create(dst string, s *formats.Schema, o Output) (formats.Writer, error) {
	if o.Format != Norm && o.Format != Parquet && o.Format != Raw {
		return nil, fmt.Errorf("cannot write format %s", o.Format)
	}
	so := atomicfile.StageOptions{Force: o.Force, NoSync: o.NoSync, Open: o.Open}
	var st *atomicfile.Stage
	if o.Format == Raw {
		st = atomicfile.NewFileStage(so)
	} else {
		root := OutputDir(dst, o.Format)
		list := listName(dst, o.Format)
		so.Listed = formats.ListedFiles(list, "file_list.txt", parquet.FileListName)
		so.Owned = func(rel string) bool { return ownedName(rel, list) }
		var err error
		if st, err = atomicfile.NewStage(root, so); err != nil {
			return nil, err
		}
		if st.Replaces() {
			if in := inside(root, o.Inputs); in != "" {
				st.Abort()
				return nil, fmt.Errorf("the output directory %s holds the input %s: replacing it would remove the input; write elsewhere", root, in)
			}
		}
	}
	w, err := createIn(st, dst, s, o)
	if err == nil {
		for _, sc := range o.Sidecars {
			if err = st.WriteFile(SidecarPath(dst, o.Format, sc.Name), sc.Data); err != nil {
				w.Abort()
				break
			}
		}
	}
	if err != nil {
		st.Abort()
		return nil, err
	}
	return &stagedWriter{Writer: w, st: st}, nil
}

// listName is the name of a Norm or Parquet output's file list:
// dst's own name when dst names a .txt file (the path the user will pass
// to train or validate), else file_list.txt (Norm) or NVTabular's
// _file_list.txt (Parquet).
func listName(dst string, f Format) string {
	switch {
	case strings.HasSuffix(dst, ".txt"):
		return filepath.Base(dst)
	case f == Parquet:
		return parquet.FileListName
	}
	return "file_list.txt"
}

// createIn opens the format writer of the output, its files made by st.
func createIn(st *atomicfile.Stage, dst string, s *formats.Schema, o Output) (formats.Writer, error) {
	switch o.Format {
	case Norm:
		list := dst
		if !strings.HasSuffix(dst, ".txt") {
			list = filepath.Join(dst, "file_list.txt")
		}
		w, err := norm.CreateList(list, s, norm.ListOptions{WriterOptions: norm.WriterOptions{Check: o.Check, Files: st}, SamplesPerFile: o.SamplesPerFile})
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return w, nil
	case Parquet:
		w, err := parquet.NewDatasetWriter(OutputDir(dst, Parquet), s, parquet.DatasetOptions{
			WriterOptions: parquet.WriterOptions{Compression: o.Compression, RowGroupSize: o.RowGroupSize, CatType: o.CatType, Dictionary: o.Dictionary, Files: st},
			RowsPerFile:   o.SamplesPerFile,
			ListName:      listName(dst, Parquet),
		})
		if err != nil {
			return nil, err
		}
		return w, nil
	}
	layout := raw.OneHot
	for _, sl := range s.Slots {
		if sl.Hotness != 1 {
			layout = raw.MultiHot
		}
	}
	if o.RawLayoutSet {
		layout = o.RawLayout
	}
	w, err := raw.CreateWith(st, dst, s, layout)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// inside returns the first of files that lies under dir, or "".
func inside(dir string, files []string) string {
	d, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if a, err := filepath.Abs(f); err == nil {
			if rel, err := filepath.Rel(d, a); err == nil && filepath.IsLocal(rel) {
				return f
			}
		}
	}
	return ""
}

// stagedWriter commits its Stage when the format writer closes.
type stagedWriter struct {
	formats.Writer
	st *atomicfile.Stage
}

func (w *stagedWriter) Close() error {
	if err := w.Writer.Close(); err != nil {
		w.st.Abort()
		return err
	}
	return w.st.Commit()
}

func (w *stagedWriter) Abort() error {
	w.Writer.Abort()
	return w.st.Abort()
}
