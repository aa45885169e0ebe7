package main

import (
	"bytes"
	"errors"
	"testing"
)

// runCtrkit runs the app on args as main does (flags may follow arguments)
// and returns its output and error.
func runCtrkit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run(permuteArgs(app, append([]string{"ctrkit"}, args...)))
	return out.String(), err
}

// execCtrkit runs the app like the binary: the output with main's
// "ctrkit: <error>" line, and the exit status (0, an exitError's code, or
// 1).
func execCtrkit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := runCtrkit(t, args...)
	if err == nil {
		return out, 0
	}
	out += "ctrkit: " + err.Error() + "\n"
	if ee := (*exitError)(nil); errors.As(err, &ee) {
		return out, ee.code
	}
	return out, 1
}
