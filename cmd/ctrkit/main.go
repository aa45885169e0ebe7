// Command ctrkit converts, validates, generates, benchmarks and trains on
// click-through-rate datasets in HugeCTR's formats. This package only wires
// the command line to library functions; each command lives in its own file
// and registers itself in commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/formats"
)

// commands is filled by the init functions of the command files.
var commands []*cli.Command

func init() {
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the module version and VCS commit"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, "ctrkit", c.App.Version) }
}

// exitError carries an exit status other than 1 out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newApp() *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	prepareCommands(commands)
	return &cli.App{
		Name:  "ctrkit",
		Usage: "click-through-rate datasets and training, compatible with NVIDIA HugeCTR",
		Description: "ctrkit reads and writes HugeCTR's Norm, Raw and Parquet datasets byte for byte,\n" +
			"generates synthetic ones, validates, converts and benchmarks them, and trains models.\n\n" +
			"Start with:  ctrkit quickstart",
		Commands:     commands,
		Version:      version(),
		Action:       rootAction,
		OnUsageError: usageError,
	}
}

// Exit statuses of a run stopped by a signal (128 + the signal's number).
const (
	exitSIGINT  = 130
	exitSIGTERM = 143
)

// signalGrace is how long a command may take to clean up after SIGINT or
// SIGTERM cancelled its context before the process exits anyway (a second
// signal ends it at once).
const signalGrace = 10 * time.Second

// signalContext returns a context cancelled by SIGINT or SIGTERM and a
// function that returns the exit status the signal asks for (0 while none
// came). After the first signal, the signals get their default action
// back: a second one ends the process at once.
func signalContext() (context.Context, func() int, func()) {
	intCtx, stopInt := signal.NotifyContext(context.Background(), os.Interrupt)
	ctx, stopTerm := signal.NotifyContext(intCtx, syscall.SIGTERM)
	// status is read from the context's cause (set by the signal before
	// Done closes), so a command returning on Done always sees it.
	status := func() int {
		if ctx.Err() == nil {
			return 0
		}
		switch c := context.Cause(ctx).Error(); {
		case strings.Contains(c, os.Interrupt.String()):
			return exitSIGINT
		case strings.Contains(c, syscall.SIGTERM.String()):
			return exitSIGTERM
		}
		return 0
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		code := status()
		stopTerm() // a second signal ends the process at once
		stopInt()
		select {
		case <-time.After(signalGrace):
			fmt.Fprintln(os.Stderr, "ctrkit: interrupted")
			os.Exit(code)
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, status, func() { once.Do(func() { close(done) }); stopTerm(); stopInt() }
}

// interrupted is the error of a command whose context a signal cancelled:
// removed names the partial output it removed ("" when it writes none).
func interrupted(removed string) error {
	if removed == "" {
		return errors.New("interrupted")
	}
	return fmt.Errorf("interrupted: partial output %s removed", removed)
}

// exitStatus prints err (when not nil) to stderr as main does and returns
// the process's exit status: sig (the signal's status) when a signal
// stopped the run, an exitError's code, 1 for bad data (a corruption
// error), or 2 (could not run).
func exitStatus(stderr io.Writer, err error, sig int) int {
	if err == nil {
		return 0 // done before the signal stopped it: the output is whole
	}
	fmt.Fprintln(stderr, "ctrkit:", err)
	var ee *exitError
	switch {
	case sig != 0:
		return sig
	case errors.As(err, &ee):
		return ee.code
	case formats.IsCorrupt(err):
		return exitProblems // the data is bad (validate lists every problem)
	}
	return exitUsage // could not run
}

func main() {
	ctx, sig, stop := signalContext()
	app := newApp()
	err := app.RunContext(ctx, permuteArgs(app, os.Args))
	code := exitStatus(os.Stderr, err, sig())
	stop()
	os.Exit(code)
}
