package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/formats"
)

// allCommands returns every command with its full name ("bench read").
func allCommands(prefix string, cmds []*cli.Command) map[string]*cli.Command {
	out := map[string]*cli.Command{}
	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		name := strings.TrimSpace(prefix + " " + c.Name)
		if c.Action != nil {
			out[name] = c
		}
		for k, v := range allCommands(name, c.Subcommands) {
			out[k] = v
		}
	}
	return out
}

// TestDeprecatedSpellings: the old spellings still work, print a note
// naming the new one, and are refused together with it.
func TestDeprecatedSpellings(t *testing.T) {
	t.Chdir(t.TempDir())
	out, code := ctrkitArgs(t, genSmall("norm", "a/file_list.txt", "--threads", "2")...) // genSmall: --source
	if code != 0 || !strings.Contains(out, "note: --source is now --out-source") || !strings.Contains(out, "note: --threads is now --num-workers") {
		t.Fatalf("gen --source --threads: exit %d\n%s", code, out)
	}
	out, code = ctrkitArgs(t, "validate", "a/file_list.txt", "--check", "sum")
	if code != 0 || !strings.Contains(out, "note: --check is now --check-type") {
		t.Errorf("validate --check sum: exit %d\n%s", code, out)
	}
	out, code = ctrkitArgs(t, "validate", "a/file_list.txt", "--check", "none")
	if code == 0 {
		t.Errorf("validate --check none on framed data passed: the alias was ignored\n%s", out)
	}
	out, code = ctrkitArgs(t, "validate", "a/file_list.txt", "--check", "sum", "--check-type", "sum")
	if code != 2 || !strings.Contains(out, "give --check-type, not both --check and --check-type") {
		t.Errorf("--check with --check-type: exit %d\n%s", code, out)
	}
	nnz, err1 := runCtrkit(t, "summary", "--model", "wdl", "--slot-size-array", "10,10", "--nnz", "3")
	arr, err2 := runCtrkit(t, "summary", "--model", "wdl", "--slot-size-array", "10,10", "--nnz-array", "3")
	if err1 != nil || err2 != nil || strings.TrimPrefix(nnz, "note: --nnz is now --nnz-array\n") != arr || !strings.Contains(arr, "≤ 3 keys") {
		t.Errorf("summary --nnz 3 vs --nnz-array 3 (%v, %v):\n%s\n---\n%s", err1, err2, nnz, arr)
	}
	// Outputs are --out-* where a command has inputs too; the old names
	// still work, with a note.
	g1, _ := runCtrkit(t, "summary", "--model", "wdl", "--slot-size-array", "10,10", "--graph-out", "g1.json")
	g2, _ := runCtrkit(t, "summary", "--model", "wdl", "--slot-size-array", "10,10", "--out-graph", "g2.json")
	if !strings.Contains(g1, "note: --graph-out is now --out-graph") || string(readFile(t, "g1.json")) != string(readFile(t, "g2.json")) || strings.Contains(g2, "note:") {
		t.Errorf("summary --graph-out vs --out-graph:\n%s\n---\n%s", g1, g2)
	}
	for cmd, olds := range map[string][]string{"train": {"--metrics-out", "--graph-out", "--plot"}, "predict": {"--output"},
		"convert": {"--vocab-out"}, "inspect": {"--plot"}, "summary": {"--graph-out"}} {
		help, _ := runCtrkit(t, cmd, "--help")
		for _, old := range olds {
			if strings.Contains(help, old+" ") {
				t.Errorf("%s --help lists the old spelling %s", cmd, old)
			}
		}
		if !strings.Contains(help, "--out-") {
			t.Errorf("%s --help lists no --out-* output", cmd)
		}
	}
	if out, code := ctrkitArgs(t, "predict", "--model", "wdl", "--eval-source", "a/file_list.txt"); code != 2 || !strings.Contains(out, "--out-predictions FILE (-o) is required") {
		t.Errorf("predict without -o: exit %d\n%s", code, out)
	}
	// Hidden: help lists the new names only.
	help, _ := runCtrkit(t, "gen", "--help")
	for _, old := range []string{"--source", "--eval-source", "--threads"} {
		if strings.Contains(help, old+" ") {
			t.Errorf("gen --help lists the old spelling %s", old)
		}
	}
}

