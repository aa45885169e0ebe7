package main

import (
	"fmt"

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
	fs := []cli.Flag{
		&cli.IntFlag{Name: "label-dim", Usage: "labels per sample (raw; checked against norm headers)"},
		&cli.IntFlag{Name: "dense-dim", Usage: "dense features per sample (raw; checked against norm headers)"},
		&cli.IntFlag{Name: "num-slot", Usage: "categorical slots per sample (raw; checked against norm headers)"},
		&cli.BoolFlag{Name: "i64-input-key", Usage: "64-bit keys (HugeCTR i64); detected for norm when not given"},
		&cli.StringFlag{Name: "check-type", Usage: "norm framing: sum | none (default: from the header)"},
		&cli.StringFlag{Name: "slot-size-array", Usage: "comma-separated slot sizes (one value: every slot): key range checks; hash buckets for criteo text"},
		&cli.BoolFlag{Name: "slot-offsets", Usage: "add slot offsets (Σ earlier slot sizes) to keys when reading"},
		&cli.StringFlag{Name: "nnz-array", Usage: "comma-separated max keys per slot (norm, parquet) or hotness (raw multihot); one value: every slot"},
		&cli.BoolFlag{Name: "float-label-dense", Usage: "raw: float32 label and dense values instead of int32"},
		&cli.StringFlag{Name: "raw-layout", Usage: "raw: onehot | multihot (default: multihot when some nnz > 1)"},
		&cli.StringFlag{Name: "label-type", Usage: "raw label type: int32 | float32 (default: multihot int32 (HugeCTR v25), onehot by --float-label-dense)"},
		&cli.StringFlag{Name: "dense-type", Usage: "raw dense type: int32 (read as ln(x+1)) | float32 (default: by --float-label-dense)"},
		&cli.BoolFlag{Name: "skip-corrupt", Usage: "norm: skip records with a bad check byte (HugeCTR's behaviour) instead of failing"},
		&cli.StringFlag{Name: "vocab-file", Usage: "criteo text: map categoricals with the vocabulary `FILE` (written by convert --vocab-out)"},
	}
	if from {
		fs = append(fs, &cli.StringFlag{Name: "from", Usage: "input format: norm | raw | parquet | criteo-tsv | criteo-csv (default: detected)"})
	}
	return fs
}

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
	sp.Offsets = c.Bool("slot-offsets")
	if sp.Offsets && sp.SlotSizeArray == nil {
		return sp, fmt.Errorf("--slot-offsets needs --slot-size-array")
	}
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
	if c.IsSet("raw-layout") {
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
