package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// The flag vocabulary: every flag that more than one command takes is
// defined here once (name, usage, kind, old spellings) and each command
// takes it with vflag. Names are HugeCTR's parameter names
// (DataReaderParams, DataGeneratorParams) in kebab case, one name per
// concept; outputs of a command that also reads inputs are --out-*.
// Old spellings stay accepted as hidden flags that print a one-line note
// (withDeprecated). README.md's flag table is checked against it.

type flagKind int

const (
	intKind flagKind = iota
	boolKind
	stringKind
)

// vocabFlag is one shared flag.
type vocabFlag struct {
	name       string
	kind       flagKind
	usage      string
	group      string   // schema | reader | data
	cmds       string   // the commands that take it, comma-separated (checked by TestVocabulary)
	deprecated []string // old spellings, hidden, accepted with a note
}

// The commands that read a dataset named by their argument, and the model
// commands (their schema flags describe the data they read).
const (
	readCmds  = "bench read, bench train, convert, inspect, keyset, validate"
	modelCmds = ", train, evaluate, predict"
)

// vocabulary lists the shared flags in README order.
var vocabulary = []vocabFlag{
	{name: "from", cmds: "bench read, convert, inspect, keyset, validate", kind: stringKind, group: "schema", usage: "input format: norm | raw | parquet | criteo-tsv | criteo-csv (default: detected)"},
	{name: "label-dim", cmds: readCmds + modelCmds + ", gen", kind: intKind, group: "schema", usage: "labels per sample (Raw: its shape; Norm, Parquet: checked against the header)"},
	{name: "dense-dim", cmds: readCmds + modelCmds + ", gen, summary", kind: intKind, group: "schema", usage: "dense features per sample (Raw: its shape; Norm, Parquet: checked against the header)"},
	{name: "num-slot", cmds: readCmds + modelCmds + ", gen, summary", kind: intKind, group: "schema", usage: "categorical slots per sample (Raw: its shape; Norm, Parquet: checked against the header)"},
	{name: "i64-input-key", cmds: readCmds + modelCmds + ", gen", kind: boolKind, group: "schema", usage: "64-bit keys (HugeCTR i64_input_key; detected for Norm when not given)"},
	{name: "check-type", cmds: readCmds + modelCmds + ", gen", kind: stringKind, group: "schema", deprecated: []string{"check"}, usage: "Norm framing: sum | none (default: the header's, the config's, else sum)"},
	{name: "slot-size-array", cmds: readCmds + modelCmds + ", gen, summary", kind: stringKind, group: "schema", usage: "comma-separated slot sizes, one value: every slot, or @FILE (a slot_size_array.json, or a dataset whose sidecar has them) (key range checks; hash buckets for Criteo text; vocabulary of gen and --model)"},
	{name: "slot-offsets", cmds: readCmds, kind: boolKind, group: "schema", usage: "add slot offsets (Σ earlier slot sizes) to keys when reading"},
	{name: "nnz-array", cmds: readCmds + modelCmds + ", gen, summary", kind: stringKind, group: "schema", deprecated: []string{"nnz"}, usage: "comma-separated max keys per slot (Raw multihot: hotness), one value: every slot"},
	{name: "float-label-dense", cmds: readCmds + modelCmds + ", gen", kind: boolKind, group: "schema", usage: "Raw: float32 label and dense values instead of int32"},
	{name: "raw-layout", cmds: readCmds + modelCmds + ", gen", kind: stringKind, group: "schema", usage: "Raw: onehot | multihot | auto (default: auto, multihot when some nnz > 1)"},
	{name: "label-type", cmds: readCmds + modelCmds, kind: stringKind, group: "schema", usage: "Raw label type: int32 | float32 (default: multihot int32 (HugeCTR v25), onehot by --float-label-dense)"},
	{name: "dense-type", cmds: readCmds + modelCmds, kind: stringKind, group: "schema", usage: "Raw dense type: int32 (read as ln(x+1)) | float32 (default: by --float-label-dense)"},
	{name: "skip-corrupt", cmds: readCmds + modelCmds, kind: boolKind, group: "schema", usage: "Norm: skip records with a bad check byte (HugeCTR's behaviour) instead of failing"},
	{name: "vocab-file", cmds: readCmds, kind: stringKind, group: "schema", usage: "Criteo text: map categoricals with the vocabulary `FILE` (written by convert --out-vocab)"},
	{name: "num-workers", cmds: "bench read, bench train, convert, gen, keyset" + modelCmds, kind: intKind, group: "reader", deprecated: []string{"threads"}, usage: "worker goroutines; never changes the output (default: the config's num_workers, else GOMAXPROCS; a training reader three quarters of GOMAXPROCS, leaving cores to the training loop)"},
	{name: "reader", cmds: "bench read, bench train" + modelCmds, kind: stringKind, group: "reader", usage: "sync | async (Raw only: HugeCTR's RawAsync, the O_DIRECT engine; same as --format raw-async for train)"},
	{name: "compression", cmds: "convert, gen", kind: stringKind, group: "data", usage: "Parquet output: snappy | zstd | none (default: snappy)"},
	{name: "row-group-size", cmds: "convert, gen", kind: intKind, group: "data", usage: "Parquet output: rows per row group (default: 131072)"},
	{name: "cat-type", cmds: "convert, gen", kind: stringKind, group: "data", usage: "Parquet output: cat column type int64 | int32 | uint32 | uint64 (default: int64)"},
	{name: "dictionary", cmds: "convert, gen", kind: boolKind, group: "data", usage: "Parquet output: dictionary-encode each column chunk whose dictionary pays for itself, the others PLAIN (RLE_DICTIONARY pages, as pyarrow, cudf (HugeCTR's data generator) and NVTabular write by default; --dictionary=false: every chunk PLAIN)"},
	{name: "source", cmds: "train", kind: stringKind, group: "data", usage: "training data: file list (Norm, Parquet) or file (Raw) `PATH`"},
	{name: "eval-source", cmds: "train, evaluate, predict", kind: stringKind, group: "data", usage: "evaluation data: file list (Norm, Parquet) or file (Raw) `PATH`"},
	{name: "out-source", cmds: "gen", kind: stringKind, group: "data", deprecated: []string{"source"}, usage: "output: train file list (Norm, Parquet, Criteo) or file (Raw) `PATH`"},
	{name: "out-eval-source", cmds: "gen", kind: stringKind, group: "data", deprecated: []string{"eval-source"}, usage: "output: eval file list (Norm, Parquet, Criteo) or file (Raw) `PATH`"},
}

