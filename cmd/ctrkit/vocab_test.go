package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
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
