package formats

import (
	"errors"
	"fmt"
	"os"
)

// SplitWriter writes a dataset as a series of files of at most PerFile
// samples each, opening file k with Create(k) when needed, and calls Finish
// with the committed files and their sample counts on Close (to write a
// file list or metadata). It implements Writer.
type SplitWriter struct {
	// PerFile is the number of samples per file (0: one file).
	PerFile int64
	// Create opens file k and returns it with its final path.
	Create func(k int) (RangeWriter, string, error)
	// Finish, when set, runs on Close after the last file is committed.
	Finish func(files []string, counts []int64) error
	// RemoveCommitted makes Abort and a failed Close remove the files
	// already committed (set when they are renamed one by one; a Stage
	// removes its files itself when it aborts).
	RemoveCommitted bool

	cur    RangeWriter
	path   string
	n      int64 // samples in cur
	files  []string
	counts []int64
	err    error
	done   bool
}

// Write implements Writer.
func (w *SplitWriter) Write(b *Batch) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("write after Close or Abort")
	}
	for lo := 0; lo < b.N; {
		if w.cur == nil {
			// The writer is kept only without an error: a constructor
			// that fails may return a typed nil, which in the interface
			// is not nil.
			cur, path, err := w.Create(len(w.files))
			if err != nil {
				w.err = err
				return err
			}
			w.cur, w.path, w.n = cur, path, 0
		}
		hi := b.N
		if w.PerFile > 0 {
			hi = lo + int(min(int64(b.N-lo), w.PerFile-w.n))
		}
		if w.err = w.cur.WriteRange(b, lo, hi); w.err != nil {
			return w.err
		}
		w.n += int64(hi - lo)
		lo = hi
		if w.PerFile > 0 && w.n == w.PerFile {
			if w.err = w.commit(); w.err != nil {
				return w.err
			}
		}
	}
	return nil
}

func (w *SplitWriter) commit() error {
	err := w.cur.Close()
	w.cur = nil
	if err != nil {
		return err
	}
	w.files = append(w.files, w.path)
	w.counts = append(w.counts, w.n)
	return nil
}

// Files returns the files committed so far.
func (w *SplitWriter) Files() []string { return append([]string(nil), w.files...) }

// Close commits the current file and runs Finish.
func (w *SplitWriter) Close() error {
	if w.done {
		return w.err
	}
	w.done = true
	if w.err == nil && w.cur != nil {
		w.err = w.commit()
	}
	if w.err == nil && len(w.files) == 0 {
		w.err = fmt.Errorf("no samples written")
	}
	if w.err == nil && w.Finish != nil {
		w.err = w.Finish(w.Files(), append([]int64(nil), w.counts...))
	}
	if w.err != nil {
		w.abortCur()
		w.removeCommitted()
	}
	return w.err
}

func (w *SplitWriter) removeCommitted() {
	if w.RemoveCommitted {
		for _, p := range w.files {
			os.Remove(p)
		}
	}
}

func (w *SplitWriter) abortCur() {
	if w.cur != nil {
		w.cur.Abort()
		w.cur = nil
	}
}

// Abort removes the file being written and, with RemoveCommitted, the
// files already committed (a Stage's files go when the Stage aborts).
func (w *SplitWriter) Abort() error {
	if w == nil || w.done {
		return nil
	}
	w.done = true
	if w.err == nil {
		w.err = errors.New("writer aborted")
	}
	w.abortCur()
	w.removeCommitted()
	return nil
}
