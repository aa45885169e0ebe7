package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/ctrkit/ctrkit/internal/suggest"
	"github.com/urfave/cli/v2"
)

// Exit statuses, the same for every command (README "Exit status"):
// 0 done, 1 problems found in the data (validate's report, or a command
// stopped by bad data), 2 bad usage or could not run (flags, arguments,
// missing files, an existing output), 130/143 stopped by SIGINT/SIGTERM.
const (
	exitOK       = 0
	exitProblems = 1
	exitUsage    = 2
)

// version is the module version and VCS commit of the binary, from its
// build information.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += " (commit " + rev + modified + ")"
	}
	return v + " " + bi.GoVersion
}

// rootAction runs when no command matched: an unknown command is a usage
// error with a suggestion; none at all prints the help.
func rootAction(c *cli.Context) error {
	if c.NArg() == 0 {
		cli.ShowAppHelp(c)
		return &exitError{exitUsage, errors.New("no command given")}
	}
	name := c.Args().First()
	var names []string
	for _, cmd := range c.App.Commands {
		if !cmd.Hidden {
			names = append(names, cmd.Names()...)
		}
	}
	return &exitError{exitUsage, fmt.Errorf("unknown command %q%s (see ctrkit help)", name, didYouMean(name, names, ""))}
}

// usageError turns a flag parsing error of a command into a usage error
// (exit 2) with a did-you-mean for an unknown flag.
func usageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	where := "ctrkit --help"
	if c.Command != nil && c.Command.Name != "" {
		where = "ctrkit " + strings.TrimSpace(strings.TrimPrefix(c.Command.FullName(), c.App.Name)) + " --help"
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = "--" + strings.TrimLeft(name, "-")
		var names []string
		if c.Command != nil {
			for _, f := range c.Command.Flags {
				if flagVisible(f) {
					for _, n := range f.Names() {
						names = append(names, "--"+n)
					}
				}
			}
		}
		return &exitError{exitUsage, fmt.Errorf("unknown flag %s%s (see %s)", name, didYouMean(name, names, "--"), where)}
	}
	return &exitError{exitUsage, fmt.Errorf("%s (see %s)", strings.Replace(msg, "flag -", "flag --", 1), where)}
}

// flagVisible says whether help lists f.
func flagVisible(f cli.Flag) bool {
	vf, ok := f.(cli.VisibleFlag)
	return ok && vf.IsVisible()
}

// didYouMean returns "; did you mean X?" for the candidate nearest to s
// (a prefix of it, or within a third of its length in edits), or "".
func didYouMean(s string, candidates []string, prefix string) string {
	best, bestD := "", 0
	bare := strings.TrimPrefix(s, prefix)
	for _, c := range candidates {
		cb := strings.TrimPrefix(c, prefix)
		d := suggest.Distance(bare, cb)
		if strings.HasPrefix(cb, bare) && len(bare) >= 3 {
			d = min(d, 1)
		}
		if d <= max(1, len(bare)/3) && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

func init() {
	commands = append(commands, &cli.Command{
		Name:  "version",
		Usage: "print ctrkit's module version and VCS commit",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return &exitError{exitUsage, fmt.Errorf("version takes no arguments, got %q", c.Args().First())}
			}
			fmt.Fprintln(c.App.Writer, "ctrkit", version())
			return nil
		},
	})
}
