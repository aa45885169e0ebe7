package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func owned(rel string) bool { return strings.HasPrefix(rel, "part_") || rel == "list.txt" }

func writeStage(t *testing.T, s *Stage, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := s.WriteFile(filepath.Join(root, n), []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
}

func readDir(t *testing.T, dir string) string {
	t.Helper()
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		names = append(names, e.Name()+"="+string(b))
	}
	return strings.Join(names, " ")
}

// TestStageReplace writes a dataset, refuses to replace it without Force,
// keeps it whole while a replacement is written and after one aborts, and
// swaps in the new one (stale parts gone) on Commit.
func TestStageReplace(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "out")
	s, err := NewStage(root, StageOptions{Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	writeStage(t, s, root, "part_0", "part_1", "list.txt")
	if _, err := os.Stat(root); err == nil {
		t.Fatal("output visible before Commit")
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	old := readDir(t, root)
	if _, err := NewStage(root, StageOptions{Owned: owned}); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("replacing without Force: %v, want ErrExists naming --force", err)
	}
	for _, commit := range []bool{false, true} {
		s, err := NewStage(root, StageOptions{Owned: owned, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		writeStage(t, s, root, "part_0", "list.txt")
		if got := readDir(t, root); got != old {
			t.Fatalf("old dataset changed while the new one is written: %s", got)
		}
		if !commit {
			s.Abort()
			if got := readDir(t, root); got != old {
				t.Fatalf("old dataset changed by Abort: %s", got)
			}
			continue
		}
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := readDir(t, root); got != "list.txt=list.txt part_0=part_0" {
			t.Fatalf("after Commit: %s", got)
		}
	}
	if got := readDir(t, parent); got != "out=" {
		t.Errorf("parent holds %s, want only out (no temporary directory)", got)
	}
}

// TestStageForeign: a directory holding other files gets the new files
// beside them (file mode), renamed only on Commit; one holding a dataset
// and other files is refused, even with Force.
func TestStageForeign(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "input.tsv"), []byte("x"), 0o644)
	s, err := NewStage(root, StageOptions{Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	writeStage(t, s, root, "part_0", "list.txt")
	if _, err := os.Stat(filepath.Join(root, "list.txt")); err == nil {
		t.Fatal("list visible before Commit")
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, root); got != "input.tsv=x list.txt=list.txt part_0=part_0" {
		t.Fatalf("after Commit: %s", got)
	}
	if _, err := NewStage(root, StageOptions{Owned: owned, Force: true}); err == nil || !strings.Contains(err.Error(), "input.tsv") {
		t.Fatalf("replacing a dataset beside another file: %v, want a refusal naming input.tsv", err)
	}
}

// TestFileStage: a single-file output refuses an existing file without
// Force and a directory always, before anything is written.
func TestFileStage(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.bin")
	os.WriteFile(p, []byte("old"), 0o644)
	if _, err := NewFileStage(StageOptions{}).CreateFile(p); !errors.Is(err, ErrExists) {
		t.Fatalf("existing file: %v, want ErrExists", err)
	}
	if _, err := NewFileStage(StageOptions{Force: true}).CreateFile(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("directory: %v", err)
	}
	s := NewFileStage(StageOptions{Force: true})
	writeStage(t, s, dir, "x.bin")
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatal("replaced before Commit")
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); got != "x.bin=x.bin" {
		t.Fatalf("after Commit: %s", got)
	}
}

// TestStageAbortRemovesParents: Abort removes the parent directories
// NewStage created for a new output.
func TestStageAbortRemovesParents(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "a", "b", "out")
	s, err := NewStage(root, StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeStage(t, s, root, "part_0")
	s.Abort()
	if got := readDir(t, dir); got != "" {
		t.Errorf("left after Abort: %s", got)
	}
}

// TestStageKeepsConcurrentEntries is the regression test of two gens
// writing into one directory at once (a Raw gen's d.bin beside a Parquet
// gen's pq/): a Stage over an existing directory without a dataset, and
// one replacing a dataset, must not remove what another process creates
// there while they write — another output's temporary directory with an
// open file in it, or a plain file. Before the fix the Raw gen's Commit
// swapped the directory and removed the previous one, the Parquet gen's
// temporary directory with it.
func TestStageKeepsConcurrentEntries(t *testing.T) {
	for _, replace := range []bool{false, true} {
		root := t.TempDir()
		if replace {
			s, err := NewStage(root+"/", StageOptions{Owned: owned})
			if err != nil {
				t.Fatal(err)
			}
			writeStage(t, s, root, "part_0", "part_9", "list.txt")
			if err := s.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		s, err := NewStage(root, StageOptions{Owned: owned, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.Replaces() != replace {
			t.Fatalf("replace=%v: Replaces() = %v", replace, s.Replaces())
		}
		writeStage(t, s, root, "part_0", "list.txt")
		// Another output starts in the same directory meanwhile.
		other := filepath.Join(root, ".pq.tmp-123")
		if err := os.MkdirAll(filepath.Join(other, "train"), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(other, "train", "gen_0.parquet"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(); err != nil {
			t.Fatalf("replace=%v: %v", replace, err)
		}
		if _, err := f.WriteString("rows"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if b, err := os.ReadFile(filepath.Join(other, "train", "gen_0.parquet")); err != nil || string(b) != "rows" {
			t.Errorf("replace=%v: the other output's temporary file after Commit: %q, %v", replace, b, err)
		}
		if got, want := readDir(t, root), "list.txt=list.txt notes.txt=mine part_0=part_0"; !strings.HasSuffix(got, want) {
			t.Errorf("replace=%v: root holds %q, want the new dataset and notes.txt (%q)", replace, got, want)
		}
	}
}

// TestStageMergeRefusesANameThatAppeared: an entry of the new output whose
// name another process created in the directory meanwhile is an error, and
// nothing of the new output stays.
func TestStageMergeRefusesANameThatAppeared(t *testing.T) {
	root := t.TempDir()
	s, err := NewStage(root, StageOptions{Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	writeStage(t, s, root, "part_0", "list.txt")
	if err := os.WriteFile(filepath.Join(root, "list.txt"), []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = s.Commit()
	if err == nil || !strings.Contains(err.Error(), "list.txt appeared") {
		t.Fatalf("Commit: %v, want an error naming list.txt", err)
	}
	if got := readDir(t, root); got != "list.txt=theirs" {
		t.Fatalf("after the refused Commit the directory holds %q", got)
	}
}
