package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestAtomicFileLeavesNothingOnAbort(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "out.data")
	f, err := Create(final)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half"))
	if _, err := os.Stat(final); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("final name exists before commit: %v", err)
	}
	f.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("abort left %v", ents)
	}
	f, _ = Create(final)
	f.Write([]byte("whole"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(final); string(b) != "whole" {
		t.Fatalf("committed %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("commit left %v", ents)
	}
}
