package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/model"
)

// detectedSource is the format and path the trainer reads for one source
// (--source or --eval-source), found by dataset.Detect, the detector every
// command shares.
type detectedSource struct {
	format dataset.Format // Norm, Raw or Parquet
	path   string         // a directory's file list replaces the directory
	note   string         // for the note line, "" when nothing was detected
}

// detectTrainSource detects what the trainer must read at path for the flag
// (--source, --eval-source). given is the format the config or --format
// says (dataset.Auto when neither does): then only a directory is resolved to its
// file list, and a format the content contradicts (a Parquet file read as
// Norm, Criteo text read as Raw) is refused naming --format. Criteo text
// is refused with the convert command that makes it trainable.
func detectTrainSource(flag, path string, given dataset.Format) (detectedSource, error) {
	ds := detectedSource{format: given, path: path}
	det, err := dataset.Detect(path, dataset.Auto)
	if err != nil {
		if given != dataset.Auto {
			return ds, nil // the reader of the given format reports the problem
		}
		return ds, fmt.Errorf("--%s: %w", flag, err)
	}
	if det.List != "" {
		ds.path = det.List
	}
	switch det.Format {
	case dataset.CriteoTSV, dataset.CriteoCSV:
		return ds, fmt.Errorf("--%s %s is Criteo text (%s); train, evaluate and predict read Norm, Raw or Parquet: convert it first, e.g.\n"+
			"  ctrkit convert %s data/ --to parquet --slot-size-array 10000   (hash buckets per slot; or --vocab)",
			flag, path, det.Format, path)
	}
	if given == dataset.Auto {
		ds.format = det.Format
		ds.note = fmt.Sprintf("--%s %s: format %s (detected; --format overrides)", flag, path, det.Format)
		if det.List != "" && det.List != path {
			ds.note = fmt.Sprintf("--%s %s: format %s, file list %s (detected; --format overrides)", flag, path, det.Format, det.List)
		}
		return ds, nil
	}
	// Raw is the detector's fallback, never a contradiction; Norm and
	// Parquet are found by their content.
	if got := det.Format; got != dataset.Raw && got != given {
		name := func(f dataset.Format) string { return (&model.Source{Format: f}).FormatName() }
		return ds, fmt.Errorf("--%s %s holds %s data, but the format is %s (the config's format or --format): give --format %s",
			flag, path, name(got), name(given), det.Format)
	}
	return ds, nil
}

func printNote(w io.Writer, note string) {
	if note != "" {
		fmt.Fprintln(w, "note:", note)
	}
}

// detectSources sets the training and evaluation sources' paths from
// --source and --eval-source (num_samples and eval_num_samples count the
// config's files, not the ones flags name instead) and their formats from
// the content when neither the config nor --format says one, printing a
// note line for each detection.
func detectSources(c *cli.Context, j *model.Job, cfg *graph.Config, train bool) error {
	if train && c.IsSet("source") {
		j.Train.Path, j.Train.Paths, j.Train.NumSamples = c.String("source"), nil, 0
	}
	if c.IsSet("eval-source") {
		j.Eval.Path, j.Eval.NumSamples = c.String("eval-source"), 0
	}
	given := dataset.Auto
	if cfg.Reader != nil || c.IsSet("format") {
		given = j.Train.Format
	}
	one := func(flag string, s *model.Source, p *string) error {
		if *p == "" {
			return nil
		}
		ds, err := detectTrainSource(flag, *p, given)
		if err != nil {
			return err
		}
		s.Format, *p = ds.format, ds.path
		printNote(c.App.ErrWriter, ds.note)
		return nil
	}
	if train {
		if len(j.Train.Paths) > 1 {
			for i := range j.Train.Paths {
				if err := one("source", &j.Train, &j.Train.Paths[i]); err != nil {
					return err
				}
			}
			j.Train.Path = j.Train.Paths[0]
		} else if err := one("source", &j.Train, &j.Train.Path); err != nil {
			return err
		}
	}
	return one("eval-source", &j.Eval, &j.Eval.Path)
}

// sourceKeys is the key convention the sidecar of src's (first) path
// records, KeysUnknown without one.
func sourceKeys(src model.Source) (dataset.KeyInfo, bool) {
	if src.Path == "" {
		return dataset.KeyInfo{}, false
	}
	det, err := dataset.Detect(src.Path, dataset.Auto)
	if err != nil || len(det.Files) == 0 {
		return dataset.KeyInfo{}, false
	}
	ki, ok, err := dataset.FindKeyInfo(det.List, det.Files[0])
	if err != nil {
		return dataset.KeyInfo{File: err.Error()}, false
	}
	return ki, ok
}

// warnKeyConvention warns when a source's sidecar says its keys are
// slot-local but the reader adds no slot offsets (every slot's key k then
// shares one embedding row: the model learns less, silently), or that they
// are global and the reader adds offsets again.
func warnKeyConvention(w io.Writer, j *model.Job, train bool) {
	for _, s := range []struct {
		flag string
		src  model.Source
		use  bool
	}{{"source", j.Train, train}, {"eval-source", j.Eval, true}} {
		ki, ok := sourceKeys(s.src)
		if s.use && !ok && ki.File != "" {
			fmt.Fprintf(w, "warning: --%s %s: %s (its key convention is unknown)\n", s.flag, s.src.Path, ki.File)
		}
		if !s.use || !ok {
			continue
		}
		switch {
		case ki.Keys == dataset.KeysSlotLocal && len(s.src.SlotSizeArray) == 0:
			fmt.Fprintf(w, "warning: --%s %s: its keys are slot-local (%s) but no slot offsets will be added, so slots share embedding rows; "+
				"give --data-slot-size-array @%s (or a slot_size_array in the config's data section), or convert the data to global keys (convert --slot-offsets)\n",
				s.flag, s.src.Path, ki.File, ki.File)
		case ki.Keys == dataset.KeysGlobal && len(s.src.SlotSizeArray) > 0:
			fmt.Fprintf(w, "warning: --%s %s: its keys are global (%s) and the reader adds slot offsets again; "+
				"remove the data section's slot_size_array (or --data-slot-size-array)\n", s.flag, s.src.Path, ki.File)
		}
	}
}

// modelOffsets reports whether a reference model's reader adds slot
// offsets: for Raw and Parquet data, and Norm data whose sidecar says its
// keys are slot-local — of the training source, or for evaluate and
// predict of the evaluation source (whose format was detected alone).
func modelOffsets(j *model.Job, train bool) bool {
	src := j.Train
	if !train {
		src = j.Eval
	}
	return src.Format != dataset.Norm || slotLocal(src)
}

// slotLocal reports whether src's sidecar says its keys are slot-local.
func slotLocal(src model.Source) bool {
	ki, ok := sourceKeys(src)
	return ok && ki.Keys == dataset.KeysSlotLocal
}
