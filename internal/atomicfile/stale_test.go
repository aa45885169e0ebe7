//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/internal/childtest"
)

// TestTempFinal: only the random names this package makes count.
func TestTempFinal(t *testing.T) {
	for name, want := range map[string]string{
		".out.tmp-123456789":              "out",       // MkdirTemp's
		".train.bin.tmp-0a1b2c3d4e5f":     "train.bin", // randomSuffix's
		".a.tmp-b.tmp-12":                 "a.tmp-b",
		".out.tmp-123.old":                "", // a previous dataset moved aside
		".out.tmp-notes":                  "",
		".out.tmp-":                       "",
		".out.tmp-1234567890123456789012": "",
		"out.tmp-123":                     "",
		"..tmp-12":                        "",
	} {
		got, ok := tempFinal(name)
		if got != want || ok != (want != "") {
			t.Errorf("tempFinal(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func aged(t *testing.T, p string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveStaleKeepsLiveAndYoung: an unlocked, old temporary output is
// removed; a locked one (a live writer's), a young one, a ".old" and a
// user's look-alike stay.
func TestRemoveStaleKeepsLiveAndYoung(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "out")
	mk := func(name string, age bool) string {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(p, "train"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "train", "part_0"), []byte("rows"), 0o644); err != nil {
			t.Fatal(err)
		}
		if age {
			aged(t, p)
		}
		return p
	}
	dead := mk(".out.tmp-111", true)
	live := mk(".out.tmp-222", true)
	young := mk(".out.tmp-333", false)
	aside := mk(".out.tmp-444.old", true)
	mine := mk(".out.tmp-mine", true)
	l := tryLock(live)
	if l == nil {
		t.Fatal("no flock on a directory here")
	}
	defer l.Close()
	s, err := NewStage(root, StageOptions{Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("%s (unlocked, an hour old) is still there", dead)
	}
	for _, p := range []string{live, young, aside, mine} {
		if _, err := os.Stat(filepath.Join(p, "train", "part_0")); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	// The new Stage's own directory is locked: another Stage keeps it.
	defer func(a time.Duration) { staleAge = a }(staleAge)
	staleAge = 0
	s2, err := NewStage(root, StageOptions{Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Abort()
	if _, err := os.Stat(s.Dir()); err != nil {
		t.Errorf("a live Stage's directory was removed by another: %v", err)
	}
}

// TestFileTempLocked: a File's temporary name is locked until it is
// renamed; an unlocked old one beside it goes when the next Create of the
// same final name starts.
func TestFileTempLocked(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "train.bin")
	dead := filepath.Join(dir, ".train.bin.tmp-0a1b2c3d4e5f")
	if err := os.WriteFile(dead, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	aged(t, dead)
	sidecar := filepath.Join(dir, ".train.bin.gen_params.json.tmp-0a1b2c3d4e5f")
	if err := os.WriteFile(sidecar, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	aged(t, sidecar)
	f, err := Create(final)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("%s (unlocked, an hour old) is still there", dead)
	}
	if _, err := os.Stat(sidecar); err != nil {
		t.Errorf("another file's temporary name was removed: %v", err)
	}
	if l := tryLock(f.tmp); l != nil {
		l.Close()
		t.Fatalf("the open File's temporary name is not locked")
	}
	defer func(a time.Duration) { staleAge = a }(staleAge)
	staleAge = 0
	g, err := Create(final) // a second writer of the same name
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("rows")); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatalf("the first writer's temporary file was taken by the second: %v", err)
	}
	g.Abort()
	if b, err := os.ReadFile(final); err != nil || string(b) != "rows" {
		t.Fatalf("%s: %q, %v", final, b, err)
	}
}

// TestKilledWriterCleanedUp is the regression test of a run killed
// mid-write: a child process starts a dataset (a Stage) and a Raw-style
// file (a File), and is killed with SIGKILL; the next run with the same
// outputs removes both temporaries.
func TestKilledWriterCleanedUp(t *testing.T) {
	if dir := os.Getenv("ATOMICFILE_KILLED_CHILD"); dir != "" {
		s, err := NewStage(filepath.Join(dir, "out"), StageOptions{Owned: owned})
		if err != nil {
			os.Exit(3)
		}
		f, err := s.CreateFile(filepath.Join(dir, "out", "part_0"))
		if err != nil {
			os.Exit(3)
		}
		f.Write([]byte("half a dataset"))
		g, err := Create(filepath.Join(dir, "train.bin"))
		if err != nil {
			os.Exit(3)
		}
		g.Write([]byte("half a file"))
		os.Stdout.WriteString("writing\n")
		time.Sleep(time.Minute)
		os.Exit(4)
	}
	dir := t.TempDir()
	cmd, _ := childtest.Start(t, "TestKilledWriterCleanedUp", "writing", "ATOMICFILE_KILLED_CHILD="+dir)
	temps := func() []string {
		es, _ := os.ReadDir(dir)
		var names []string
		for _, e := range es {
			if IsTemp(e.Name()) {
				names = append(names, e.Name())
			}
		}
		return names
	}
	if n := temps(); len(n) != 2 {
		t.Fatalf("the child's temporaries: %v, want a directory and a file", n)
	}
	// While the child lives, another run leaves its temporaries alone.
	defer func(a time.Duration) { staleAge = a }(staleAge)
	staleAge = 0
	s, err := NewStage(filepath.Join(dir, "out"), StageOptions{Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	s.Abort()
	if n := temps(); len(n) != 2 {
		t.Fatalf("a live writer's temporaries were removed: %v left", n)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	s, err = NewStage(filepath.Join(dir, "out"), StageOptions{Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	writeStage(t, s, filepath.Join(dir, "out"), "part_0", "list.txt")
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "train.bin"), []byte("rows")); err != nil {
		t.Fatal(err)
	}
	if n := temps(); len(n) != 0 {
		t.Errorf("after the killed run, the next run left %s", strings.Join(n, ", "))
	}
}

// TestStageFilesUnlockWhenComplete: a file-mode Stage holds a file's lock
// only while the file is written (a Stage of many files does not hold a
// lock each), lists a directory once for its killed runs' temporaries and
// removes them.
func TestStageFilesUnlockWhenComplete(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, ".b.bin.tmp-1234abcd")
	if err := os.WriteFile(dead, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	aged(t, dead)
	s := NewFileStage(StageOptions{})
	a, err := s.CreateFile(filepath.Join(dir, "a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if a.lock == nil {
		t.Fatal("a file being written holds no lock")
	}
	if err := writeAll(a, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if a.lock != nil {
		t.Error("a complete file still holds its lock")
	}
	if _, err := os.Stat(dead); err != nil {
		t.Fatalf("b.bin's temporary went before b.bin was written: %v", err)
	}
	if err := s.WriteFile(filepath.Join(dir, "b.bin"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("%s (unlocked, an hour old) is still there", dead)
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); got != "a.bin=a b.bin=b" {
		t.Errorf("the directory holds %q", got)
	}
}
