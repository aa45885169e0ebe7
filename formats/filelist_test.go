package formats

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParseFileList(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
		line       int64 // expected error line, 0 = no error
		msg        string
	}{
		{"ok", "2\na.data\nb.data\n", []string{"a.data", "b.data"}, 0, ""},
		{"crlf and spaces", "2\r\n a.data \r\nb.data", []string{"a.data", "b.data"}, 0, ""},
		{"extra lines ignored", "1\na\na\nb\n", []string{"a"}, 0, ""},
		{"empty", "", nil, 1, "empty file list"},
		{"not a number", "two\na\n", nil, 1, "not a file count"},
		{"zero", "0\n", nil, 1, "must be > 0"},
		{"negative", "-3\na\n", nil, 1, "must be > 0"},
		{"short", "3\na\nb\n", nil, 4, "count says 3 files, list has 2"},
		{"blank path", "2\na\n\nb\n", nil, 3, "empty path"},
		{"absurd count", "99999999999\na\n", nil, 1, "larger than the list can hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFileList([]byte(tc.text))
			if tc.line == 0 {
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			var fe *Error
			if !errors.As(err, &fe) || fe.Record != tc.line || !errors.Is(err, ErrMetadata) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v; want line %d, ErrMetadata, %q", err, tc.line, tc.msg)
			}
		})
	}
}

func TestReadFileListResolves(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.data", "sub/b.data"} {
		p := filepath.Join(dir, n)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x"), 0o644)
	}
	list := filepath.Join(dir, "file_list.txt")
	if err := WriteFileList(list, []string{filepath.Join(dir, "a.data"), filepath.Join(dir, "sub/b.data")}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(list)
	if string(data) != "2\na.data\nsub/b.data\n" {
		t.Fatalf("list text %q: want paths relative to the list", data)
	}
	got, err := ReadFileList(list)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.data"), filepath.Join(dir, "sub/b.data")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q want %q", got, want)
	}

	// The same relative name in the working directory and beside the list,
	// as different files: an error naming both, never a guess.
	wd, _ := os.Getwd()
	other := t.TempDir()
	os.Chdir(other)
	defer os.Chdir(wd)
	os.WriteFile(filepath.Join(other, "a.data"), []byte("y"), 0o644)
	_, err = ReadFileList(list)
	if !errors.Is(err, ErrMetadata) || !strings.Contains(err.Error(), "names two different files") {
		t.Fatalf("ambiguous name: err = %v", err)
	}
	os.Chdir(dir) // the same file through both paths is fine
	if _, err := ReadFileList(list); err != nil {
		t.Fatalf("same file via both paths: %v", err)
	}
	os.Chdir(wd)

	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("2\na.data\nmissing.data\n"), 0o644)
	_, err = ReadFileList(bad)
	var fe *Error
	if !errors.As(err, &fe) || fe.Path != bad || fe.Record != 3 || !errors.Is(err, fs.ErrNotExist) ||
		!strings.Contains(err.Error(), filepath.Join(dir, "missing.data")) {
		t.Fatalf("missing file: err = %v", err)
	}
}

func FuzzParseFileList(f *testing.F) {
	for _, s := range []string{"2\na\nb\n", "1\r\nx\r\n", "", "0\n", "3\na\n", "-1", "1\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		names, err := ParseFileList(data)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || !errors.Is(err, ErrMetadata) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(names) == 0 {
			t.Fatal("no names and no error")
		}
		// Round trip: a list written from the names parses to the same names.
		text := []byte(strings.Join(append([]string{strconv.Itoa(len(names))}, names...), "\n"))
		again, err := ParseFileList(text)
		if err != nil || !reflect.DeepEqual(again, names) {
			t.Fatalf("round trip: %q → %q, %v", names, again, err)
		}
	})
}
