package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
	"github.com/ctrkit/ctrkit/validate"
)

// childEnv makes the test binary run as ctrkit (TestMain), so the crash
// tests can start it as a process and kill it.
const childEnv = "CTRKIT_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// crashRun starts ctrkit with args in dir, sends sig after delay (none when
// delay < 0) and returns the exit status (−signal when the signal's default
// action ended it: SIGKILL, or SIGINT before main installed its handler)
// and the output.
func crashRun(t *testing.T, dir string, sig syscall.Signal, delay time.Duration, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv+"=1", noTimingsEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if delay >= 0 {
		timer := time.AfterFunc(delay, func() { cmd.Process.Signal(sig) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal()), out.String() // killed by the signal's default action
		}
		return ee.ExitCode(), out.String()
	}
	t.Fatal(err)
	return 0, ""
}

// samplesOf validates the dataset at p (validate package) and returns its
// sample count; a dataset that is missing or has any problem fails t.
func samplesOf(t *testing.T, p string, what string) int64 {
	t.Helper()
	rep, err := validate.Run(p, dataset.Spec{}, validate.Options{})
	if err != nil {
		t.Fatalf("%s: validate %s: %v", what, p, err)
	}
	if rep.Total != 0 || rep.Checked != rep.Files {
		t.Fatalf("%s: validate %s: %d problems, %d of %d files checked: %+v", what, p, rep.Total, rep.Checked, rep.Files, rep.Problems)
	}
	return rep.Samples
}

