package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/inspect"
	"github.com/ctrkit/ctrkit/internal/progress"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "inspect",
		Usage:     "print a dataset's schema, counts, key statistics and power-law exponents",
		ArgsUsage: "PATH",
		Description: "PATH is a file list (Norm, Parquet), a directory holding one, a Norm or Raw file, or\n" +
			"Criteo text. The format, key width and check mode are detected when not given. One\n" +
			"streaming pass prints the schema, file and sample counts, the label mean and histogram,\n" +
			"dense min/mean/max, and per slot the distinct keys, key range, nnz histogram and the\n" +
			"exponent α of a power law fitted by maximum likelihood to the slot's rank–frequency.\n" +
			"--out-plot DIR writes rank_frequency.png (a log-log panel per slot, with the fitted line),\n" +
			"labels.png and nnz.png (a panel per slot).\n\n" +
			"Examples:\n" +
			"  ctrkit inspect data/file_list.txt\n" +
			"  ctrkit inspect --slot-size-array 10000,10000 --out-plot plots/ data/file_list.txt\n" +
			"  ctrkit inspect --label-dim 1 --dense-dim 13 --num-slot 26 --json train.bin",
		Flags: append(schemaFlags(true),
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
			&cli.StringFlag{Name: "out-plot", Usage: "write PNG charts into `DIR`"},
			renamed("plot", "out-plot"),
			&cli.IntFlag{Name: "exact-keys", Value: inspect.DefaultExactKeys, Usage: "distinct keys counted exactly per slot before estimating (memory bound)"},
			&cli.IntFlag{Name: "rmin", Value: 3, Usage: "first rank of the power-law fit (rank 1 = most frequent key)"},
		),
		Action: runInspect,
	})
}

func runInspect(c *cli.Context) error {
	if c.NArg() > 1 {
		return &exitError{2, fmt.Errorf("inspect: want one PATH argument, got %d (see ctrkit inspect --help)", c.NArg())}
	}
	if c.Int("exact-keys") <= 0 || c.Int("rmin") <= 0 {
		return &exitError{2, errors.New("--exact-keys and --rmin must be > 0")}
	}
	d, err := resolveArg(c, "PATH")
	if err != nil {
		return err
	}
	rd, err := d.Open(formats.Options{BatchSize: 4096})
	if err != nil {
		return &exitError{2, fmt.Errorf("opening %s: %w", d.Path, err)}
	}
	defer rd.Close()
	o := inspect.Options{ExactKeys: c.Int("exact-keys"), RMin: int64(c.Int("rmin"))}
	if len(d.Spec.SlotSizeArray) > 0 {
		o.SlotSizes = d.Spec.SlotSizeArray
	}
	bar := progress.New(c.App.ErrWriter, d.Samples, "inspecting", "samples")
	rep, err := inspect.Scan(withContext(c.Context, rd), 4096, o, func(n int) { bar.Add(int64(n)) })
	bar.Finish()
	if c.Context.Err() != nil {
		return interrupted("")
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w (run ctrkit validate %s to list every problem)", d.Path, err, d.Path)
	}
	var plots []string
	if dir := c.String("out-plot"); dir != "" {
		if plots, err = inspect.WritePlots(dir, rep, inspect.PlotOptions{Source: d.Path}); err != nil {
			return fmt.Errorf("--out-plot: %w", err)
		}
	}
	if c.Bool("json") {
		return writeInspectJSON(c.App.Writer, d, rep, plots)
	}
	return writeInspectText(c.App.Writer, d, rep, plots)
}

// datasetInfo is the part of inspect's output that describes the files.
type datasetInfo struct {
	Path     string   `json:"path"`
	Format   string   `json:"format"`
	KeyType  string   `json:"key_type"`
	Check    string   `json:"check_mode,omitempty"`
	Files    int      `json:"files"`
	Bytes    int64    `json:"bytes"`
	Recorded int64    `json:"samples_recorded"`
	LabelDim int      `json:"label_dim"`
	DenseDim int      `json:"dense_dim"`
	NumSlot  int      `json:"num_slot"`
	Notes    []string `json:"notes,omitempty"`
	Plots    []string `json:"plots,omitempty"`
}

func infoOf(d *dataset.Dataset, plots []string) datasetInfo {
	in := datasetInfo{Path: d.Path, Format: d.Format.String(), KeyType: d.Schema.KeyType.String(), Files: len(d.Files), Bytes: d.Bytes,
		Recorded: d.Samples, LabelDim: d.Schema.LabelDim, DenseDim: d.Schema.DenseDim, NumSlot: len(d.Schema.Slots), Notes: d.Notes, Plots: plots}
	if d.Format == dataset.Norm {
		in.Check = d.Spec.Check.String()
	}
	return in
}

func writeInspectJSON(w io.Writer, d *dataset.Dataset, rep *inspect.Report, plots []string) error {
	out := struct {
		Dataset datasetInfo     `json:"dataset"`
		Stats   *inspect.Report `json:"stats"`
	}{infoOf(d, plots), rep}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

func writeInspectText(w io.Writer, d *dataset.Dataset, rep *inspect.Report, plots []string) error {
	in := infoOf(d, plots)
	var sb strings.Builder
	fmt.Fprintf(&sb, "path       %s\n", in.Path)
	fmt.Fprintf(&sb, "format     %s\n", in.Format)
	fmt.Fprintf(&sb, "key type   %s\n", in.KeyType)
	if in.Check != "" {
		fmt.Fprintf(&sb, "check mode %s\n", in.Check)
	}
	fmt.Fprintf(&sb, "schema     label_dim %d, dense_dim %d, %d slots\n", in.LabelDim, in.DenseDim, in.NumSlot)
	fmt.Fprintf(&sb, "files      %d (%d bytes)\n", in.Files, in.Bytes)
	if in.Recorded >= 0 {
		fmt.Fprintf(&sb, "recorded   %d samples (headers, metadata or file size)\n", in.Recorded)
	}
	for _, n := range in.Notes {
		fmt.Fprintf(&sb, "note       %s\n", n)
	}
	if _, err := io.WriteString(w, sb.String()); err != nil {
		return err
	}
	if err := rep.WriteText(w); err != nil {
		return err
	}
	for _, p := range plots {
		if _, err := fmt.Fprintf(w, "wrote %s\n", p); err != nil {
			return err
		}
	}
	return nil
}
