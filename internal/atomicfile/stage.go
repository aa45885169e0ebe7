package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// StageOptions are the options of NewStage and NewFileStage.
type StageOptions struct {
	// Force replaces an existing output (the command line's --force);
	// otherwise an existing output is an ErrExists error.
	Force bool
	// NoSync skips the fsync of files and directories before the final
	// rename (scratch data: a crash may then leave the new output
	// incomplete under its final name).
	NoSync bool
	// Owned reports whether the entry rel (slash-separated, relative to the
	// root) of an existing output directory belongs to the dataset it holds
	// (its index, data files and sidecars). Files Listed names are owned
	// as well.
	Owned func(rel string) bool
	// Listed, when set, returns the paths of the files the dataset an
	// existing root holds names in its file lists (formats.ListedFiles
	// reads them).
	Listed func(root string) []string
	// Open opens new files (default os.OpenFile with O_CREATE|O_EXCL):
	// tests inject faults through it.
	Open OpenFunc
}

// Stage collects the files of one output — data files and their index —
// and makes them visible as a unit on Commit; Abort removes them all. It has
// two modes:
//
//   - directory (NewStage with a root that is new or holds only a dataset):
//     files are written under their names into a temporary directory
//     beside the root, ".<root>.tmp-<random>"; Commit syncs it and renames it
//     to the root, or swaps it atomically with the existing root
//     (renameat2 RENAME_EXCHANGE; a rename pair where the kernel lacks it)
//     and then removes the previous dataset. A reader sees the old dataset
//     or the new one, never a mix, and a crash leaves one of them whole.
//   - files (NewFileStage, or a root that holds other files but no
//     dataset): each file is written under a temporary name beside its final
//     name; Commit renames them in the order they were created (index last).
//
// A Stage is safe for concurrent use by the writers of its files.
type Stage struct {
	root    string          // the final directory (directory mode)
	tmp     string          // the temporary directory (directory mode)
	replace bool            // root holds a dataset: swap it on Commit
	merge   bool            // root exists without a dataset: move the new entries into it on Commit
	owned   map[string]bool // root's top-level entries at NewStage (replace): the dataset Commit removes
	o       StageOptions
	lock    *os.File  // holds tmp's flock (stale.go)
	prev    *os.File  // holds the flock of the dataset being replaced until it is removed
	killed  staleScan // the killed runs' temporaries of its files (file mode)

	mu     sync.Mutex // guards the fields below
	files  []*File    // every file created, in order
	made   []string   // parent directories NewStage created, deepest first
	stale  []string   // removed after Commit (file mode)
	done   bool
	failed error
}

// NewFileStage starts an output of single files each committed beside its
// final name (a Raw file, its sidecar).
func NewFileStage(o StageOptions) *Stage {
	if o.Open == nil {
		o.Open = osOpen
	}
	return &Stage{o: o}
}

