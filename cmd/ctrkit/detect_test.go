package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCriteoCSV writes n rows of Criteo-shaped CSV text (header line,
// label, 13 integers, 26 8-hex-digit categoricals, some missing) whose
// label follows the first categorical, so that models learn from it.
func writeCriteoCSV(t *testing.T, path string, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 9))
	var b strings.Builder
	b.WriteString("label")
	for i := 1; i <= 13; i++ {
		fmt.Fprintf(&b, ",I%d", i)
	}
	for i := 1; i <= 26; i++ {
		fmt.Fprintf(&b, ",C%d", i)
	}
	b.WriteByte('\n')
	for range n {
		c0 := r.IntN(8)
		label := 0
		if c0 < 3 {
			label = 1
		}
		fmt.Fprintf(&b, "%d", label)
		for range 13 {
			if r.IntN(10) == 0 {
				b.WriteString(",")
			} else {
				fmt.Fprintf(&b, ",%d", r.IntN(100))
			}
		}
		fmt.Fprintf(&b, ",%08x", 0x1000+c0)
		for range 25 {
			fmt.Fprintf(&b, ",%08x", r.Uint32()%64)
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTrainDetectsFormat: train, evaluate and predict detect the format of
// --source/--eval-source with the detector the other commands use (a
// directory, a file list, a Parquet file list, a Raw file), print a note
// line saying so, and refuse Criteo text, a file list of Raw files and a
// format the content contradicts with the flag or command to use — never
// reading Parquet as a Norm header or a Raw file as a file list.
func TestTrainDetectsFormat(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeCriteoCSV(t, "day.csv", 200)
	for _, to := range []string{"norm", "parquet", "raw"} {
		dst := to + "/"
		if to == "raw" {
			dst = "a.raw"
		}
		if out, code := ctrkitArgs(t, "convert", "day.csv", dst, "--to", to, "--slot-size-array", "1000"); code != 0 {
			t.Fatalf("convert to %s: exit %d\n%s", to, code, out)
		}
	}
	abs, _ := filepath.Abs("a.raw")
	if err := os.WriteFile("raw_list.txt", []byte("1\n"+abs+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	train := []string{"train", "--model", "dlrm", "--width", "0.125", "--vec-size", "4", "--slot-size-array", "1000",
		"--batchsize", "50", "--max-iter", "2", "--snapshot-prefix", "m"}
	criteoList, _ := filepath.Abs("day.csv")
	if err := os.WriteFile("criteo_list.txt", []byte("1\n"+criteoList+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// validate detects with the same detector: a file list of Criteo text
	// is Criteo text (was read as Norm: one bogus header problem), a list
	// of Raw files is refused.
	if out, code := ctrkitArgs(t, "validate", "criteo_list.txt", "--slot-size-array", "1000"); code != 0 ||
		strings.Count(out, "format criteo-csv") != 1 || !strings.Contains(out, "ok: no problems; 1 of 1 file checked, 200 samples") {
		t.Errorf("validate criteo_list.txt: exit %d\n%s", code, out)
	}
	if out, code := ctrkitArgs(t, "validate", "raw_list.txt"); code == 0 || !strings.Contains(out, "a Raw dataset is one file") {
		t.Errorf("validate raw_list.txt: exit %d\n%s", code, out)
	}
	for _, c := range []struct{ source, note string }{
		{"norm", "--source norm: format norm, file list norm/file_list.txt (detected"},
		{"norm/file_list.txt", "--source norm/file_list.txt: format norm (detected"},
		{"parquet", "--source parquet: format parquet, file list parquet/_file_list.txt (detected"},
		{"parquet/_file_list.txt", "--source parquet/_file_list.txt: format parquet (detected"},
		{"a.raw", "--source a.raw: format raw (detected"},
	} {
		out, code := ctrkitArgs(t, append(train, "--source", c.source, "--eval-source", c.source)...)
		if code != 0 || !strings.Contains(out, "note: "+c.note) || !strings.Contains(out, "trained 2 iterations") {
			t.Errorf("train --source %s: exit %d, want 0 and the note %q\n%s", c.source, code, c.note, out)
		}
		ev := []string{"evaluate", "--model", "dlrm", "--width", "0.125", "--vec-size", "4", "--slot-size-array", "1000",
			"--batchsize", "50", "--load-prefix", "m", "--load-iter", "2", "--eval-source", c.source}
		if out, code := ctrkitArgs(t, ev...); code != 0 || !strings.Contains(out, "note: --eval-source "+c.source+": format") {
			t.Errorf("evaluate --eval-source %s: exit %d\n%s", c.source, code, out)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "day.csv"}, "--source day.csv is Criteo text (criteo-csv); train, evaluate and predict read Norm, Raw or Parquet: convert it first"},
		{[]string{"--source", "norm", "--eval-source", "day.csv"}, "--eval-source day.csv is Criteo text"},
		{[]string{"--source", "raw_list.txt"}, "a Raw dataset is one file: give that file's path"},
		{[]string{"--source", "parquet", "--format", "norm"}, "--source parquet holds Parquet data, but the format is Norm (the config's format or --format): give --format parquet"},
		{[]string{"--source", "norm", "--format", "raw"}, "--source norm holds Norm data, but the format is Raw"},
	} {
		out, code := ctrkitArgs(t, append(train, c.args...)...)
		if code == 0 || !strings.Contains(out, c.want) || strings.Contains(out, "frame length") || strings.Contains(out, `\x00`) {
			t.Errorf("train %v: exit %d, want an error with %q\n%s", c.args, code, c.want, out)
		}
	}
}
