package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchTrainSources: `ctrkit bench train` feeds its pipeline from a Raw
// file through the synchronous reader and the RawAsync (O_DIRECT) engine,
// and from Parquet, with slot-local keys checked against the slot sizes.
// Before, it fed one-hot keys minus the slot offsets (negative rows: "outside
// its slot") and had no --reader.
func TestBenchTrainSources(t *testing.T) {
	dir := t.TempDir()
	rawPath := filepath.Join(dir, "train.bin")
	pq := filepath.Join(dir, "pq")
	gen := []string{"--dense-dim", "3", "--num-slot", "4", "--slot-size-array", "100"}
	if out, err := runCtrkit(t, append([]string{"gen", "--format", "raw", "--num-samples", "512", "--eval-num-samples", "64",
		"--out-source", rawPath, "--out-eval-source", filepath.Join(dir, "eval.bin")}, gen...)...); err != nil {
		t.Fatalf("gen raw: %v\n%s", err, out)
	}
	if out, err := runCtrkit(t, append([]string{"gen", "--format", "parquet", "--num-files", "1", "--eval-num-files", "1", "--num-samples-per-file", "512",
		"--out-source", filepath.Join(pq, "_file_list.txt"), "--out-eval-source", filepath.Join(dir, "pqe", "_file_list.txt")}, gen...)...); err != nil {
		t.Fatalf("gen parquet: %v\n%s", err, out)
	}
	for _, c := range [][]string{
		{rawPath, "--reader", "sync"},
		{rawPath, "--reader", "async"},
		{filepath.Join(pq, "_file_list.txt")},
	} {
		args := append([]string{"bench", "train", "--device", "cpu", "--batchsize", "64", "--warmup", "1", "--steps", "2",
			"--vec-size", "4", "--slot-size-array", "100", "--label-dim", "1", "--dense-dim", "3", "--num-slot", "4", "--json"}, c...)
		out, err := runCtrkit(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
		var res struct {
			Pipeline struct{ Steps int }
		}
		js := out[max(strings.Index(out, "{\n"), 0):] // after the log lines
		if err := json.Unmarshal([]byte(js), &res); err != nil || res.Pipeline.Steps != 2 {
			t.Errorf("%v: %v, %d steps\n%s", c, err, res.Pipeline.Steps, out)
		}
	}
}
