package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/internal/progress"
	"github.com/ctrkit/ctrkit/validate"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "validate",
		Usage:     "read a whole dataset and report every problem in it",
		ArgsUsage: "PATH",
		Description: "PATH is a file list (Norm, Parquet), a directory holding one, a Norm or Raw file,\n" +
			"or Criteo text. Every problem is reported, one line each naming the file, the byte\n" +
			"offset and the record: bad headers, checksum failures, truncation, nnz out of range,\n" +
			"keys ≥ slot size (--slot-size-array), NaN/Inf labels or dense values, labels outside\n" +
			"[0,1], negative int32 Raw dense values (clamped to 0), missing files, _metadata.json\n" +
			"disagreements. Exit status: 0 clean, 1 problems found, 2 could not run.\n\n" +
			"Examples:\n" +
			"  ctrkit validate data/file_list.txt\n" +
			"  ctrkit validate --slot-size-array 1000,2000,500 --nnz-array 1,2,1 data/file_list.txt\n" +
			"  ctrkit validate --label-dim 1 --dense-dim 13 --num-slot 26 train.bin\n" +
			"  ctrkit validate --json data/_file_list.txt > report.json",
		Flags: append(schemaFlags(true),
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object (problems, counts per kind, samples checked)"},
			&cli.IntFlag{Name: "max-per-kind", Value: 20, Usage: "problems of one kind listed per file (all are counted)"},
		),
		Action: runValidate,
	})
}

func runValidate(c *cli.Context) error {
	if c.NArg() != 1 {
		return &exitError{2, fmt.Errorf("validate: want one PATH argument, got %d (see ctrkit validate --help)", c.NArg())}
	}
	sp, err := specFromFlags(c)
	if err != nil {
		return &exitError{2, err}
	}
	if c.Int("max-per-kind") <= 0 {
		return &exitError{2, errors.New("--max-per-kind must be > 0")}
	}
	path := c.Args().First()
	bar := progress.New(c.App.ErrWriter, -1, "validating", "bytes")
	rep, err := runCancellable(c.Context, func() (*validate.Report, error) {
		return validate.Run(path, sp, validate.Options{MaxPerKind: c.Int("max-per-kind"), Progress: bar.Add})
	})
	bar.Finish()
	if c.Context.Err() != nil {
		return interrupted("")
	}
	if err != nil {
		return &exitError{2, fmt.Errorf("validate %s: %w", path, err)}
	}
	if c.Bool("json") {
		err = rep.WriteJSON(c.App.Writer)
	} else {
		err = rep.WriteText(c.App.Writer)
	}
	if err != nil {
		return &exitError{2, err}
	}
	if !rep.Clean() {
		s := "s"
		if rep.Total == 1 {
			s = ""
		}
		return &exitError{1, fmt.Errorf("%s: %d problem%s found (see above)", path, rep.Total, s)}
	}
	return nil
}
