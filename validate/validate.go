package validate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/parquet"
)

// Options configure a validation. The zero value is useful.
type Options struct {
	// MaxPerKind is how many problems of one kind are listed per file
	// (default 20); all are counted.
	MaxPerKind int
	// BufferSize is the read buffer of the Norm and Raw walks (default 4 MiB).
	BufferSize int
	// Progress, when not nil, is called with the number of data bytes
	// checked since its last call.
	Progress func(bytes int64)
}

// Validate reports options that cannot work.
func (o *Options) Validate() error {
	if o.MaxPerKind < 0 || o.BufferSize < 0 {
		return errors.New("negative MaxPerKind or BufferSize")
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MaxPerKind == 0 {
		o.MaxPerKind = 20
	}
	if o.BufferSize == 0 {
		o.BufferSize = 4 << 20
	}
	return o
}

// run is the state of one validation.
type run struct {
	o    Options
	spec dataset.Spec
	rep  *Report
}

func (v *run) progress(n int64) {
	if v.o.Progress != nil && n > 0 {
		v.o.Progress(n)
	}
}

// Run validates the dataset at path (a file list, a directory holding one, a
// Norm, Raw or Parquet file, or Criteo text) described by spec, reporting
// every problem it finds (see the package doc). The error is non-nil only
// when validation could not run at all (a missing path, an unreadable or
// malformed file list, flags that contradict each other); problems in the
// data are in the Report.
func Run(path string, spec dataset.Spec, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	v := &run{o: o, spec: spec, rep: newReport(path, o.MaxPerKind)}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		found := false
		for _, n := range []string{parquet.FileListName, "file_list.txt"} {
			if _, err := os.Stat(filepath.Join(path, n)); err == nil {
				path, found = filepath.Join(path, n), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%s is a directory without %s or file_list.txt; name a file list or a data file", path, parquet.FileListName)
		}
	}
	head, err := dataset.ReadHead(path, 4096)
	if err != nil {
		return nil, err
	}
	if v.spec.Keys == dataset.KeysUnknown {
		// The sidecar says whether keys are global: slot s's keys are
		// then checked against [P_s, P_s + size_s).
		list, first := "", path
		if dataset.LooksLikeFileList(head) {
			list, first = path, ""
		}
		if ki, ok, err := dataset.FindKeyInfo(list, first); err == nil && ok && ki.Keys != dataset.KeysUnknown {
			v.spec.Keys = ki.Keys
			v.note("keys %s (from %s)", ki.Keys.Phrase(), ki.File)
		}
	}
	if st, err := os.Stat(path); err == nil && (!st.Mode().IsRegular() || st.Size() == 0) {
		// A device or an empty file: dataset.Resolve says which.
		_, err := dataset.Resolve(path, spec)
		if err == nil {
			err = fmt.Errorf("%s: %w", path, dataset.ErrNotDataset)
		}
		return nil, err
	}
	f := spec.Format
	var files []string
	if dataset.LooksLikeFileList(head) && f != dataset.Raw && f != dataset.CriteoTSV && f != dataset.CriteoCSV {
		files, err = v.readList(path)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			v.rep.Format = f.String()
			v.rep.finish()
			return v.rep, nil
		}
		if f == dataset.Auto {
			f = dataset.Norm
			if h, _ := dataset.ReadHead(files[0], 4); string(h) == "PAR1" {
				f = dataset.Parquet
			}
			// The detector every command uses: Criteo text lists, and a
			// list of Raw files refused (Raw is one file).
			if det, err := dataset.Detect(path, dataset.Auto); err == nil {
				f = det.Format
			} else if errors.Is(err, dataset.ErrNotDataset) {
				return nil, err
			}
			if f != dataset.CriteoTSV && f != dataset.CriteoCSV { // (their reader's notes say it)
				v.note("format %s (from the first file of the list)", f)
			}
		}
	} else {
		files = []string{path}
		v.rep.Files = 1
		if f == dataset.Auto {
			d, err := dataset.Resolve(path, spec)
			detected, _, _ := dataset.DetectFormat(path, dataset.Auto)
			switch {
			case err == nil:
				f = d.Format
			case detected == dataset.CriteoTSV || detected == dataset.CriteoCSV:
				// Criteo text that cannot be read as given (no hash
				// buckets or vocabulary): its error names the flag; it
				// is never taken for Raw.
				return nil, err
			case bytes.HasPrefix(head, []byte("PAR1")):
				f = dataset.Parquet
			case errors.Is(err, dataset.ErrNotDataset) && sniffBinary(head) != dataset.Norm:
				return nil, err
			default:
				// Resolve fails on a corrupt file; the format is then Norm when
				// the file starts like one, else Raw.
				f = sniffBinary(head)
			}
			v.note("format %s (detected)", f)
		}
	}
	v.rep.Format = f.String()
	switch f {
	case dataset.Norm:
		err = v.norm(files)
	case dataset.Raw:
		err = v.raw(files[0])
	case dataset.Parquet:
		err = v.parquet(files)
	case dataset.CriteoTSV, dataset.CriteoCSV:
		err = v.criteo(path)
	default:
		err = fmt.Errorf("cannot validate format %s", f)
	}
	if err != nil {
		return nil, err
	}
	if v.rep.Samples == 0 && v.rep.Total == 0 {
		v.rep.add(KindEmpty, path, -1, -1, "no samples: the %s dataset holds 0 records", f)
	}
	v.rep.finish()
	return v.rep, nil
}

func (v *run) note(format string, args ...any) {
	v.rep.Notes = append(v.rep.Notes, fmt.Sprintf(format, args...))
}

// readList parses a file list, reporting every missing file and returning
// the others.
func (v *run) readList(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	names, err := formats.ParseFileList(data)
	if err != nil {
		var fe *formats.Error
		if errors.As(err, &fe) {
			fe.Path = path
		}
		return nil, fmt.Errorf("reading the file list: %w", err)
	}
	v.rep.Files = len(names)
	dir := filepath.Dir(path)
	var out []string
	for i, n := range names {
		cands := []string{n}
		if alt := filepath.Join(dir, n); !filepath.IsAbs(n) && alt != filepath.Clean(n) {
			cands = append(cands, alt)
		}
		found := ""
		for _, c := range cands {
			if st, err := os.Stat(c); err == nil && !st.IsDir() {
				found = c
				break
			}
		}
		if found == "" {
			v.rep.add(KindMissingFile, path, -1, int64(i+2), "data file %q does not exist (tried %q)", n, cands)
			continue
		}
		out = append(out, found)
	}
	return out, nil
}

// sniffBinary guesses the format of a file dataset.Resolve rejected: Norm
// when it starts with a checksum frame or a plausible unframed header
// (error_check 0 or 1 and small dimensions), else Raw.
func sniffBinary(head []byte) dataset.Format {
	le := func(i int) uint64 {
		var x uint64
		for j := 7; j >= 0; j-- {
			x = x<<8 | uint64(head[i+j])
		}
		return x
	}
	if len(head) >= 4 && head[0] == 64 && head[1] == 0 && head[2] == 0 && head[3] == 0 {
		return dataset.Norm
	}
	if len(head) >= 40 && le(0) <= 1 && le(16) < 1<<20 && le(24) < 1<<20 && le(32) < 1<<20 && le(16)+le(24)+le(32) > 0 {
		return dataset.Norm
	}
	return dataset.Raw
}
