package formats

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is an output file written under a temporary name in the destination
// directory and renamed to its final name by Commit, so an interrupted run
// leaves no half file under the final name.
type File struct {
	*os.File
	final string
	done  bool
}

// CreateFile creates the temporary file for final (".<base>.tmp-<random>"
// in the same directory), creating the directory if needed.
func CreateFile(final string) (*File, error) {
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &File{File: f, final: final}, nil
}

// Final returns the name the file gets on Commit.
func (f *File) Final() string { return f.final }

// Commit closes the file and renames it to its final name.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("ctrkit/formats: %s already committed or aborted", f.final)
	}
	f.done = true
	tmp := f.File.Name()
	if err := f.File.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, f.final); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Abort closes and removes the temporary file. It is a no-op after Commit.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	f.File.Close()
	return os.Remove(f.File.Name())
}

// WriteFileAtomic writes data to path through a temporary file.
func WriteFileAtomic(path string, data []byte) error {
	f, err := CreateFile(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}
