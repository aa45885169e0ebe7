package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/model"
)

// trainFormats maps the detector's formats onto the trainer's names.
var trainFormats = map[dataset.Format]string{dataset.Norm: "Norm", dataset.Raw: "Raw", dataset.Parquet: "Parquet"}

// detectedSource is the format and path the trainer reads for one source
// (--source or --eval-source), found by dataset.Detect, the detector every
// command shares.
type detectedSource struct {
	format string // Norm, Raw or Parquet
	path   string // a directory's file list replaces the directory
	note   string // for the note line, "" when nothing was detected
}

// detectTrainSource detects what the trainer must read at path for the flag
// (--source, --eval-source). given is the format the config or --format
// says ("" when neither does): then only a directory is resolved to its
// file list, and a format the content contradicts (a Parquet file read as
// Norm, Criteo text read as Raw) is refused naming --format. Criteo text
// is refused with the convert command that makes it trainable.
func detectTrainSource(flag, path, given string) (detectedSource, error) {
	ds := detectedSource{format: given, path: path}
	det, err := dataset.Detect(path, dataset.Auto)
	if err != nil {
		if given != "" {
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
	if given == "" {
		ds.format = trainFormats[det.Format]
		ds.note = fmt.Sprintf("--%s %s: format %s (detected; --format overrides)", flag, path, det.Format)
		if det.List != "" && det.List != path {
			ds.note = fmt.Sprintf("--%s %s: format %s, file list %s (detected; --format overrides)", flag, path, det.Format, det.List)
		}
		return ds, nil
	}
	// Raw is the detector's fallback, never a contradiction; Norm and
	// Parquet are found by their content.
	if got := trainFormats[det.Format]; det.Format != dataset.Raw && got != given && !(given == "RawAsync" && got == "Raw") {
		return ds, fmt.Errorf("--%s %s holds %s data, but the format is %s (the config's format or --format): give --format %s",
			flag, path, got, given, det.Format)
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
	given := ""
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