// NewStage starts an output whose files all lie under the directory root.
// An existing root that holds a dataset (every entry owned, see
// StageOptions) is replaced on Commit when o.Force is set, else NewStage
// returns an ErrExists error; a root that holds a dataset and other files is
// refused, since it cannot be replaced as a unit; a root that holds only
// other files gets the new files beside them (file mode).
func NewStage(root string, o StageOptions) (*Stage, error) {
	root = filepath.Clean(root)
	s := NewFileStage(o)
	st, err := os.Lstat(root)
	if err == nil && st.Mode()&os.ModeSymlink != 0 {
		// Replace what the link points to; the link stays.
		if real, rerr := filepath.EvalSymlinks(root); rerr == nil {
			root = real
			st, err = os.Lstat(root)
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		for d := filepath.Dir(root); ; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
				break
			}
			s.made = append(s.made, d) // removed again by Abort
		}
		if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", root, unwrapPath(err))
		}
	case err != nil:
		return nil, fmt.Errorf("output %s: %w", root, unwrapPath(err))
	case !st.IsDir():
		return nil, fmt.Errorf("%s exists and is not a directory", root)
	default:
		owned, foreign, err := classify(root, o)
		if err != nil {
			return nil, err
		}
		base := filepath.Base(root)
		fixed := base == "." || base == ".." || base == string(filepath.Separator) || mountPoint(root)
		switch {
		case len(foreign) > 0 || fixed && len(owned) == 0:
			if len(owned) > 0 {
				return nil, fmt.Errorf("%s holds a dataset and %s, which is not part of it: an output directory is replaced as a whole; move %s away or write elsewhere",
					root, foreign[0], foreign[0])
			}
			return s, nil // file mode beside the other files
		case fixed:
			return nil, fmt.Errorf("%s holds a dataset; it cannot be replaced as a unit in place (the working directory or a mount point cannot be renamed): write the output to a directory below it", root)
		case len(owned) > 0 && !o.Force:
			return nil, errExists("%s holds a dataset (%s, …): use --force to replace it", root, owned[0])
		}
		if len(owned) == 0 {
			// An existing directory without a dataset (empty, or
			// holding only another output's temporaries): the new
			// entries move into it on Commit, index last, and whatever
			// another process puts there meanwhile stays.
			s.merge = true
		} else {
			s.replace = true
			s.owned = map[string]bool{}
			for _, f := range owned {
				s.owned[strings.SplitN(f, "/", 2)[0]] = true
			}
		}
	}
	removeStale(root) // a killed run's
	tmp, err := os.MkdirTemp(filepath.Dir(root), "."+filepath.Base(root)+".tmp-")
	if err != nil {
		if s.merge {
			s.merge = false
			return s, nil // the parent is read-only: the new files beside the others
		}
		return nil, fmt.Errorf("creating %s: %w", root, unwrapPath(err))
	}
	s.root, s.tmp = root, tmp
	s.lock = tryLock(tmp)
	if s.replace {
		// After the exchange the previous dataset has a temporary name
		// until it is removed: locked, no other run takes it for a
		// killed run's meanwhile.
		s.prev = tryLock(root)
	}
	return s, nil
}

// IsTemp reports whether a file name is a temporary name of an output
// (".<name>.tmp-<random>"): those of an interrupted run are never part of a
// dataset.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// classify walks an existing output directory and returns its owned and
// foreign files (temporary files are neither), both sorted.
func classify(root string, o StageOptions) (owned, foreign []string, err error) {
	listed := map[string]bool{}
	if o.Listed != nil {
		for _, f := range o.Listed(root) {
			if rel, err := filepath.Rel(root, f); err == nil && filepath.IsLocal(rel) {
				listed[filepath.ToSlash(rel)] = true
			}
		}
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && !IsTemp(d.Name()) {
			if strings.Contains(rel, "/") {
				// Datasets hold files one directory deep at most
				// (gen's train/, val/): a deeper tree is not one.
				foreign = append(foreign, rel+"/")
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case IsTemp(d.Name()):
			if d.IsDir() {
				return filepath.SkipDir
			}
		case listed[rel] || o.Owned != nil && o.Owned(rel):
			owned = append(owned, rel)
		default:
			foreign = append(foreign, rel)
		}
		if len(owned) > 0 && len(foreign) > 0 {
			return filepath.SkipAll // refused either way: no need to walk a big tree
		}
		return nil
	})
	sort.Strings(owned)
	sort.Strings(foreign)
	return owned, foreign, err
}

// Dir is the directory the Stage's files are written in before Commit (the
// temporary directory in directory mode, "" in file mode).
func (s *Stage) Dir() string { return s.tmp }

// Replaces reports whether Commit replaces an existing dataset.
func (s *Stage) Replaces() bool { return s.replace }