func lookupVocab(name string) *vocabFlag {
	for i := range vocabulary {
		if vocabulary[i].name == name {
			return &vocabulary[i]
		}
	}
	panic("ctrkit: flag --" + name + " is not in the vocabulary")
}

// flagOpt adjusts a command's copy of a vocabulary flag: its default.
type flagOpt func(cli.Flag)

// withValue gives the flag a default (the generator's, HugeCTR's).
func withValue(v any) flagOpt {
	return func(f cli.Flag) {
		switch f := f.(type) {
		case *cli.IntFlag:
			f.Value, f.DefaultText = v.(int), ""
		case *cli.BoolFlag:
			f.Value, f.DefaultText = v.(bool), ""
		case *cli.StringFlag:
			f.Value, f.DefaultText = v.(string), ""
		}
	}
}

// withDefaultText says what an unset flag means, for help.
func withDefaultText(s string) flagOpt {
	return func(f cli.Flag) {
		switch f := f.(type) {
		case *cli.IntFlag:
			f.DefaultText = s
		case *cli.BoolFlag:
			f.DefaultText = s
		case *cli.StringFlag:
			f.DefaultText = s
		}
	}
}

// vflag returns the vocabulary's flag name.
func vflag(name string, opts ...flagOpt) cli.Flag {
	v := lookupVocab(name)
	var f cli.Flag
	switch v.kind {
	case intKind:
		f = &cli.IntFlag{Name: v.name, Usage: v.usage}
	case boolKind:
		f = &cli.BoolFlag{Name: v.name, Usage: v.usage}
	default:
		f = &cli.StringFlag{Name: v.name, Usage: v.usage}
	}
	moveDefault(f) // before opts: a command's default text replaces the generic one
	for _, o := range opts {
		o(f)
	}
	return f
}

// vflags returns the vocabulary's flags names.
func vflags(names ...string) []cli.Flag {
	fs := make([]cli.Flag, len(names))
	for i, n := range names {
		fs[i] = vflag(n)
	}
	return fs
}

// renamed is the hidden old spelling old of a command's own string flag
// canon (resolveDeprecated moves its value, with a note).
func renamed(old, canon string) cli.Flag {
	return &cli.StringFlag{Name: old, Usage: deprecatedPrefix + canon, Hidden: true}
}

// deprecatedPrefix marks the usage of a hidden old spelling.
const deprecatedPrefix = "deprecated spelling of --"

// withDeprecated adds, for each vocabulary flag of fs, its old spellings
// as hidden flags of the same kind (unless fs defines the name itself).
func withDeprecated(fs []cli.Flag) []cli.Flag {
	have := map[string]bool{}
	for _, f := range fs {
		for _, n := range f.Names() {
			have[n] = true
		}
	}
	out := fs
	for _, f := range fs {
		name := f.Names()[0]
		for _, v := range vocabulary {
			if v.name != name {
				continue
			}
			for _, old := range v.deprecated {
				if have[old] {
					continue
				}
				have[old] = true
				u := deprecatedPrefix + name
				switch v.kind {
				case intKind:
					out = append(out, &cli.IntFlag{Name: old, Usage: u, Hidden: true})
				case boolKind:
					out = append(out, &cli.BoolFlag{Name: old, Usage: u, Hidden: true})
				default:
					out = append(out, &cli.StringFlag{Name: old, Usage: u, Hidden: true})
				}
			}
		}
	}
	return out
}

