// Command ctrkit converts, validates, generates, benchmarks and trains on
// click-through-rate datasets in HugeCTR's formats. This package only wires
// the command line to library functions; each command lives in its own file
// and registers itself in commands.
package main

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/urfave/cli/v2"
)

// commands is filled by the init functions of the command files.
var commands []*cli.Command

// exitError carries an exit status other than 1 out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newApp() *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	return &cli.App{
		Name:  "ctrkit",
		Usage: "click-through-rate datasets and training, compatible with NVIDIA HugeCTR",
		Description: "ctrkit reads and writes HugeCTR's Norm, Raw and Parquet datasets byte for byte,\n" +
			"generates synthetic ones, validates, converts and benchmarks them, and trains models.\n\n" +
			"Start with:  ctrkit quickstart",
		Commands:        commands,
		HideHelpCommand: true,
	}
}

func main() {
	app := newApp()
	if err := app.Run(permuteArgs(app, os.Args)); err != nil {
		fmt.Fprintln(os.Stderr, "ctrkit:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}
