package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
)

func TestGenNorm(t *testing.T) {
	dir := t.TempDir()
	src, eval := filepath.Join(dir, "file_list.txt"), filepath.Join(dir, "file_list_test.txt")
	out, err := runCtrkit(t, "gen", "--format", "norm", "--num-slot", "3", "--dense-dim", "2",
		"--slot-size-array", "10,200,3000", "--nnz-array", "1,2,3", "--num-files", "2", "--eval-num-files", "1",
		"--num-samples-per-file", "1000", "--source", src, "--eval-source", eval, "--seed", "42", "--threads", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"seed 42", "Wrote 3 norm files (2 train, 1 eval", "3000 samples", "MB/s", "planted AUC 0."} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^Wrote .*\.\n$`).MatchString(out) {
		t.Errorf("summary is not one paragraph:\n%s", out)
	}
	files, err := formats.ReadFileList(src)
	if err != nil || len(files) != 2 || !strings.HasSuffix(files[1], filepath.Join("train", "gen_1.data")) {
		t.Fatalf("train list %v %v", files, err)
	}
	files, err = formats.ReadFileList(eval)
	if err != nil || len(files) != 1 || !strings.HasSuffix(files[0], filepath.Join("val", "gen_0.data")) {
		t.Fatalf("eval list %v %v", files, err)
	}
	// 3000 Norm samples with checksum framing: 69-byte header, then
	// 4+ (4·3 + 4·3 + 4·6) +1 bytes per sample.
	st, err := os.Stat(files[0])
	if err != nil || st.Size() != 69+1000*(4+48+1) {
		t.Errorf("eval file size %v (%v)", st.Size(), err)
	}
	rec, err := os.ReadFile(filepath.Join(dir, "gen_params.json"))
	if err != nil || !bytes.Contains(rec, []byte(`"seed": 42`)) || !bytes.Contains(rec, []byte(`"planted_auc"`)) {
		t.Errorf("gen_params.json: %v\n%s", err, rec)
	}
}

func TestGenRawRandomSeed(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "train.bin")
	out, err := runCtrkit(t, "gen", "--format", "raw", "--num-slot", "2", "--dense-dim", "1",
		"--slot-size-array", "5,6", "--num-samples", "100", "--eval-num-samples", "50",
		"--source", src, "--eval-source", filepath.Join(dir, "test.bin"), "--label-mode", "uniform")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !regexp.MustCompile(`generating raw data with seed \d+`).MatchString(out) || !strings.Contains(out, "no planted AUC") {
		t.Errorf("output:\n%s", out)
	}
	// One-hot Raw: (1 label + 1 dense + 2 keys) × 4 bytes.
	if st, err := os.Stat(src); err != nil || st.Size() != 100*16 {
		t.Errorf("raw train file: %v %v", st, err)
	}
}

func TestGenRefused(t *testing.T) {
	nnz26 := strings.TrimSuffix(strings.Repeat("2,", 26), ",")
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"--slot-size-array", "1,2,3"}, "--slot-size-array"},
		{[]string{"--slot-size-array", "1,x"}, "--slot-size-array"},
		{[]string{"--num-slot", "2", "--slot-size-array", "5,0"}, "--slot-size-array"},
		{[]string{"--nnz-array", "1,2"}, "--nnz-array"},
		{[]string{"--alpha", "1"}, "--alpha"},
		{[]string{"--format", "raw", "--raw-layout", "onehot", "--nnz-array", nnz26}, "--nnz-array"},
		{[]string{"--format", "avro"}, "--format"},
		{[]string{"--check-type", "crc"}, "--check-type"},
		{[]string{"--dist-type", "zipf"}, "--dist-type"},
		{[]string{"--num-files", "0"}, "--num-files"},
		{[]string{"--label-mode", "random"}, "--label-mode"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		args := append([]string{"gen", "--source", filepath.Join(dir, "d", "list.txt"),
			"--eval-source", filepath.Join(dir, "d", "eval.txt"), "--num-files", "1", "--eval-num-files", "1",
			"--num-samples-per-file", "10"}, c.args...)
		out, err := runCtrkit(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%v: error %v, want one naming %s\n%s", c.args, err, c.flag, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "d")); !os.IsNotExist(err) {
			t.Errorf("%v: refused parameters wrote output", c.args)
		}
	}
}
