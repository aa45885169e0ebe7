// Package python_test runs the Python package's unittest suite (ctrkit.hugectr)
// against a ctrkit binary built from this checkout, so `go test ./...` covers it.
package python_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestPythonSuite(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the ctrkit.hugectr tests need it (they use the standard library only)")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("the go command is not found: it builds the ctrkit binary the Python tests run")
		}
	}
	bin := filepath.Join(t.TempDir(), "ctrkit")
	build := exec.Command(goBin, "build", "-o", bin, "github.com/ctrkit/ctrkit/cmd/ctrkit")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ctrkit: %v\n%s", err, out)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-t", ".")
	// CTRKIT_DEVICE=gpu go test ./python runs the suite on the GPU; the
	// default is the CPU.
	dev := os.Getenv("CTRKIT_DEVICE")
	if dev == "" {
		dev = "cpu"
	}
	cmd.Env = append(os.Environ(), "CTRKIT_BIN="+bin, "CTRKIT_DEVICE="+dev, "PYTHONDONTWRITEBYTECODE=1",
		"TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OK") {
		t.Fatalf("unittest did not report OK:\n%s", out)
	}
	t.Logf("%s", lastLines(string(out), 4))
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
