package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goInternals matches what a user should never read: Go package prefixes
// (one, or a chain of them), Go type names, SPEC references.
var goInternals = regexp.MustCompile(`(^|: )(asyncio|datagen|keysets|inspect|bench|formats|filelist|graph|model|dataset|validate|ctrkit/[\w/]+): ` +
	`|\b(raw|parquet|norm|criteo): (raw|parquet|norm|criteo|read|open|filelist)\b` +
	`|\*?\b[a-z]+\.[A-Z][A-Za-z]+ field|SPEC §|\b\d*[02-9] problem\b|\b1 (problems|epochs|files|samples)\b`)

// TestMessagesWithoutGoInternals runs the CLI on a set of bad inputs and
// fails when an output holds a Go package prefix, type name or SPEC
// reference.
func TestMessagesWithoutGoInternals(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeCriteoCSV(t, "day.csv", 50)
	for _, a := range [][]string{
		{"convert", "day.csv", "a.raw", "--to", "raw", "--slot-size-array", "100"},
		{"convert", "day.csv", "pq/", "--to", "parquet", "--slot-size-array", "100"},
		{"convert", "day.csv", "n/", "--to", "norm", "--slot-size-array", "100"},
	} {
		if out, code := ctrkitArgs(t, a...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", a, code, out)
		}
	}
	abs, _ := filepath.Abs("a.raw")
	os.WriteFile("raw_list.txt", []byte("1\n"+abs+"\n"), 0o644)
	os.WriteFile("bad.parquet", []byte("PAR1 not really parquet"), 0o644)
	data, _ := os.ReadFile("n/part_0.data")
	os.MkdirAll("cut", 0o755)
	os.WriteFile("cut/part_0.data", data[:len(data)/2], 0o644)
	os.WriteFile("cut/file_list.txt", []byte("1\ncut/part_0.data\n"), 0o644)
	os.WriteFile("bad.json", []byte(`{"layers": [{"type": "Data"}, {"type": "InnerProdct"}]}`), 0o644)
	os.WriteFile("a.raw.slot_size_array.json", []byte(`{"slot_size_array": [1, -2]}`), 0o644)
	model := []string{"--model", "wdl", "--width", "0.125", "--vec-size", "4", "--slot-size-array", "100", "--batchsize", "10", "--max-iter", "1"}
	for _, args := range [][]string{
		{"validate", "raw_list.txt"},
		{"validate", "bad.parquet"},
		{"validate", "cut"},
		{"inspect", "cut"},
		{"inspect", "a.raw"},
		{"keyset", "day.csv", "--out", "k"},
		{"keyset", "cut", "--out", "k"},
		{"convert", "cut", "x/", "--to", "parquet"},
		{"convert", "bad.parquet", "x/", "--to", "norm"},
		{"bench", "read", "cut"},
		{"summary", "--config", "bad.json"},
		{"gen", "--num-slot", "3", "--slot-size-array", "1,2", "--out-source", "g/file_list.txt"},
		{"gen", "--format", "parquet", "--alpha", "-1", "--out-source", "g/file_list.txt"},
		append([]string{"train", "--source", "cut"}, model...),
		append([]string{"train", "--source", "pq", "--format", "norm"}, model...),
		append([]string{"train", "--source", "raw_list.txt"}, model...),
		append([]string{"train", "--source", "n", "--format", "raw"}, model...),
	} {
		out, code := ctrkitArgs(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want an error\n%s", args, out)
		}
		if m := goInternals.FindString(out); m != "" {
			t.Errorf("%v: the output holds %q (Go internals, a SPEC reference or a bad plural):\n%s", args, m, out)
		}
		if strings.Contains(out, "panic") || strings.Contains(out, `\x00`) {
			t.Errorf("%v:\n%s", args, out)
		}
	}
}
