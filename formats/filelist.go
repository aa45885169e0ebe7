package formats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// A file list (SPEC §1) is a text file whose first line is the count N > 0,
// followed by N paths, one per line; lines after the N-th are ignored.
//
//	2
//	train/gen_0.data
//	train/gen_1.data

// maxFileListBytes bounds how much of a file list is read.
const maxFileListBytes = 64 << 20

// ReadFileList reads a file list and resolves its paths: a relative path is
// tried relative to the working directory first, then relative to the list's
// directory (SPEC §1). A missing file is an *Error naming both candidates;
// so is a name that exists in both places as different files (ErrMetadata),
// which would otherwise read the wrong data silently.
func ReadFileList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Format: "filelist", Path: path, Offset: -1, Record: -1, Op: "open", Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileListBytes+1))
	if err != nil {
		return nil, &Error{Format: "filelist", Path: path, Offset: -1, Record: -1, Op: "read", Err: err}
	}
	if len(data) > maxFileListBytes {
		return nil, Errorf("filelist", path, -1, -1, ErrMetadata, "file list larger than %d bytes", maxFileListBytes)
	}
	names, err := ParseFileList(data)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			fe.Path = path
		}
		return nil, err
	}
	dir := filepath.Dir(path)
	out := make([]string, len(names))
	seen := map[string]string{} // a name listed again resolves as before
	for i, n := range names {
		p, ok := seen[n]
		if !ok {
			if p, err = resolve(n, dir); err != nil {
				return nil, &Error{Format: "filelist", Path: path, Offset: -1, Record: int64(i + 2), Op: "data file", Err: err}
			}
			seen[n] = p
		}
		out[i] = p
	}
	return out, nil
}

func resolve(name, dir string) (string, error) {
	if filepath.IsAbs(name) {
		if _, err := os.Stat(name); err != nil {
			return "", err
		}
		return name, nil
	}
	alt := filepath.Join(dir, name)
	st, err := os.Stat(name)
	ast, aerr := os.Stat(alt)
	switch {
	case err == nil && aerr == nil && !os.SameFile(st, ast):
		// SPEC §1 tries the working directory first, as HugeCTR does; when
		// the list's directory holds another file of that name, guessing
		// would silently read the wrong data.
		return "", fmt.Errorf("%w: %q names two different files, %q (working directory) and %q (beside the list); run from the list's directory or give absolute paths",
			ErrMetadata, name, name, alt)
	case err == nil:
		return name, nil
	case aerr == nil:
		return alt, nil
	}
	return "", fmt.Errorf("%w: %q (tried %q and %q)", fs.ErrNotExist, name, name, alt)
}

// ParseFileList parses the text of a file list without touching the file
// system. Errors are *Error values with Format "filelist" and the 1-based
// line in Record (Path is empty).
func ParseFileList(data []byte) ([]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	next := func() (string, bool) {
		for sc.Scan() {
			line++
			return strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r")), true
		}
		return "", false
	}
	first, ok := next()
	if !ok {
		if err := sc.Err(); err != nil {
			return nil, Errorf("filelist", "", -1, int64(line+1), ErrMetadata, "%v", err)
		}
		return nil, Errorf("filelist", "", -1, 1, ErrMetadata, "empty file list: want a count on the first line")
	}
	n, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return nil, Errorf("filelist", "", -1, 1, ErrMetadata, "first line %q is not a file count", clip(first))
	}
	if n <= 0 {
		return nil, Errorf("filelist", "", -1, 1, ErrMetadata, "file count %d must be > 0", n)
	}
	if n > int64(len(data)/2) {
		return nil, Errorf("filelist", "", -1, 1, ErrMetadata, "file count %d larger than the list can hold (%d bytes, at most %d paths of a character and a newline)", n, len(data), len(data)/2)
	}
	names := make([]string, 0, n)
	for int64(len(names)) < n {
		s, ok := next()
		if !ok {
			if err := sc.Err(); err != nil {
				return nil, Errorf("filelist", "", -1, int64(line+1), ErrMetadata, "%v", err)
			}
			return nil, Errorf("filelist", "", -1, int64(line+1), ErrMetadata, "count says %d files, list has %d", n, len(names))
		}
		if s == "" {
			return nil, Errorf("filelist", "", -1, int64(line), ErrMetadata, "empty path (count says %d files)", n)
		}
		names = append(names, s)
	}
	return names, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// WriteFileList writes a file list atomically, with paths relative to the
// list's directory where possible.
func WriteFileList(path string, files []string) error { return WriteFileListTo(nil, path, files) }

// WriteFileListTo writes a file list as a file of c (nil:
// atomicfile.Direct).
func WriteFileListTo(c atomicfile.Creator, path string, files []string) error {
	if len(files) == 0 {
		return fmt.Errorf("writing %s: empty file list", path)
	}
	dir := filepath.Dir(path)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%d\n", len(files))
	for _, f := range files {
		if rel, err := filepath.Rel(dir, f); err == nil && !strings.HasPrefix(rel, "..") {
			f = rel
		}
		buf.WriteString(f)
		buf.WriteByte('\n')
	}
	return atomicfile.WriteFileTo(c, path, buf.Bytes())
}

// ListedFiles returns the function atomicfile.StageOptions.Listed wants: the
// paths that the given file lists (relative to the output root) of an
// existing dataset name. A list that is missing or not one is skipped: its files are
// then judged by name.
func ListedFiles(lists ...string) func(root string) []string {
	return func(root string) []string {
		var out []string
		for _, l := range lists {
			files, err := ReadFileList(filepath.Join(root, l))
			if err == nil {
				out = append(out, files...)
			}
		}
		return out
	}
}
