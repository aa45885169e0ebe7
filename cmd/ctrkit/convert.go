package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/criteo"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
	"github.com/ctrkit/ctrkit/internal/progress"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "convert",
		Usage:     "convert a dataset between Norm, Raw and Parquet, or from Criteo text logs",
		ArgsUsage: "SRC DST",
		Description: `SRC is a file list (Norm, Parquet), a Raw file or Criteo text; DST is a file list
path or directory (Norm, Parquet) or a file (Raw). Conversion streams: memory is a
few batches, whatever the dataset's size.

The output appears only when complete: a Norm or Parquet dataset is written in a
temporary directory beside DST's directory and renamed into place (swapped with a
dataset already there, which --force allows), the index last; a Raw file under a
temporary name. On an error or an interrupt (Ctrl-C, SIGTERM) nothing of it remains
and a previous dataset at DST stays as it was.

Examples:
   ctrkit convert data/file_list.txt out/ --to parquet
   ctrkit convert train.bin out/file_list.txt --to norm --label-dim 1 --dense-dim 13 --num-slot 26
   ctrkit convert day_0.tsv out.raw --to raw --slot-size-array 1000,1000,... (26 hash buckets)
   ctrkit convert day_0.tsv out/ --to parquet --vocab --min-count 6 --vocab-memory 2GiB`,
		Flags: append(schemaFlags(true),
			&cli.StringFlag{Name: "to", Usage: "output format: norm | raw | parquet (required)"},
			&cli.StringFlag{Name: "out-check-type", Value: "sum", Usage: "norm output framing: sum | none"},
			&cli.StringFlag{Name: "out-key-type", Usage: "output keys: i32 | i64 (default: the input's)"},
			&cli.StringFlag{Name: "out-raw-layout", Usage: "raw output: onehot | multihot (default: multihot when some slot has hotness > 1)"},
			&cli.BoolFlag{Name: "out-float-label-dense", Usage: "raw output: float32 label and dense instead of int32 (dense as ln(x+1))"},
			&cli.StringFlag{Name: "out-label-type", Usage: "raw multihot output label type: int32 | float32"},
			&cli.Int64Flag{Name: "samples-per-file", Usage: "norm, parquet: start a new file after N samples (0: one file)"},
			vflag("compression"), vflag("row-group-size"), vflag("cat-type"), vflag("dictionary", withValue(true)),
			&cli.BoolFlag{Name: "vocab", Usage: "criteo text: map categoricals by a vocabulary built in a first pass"},
			&cli.IntFlag{Name: "min-count", Value: criteo.DefaultMinCount, Usage: "with --vocab: values seen fewer times share one id"},
			&cli.StringFlag{Name: "vocab-memory", Value: "1GiB", Usage: "with --vocab: memory budget of the counting (`SIZE`, e.g. 512MiB); beyond it counts spill to disk"},
			&cli.StringFlag{Name: "out-vocab", Usage: "with --vocab: save the vocabulary to `FILE` (reuse with --vocab-file)"},
			renamed("vocab-out", "out-vocab"),
			vflag("num-workers"),
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the conversion to `FILE` (go tool pprof)"},
			&cli.StringFlag{Name: "read-memory", Value: "768MiB", Usage: "bound on the reader's decoded buffers (`SIZE`; Parquet row groups): fewer reader goroutines run to stay under it; 0: none"},
			&cli.IntFlag{Name: "batchsize", Value: 65536, Usage: "samples per batch"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing output (atomically: the old dataset stays whole until the new one is complete)"},
			&cli.BoolFlag{Name: "no-sync", Usage: "skip the fsync before the output's final rename (scratch data: a crash may then lose it)"},
			jsonFlag("samples, seconds, samples_per_s, formats, slot_size_array_file, key_convention"),
		),
		Action: func(c *cli.Context) error { return runConvert(c, c.App.Writer) },
	})
}

