package norm

import (
	"fmt"
	"path/filepath"

	"github.com/ctrkit/ctrkit/formats"
)

// ListOptions configure CreateList.
type ListOptions struct {
	WriterOptions
	// SamplesPerFile starts a new data file after this many samples (0:
	// one file).
	SamplesPerFile int64
	// Prefix names the data files <Prefix><k>.data beside the list
	// (default "part_").
	Prefix string
}

// CreateList writes a Norm dataset: data files <dir>/<Prefix><k>.data and,
// on Close, the file list at listPath (SPEC §1) naming them relative to its
// directory. Each file is written under a temporary name and renamed.
func CreateList(listPath string, s *formats.Schema, o ListOptions) (*formats.SplitWriter, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.SamplesPerFile < 0 {
		return nil, fmt.Errorf("samples per file %d must be ≥ 0", o.SamplesPerFile)
	}
	if o.Prefix == "" {
		o.Prefix = "part_"
	}
	dir := filepath.Dir(listPath)
	return &formats.SplitWriter{
		PerFile:         o.SamplesPerFile,
		RemoveCommitted: o.Files == nil,
		Create: func(k int) (formats.RangeWriter, string, error) {
			p := filepath.Join(dir, fmt.Sprintf("%s%d.data", o.Prefix, k))
			w, err := Create(p, s, o.WriterOptions)
			if err != nil {
				return nil, p, err // not the typed nil *Writer
			}
			return w, p, nil
		},
		Finish: func(files []string, _ []int64) error { return formats.WriteFileListTo(o.Files, listPath, files) },
	}, nil
}
