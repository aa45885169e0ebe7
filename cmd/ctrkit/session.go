package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/trainer/model"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "session",
		Usage: "serve a long-lived model over JSON lines on stdin/stdout (the Python API's low-level loop)",
		Description: "Reads one JSON request per line from stdin and writes one JSON response per line\n" +
			"to stdout (docs/SESSION.md): load (ctrkit train's flags as \"args\"), set_source,\n" +
			"start_data_reading, train, loss, eval, set_lr, lr_next, reset_lr, save, predict,\n" +
			"freeze_*/unfreeze_*, load_*, export_predictions, info, quit. Notes go to stderr.\n\n" +
			"Example:\n" +
			"  echo '{\"cmd\":\"load\",\"args\":[\"--config\",\"model.json\",\"--device\",\"cpu\"]}' | ctrkit session",
		Action: runSession,
	})
}

func runSession(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("session takes no arguments (send a load request on stdin), got %q", c.Args().First())
	}
	return model.ServeSession(c.Context, c.App.Reader, c.App.Writer, func(args []string) (model.Job, error) {
		return sessionJob(args, c.App.ErrWriter)
	})
}

// sessionJob builds a job from ctrkit train's flags, as train does.
func sessionJob(args []string, stderr io.Writer) (model.Job, error) {
	var j model.Job
	var jerr error
	cmd := &cli.Command{
		Name:  "load",
		Flags: withSchemaFlags(append(append(append(modelFlags(), dataFlags(true)...), solverFlags(true)...), optimizerFlags()...)),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("load: unexpected argument %q", c.Args().First())
			}
			j, _, jerr = buildJob(c, true)
			return nil
		},
	}
	prepareCommands([]*cli.Command{cmd})
	var usage error
	cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error { usage = err; return err }
	app := &cli.App{Name: "ctrkit session", Commands: []*cli.Command{cmd}, Writer: stderr, ErrWriter: stderr,
		HideHelp: true, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run(append([]string{"ctrkit", "load"}, args...)); err != nil {
		if usage != nil {
			return j, fmt.Errorf("load: %w", usage)
		}
		return j, err
	}
	if jerr == nil && j.Solver.MaxIter <= 0 && j.Solver.NumEpochs <= 0 {
		j.Solver.NumEpochs = 1
	}
	return j, jerr
}
