package dataset

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
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
	// SamplesPerFile rolls Norm and Parquet output over to a new file.
	SamplesPerFile int64
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
func Create(dst string, s *formats.Schema, o Output) (formats.Writer, error) {
	switch o.Format {
	case Norm:
		list := dst
		if !strings.HasSuffix(dst, ".txt") {
			list = filepath.Join(dst, "file_list.txt")
		}
		return norm.CreateList(list, s, norm.ListOptions{WriterOptions: norm.WriterOptions{Check: o.Check}, SamplesPerFile: o.SamplesPerFile})
	case Parquet:
		dir := dst
		if strings.HasSuffix(dst, ".txt") {
			dir = filepath.Dir(dst)
		}
		return parquet.NewDatasetWriter(dir, s, parquet.DatasetOptions{
			WriterOptions: parquet.WriterOptions{Compression: o.Compression, RowGroupSize: o.RowGroupSize, CatType: o.CatType},
			RowsPerFile:   o.SamplesPerFile,
		})
	case Raw:
		layout := raw.OneHot
		for _, sl := range s.Slots {
			if sl.Hotness != 1 {
				layout = raw.MultiHot
			}
		}
		if o.RawLayoutSet {
			layout = o.RawLayout
		}
		return raw.Create(dst, s, layout)
	}
	return nil, fmt.Errorf("cannot write format %s", o.Format)
}
