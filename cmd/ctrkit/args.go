package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// permuteArgs moves a command's flags in front of its positional arguments,
// so `ctrkit convert SRC DST --to parquet` works: urfave/cli v2 stops
// parsing flags at the first positional argument. A flag that takes a value
// keeps it ("--to parquet" or "--to=parquet"); "--" ends the flags.
func permuteArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	if len(args) > 2 && args[1] == "help" && app.Command(args[2]) != nil {
		// `ctrkit help bench read` is `ctrkit bench read --help` (cli's
		// help command shows only the first word's).
		args = append(append([]string{args[0]}, args[2:]...), "--help")
	}
	var cmd *cli.Command
	ci := 1
	for ; ci < len(args); ci++ {
		if !strings.HasPrefix(args[ci], "-") {
			cmd = app.Command(args[ci])
			break
		}
	}
	if cmd == nil {
		return args
	}
	cmd, ci = subcommand(cmd, args, ci)
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	out := append([]string(nil), args[:ci+1]...)
	var pos []string
	rest := args[ci+1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			pos = append(pos, rest[i:]...)
			i = len(rest)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			out = append(out, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && takesValue[name] && i+1 < len(rest) {
				out = append(out, rest[i+1])
				i++
			}
		default:
			pos = append(pos, a)
		}
	}
	return append(out, pos...)
}

// subcommand descends into nested commands (`bench read`).
func subcommand(cmd *cli.Command, args []string, ci int) (*cli.Command, int) {
	for ci+1 < len(args) && len(cmd.Subcommands) > 0 {
		var sub *cli.Command
		for _, s := range cmd.Subcommands {
			if s.HasName(args[ci+1]) {
				sub = s
			}
		}
		if sub == nil {
			break
		}
		cmd, ci = sub, ci+1
	}
	return cmd, ci
}
