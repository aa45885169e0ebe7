package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

func init() {
	d := datagen.DefaultParams()
	commands = append(commands, &cli.Command{
		Name:  "gen",
		Usage: "generate a synthetic CTR dataset (HugeCTR DataGenerator parity, reproducible, learnable labels)",
		Description: "Writes Norm, Parquet, Raw or Criteo-style text data with HugeCTR's file naming.\n" +
			"Flags are HugeCTR's DataGeneratorParams in kebab case. The same --seed gives\n" +
			"byte-identical files whatever --num-workers. With --label-mode planted (default) labels\n" +
			"come from a hidden logistic model and the summary reports its Bayes AUC.\n" +
			"HugeCTR's defaults are 128 train files of 40960 samples: ask for less with\n" +
			"--num-files/--num-samples-per-file (or --num-samples for raw).\n" +
			"The eval set goes beside --out-source unless --out-eval-source says otherwise. The train\n" +
			"and eval sets appear only complete (temporary directory renamed into place);\n" +
			"an existing dataset is replaced only with --force, atomically.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "norm", Usage: "norm | parquet | raw | criteo"},
			vflag("label-dim", withValue(d.LabelDim)),
			vflag("dense-dim", withValue(d.DenseDim)),
			vflag("num-slot", withValue(d.NumSlot)),
			vflag("i64-input-key"),
			vflag("out-source", withDefaultText("data/file_list.txt, raw: data/train_data.bin")),
			vflag("out-eval-source", withDefaultText("file_list_test.txt, raw: test_data.bin, beside --out-source")),
			vflag("slot-size-array", withDefaultText("10000 per slot")),
			vflag("nnz-array", withDefaultText("1 per slot")),
			vflag("check-type", withValue("sum")),
			&cli.StringFlag{Name: "dist-type", Value: "powerlaw", Usage: "key distribution: powerlaw | uniform"},
			&cli.StringFlag{Name: "power-law-type", Value: "specific", Usage: "long (α 0.9) | medium (1.1) | short (1.3) | specific (--alpha)"},
			&cli.Float64Flag{Name: "alpha", Value: d.Alpha, Usage: "power-law exponent with --power-law-type specific (> 0, ≠ 1)"},
			&cli.IntFlag{Name: "num-files", Value: d.NumFiles, Usage: "train files (norm, parquet, criteo)"},
			&cli.IntFlag{Name: "eval-num-files", Value: d.EvalNumFiles, Usage: "eval files (norm, parquet, criteo)"},
			&cli.IntFlag{Name: "num-samples-per-file", Value: d.NumSamplesPerFile, Usage: "samples per file (norm, parquet, criteo)"},
			&cli.Int64Flag{Name: "num-samples", Value: d.NumSamples, Usage: "train samples (raw)"},
			&cli.Int64Flag{Name: "eval-num-samples", Value: d.EvalNumSamples, Usage: "eval samples (raw)"},
			vflag("float-label-dense"),
			vflag("raw-layout", withValue("auto")),
			vflag("compression"), vflag("row-group-size"), vflag("cat-type"), vflag("dictionary", withValue(true)),
			&cli.Uint64Flag{Name: "seed", Usage: "master seed", DefaultText: "random, printed"},
			&cli.StringFlag{Name: "label-mode", Value: "planted", Usage: "planted (learnable, reports its AUC) | uniform (HugeCTR's values)"},
			&cli.Float64Flag{Name: "missing-rate", Value: d.MissingRate, Usage: "criteo: probability of an empty field"},
			vflag("num-workers", withDefaultText("GOMAXPROCS")),
			&cli.BoolFlag{Name: "force", Usage: "replace an existing dataset (atomically: the old one stays whole until the new one is complete)"},
			&cli.BoolFlag{Name: "no-sync", Usage: "skip the fsync before the final renames (scratch data: a crash may then lose it)"},
			jsonFlag("samples, bytes, seconds, bytes_per_s, seed, planted_auc, key_convention, files"),
		},
		Action: runGen,
	})
}