// CreateFile creates the file whose final name is final. Its Commit syncs
// and closes it; it becomes visible when the Stage commits. In file mode an
// existing final name is an ErrExists error unless Force (a directory
// always is an error).
func (s *Stage) CreateFile(final string) (*File, error) {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done {
		return nil, fmt.Errorf("creating %s: output already committed or aborted", final)
	}
	var f *File
	if s.tmp != "" {
		rel, err := filepath.Rel(s.root, final)
		if err != nil || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("creating %s: outside the output directory %s", final, s.root)
		}
		p := filepath.Join(s.tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", final, unwrapPath(err))
		}
		of, err := s.o.Open(p)
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", final, unwrapPath(err))
		}
		f = &File{File: of, final: final, tmp: p, sync: !s.o.NoSync}
	} else {
		if st, err := os.Stat(final); err == nil {
			if st.IsDir() {
				return nil, fmt.Errorf("output %s is a directory", final)
			}
			if !s.o.Force {
				return nil, errExists("%s exists: use --force to replace it", final)
			}
			if !st.Mode().IsRegular() {
				return nil, fmt.Errorf("output %s exists and is not a regular file", final)
			}
		}
		var err error
		if f, err = createTemp(final, s.o.Open, !s.o.NoSync, s.killed.remove); err != nil {
			return nil, err
		}
	}
	f.commit = func(f *File) error { f.unlock(); return nil } // complete: renamed on the Stage's Commit
	s.mu.Lock()
	s.files = append(s.files, f)
	s.mu.Unlock()
	return f, nil
}

// WriteFile writes data to a new file of the Stage.
func (s *Stage) WriteFile(final string, data []byte) error {
	f, err := s.CreateFile(final)
	if err != nil {
		return err
	}
	return writeAll(f, data)
}

// RemoveOnCommit names a file of a previous output that Commit removes
// once the new files are in place (file mode; in directory mode the whole
// previous directory goes).
func (s *Stage) RemoveOnCommit(path string) {
	s.mu.Lock()
	s.stale = append(s.stale, path)
	s.mu.Unlock()
}

// Commit makes the output visible: every file must have been committed
// (File.Commit). On error nothing of the new output remains and a
// previous dataset stays.
func (s *Stage) Commit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return fmt.Errorf("output already committed or aborted")
	}
	for _, f := range s.files {
		if !f.done {
			s.abortLocked()
			return fmt.Errorf("committing the output: %s is still being written", f.final)
		}
	}
	var err error
	if s.tmp != "" {
		err = s.commitDir()
	} else {
		err = s.commitFiles()
	}
	if err != nil {
		s.abortLocked()
		return err
	}
	s.done = true
	s.unlock()
	return nil
}

// unlock releases the Stage's locks: its temporary directory's, the
// replaced dataset's, its files' (their temporary names are gone).
func (s *Stage) unlock() {
	for _, l := range []**os.File{&s.lock, &s.prev} {
		if *l != nil {
			(*l).Close()
			*l = nil
		}
	}
	for _, f := range s.files {
		f.unlock()
	}
}

func (s *Stage) commitDir() error {
	sync := !s.o.NoSync
	if sync {
		var dirs []string
		filepath.WalkDir(s.tmp, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children first
			if err := SyncDir(dirs[i]); err != nil {
				return fmt.Errorf("syncing %s: %w", s.root, unwrapPath(err))
			}
		}
	}
	if s.merge {
		return s.commitMerge(sync)
	}
	if !s.replace {
		if err := os.Rename(s.tmp, s.root); err != nil {
			return fmt.Errorf("renaming the new output to %s: %w", s.root, unwrapPath(err))
		}
	} else if err := exchange(s.tmp, s.root); err != nil {
		// No atomic exchange here: move the old dataset aside, then the
		// new one in (a crash in between leaves the old one at old).
		old := s.tmp + ".old"
		if err := os.Rename(s.root, old); err != nil {
			return fmt.Errorf("moving the previous %s aside: %w", s.root, unwrapPath(err))
		}
		if err := os.Rename(s.tmp, s.root); err != nil {
			os.Rename(old, s.root)
			return fmt.Errorf("renaming the new output to %s: %w", s.root, unwrapPath(err))
		}
		s.tmp = old
	}
	// Committed: s.tmp now holds the previous dataset (or nothing).
	prev := s.tmp
	s.tmp = ""
	if sync {
		if err := SyncDir(filepath.Dir(s.root)); err != nil {
			return fmt.Errorf("syncing the directory of %s: %w", s.root, unwrapPath(err))
		}
	}
	if s.replace {
		// What appeared in the old directory after NewStage classified
		// it (another process's file or temporary output) is not the
		// dataset being replaced: it moves back beside the new one.
		if ents, err := os.ReadDir(prev); err == nil {
			for _, e := range ents {
				if !s.owned[e.Name()] {
					os.Rename(filepath.Join(prev, e.Name()), filepath.Join(s.root, e.Name()))
				}
			}
		}
		if err := os.RemoveAll(prev); err != nil {
			return fmt.Errorf("%s committed; removing the previous dataset (now %s): %w", s.root, prev, err)
		}
	}
	return nil
}