func runConvert(c *cli.Context, w io.Writer) error {
	if c.NArg() != 2 {
		return &exitError{2, fmt.Errorf("convert: want SRC and DST arguments (see ctrkit convert --help)")}
	}
	src, dst := c.Args().Get(0), c.Args().Get(1)
	if err := checkConvertFlags(c); err != nil {
		return &exitError{2, err}
	}
	sp, err := specFromFlags(c)
	if err != nil {
		return &exitError{2, err}
	}
	if c.Bool("vocab") {
		f, files, err := dataset.DetectFormat(src, sp.Format)
		if err != nil {
			return &exitError{2, err}
		}
		if f != dataset.CriteoTSV && f != dataset.CriteoCSV {
			return &exitError{2, fmt.Errorf("--vocab: %s is %s, not Criteo text", src, f)}
		}
		sp.Format = f
		if sp.Vocab, err = buildVocab(c, files, sp, w); err != nil {
			return err
		}
	}
	d, err := dataset.Resolve(src, sp)
	if err != nil {
		return &exitError{2, err}
	}
	out, err := outputFromFlags(c, d)
	if err != nil {
		return &exitError{2, err}
	}
	for _, n := range d.Notes {
		fmt.Fprintln(c.App.ErrWriter, "note:", n)
	}
	var readMem int64
	if v := strings.TrimSpace(c.String("read-memory")); v != "0" {
		readMem, err = parseSize(v)
	}
	if err != nil {
		return &exitError{2, fmt.Errorf("--read-memory: %w", err)}
	}
	stop, err := startCPUProfile(c.String("cpuprofile"))
	if err != nil {
		return &exitError{2, err}
	}
	defer stop()
	sidecar, keys, err := convertKeys(c, d, &out)
	if err != nil {
		return &exitError{2, err}
	}
	out.Force, out.NoSync = c.Bool("force"), c.Bool("no-sync")
	bar := progress.New(c.App.ErrWriter, d.Samples, "converting", "samples")
	st, err := dataset.Convert(c.Context, d, dst, out, formats.Options{BatchSize: c.Int("batchsize"), Workers: c.Int("num-workers"), MemoryLimit: readMem},
		func(n int) { bar.Add(int64(n)) })
	bar.Finish()
	if err != nil && c.Context.Err() != nil {
		return interrupted(dst) // (a conversion that committed before the signal succeeded)
	}
	if errors.Is(err, atomicfile.ErrExists) {
		return &exitError{2, err}
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		j := convertJSON{Source: src, SourceFormat: d.Format.String(), Output: dst, OutputFormat: out.Format.String(), Samples: st.Samples,
			Seconds: num(st.Seconds), SamplesPerS: num(float64(st.Samples) / st.Seconds), ReadWorkers: st.ReadWorkers, KeyConvention: keys.String()}
		if sidecar != "" {
			j.SlotSizeFile = &sidecar
		}
		return printJSON(w, j)
	}
	if sidecar != "" {
		fmt.Fprintf(w, "slot_size_array written to %s (keys %s)\n", sidecar, keys)
	}
	fmt.Fprintf(w, "converted %d samples from %s (%s) to %s (%s)", st.Samples, src, d.Format, dst, out.Format)
	if os.Getenv(noTimingsEnv) == "" {
		fmt.Fprintf(w, " in %.2fs (%.0f samples/s, %d decoding goroutines)", st.Seconds, float64(st.Samples)/max(st.Seconds, 1e-9), st.ReadWorkers)
	}
	fmt.Fprintln(w)
	return nil
}

// noTimingsEnv, when set in the environment, leaves timings out of the
// commands' summaries, so tests can compare them with expected text.
const noTimingsEnv = "CTRKIT_NO_TIMINGS"