// temps returns the temporary files and directories of outputs under dir.
func temps(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && atomicfile.IsTemp(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func genSource(t *testing.T, dir string, seed uint64, files, perFile int) string {
	t.Helper()
	p := datagen.DefaultParams()
	p.NumSlot, p.DenseDim = 8, 4
	p.SlotSizeArray = make([]int64, p.NumSlot)
	for i := range p.SlotSizeArray {
		p.SlotSizeArray[i] = 1000
	}
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = files, 1, perFile
	p.Source, p.EvalSource = filepath.Join(dir, "file_list.txt"), filepath.Join(dir, "file_list_test.txt")
	p.Seed, p.Threads = seed, 1
	if _, err := datagen.Generate(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	return p.Source
}

// TestCrashConvert converts into a directory holding a dataset with
// --force and kills the conversion (SIGKILL, SIGINT) at random moments:
// afterwards the output validates as the complete old or the complete new
// dataset, and after SIGINT no temporary file is left and the exit status
// is 130 (or 0 when the conversion had finished).
func TestCrashConvert(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	dir := t.TempDir()
	oldSrc := genSource(t, filepath.Join(dir, "a"), 1, 3, 6000) // 18000 samples
	newSrc := genSource(t, filepath.Join(dir, "b"), 2, 4, 6000) // 24000 samples
	const oldN, newN = 18000, 24000
	rng := rand.New(rand.NewPCG(1, 2))
	for _, to := range []string{"norm", "parquet"} {
		out := filepath.Join(dir, "out-"+to)
		args := func(src string, force bool, i int) []string {
			a := []string{"convert", src, out, "--to", to, "--samples-per-file", "5000", "--batchsize", "2000", "--num-workers", "2"}
			if to == "parquet" {
				a = append(a, "--row-group-size", "2000")
			}
			if force {
				a = append(a, "--force")
			}
			if i%3 != 0 {
				// A kill is atomic either way; the fsyncs (slow on a
				// busy disk) matter only for power loss.
				a = append(a, "--no-sync")
			}
			return a
		}
		if code, o := crashRun(t, dir, 0, -1, args(oldSrc, false, 0)...); code != 0 {
			t.Fatalf("first conversion: exit %d\n%s", code, o)
		}
		if code, o := crashRun(t, dir, 0, -1, args(newSrc, false, 0)...); code != 2 || !strings.Contains(o, "--force") {
			t.Fatalf("conversion over a dataset without --force: exit %d, want 2 and a hint at --force\n%s", code, o)
		}
		start := time.Now()
		if code, o := crashRun(t, dir, 0, -1, args(oldSrc, true, 1)...); code != 0 {
			t.Fatalf("--force: exit %d\n%s", code, o)
		}
		span := time.Since(start) + 10*time.Millisecond
		for i := range 20 { // 10 SIGKILL and 10 SIGINT per format
			sig := syscall.SIGKILL
			if i%2 == 1 {
				sig = syscall.SIGINT
			}
			src := newSrc
			if i%4 >= 2 {
				src = oldSrc
			}
			delay := time.Duration(rng.Int64N(int64(span)))
			code, o := crashRun(t, dir, sig, delay, args(src, true, i)...)
			what := to + " run " + strconv.Itoa(i) + " " + sig.String() + " after " + delay.String()
			n := samplesOf(t, out, what)
			if n != oldN && n != newN {
				t.Fatalf("%s: %d samples, neither the old %d nor the new %d", what, n, oldN, newN)
			}
			if sig == syscall.SIGINT {
				if code != 0 && code != exitSIGINT && code != -int(syscall.SIGINT) {
					t.Fatalf("%s: exit %d, want 130 (or 0 when done)\n%s", what, code, o)
				}
				if code == exitSIGINT && !strings.Contains(o, "interrupted: partial output "+out+" removed") {
					t.Errorf("%s: exit 130 without the interrupt message naming %s:\n%s", what, out, o)
				}
				if tmp := temps(dir); len(tmp) > 0 {
					t.Fatalf("%s: temporary files left: %v\n%s", what, tmp, o)
				}
			}
			for _, p := range temps(dir) { // a SIGKILL's leftovers
				os.RemoveAll(p)
			}
		}
	}
}

// TestSIGTERM stops a conversion with SIGTERM: exit 143, the interrupt
// message, no temporary file, the old dataset whole.
func TestSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	dir := t.TempDir()
	src := genSource(t, filepath.Join(dir, "a"), 1, 4, 6000)
	out := filepath.Join(dir, "out")
	args := []string{"convert", src, out, "--to", "parquet", "--samples-per-file", "5000", "--batchsize", "500", "--row-group-size", "500", "--num-workers", "1"}
	if code, o := crashRun(t, dir, 0, -1, args...); code != 0 {
		t.Fatalf("convert: exit %d\n%s", code, o)
	}
	args = append(args, "--force")
	early := 0 // signals that came before the process could handle them
	for try := range 10 {
		code, o := crashRun(t, dir, syscall.SIGTERM, time.Duration(30+10*try)*time.Millisecond, args...)
		if code == 0 {
			continue // done before the signal
		}
		if code == -int(syscall.SIGTERM) && try < 9 {
			// Killed by the default action: the process had not yet
			// installed its handler (a loaded machine starts it slowly).
			// Nothing may have changed; a later, longer delay must find
			// the handler.
			if n := samplesOf(t, out, "early SIGTERM"); n != 24000 || len(temps(dir)) > 0 {
				t.Fatalf("SIGTERM before the handler: %d samples (want the old 24000), temporary files %v", n, temps(dir))
			}
			early++
			continue
		}
		if code != exitSIGTERM || !strings.Contains(o, "interrupted: partial output "+out+" removed") {
			t.Fatalf("SIGTERM: exit %d, want 143 and the interrupt message\n%s", code, o)
		}
		if tmp := temps(dir); len(tmp) > 0 {
			t.Fatalf("temporary files left: %v", tmp)
		}
		if n := samplesOf(t, out, "SIGTERM"); n != 24000 {
			t.Fatalf("after SIGTERM: %d samples, want the old 24000", n)
		}
		return
	}
	if early > 0 {
		t.Fatalf("SIGTERM never reached the handler: %d of 10 came before it, the rest after the end", early)
	}
	t.Skip("every conversion finished before SIGTERM came")
}

// TestCrashGen kills gen --force over an earlier run's dataset at random
// moments: train and eval sets validate as the old or the new ones.
func TestCrashGen(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	dir := t.TempDir()
	gen := func(files int, seed string, i int) []string {
		sync := "--no-sync" // as in TestCrashConvert
		if i%3 == 0 {
			sync = "--force"
		}
		return []string{"gen", "--format", "parquet", "--num-slot", "8", "--dense-dim", "4", "--slot-size-array", "1000,1000,1000,1000,1000,1000,1000,1000",
			"--num-files", strconv.Itoa(files), "--eval-num-files", "1", "--num-samples-per-file", "5000",
			"--seed", seed, "--threads", "2", "--label-mode", "uniform", "--force", sync}
	}
	start := time.Now()
	if code, o := crashRun(t, dir, 0, -1, gen(3, "1", 1)...); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, o)
	}
	span := time.Since(start) + 10*time.Millisecond
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 40 { // 20 SIGKILL and 20 SIGINT
		sig := syscall.SIGKILL
		if i%2 == 1 {
			sig = syscall.SIGINT
		}
		files := 4
		if i%4 >= 2 {
			files = 3
		}
		delay := time.Duration(rng.Int64N(int64(span)))
		code, o := crashRun(t, dir, sig, delay, gen(files, strconv.Itoa(i+2), i)...)
		what := "gen run " + strconv.Itoa(i) + " " + sig.String() + " after " + delay.String()
		n := samplesOf(t, filepath.Join(dir, "data", "file_list.txt"), what)
		if n != 3*5000 && n != 4*5000 {
			t.Fatalf("%s: %d train samples, neither 15000 nor 20000", what, n)
		}
		if e := samplesOf(t, filepath.Join(dir, "data", "file_list_test.txt"), what); e != 5000 {
			t.Fatalf("%s: %d eval samples, want 5000", what, e)
		}
		if sig == syscall.SIGINT {
			if code != 0 && code != exitSIGINT && code != -int(syscall.SIGINT) {
				t.Fatalf("%s: exit %d, want 130 (or 0 when done)\n%s", what, code, o)
			}
			if code == exitSIGINT && !strings.Contains(o, "interrupted: partial output data/ removed") {
				t.Errorf("%s: no interrupt message:\n%s", what, o)
			}
			if tmp := temps(dir); len(tmp) > 0 {
				t.Fatalf("%s: temporary files left: %v\n%s", what, tmp, o)
			}
		}
		for _, p := range temps(dir) {
			os.RemoveAll(p)
		}
	}
}
