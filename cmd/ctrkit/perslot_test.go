package main

import (
	"strings"
	"testing"
)

// TestPerSlotOneValue: a single value in a per-slot array flag means every
// slot in every command (it panicked validate on Raw, was refused by
// validate on Norm and by gen, and meant one slot in train/summary); a
// list of the wrong length is a usage error naming the flag, the count
// given and the slot count.
func TestPerSlotOneValue(t *testing.T) {
	t.Chdir(t.TempDir())
	shape := []string{"--label-dim", "1", "--dense-dim", "13", "--num-slot", "26"}
	gen := func(format, source string, extra ...string) {
		t.Helper()
		args := append([]string{"gen", "--format", format, "--num-files", "1", "--eval-num-files", "1",
			"--num-samples-per-file", "50", "--num-samples", "50", "--eval-num-samples", "20", "--seed", "1",
			"--source", source, "--slot-size-array", "1000", "--nnz-array", "1"}, shape...)
		if out, code := ctrkitArgs(t, append(args, extra...)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	gen("raw", "raw/train.bin")
	gen("norm", "norm/file_list.txt")
	gen("parquet", "pq/file_list.txt")
	for _, src := range []string{"raw/train.bin", "norm/file_list.txt", "pq/file_list.txt"} {
		// (Norm keys carry slot offsets, which gen_params.json records:
		// slot s's keys are checked against [1000·s, 1000·s + 1000).)
		args := append([]string{"validate", src, "--slot-size-array", "1000", "--nnz-array", "1"}, shape...)
		if out, code := ctrkitArgs(t, args...); code != 0 {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
		args = append([]string{"validate", src, "--slot-size-array", "1000,2000"}, shape...)
		out, code := ctrkitArgs(t, args...)
		if code != 2 || !strings.Contains(out, "--slot-size-array has 2 values") || !strings.Contains(out, "26 slots") {
			t.Errorf("%v: exit %d, want 2 naming the flag and counts\n%s", args, code, out)
		}
	}
	out, code := ctrkitArgs(t, "gen", "--format", "norm", "--num-slot", "3", "--nnz-array", "1,2", "--source", "bad/file_list.txt")
	if code == 0 || !strings.Contains(out, "--nnz-array has 2 values") || !strings.Contains(out, "3 slots") {
		t.Errorf("gen --nnz-array 1,2 with 3 slots: exit %d\n%s", code, out)
	}
	// summary (train's --model): one value is every slot.
	one, err1 := runCtrkit(t, "summary", "--model", "dcn", "--slot-size-array", "10", "--num-slot", "3", "--dense-dim", "4")
	three, err3 := runCtrkit(t, "summary", "--model", "dcn", "--slot-size-array", "10,10,10", "--dense-dim", "4")
	if err1 != nil || err3 != nil || one != three {
		t.Errorf("summary --slot-size-array 10 --num-slot 3 differs from 10,10,10 (%v, %v):\n%s\n---\n%s", err1, err3, one, three)
	}
}