// checkConvertFlags refuses flag combinations that would be ignored or
// contradict each other, naming the flag.
func checkConvertFlags(c *cli.Context) error {
	if !c.IsSet("to") {
		return fmt.Errorf("--to is required: norm, raw or parquet")
	}
	if !c.Bool("vocab") {
		for _, n := range []string{"min-count", "vocab-memory", "out-vocab"} {
			if c.IsSet(n) {
				return fmt.Errorf("--%s needs --vocab", n)
			}
		}
	} else {
		if c.IsSet("vocab-file") {
			return fmt.Errorf("--vocab builds a vocabulary, --vocab-file loads one: give one of them")
		}
		if c.Int("min-count") < 1 {
			return fmt.Errorf("--min-count must be ≥ 1, not %d", c.Int("min-count"))
		}
		if c.IsSet("slot-size-array") && !c.Bool("slot-offsets") {
			return fmt.Errorf("--slot-size-array selects hashing; with --vocab the slot sizes come from the vocabulary (give --slot-size-array only with --slot-offsets)")
		}
	}
	if c.Int("batchsize") < 1 {
		return fmt.Errorf("--batchsize must be ≥ 1, not %d", c.Int("batchsize"))
	}
	if c.Int("num-workers") < 0 {
		return fmt.Errorf("--num-workers must be ≥ 0, not %d", c.Int("num-workers"))
	}
	if c.Int64("samples-per-file") < 0 {
		return fmt.Errorf("--samples-per-file must be ≥ 0, not %d", c.Int64("samples-per-file"))
	}
	if _, err := parquetWriterFlags(c); err != nil {
		return err
	}
	to := strings.ToLower(c.String("to"))
	for _, f := range []struct {
		name   string
		format string
	}{
		{"out-check-type", "norm"}, {"out-raw-layout", "raw"}, {"out-float-label-dense", "raw"}, {"out-label-type", "raw"},
		{"compression", "parquet"}, {"row-group-size", "parquet"}, {"cat-type", "parquet"}, {"dictionary", "parquet"},
	} {
		if c.IsSet(f.name) && to != f.format {
			return fmt.Errorf("--%s applies to %s output, not %s", f.name, f.format, to)
		}
	}
	if c.IsSet("samples-per-file") && to == "raw" {
		return fmt.Errorf("--samples-per-file applies to norm and parquet output; raw output is one file")
	}
	return nil
}

func outputFromFlags(c *cli.Context, d *dataset.Dataset) (dataset.Output, error) {
	var o dataset.Output
	var err error
	if o.Format, err = dataset.ParseFormat(c.String("to")); err != nil || o.Format == dataset.Auto || o.Format >= dataset.CriteoTSV {
		return o, fmt.Errorf("--to: want norm, raw or parquet, not %q", c.String("to"))
	}
	if o.Check, err = norm.ParseCheckMode(c.String("out-check-type")); err != nil {
		return o, fmt.Errorf("--out-check-type: %w", err)
	}
	o.KeyType = d.Schema.KeyType
	if c.IsSet("out-key-type") {
		if o.KeyType, err = formats.ParseKeyType(c.String("out-key-type")); err != nil {
			return o, fmt.Errorf("--out-key-type: %w", err)
		}
	}
	if c.IsSet("out-raw-layout") {
		if o.RawLayout, err = raw.ParseLayout(c.String("out-raw-layout")); err != nil {
			return o, fmt.Errorf("--out-raw-layout: %w", err)
		}
		o.RawLayoutSet = true
	}
	o.FloatLabelDense = c.Bool("out-float-label-dense")
	if c.IsSet("out-label-type") {
		if o.LabelType, err = formats.ParseValueType(c.String("out-label-type")); err != nil {
			return o, fmt.Errorf("--out-label-type: %w", err)
		}
		o.LabelTypeSet = true
	}
	o.SamplesPerFile = c.Int64("samples-per-file")
	pw, err := parquetWriterFlags(c)
	if err != nil {
		return o, err
	}
	o.Compression, o.RowGroupSize, o.CatType, o.Dictionary = pw.Compression, pw.RowGroupSize, pw.CatType, pw.Dictionary
	if _, err := dataset.OutputSchema(d.Schema, o); err != nil {
		return o, err
	}
	return o, nil
}

