// Package childtest runs a test of the current test binary as a child
// process, for tests that kill or signal a process mid-work (a crash, a
// SIGKILL) and look at what it left.
package childtest

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Start runs the test named test of this test binary in a child process
// with env added to the environment, and waits for the first line it
// writes to stdout, which must be ready (with its newline). The child's
// stderr is collected in the returned builder. On a failure to start, or
// another first line, the child is killed and t fails.
func Start(t testing.TB, test, ready string, env ...string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != ready+"\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child %s said %q, want %q\n%s", test, line, ready, stderr.String())
	}
	return cmd, stderr
}
