package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrExists is returned when an output already exists and was not to be
// replaced (the command line's --force replaces it).
var ErrExists = errors.New("output exists")

// existsError is an error about an existing output that matches ErrExists
// without its package prefix in the message users read.
type existsError struct{ msg string }

func (e *existsError) Error() string        { return e.msg }
func (e *existsError) Is(target error) bool { return target == ErrExists }

func errExists(format string, args ...any) error {
	return &existsError{fmt.Sprintf(format, args...)}
}

// OutFile is what an output file is written through: an *os.File, or in
// tests a file that injects faults (disk full) through StageOptions.Open.
type OutFile interface {
	io.Writer
	io.WriterAt
	Sync() error
	Close() error
	Name() string
}

// OpenFunc opens a new file for writing (os.OpenFile with O_CREATE|O_EXCL).
type OpenFunc func(name string) (OutFile, error)

func osOpen(name string) (OutFile, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

// File is an output file written under a temporary name and given its final
// name only when complete, so an interrupted run leaves no half file under
// the final name. A File from Create is renamed by Commit; one from a
// Stage is renamed (or its directory is) when the whole Stage commits.
type File struct {
	// File is the open temporary file.
	File  OutFile
	final string // the name users see, in messages
	tmp   string // the name written under
	sync  bool   // fsync before Commit closes it
	// commit, when set, runs after the file is synced and closed (the
	// Stage records it); otherwise Commit renames tmp to final.
	commit func(*File) error
	done   bool
	lock   *os.File // holds tmp's flock while tmp is ours (stale.go)
}

// Write writes to the temporary file. Errors carry no path (the temporary
// name means nothing to users): callers name Final.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, unwrapPath(err)
}

// WriteAt writes to the temporary file at off (errors as Write's).
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, unwrapPath(err)
}

// Create creates the temporary file for final (".<base>.tmp-<random>"
// in the same directory), creating the directory if needed. Commit syncs it
// to disk, renames it to final and syncs the directory.
func Create(final string) (*File, error) {
	return createTemp(final, osOpen, true, removeStale)
}

// createTemp creates final's temporary file after removing the killed
// runs' ones (stale).
func createTemp(final string, open OpenFunc, sync bool, stale func(string)) (*File, error) {
	dir := filepath.Dir(final)
	if st, err := os.Stat(final); err == nil && st.IsDir() {
		return nil, fmt.Errorf("output %s is a directory", final)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", final, unwrapPath(err))
	}
	stale(final)
	for range 100 {
		tmp := filepath.Join(dir, "."+filepath.Base(final)+".tmp-"+randomSuffix())
		f, err := open(tmp)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", final, unwrapPath(err))
		}
		return &File{File: f, final: final, tmp: tmp, sync: sync, lock: tryLock(tmp)}, nil
	}
	return nil, fmt.Errorf("creating %s: no free temporary name", final)
}

// unwrapPath drops the *fs.PathError around err, whose path is the
// temporary name users never see.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Stat returns the file info of the file as written (under its temporary
// name until it is visible).
func (f *File) Stat() (os.FileInfo, error) { return os.Stat(f.tmp) }

// Final returns the name the file gets on Commit.
func (f *File) Final() string { return f.final }

// Commit syncs and closes the file and gives it its final name (at once,
// or when its Stage commits). On error the temporary file is removed and
// the error names the final path.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("%s already committed or aborted", f.final)
	}
	f.done = true
	fail := func(step string, err error) error {
		os.Remove(f.tmp)
		f.unlock()
		return fmt.Errorf("%s %s: %w", step, f.final, unwrapPath(err))
	}
	if f.sync {
		if err := f.File.Sync(); err != nil {
			f.File.Close()
			return fail("syncing", err)
		}
	}
	if err := f.File.Close(); err != nil {
		return fail("closing", err)
	}
	if f.commit != nil {
		if err := f.commit(f); err != nil {
			return fail("committing", err)
		}
		return nil
	}
	if err := os.Rename(f.tmp, f.final); err != nil {
		return fail("renaming", err)
	}
	f.tmp = f.final
	f.unlock()
	if f.sync {
		if err := SyncDir(filepath.Dir(f.final)); err != nil {
			return fmt.Errorf("syncing the directory of %s: %w", f.final, unwrapPath(err))
		}
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
	err := os.Remove(f.tmp)
	f.unlock()
	return err
}

// unlock releases the temporary name's lock (once it is renamed or gone).
func (f *File) unlock() {
	if f.lock != nil {
		f.lock.Close()
		f.lock = nil
	}
}

// WriteFile writes data to path through a temporary file, synced before
// the rename.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	return writeAll(f, data)
}

func writeAll(f *File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return fmt.Errorf("writing %s: %w", f.final, unwrapPath(err))
	}
	return f.Commit()
}

// SyncDir fsyncs a directory, so that the names created, renamed or removed
// in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Creator creates the files of an output: a *Stage (committed as a unit),
// or Direct (each file renamed to its final name by its own Commit).
// CreateFile creates the file whose final name is final.
type Creator interface {
	CreateFile(final string) (*File, error)
}

// Direct is the Creator of files committed one by one (Create).
var Direct Creator = direct{}

type direct struct{}

func (direct) CreateFile(final string) (*File, error) { return Create(final) }

// CreatorOr returns c, or Direct when c is nil.
func CreatorOr(c Creator) Creator {
	if c == nil {
		return Direct
	}
	return c
}

// WriteFileTo writes data to the file final of c.
func WriteFileTo(c Creator, final string, data []byte) error {
	f, err := CreatorOr(c).CreateFile(final)
	if err != nil {
		return err
	}
	return writeAll(f, data)
}
