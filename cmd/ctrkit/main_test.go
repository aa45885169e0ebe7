package main

import (
	"bytes"
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
// "ctrkit: <error>" line, and main's exit status (exitStatus).
func execCtrkit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := runCtrkit(t, args...)
	var msg bytes.Buffer
	code := exitStatus(&msg, err, 0)
	return out + msg.String(), code
}