// resolveDeprecated moves the values of old spellings onto their
// canonical flags, with a note each (a command's Before).
func resolveDeprecated(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		var usage string
		switch f := f.(type) {
		case *cli.IntFlag:
			usage = f.Usage
		case *cli.BoolFlag:
			usage = f.Usage
		case *cli.StringFlag:
			usage = f.Usage
		}
		old := f.Names()[0]
		if !strings.HasPrefix(usage, deprecatedPrefix) || !c.IsSet(old) {
			continue
		}
		canon := strings.TrimPrefix(usage, deprecatedPrefix)
		if c.IsSet(canon) {
			return &exitError{2, fmt.Errorf("give --%s, not both --%s and --%s", canon, old, canon)}
		}
		if err := c.Set(canon, fmt.Sprint(c.Value(old))); err != nil {
			return &exitError{2, fmt.Errorf("--%s: %w", old, err)}
		}
		fmt.Fprintf(c.App.ErrWriter, "note: --%s is now --%s\n", old, canon)
	}
	return nil
}

// prepareCommands adds the old spellings to every command and resolves
// them before its action.
func prepareCommands(cmds []*cli.Command) {
	for _, cmd := range cmds {
		if cmd.Name == "help" {
			continue // cli's own, added to each command on a run (and its own subcommand)
		}
		cmd.Flags = withDeprecated(cmd.Flags)
		for _, f := range cmd.Flags {
			moveDefault(f)
		}
		if cmd.Action != nil && cmd.Before == nil {
			cmd.Before = resolveDeprecated
		}
		if cmd.OnUsageError == nil {
			cmd.OnUsageError = usageError
		}
		prepareCommands(cmd.Subcommands)
	}
}

// moveDefault turns a usage's trailing "(default: X)" into the flag's
// DefaultText, so help prints the default once.
func moveDefault(f cli.Flag) {
	var usage, text *string
	switch f := f.(type) {
	case *cli.IntFlag:
		usage, text = &f.Usage, &f.DefaultText
	case *cli.Int64Flag:
		usage, text = &f.Usage, &f.DefaultText
	case *cli.Uint64Flag:
		usage, text = &f.Usage, &f.DefaultText
	case *cli.Float64Flag:
		usage, text = &f.Usage, &f.DefaultText
	case *cli.StringFlag:
		usage, text = &f.Usage, &f.DefaultText
	case *cli.DurationFlag:
		usage, text = &f.Usage, &f.DefaultText
	default:
		return
	}
	u := *usage
	if *text != "" || !strings.HasSuffix(u, ")") {
		return
	}
	depth := 0
	for i := len(u) - 1; i >= 0; i-- {
		switch u[i] {
		case ')':
			depth++
		case '(':
			depth--
		}
		if depth == 0 {
			inner := u[i+1 : len(u)-1]
			if d, ok := strings.CutPrefix(inner, "default"); ok {
				*text = strings.TrimSpace(strings.TrimPrefix(d, ":"))
				*usage = strings.TrimSpace(u[:i])
			}
			return
		}
	}
}

// readmeCommands is README.md's command section: one line per command
// (its arguments and what it does), the flag vocabulary and the exit
// statuses, generated from the commands and the vocabulary (TestREADME
// fails when README.md differs).
func readmeCommands(app *cli.App) string {
	var b strings.Builder
	b.WriteString("| command | what it does |\n|---|---|\n")
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" || c.Hidden {
				continue
			}
			name := strings.TrimSpace(prefix + " " + c.Name)
			if c.Action != nil {
				line := "ctrkit " + name
				if c.ArgsUsage != "" {
					line += " " + c.ArgsUsage
				}
				fmt.Fprintf(&b, "| `%s` | %s |\n", line, c.Usage)
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", app.Commands)
	b.WriteString("\nShared flags, defined once (cmd/ctrkit/vocab.go) and taken by every command listed;\n" +
		"old spellings still work, with a note:\n\n" +
		"| flag | meaning | commands | old spelling |\n|---|---|---|---|\n")
	for _, v := range vocabulary {
		old := ""
		for i, o := range v.deprecated {
			if i > 0 {
				old += ", "
			}
			old += "`--" + o + "`"
		}
		usage := strings.ReplaceAll(v.usage, "`", "")
		usage = strings.ReplaceAll(usage, "|", "\\|")
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", v.name, usage, v.cmds, old)
	}
	b.WriteString("\n" + exitStatusDoc)
	return b.String()
}

// exitStatusDoc is the exit-status convention, as README.md states it.
const exitStatusDoc = "Exit status, the same for every command: 0 done; 1 problems found in the data\n" +
	"(validate's report, or a command stopped by bad data); 2 bad usage or could not run\n" +
	"(unknown command or flag — with a did-you-mean —, bad values, missing files, an\n" +
	"existing output without --force); 130 or 143 stopped by SIGINT or SIGTERM.\n" +
	"`ctrkit help [CMD]` and `ctrkit CMD --help` print the help, `ctrkit --version` the\n" +
	"module version and VCS commit.\n"