// buildVocab counts the categorical values of the Criteo text files with
// the --vocab flags.
func buildVocab(c *cli.Context, files []string, sp dataset.Spec, w io.Writer) (*criteo.Vocab, error) {
	budget, err := parseSize(c.String("vocab-memory"))
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("--vocab-memory: %w", err)}
	}
	f := criteo.Auto
	switch sp.Format {
	case dataset.CriteoTSV:
		f = criteo.TSV
	case dataset.CriteoCSV:
		f = criteo.CSV
	}
	lay := criteo.Layout{Format: f}
	if sp.DenseDim > 0 {
		lay.NumDense = sp.DenseDim
	}
	if sp.NumSlot > 0 {
		lay.NumCat = sp.NumSlot
	}
	v, err := criteo.BuildVocab(files, criteo.VocabOptions{Layout: lay, MinCount: c.Int("min-count"), MemoryBudget: budget, Workers: c.Int("num-workers")})
	if err != nil {
		return nil, err
	}
	st := v.Stats()
	fmt.Fprintf(w, "vocabulary: %d distinct values, %d seen at least %d times, %d spilled runs, peak %d bytes counted\n",
		st.Distinct, st.Frequent, v.MinCount(), st.Runs, st.PeakBytes)
	if p := c.String("out-vocab"); p != "" {
		if err := v.Save(p); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// parseSize parses "1GiB", "512MB", "64k", "1000".
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a size like 512MiB or 2GiB", s)
	}
	return int64(v * float64(mult)), nil
}

// convertKeys settles the output's key convention and adds its sidecar
// (slot_size_array.json with key_convention, docs/sidecar.md) to out:
// slot-local input keys (Criteo text's hashed or vocabulary ids, a sidecar
// saying so) become global keys in a Norm output unless --slot-offsets is
// given (HugeCTR's convention, and gen's: its Norm reader adds no offsets),
// and stay slot-local in Raw and Parquet outputs; --slot-offsets makes them
// global. It returns the sidecar's path ("" when the slot sizes are
// unknown) and the output's convention.
func convertKeys(c *cli.Context, d *dataset.Dataset, out *dataset.Output) (string, dataset.KeyConvention, error) {
	in := d.Spec.Keys
	sizes := d.Spec.SlotSizeArray
	if d.Format == dataset.CriteoTSV || d.Format == dataset.CriteoCSV {
		in, sizes = dataset.KeysSlotLocal, d.Schema.SlotSizes()
	}
	if !c.IsSet("slot-offsets") && in == dataset.KeysSlotLocal && len(sizes) > 0 && out.Format == dataset.Norm {
		d.Spec.Offsets = true
		if len(d.Spec.SlotSizeArray) == 0 {
			d.Spec.SlotSizeArray = sizes
		}
		fmt.Fprintln(c.App.ErrWriter, "note: adding slot offsets: Norm keys are global (HugeCTR's convention, as gen writes them); --slot-offsets=false keeps them slot-local")
	}
	keys := in
	if d.Spec.Offsets {
		keys = dataset.KeysGlobal
	}
	if keys == dataset.KeysUnknown && out.Format == dataset.Norm && d.Format != dataset.Norm {
		fmt.Fprintln(c.App.ErrWriter, "note: keys copied as they are (no slot_size_array.json says whether they are slot-local); "+
			"HugeCTR reads Norm keys as global: if they are slot-local, give --slot-offsets --slot-size-array")
	}
	if len(sizes) == 0 {
		return "", keys, nil
	}
	data, err := dataset.KeyInfoJSON(sizes, keys)
	if err != nil {
		return "", keys, err
	}
	out.Sidecars = append(out.Sidecars, dataset.Sidecar{Name: dataset.KeyInfoName, Data: data})
	return dataset.SidecarPath(c.Args().Get(1), out.Format, dataset.KeyInfoName), keys, nil
}

// parquetWriterFlags reads the Parquet output flags (--compression,
// --row-group-size, --cat-type, --dictionary) of convert and gen, each
// checked under its flag's name.
func parquetWriterFlags(c *cli.Context) (parquet.WriterOptions, error) {
	o := parquet.WriterOptions{Compression: c.String("compression"), RowGroupSize: c.Int("row-group-size"), CatType: c.String("cat-type"), Dictionary: c.Bool("dictionary")}
	if o.RowGroupSize < 0 {
		return o, fmt.Errorf("--row-group-size must be ≥ 0, not %d", o.RowGroupSize)
	}
	switch o.Compression {
	case "", "snappy", "zstd", "none":
	default:
		return o, fmt.Errorf("--compression: want snappy, zstd or none, not %q", o.Compression)
	}
	switch o.CatType {
	case "", "int64", "int32", "uint32", "uint64":
	default:
		return o, fmt.Errorf("--cat-type: want int64, int32, uint32 or uint64, not %q", o.CatType)
	}
	return o, nil
}
