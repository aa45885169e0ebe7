package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/progress"
	"github.com/ctrkit/ctrkit/keysets"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "keyset",
		Usage:     "write the keyset file (unique keys, slot offsets applied) of a file list or a Raw file",
		ArgsUsage: "PATH",
		Description: `A keyset is a bare little-endian array of the dataset's unique keys in the key
type, what HugeCTR's embedding cache loads. Slot offsets from
--slot-size-array are applied, as HugeCTR does.

Examples:
   ctrkit keyset data/file_list.txt --out data/file_list.txt.keyset
   ctrkit keyset train.bin --out train.keyset --slot-size-array 1459,583,... --num-slot 26
   ctrkit keyset data/file_list.txt --per-file --out keysets/`,
		Flags: append(schemaFlags(true),
			&cli.StringFlag{Name: "out", Usage: "keyset `FILE` (with --per-file: a directory, created if missing) (required)"},
			&cli.BoolFlag{Name: "per-file", Usage: "one keyset per data file (<out>/<file>.keyset) instead of one per list"},
			vflag("num-workers"),
			jsonFlag("source, keysets with path, unique_keys, key_type"),
		),
		Action: func(c *cli.Context) error { return runKeyset(c, c.App.Writer) },
	})
}

func runKeyset(c *cli.Context, w io.Writer) error {
	if !c.IsSet("out") || c.String("out") == "" {
		return &exitError{2, fmt.Errorf("keyset: --out is required")}
	}
	if c.NArg() > 1 {
		return &exitError{2, fmt.Errorf("keyset: want one PATH argument, got %d", c.NArg())}
	}
	if c.Int("num-workers") < 0 {
		return &exitError{2, fmt.Errorf("--num-workers must be ≥ 0, not %d", c.Int("num-workers"))}
	}
	d, err := resolveArg(c, "PATH")
	if err != nil {
		return err
	}
	if d.Format == dataset.CriteoTSV || d.Format == dataset.CriteoCSV {
		return &exitError{2, fmt.Errorf("keyset: %s is Criteo text; convert it first (keysets are for Norm, Raw and Parquet data)", d.Path)}
	}
	if len(d.Spec.SlotSizeArray) > 0 && d.Spec.Keys != dataset.KeysGlobal {
		d.Spec.Offsets = true // keysets hold offset keys, as HugeCTR's do (global keys have them)
	}
	var space int64
	for _, n := range d.Spec.SlotSizeArray {
		space += n
	}
	js := keysetJSON{Source: d.Path, Keysets: []keysetFileJSON{}}
	groups := [][]string{d.Files}
	outs := []string{c.String("out")}
	if c.Bool("per-file") {
		groups, outs = nil, nil
		seen := map[string]string{}
		for _, f := range d.Files {
			o := filepath.Join(c.String("out"), filepath.Base(f)+".keyset")
			if prev, ok := seen[o]; ok {
				return &exitError{2, fmt.Errorf("--per-file: %s and %s would both write %s", prev, f, o)}
			}
			seen[o] = f
			groups = append(groups, []string{f})
			outs = append(outs, o)
		}
		if err := os.MkdirAll(c.String("out"), 0o755); err != nil {
			return err
		}
	}
	for i, files := range groups {
		sub := *d
		sub.Files = files
		r, err := sub.Open(formats.Options{BatchSize: 65536, Workers: c.Int("num-workers")})
		if err != nil {
			return err
		}
		bar := progress.New(c.App.ErrWriter, -1, "keyset "+filepath.Base(outs[i]), "samples")
		set, err := keysets.Build(withContext(c.Context, r), space, 65536, func(n int) { bar.Add(int64(n)) })
		bar.Finish()
		r.Close()
		if c.Context.Err() != nil {
			return interrupted("") // keyset files already written are complete
		}
		if err != nil {
			return err
		}
		if err := set.WriteFile(outs[i]); err != nil {
			return fmt.Errorf("writing %s: %w", outs[i], err)
		}
		js.Keysets = append(js.Keysets, keysetFileJSON{Path: outs[i], UniqueKeys: set.Len(), KeyType: d.Schema.KeyType.String()})
		if !c.Bool("json") {
			fmt.Fprintf(w, "%s: %d unique %s keys\n", outs[i], set.Len(), d.Schema.KeyType)
		}
	}
	if c.Bool("json") {
		return printJSON(w, js)
	}
	return nil
}