// commitMerge moves the temporary directory's top-level entries into the
// existing root, ordered by the last file each holds (so the index, written
// last, appears last), then removes the emptied temporary directory. An
// entry whose name appeared in root meanwhile is an error: nothing of the
// new output stays.
func (s *Stage) commitMerge(sync bool) error {
	var order []string
	last := map[string]int{}
	for i, f := range s.files {
		rel, err := filepath.Rel(s.tmp, f.tmp)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		top := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
		if _, ok := last[top]; !ok {
			order = append(order, top)
		}
		last[top] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return last[order[a]] < last[order[b]] })
	for i, top := range order {
		dst := filepath.Join(s.root, top)
		if _, err := os.Lstat(dst); err == nil {
			s.unmerge(order[:i])
			return fmt.Errorf("committing %s: %s appeared there while the output was written; move it away or write elsewhere", s.root, dst)
		}
		if err := os.Rename(filepath.Join(s.tmp, top), dst); err != nil {
			s.unmerge(order[:i])
			return fmt.Errorf("renaming the new %s into %s: %w", top, s.root, unwrapPath(err))
		}
	}
	for _, f := range s.files {
		if rel, err := filepath.Rel(s.tmp, f.tmp); err == nil {
			f.tmp = filepath.Join(s.root, rel)
		}
	}
	os.Remove(s.tmp)
	s.tmp = ""
	if sync {
		if err := SyncDir(s.root); err != nil {
			return fmt.Errorf("syncing %s: %w", s.root, unwrapPath(err))
		}
	}
	return nil
}

// unmerge moves entries commitMerge already moved back into the temporary
// directory (Abort then removes it).
func (s *Stage) unmerge(moved []string) {
	for _, top := range moved {
		os.Rename(filepath.Join(s.root, top), filepath.Join(s.tmp, top))
	}
}

func (s *Stage) commitFiles() error {
	dirs := map[string]bool{}
	for i, f := range s.files {
		if err := os.Rename(f.tmp, f.final); err != nil {
			// Take back what was already renamed: nothing of the new
			// output stays.
			for _, g := range s.files[:i] {
				os.Remove(g.final)
			}
			return fmt.Errorf("renaming %s: %w", f.final, unwrapPath(err))
		}
		f.tmp = f.final
		dirs[filepath.Dir(f.final)] = true
	}
	for _, p := range s.stale {
		if err := os.Remove(p); err == nil {
			dirs[filepath.Dir(p)] = true
		}
	}
	if !s.o.NoSync {
		for d := range dirs {
			if err := SyncDir(d); err != nil {
				return fmt.Errorf("syncing the directory of the output %s: %w", d, unwrapPath(err))
			}
		}
	}
	return nil
}

// Abort removes every file of the Stage (the temporary directory in
// directory mode); a previous dataset stays. It is a no-op after Commit.
func (s *Stage) Abort() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	return s.abortLocked()
}

func (s *Stage) abortLocked() error {
	s.done = true
	var first error
	for _, f := range s.files {
		if !f.done {
			f.done = true
			f.File.Close()
		}
		if err := os.Remove(f.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) && s.tmp == "" && first == nil {
			first = err
		}
	}
	if s.tmp != "" {
		if err := os.RemoveAll(s.tmp); err != nil && first == nil {
			first = err
		}
	}
	for _, d := range s.made {
		os.Remove(d) // only when still empty
	}
	s.unlock()
	return first
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
