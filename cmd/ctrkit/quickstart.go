package main

import (
	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/quickstart"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "quickstart",
		Usage: "generate a small dataset, validate it, read it back at speed, train a small DLRM, compare AUCs",
		Description: `Runs ctrkit's main job on built-in defaults in a temporary directory (or --dir,
which is kept): a planted Norm dataset of 330k samples, validation, a read
benchmark, and a small DLRM trained on it; prints the eval AUC next to the AUC
the generator planted. Takes well under a minute on two cores.

Example:
   ctrkit quickstart
   ctrkit quickstart --dir /tmp/qs     # keep the files to explore them`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "device", Value: "auto", Usage: "train on: auto (the GPU when a CUDA driver loads) | gpu | gpu:N | cpu"},
			&cli.StringFlag{Name: "dir", Usage: "work in `DIR` and keep the files"},
			&cli.IntFlag{Name: "samples-per-file", Value: 65536, Usage: "samples per train file (4 train files, 1 eval)"},
			&cli.IntFlag{Name: "epochs", Value: 1, Usage: "training epochs"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generator and model seed"},
		},
		Action: func(c *cli.Context) error {
			_, err := quickstart.Run(c.Context, c.App.Writer, quickstart.Options{
				Dir: c.String("dir"), SamplesPerFile: c.Int("samples-per-file"), Epochs: c.Int("epochs"), Seed: c.Uint64("seed"),
				Device: c.String("device"),
			})
			return err
		},
	})
}
