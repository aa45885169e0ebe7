package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/criteo"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// schemaFlags are the dataset-describing flags every data command shares,
// named after HugeCTR's parameters in kebab case. Norm needs none of them
// to be read (header plus detection); Raw needs its shape.
func schemaFlags(from bool) []cli.Flag {
	fs := vflags(schemaFlagNames...)
	if from {
		fs = append(fs, vflag("from"))
	}
	return fs
}

// schemaFlagNames are the schema flags of schemaFlags, --from aside.
var schemaFlagNames = []string{"label-dim", "dense-dim", "num-slot", "i64-input-key", "check-type", "slot-size-array",
	"slot-offsets", "nnz-array", "float-label-dense", "raw-layout", "label-type", "dense-type", "skip-corrupt", "vocab-file"}

// specFromFlags turns the schema flags into a dataset.Spec.
func specFromFlags(c *cli.Context) (dataset.Spec, error) {
	var sp dataset.Spec
	var err error
	if c.IsSet("from") {
		if sp.Format, err = dataset.ParseFormat(c.String("from")); err != nil {
			return sp, fmt.Errorf("--from: %w", err)
		}
	}
	sp.LabelDim, sp.DenseDim, sp.NumSlot = c.Int("label-dim"), c.Int("dense-dim"), c.Int("num-slot")
	for _, name := range []string{"label-dim", "dense-dim", "num-slot"} {
		if v := c.Int(name); v < 0 || v > formats.MaxDim {
			return sp, fmt.Errorf("--%s %d: want 0..%d", name, v, formats.MaxDim)
		}
	}
	if c.IsSet("i64-input-key") {
		sp.KeyTypeSet = true
		if c.Bool("i64-input-key") {
			sp.KeyType = formats.KeyI64
		}
	}
	if c.IsSet("check-type") {
		if sp.Check, err = norm.ParseCheckMode(c.String("check-type")); err != nil {
			return sp, fmt.Errorf("--check-type: %w", err)
		}
		sp.CheckSet = true
	}
	if c.IsSet("slot-size-array") {
		if sp.SlotSizeArray, err = parseInts[int64]("slot-size-array", c.String("slot-size-array")); err != nil {
			return sp, err
		}
		for i, n := range sp.SlotSizeArray {
			if n <= 0 {
				return sp, fmt.Errorf("--slot-size-array: entry %d is %d; slot sizes must be > 0", i, n)
			}
		}
	}
	sp.Offsets = c.Bool("slot-offsets") // (the sizes may come from the dataset's sidecar: dataset.Resolve checks)
	if c.IsSet("nnz-array") {
		if sp.NNZ, err = parseInts[int]("nnz-array", c.String("nnz-array")); err != nil {
			return sp, err
		}
		for i, n := range sp.NNZ {
			if n < 0 || n > formats.MaxDim {
				return sp, fmt.Errorf("--nnz-array: entry %d is %d; want 0..%d", i, n, formats.MaxDim)
			}
		}
	}
	sp.FloatLabelDense = c.Bool("float-label-dense")
	if c.IsSet("raw-layout") && !strings.EqualFold(c.String("raw-layout"), "auto") {
		if sp.RawLayout, err = raw.ParseLayout(c.String("raw-layout")); err != nil {
			return sp, fmt.Errorf("--raw-layout: %w", err)
		}
		sp.RawLayoutSet = true
	}
	if c.IsSet("label-type") {
		if sp.LabelType, err = formats.ParseValueType(c.String("label-type")); err != nil {
			return sp, fmt.Errorf("--label-type: %w", err)
		}
		sp.LabelTypeSet = true
	}
	if c.IsSet("dense-type") {
		if sp.DenseType, err = formats.ParseValueType(c.String("dense-type")); err != nil {
			return sp, fmt.Errorf("--dense-type: %w", err)
		}
		sp.DenseTypeSet = true
	}
	sp.SkipCorrupt = c.Bool("skip-corrupt")
	if c.IsSet("vocab-file") {
		if sp.Vocab, err = criteo.LoadVocab(c.String("vocab-file")); err != nil {
			return sp, fmt.Errorf("--vocab-file: %w", err)
		}
	}
	return sp, nil
}

// resolveArg resolves the dataset named by the command's first argument.
func resolveArg(c *cli.Context, what string) (*dataset.Dataset, error) {
	if c.NArg() < 1 {
		return nil, &exitError{2, fmt.Errorf("%s: missing %s argument (see ctrkit %s --help)", c.Command.Name, what, c.Command.Name)}
	}
	sp, err := specFromFlags(c)
	if err != nil {
		return nil, &exitError{2, err}
	}
	d, err := dataset.Resolve(c.Args().First(), sp)
	if err != nil {
		return nil, &exitError{2, err}
	}
	return d, nil
}
