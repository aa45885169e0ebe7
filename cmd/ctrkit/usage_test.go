package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestUsage: help for a command, the version, did-you-mean for unknown
// commands and flags, and exit status 2 for every usage error.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help", "convert"}, 0, "ctrkit convert - convert a dataset"},
		{[]string{"help"}, 0, "COMMANDS:"},
		{[]string{"help", "bench", "read"}, 0, "ctrkit bench read - read a dataset"},
		{[]string{"convert", "--help"}, 0, "--out-check-type"},
		{[]string{"--version"}, 0, "ctrkit "},
		{[]string{"version"}, 0, "ctrkit "},
		{[]string{"conver"}, 2, `unknown command "conver"; did you mean convert?`},
		{[]string{"nosuchthing"}, 2, `unknown command "nosuchthing" (see ctrkit help)`},
		{[]string{"validate", "x", "--slot-size", "3"}, 2, "unknown flag --slot-size; did you mean --slot-size-array?"},
		{[]string{"gen", "--num-files", "x"}, 2, `invalid value "x" for flag --num-files`},
		{[]string{"validate"}, 2, "want one PATH argument"},
		{[]string{"gen", "--format", "nosuch"}, 2, "--format"},
		{[]string{}, 2, "no command given"},
	} {
		out, code := execCtrkit(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("ctrkit %v: exit %d, want %d and %q\n%s", c.args, code, c.code, c.want, out)
		}
	}
	v1, _ := execCtrkit(t, "--version")
	v2, _ := execCtrkit(t, "version")
	if v1 != v2 || !strings.Contains(v1, runtime.Version()) {
		t.Errorf("--version %q and version %q differ or lack the Go version", v1, v2)
	}
}
