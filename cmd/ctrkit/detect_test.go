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
	evalAUC := ""
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
		out, code = ctrkitArgs(t, append(ev, "--json")...)
		if code != 0 || !strings.Contains(out, "note: --eval-source "+c.source+": format") {
			t.Errorf("evaluate --eval-source %s: exit %d\n%s", c.source, code, out)
		}
		// The same rows in every format evaluate alike (the Raw and
		// Parquet keys get the model's offsets, the Norm keys have them).
		auc := out[strings.Index(out, `"auc"`):]
		auc = auc[:strings.IndexByte(auc, ',')]
		if evalAUC == "" {
			evalAUC = auc
		} else if auc != evalAUC {
			t.Errorf("evaluate --eval-source %s: %s, the first source %s", c.source, auc, evalAUC)
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

// TestOffsetTrap: the same Criteo rows trained from Norm, Parquet and Raw
// conversions reach the same AUC. Before the sidecar, Criteo → Norm wrote
// slot-local keys and train added no offsets for Norm, so every slot's key
// k shared one embedding row and Norm trained worse, silently. Now convert
// writes Norm keys global (as gen does, HugeCTR's convention) and records
// the convention in slot_size_array.json; Norm kept slot-local
// (--slot-offsets=false) is offset by --model from its sidecar, and a
// config that adds no offsets gets a warning naming the sidecar.
func TestOffsetTrap(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeCriteoCSV(t, "day.csv", 400)
	conv := [][]string{
		{"convert", "day.csv", "norm/", "--to", "norm", "--slot-size-array", "64"},
		{"convert", "day.csv", "parquet/", "--to", "parquet", "--slot-size-array", "64"},
		{"convert", "day.csv", "a.raw", "--to", "raw", "--slot-size-array", "64"},
		{"convert", "day.csv", "local/", "--to", "norm", "--slot-size-array", "64", "--slot-offsets=false"},
	}
	for _, a := range conv {
		if out, code := ctrkitArgs(t, a...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", a, code, out)
		}
	}
	for p, want := range map[string]string{"norm/slot_size_array.json": "global", "parquet/slot_size_array.json": "slot_local",
		"a.raw.slot_size_array.json": "slot_local", "local/slot_size_array.json": "slot_local"} {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), `"key_convention":"`+want+`"`) || !strings.HasPrefix(string(data), `{"slot_size_array":[64,64,`) {
			t.Errorf("%s: %s %v, want key_convention %s", p, data, err, want)
		}
	}
	aucs := map[string]float64{}
	for _, s := range []string{"norm", "parquet", "a.raw", "local"} {
		out, code := ctrkitArgs(t, "train", "--model", "wdl", "--width", "0.125", "--vec-size", "4", "--slot-size-array", "64",
			"--batchsize", "100", "--num-epochs", "4", "--eval-interval", "16", "--lr", "0.01", "--source", s, "--eval-source", s)
		if code != 0 || strings.Contains(out, "warning:") {
			t.Fatalf("train --source %s: exit %d\n%s", s, code, out)
		}
		aucs[s], _ = evalLine(t, out, 16)
	}
	for _, s := range []string{"parquet", "a.raw", "local"} {
		if aucs[s] != aucs["norm"] {
			t.Errorf("AUC from %s %v, from norm %v: the same rows must train alike (%v)", s, aucs[s], aucs["norm"], aucs)
		}
	}
	// The keys themselves: the Norm output holds slot s's keys in
	// [64·s, 64·s + 64).
	if out, code := ctrkitArgs(t, "validate", "norm", "--slot-size-array", "64"); code != 0 || !strings.Contains(out, "ok: no problems") {
		t.Errorf("validate norm (global keys, their sidecar): exit %d\n%s", code, out)
	}
	// keyset (global keys, as HugeCTR's) takes the convention from the
	// sidecars: the same keys from Norm and Parquet.
	for _, s := range []string{"norm", "parquet"} {
		if out, code := ctrkitArgs(t, "keyset", s, "--out", s+".keyset"); code != 0 {
			t.Fatalf("keyset %s: exit %d\n%s", s, code, out)
		}
	}
	if a, b := readFile(t, "norm.keyset"), readFile(t, "parquet.keyset"); string(a) != string(b) {
		t.Errorf("keysets of the Norm and Parquet conversions differ (%d, %d bytes)", len(a), len(b))
	}
	// gen and convert agree: gen's Norm keys are global too, and validate
	// with gen's own slot sizes finds no problem (was one per key beyond
	// slot 0).
	if out, code := ctrkitArgs(t, "gen", "--format", "norm", "--out-source", "g/file_list.txt", "--num-files", "1", "--eval-num-files", "1",
		"--num-samples-per-file", "500", "--slot-size-array", "10,20,30", "--num-slot", "3", "--dense-dim", "2", "--seed", "1"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	if out, code := ctrkitArgs(t, "validate", "g/file_list.txt", "--slot-size-array", "@g/gen_params.json"); code != 0 ||
		!strings.Contains(out, "keys global (slot offsets already added)") || !strings.Contains(out, "ok: no problems") {
		t.Errorf("validate gen's Norm with its slot sizes: exit %d\n%s", code, out)
	}
	// A run that adds no offsets to slot-local keys warns, naming the fix.
	cfg := filepath.Join(dir, "wdl.json")
	if out, code := ctrkitArgs(t, "summary", "--model", "wdl", "--width", "0.125", "--vec-size", "4", "--slot-size-array", "64", "--out-graph", cfg); code != 0 {
		t.Fatalf("summary --out-graph: exit %d\n%s", code, out)
	}
	out, code := ctrkitArgs(t, "train", "--config", cfg, "--batchsize", "100", "--max-iter", "1", "--source", "local")
	want := "warning: --source local/file_list.txt: its keys are slot-local (local/slot_size_array.json) but no slot offsets will be added"
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "--data-slot-size-array @local/slot_size_array.json") {
		t.Errorf("train --config --source local: exit %d, want %q\n%s", code, want, out)
	}
	out, code = ctrkitArgs(t, "train", "--config", cfg, "--batchsize", "100", "--max-iter", "1", "--source", "local",
		"--data-slot-size-array", "@local/slot_size_array.json")
	if code != 0 || strings.Contains(out, "warning:") {
		t.Errorf("train --data-slot-size-array @FILE: exit %d\n%s", code, out)
	}
	out, code = ctrkitArgs(t, "train", "--config", cfg, "--batchsize", "100", "--max-iter", "1", "--source", "norm", "--data-slot-size-array", "@norm")
	if !strings.Contains(out, "warning: --source norm/file_list.txt: its keys are global") { // (the reader then refuses the keys beyond the model's slots)
		t.Errorf("train: global keys offset again: exit %d\n%s", code, out)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