// genParams turns the flags into datagen.Params.
func genParams(c *cli.Context) (datagen.Params, error) {
	p := datagen.DefaultParams()
	var err error
	if p.Format, err = datagen.ParseFormat(c.String("format")); err != nil {
		return p, fmt.Errorf("--format: %w", err)
	}
	p.LabelDim, p.DenseDim, p.NumSlot = c.Int("label-dim"), c.Int("dense-dim"), c.Int("num-slot")
	p.I64InputKey = c.Bool("i64-input-key")
	p.Source, p.EvalSource = c.String("out-source"), c.String("out-eval-source")
	// The eval set goes beside the train set: with --source alone, a
	// default eval path elsewhere would overwrite another dataset's files.
	source, eval := "file_list.txt", "file_list_test.txt"
	if p.Format == datagen.Raw {
		source, eval = "train_data.bin", "test_data.bin"
	}
	if !c.IsSet("out-source") {
		p.Source = filepath.Join("data", source)
	}
	if !c.IsSet("out-eval-source") {
		p.EvalSource = filepath.Join(filepath.Dir(p.Source), eval)
	}
	if c.IsSet("slot-size-array") {
		if p.SlotSizeArray, err = parseInts[int64]("slot-size-array", c.String("slot-size-array")); err != nil {
			return p, err
		}
		if p.SlotSizeArray, err = dataset.PerSlot("--slot-size-array", p.SlotSizeArray, p.NumSlot); err != nil {
			return p, err
		}
	} else {
		p.SlotSizeArray = make([]int64, max(p.NumSlot, 0))
		for i := range p.SlotSizeArray {
			p.SlotSizeArray[i] = 10000
		}
	}
	if c.IsSet("nnz-array") {
		if p.NNZArray, err = parseInts[int]("nnz-array", c.String("nnz-array")); err != nil {
			return p, err
		}
		if p.NNZArray, err = dataset.PerSlot("--nnz-array", p.NNZArray, p.NumSlot); err != nil {
			return p, err
		}
	}
	for _, f := range []string{"compression", "row-group-size", "cat-type", "dictionary"} {
		if c.IsSet(f) && p.Format != datagen.Parquet {
			return p, fmt.Errorf("--%s applies to --format parquet, not %s", f, c.String("format"))
		}
	}
	pw, err := parquetWriterFlags(c)
	if err != nil {
		return p, err
	}
	if p.Format == datagen.Parquet {
		p.ParquetWriter = pw
	}
	if p.CheckType, err = norm.ParseCheckMode(c.String("check-type")); err != nil {
		return p, fmt.Errorf("--check-type: %w", err)
	}
	if p.DistType, err = datagen.ParseDistType(c.String("dist-type")); err != nil {
		return p, fmt.Errorf("--dist-type: %w", err)
	}
	if p.PowerLawType, err = datagen.ParsePowerLawType(c.String("power-law-type")); err != nil {
		return p, fmt.Errorf("--power-law-type: %w", err)
	}
	p.Alpha = c.Float64("alpha")
	p.NumFiles, p.EvalNumFiles = c.Int("num-files"), c.Int("eval-num-files")
	p.NumSamplesPerFile = c.Int("num-samples-per-file")
	p.NumSamples, p.EvalNumSamples = c.Int64("num-samples"), c.Int64("eval-num-samples")
	p.FloatLabelDense = c.Bool("float-label-dense")
	if p.RawLayout, p.RawLayoutSet, err = datagen.ParseRawLayout(c.String("raw-layout")); err != nil {
		return p, fmt.Errorf("--raw-layout: %w", err)
	}
	p.Seed = c.Uint64("seed")
	if p.LabelMode, err = datagen.ParseLabelMode(c.String("label-mode")); err != nil {
		return p, fmt.Errorf("--label-mode: %w", err)
	}
	p.MissingRate = c.Float64("missing-rate")
	p.Threads = c.Int("num-workers")
	return p, nil
}

// parseInts parses the comma-separated integers of a flag's value.
//
// A slot-size flag (--slot-size-array, --data-slot-size-array) also takes
// @FILE: the sizes of a slot_size_array.json, gen_params.json, or the
// sidecar of the dataset (directory, file list, Raw file) FILE names.
func parseInts[T int | int64](flag, s string) ([]T, error) {
	var out []T
	if file, ok := strings.CutPrefix(strings.TrimSpace(s), "@"); ok && strings.HasSuffix(flag, "slot-size-array") {
		sizes, err := dataset.SlotSizesFromFile(file)
		if err != nil {
			return nil, fmt.Errorf("--%s @%s: %w", flag, file, err)
		}
		for _, v := range sizes {
			if int64(T(v)) != v {
				return nil, fmt.Errorf("--%s @%s: slot size %d is too large", flag, file, v)
			}
			out = append(out, T(v))
		}
		return out, nil
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || int64(T(v)) != v {
			return nil, fmt.Errorf("--%s: %q is not an integer", flag, f)
		}
		out = append(out, T(v))
	}
	return out, nil
}

func runGen(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("gen takes no arguments, got %q", c.Args().First())
	}
	p, err := genParams(c)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		w = c.App.ErrWriter // stdout holds the JSON alone
	}
	res, err := datagen.Run(c.Context, p, datagen.RunOptions{RandomSeed: !c.IsSet("seed"),
		Output: datagen.Output{Force: c.Bool("force"), NoSync: c.Bool("no-sync")}}, w)
	if err == nil && c.Bool("json") {
		return printJSON(c.App.Writer, genResultJSON(res))
	}
	if err != nil && c.Context.Err() != nil {
		return interrupted(genOutputs(p))
	}
	if errors.Is(err, atomicfile.ErrExists) {
		return &exitError{2, err}
	}
	var pe *datagen.ParamError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s", pe.Flag(), pe.Msg)
	}
	return err
}

// genOutputs names the outputs of a run for the interrupt message.
func genOutputs(p datagen.Params) string {
	if filepath.Dir(p.Source) == filepath.Dir(p.EvalSource) && p.Format != datagen.Raw {
		return filepath.Dir(p.Source) + string(filepath.Separator)
	}
	return p.Source + " and " + p.EvalSource
}