// TestHelpText: every command's help prints each default once; evaluate
// and predict have a description and list no training-only flag.
func TestHelpText(t *testing.T) {
	for name := range allCommands("", newApp().Commands) {
		out, err := runCtrkit(t, append(strings.Fields(name), "--help")...)
		if err != nil {
			t.Fatalf("%s --help: %v", name, err)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Count(l, "(default") > 1 {
				t.Errorf("%s --help prints a default twice: %s", name, strings.TrimSpace(l))
			}
		}
	}
	for _, name := range []string{"evaluate", "predict"} {
		out, _ := runCtrkit(t, name, "--help")
		if !strings.Contains(out, "DESCRIPTION:") {
			t.Errorf("%s --help has no description", name)
		}
		for _, f := range []string{"--max-iter", "--num-epochs", "--display", "--eval-interval", "--snapshot", "--keep-snapshots",
			"--auc-threshold", "--seed", "--load-optimizer", "--slot-offsets", "--vocab-file", "--source "} {
			if strings.Contains(out, f) {
				t.Errorf("%s --help lists %s, which it does not use", name, f)
			}
		}
	}
}

// vocabCmds returns the commands a vocabulary flag lists.
func vocabCmds(v vocabFlag) []string {
	var out []string
	for _, c := range strings.Split(v.cmds, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// sampleValues are a value for each vocabulary flag (vocab-file: written
// by the test).
var sampleValues = map[string]string{
	"from": "norm", "label-dim": "1", "dense-dim": "3", "num-slot": "4", "i64-input-key": "true", "check-type": "none",
	"slot-size-array": "100", "slot-offsets": "true", "nnz-array": "1,2,1,1", "float-label-dense": "true", "raw-layout": "multihot",
	"label-type": "int32", "dense-type": "float32", "skip-corrupt": "true", "num-workers": "3", "reader": "sync",
	"source": "a.txt", "eval-source": "b.txt", "out-source": "c/file_list.txt", "out-eval-source": "c/file_list_test.txt",
}

// parsedFlags is what a command made of the vocabulary flags, flag by flag,
// through the command's own parsing (gen: genParams; the others:
// specFromFlags, per-slot arrays expanded to --num-slot as dataset.Resolve
// does).
func parsedFlags(t *testing.T, name string, c *cli.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	if name == "gen" {
		p, err := genParams(c)
		if err != nil {
			t.Fatalf("gen: %v", err)
		}
		out["label-dim"], out["dense-dim"], out["num-slot"] = fmt.Sprint(p.LabelDim), fmt.Sprint(p.DenseDim), fmt.Sprint(p.NumSlot)
		out["i64-input-key"], out["check-type"] = fmt.Sprint(p.I64InputKey), strings.ToLower(p.CheckType.String())
		out["slot-size-array"], out["nnz-array"] = fmt.Sprint(p.SlotSizeArray), fmt.Sprint(p.NNZArray)
		out["float-label-dense"], out["raw-layout"] = fmt.Sprint(p.FloatLabelDense), strings.ToLower(fmt.Sprint(p.RawLayout))
		if !p.RawLayoutSet {
			out["raw-layout"] = "auto"
		}
		out["num-workers"], out["out-source"], out["out-eval-source"] = fmt.Sprint(p.Threads), p.Source, p.EvalSource
		return out
	}
	if name == "summary" {
		cfg, err := loadModel(c)
		if err != nil {
			t.Fatalf("summary: %v", err)
		}
		var sizes []int64
		var nnz []int
		for _, e := range cfg.Graph.Embeddings {
			sizes = append(sizes, e.SlotSizeArray...)
		}
		for _, s := range cfg.Graph.Input.Sparse {
			nnz = append(nnz, s.NNZPerSlot...)
		}
		out["dense-dim"], out["num-slot"], out["slot-size-array"] = fmt.Sprint(cfg.Graph.Input.DenseDim), fmt.Sprint(len(sizes)), fmt.Sprint(sizes)
		_ = nnz // the reference models take one nnz: not comparable with a per-slot list
		return out
	}
	sp, err := specFromFlags(c)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := sp.ForSlots(sp.NumSlot); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out["from"], out["label-dim"], out["dense-dim"], out["num-slot"] = sp.Format.String(), fmt.Sprint(sp.LabelDim), fmt.Sprint(sp.DenseDim), fmt.Sprint(sp.NumSlot)
	out["i64-input-key"] = fmt.Sprint(sp.KeyTypeSet && sp.KeyType == formats.KeyI64)
	out["check-type"] = strings.ToLower(sp.Check.String())
	out["slot-size-array"], out["nnz-array"], out["slot-offsets"] = fmt.Sprint(sp.SlotSizeArray), fmt.Sprint(sp.NNZ), fmt.Sprint(sp.Offsets)
	out["float-label-dense"], out["raw-layout"] = fmt.Sprint(sp.FloatLabelDense), strings.ToLower(fmt.Sprint(sp.RawLayout))
	out["label-type"], out["dense-type"] = strings.ToLower(sp.LabelType.String()), strings.ToLower(sp.DenseType.String())
	out["skip-corrupt"], out["vocab-file"] = fmt.Sprint(sp.SkipCorrupt), fmt.Sprint(sp.Vocab != nil)
	out["num-workers"], out["source"], out["eval-source"] = fmt.Sprint(c.Int("num-workers")), c.String("source"), c.String("eval-source")
	return out
}

// TestVocabulary is the acceptance test of the one flag vocabulary: every
// command defines exactly the vocabulary flags the vocabulary says it
// takes (visible, under their canonical names), accepts all of them at
// once, and two commands make the same of the same flag.
func TestVocabulary(t *testing.T) {
	dir := t.TempDir()
	// A vocabulary file for --vocab-file, written by convert.
	tsv := filepath.Join(dir, "day.tsv")
	row := "1\t1\t2\t3" + strings.Repeat("\t68fd1e64", 4) + "\n"
	if err := os.WriteFile(tsv, []byte(row+row), 0o644); err != nil {
		t.Fatal(err)
	}
	vocabFile := filepath.Join(dir, "v.vocab")
	if out, code := ctrkitArgs(t, "convert", tsv, filepath.Join(dir, "out.raw"), "--to", "raw", "--dense-dim", "3", "--num-slot", "4",
		"--vocab", "--min-count", "1", "--out-vocab", vocabFile); code != 0 {
		t.Fatalf("writing a vocabulary: exit %d\n%s", code, out)
	}
	values := map[string]string{"vocab-file": vocabFile}
	for k, v := range sampleValues {
		values[k] = v
	}
	cmds := allCommands("", newApp().Commands)
	takes := map[string]map[string]bool{}
	for _, v := range vocabulary {
		for _, name := range vocabCmds(v) {
			if cmds[name] == nil {
				t.Fatalf("vocabulary: --%s lists %q, not a command", v.name, name)
			}
			if takes[name] == nil {
				takes[name] = map[string]bool{}
			}
			takes[name][v.name] = true
		}
	}
	inVocab := map[string]bool{}
	for _, v := range vocabulary {
		inVocab[v.name] = true
	}
	parsed := map[string]map[string]string{} // command → flag → value
	for name, cmd := range cmds {
		for _, f := range cmd.Flags {
			n := f.Names()[0]
			if vf, ok := f.(cli.VisibleFlag); inVocab[n] && ok && vf.IsVisible() && !takes[name][n] {
				t.Errorf("%s defines --%s; the vocabulary does not list it there", name, n)
			}
		}
		if len(takes[name]) == 0 {
			continue
		}
		args := []string{name}
		for _, f := range cmd.Flags {
			n := f.Names()[0]
			if vf, ok := f.(cli.VisibleFlag); ok && vf.IsVisible() {
				delete(takes[name], n)
			}
			if !inVocab[n] || values[n] == "" || !flagVisible(f) {
				continue
			}
			val := values[n]
			if name == "summary" && n == "nnz-array" {
				val = "2" // the reference models take one nnz for every slot
			}
			if _, isBool := f.(*cli.BoolFlag); isBool {
				args = append(args, "--"+n)
			} else {
				args = append(args, "--"+n, val)
			}
		}
		for n := range takes[name] {
			t.Errorf("%s lacks --%s, which the vocabulary says it takes", name, n)
		}
		switch name {
		case "summary":
			args = append(args, "--model", "dlrm")
		case "predict":
			args = append(args, "--out-predictions", "p.txt")
		}
		// Run the command's own flag parsing, without its action.
		cp := *cmd
		cp.Name = "cmd"
		cp.Action = func(c *cli.Context) error {
			parsed[name] = parsedFlags(t, name, c)
			return nil
		}
		app := &cli.App{Name: "ctrkit", Commands: []*cli.Command{&cp}, Writer: io.Discard, ErrWriter: io.Discard}
		args[0] = "cmd"
		if err := app.Run(append([]string{"ctrkit"}, args...)); err != nil {
			t.Errorf("%s rejects the vocabulary flags %v: %v", name, args[1:], err)
		}
	}
	for _, v := range vocabulary {
		first := ""
		for _, name := range vocabCmds(v) {
			got, ok := parsed[name][v.name]
			if !ok {
				continue
			}
			if first == "" {
				first = name
			} else if want := parsed[first][v.name]; got != want {
				t.Errorf("--%s %s: %s makes %s of it, %s %s", v.name, values[v.name], name, got, first, want)
			}
		}
	}
}
