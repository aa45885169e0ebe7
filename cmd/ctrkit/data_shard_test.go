package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
)

// evalRecords are the evaluation records of an --out-metrics file, without
// their timing fields.
func evalRecords(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "auc") {
			out = append(out, regexp.MustCompile(`"[a-z_]*(time|sec|_s|ms)[a-z_]*":[^,}]*,?`).ReplaceAllString(l, ""))
		}
	}
	return out
}

// runProcesses runs ctrkit args as n processes joined over loopback
// (CTRKIT_RANK/CTRKIT_WORLD_SIZE/CTRKIT_MASTER_ADDR): their outputs.
func runProcesses(t *testing.T, n int, args ...string) []string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], append(args, "--timeout", "60s")...)
			cmd.Env = append(os.Environ(), childEnv+"=1", "CTRKIT_RANK="+strconv.Itoa(r), "CTRKIT_WORLD_SIZE="+strconv.Itoa(n), "CTRKIT_MASTER_ADDR="+addr)
			b, err := cmd.CombinedOutput()
			outs[r], errs[r] = string(b), err
		}()
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil {
			t.Fatalf("process %d: %v\n%s", r, errs[r], outs[r])
		}
	}
	return outs
}

// TestTrainDataShard: two processes on loopback, each reading only its
// half of every global batch of a Raw file (--data-shard samples), train
// exactly as one process of two ranks reading all of it (the same losses,
// byte-identical model files) and as one rank within 1e-5; with
// --data-shard files each reads its own file of a Norm list and an epoch
// covers both files once. What a mode cannot shard is refused by name.
func TestTrainDataShard(t *testing.T) {
	src, eval, _ := genData(t, datagen.Raw, []int64{40, 60, 20, 80, 30, 50}, 4)
	dir := t.TempDir()
	args := func(name string, extra ...string) []string {
		a := append(rankArgs(src), "--format", "raw", "--float-label-dense", "--out-metrics", filepath.Join(dir, name+".jsonl"), "--snapshot-prefix", filepath.Join(dir, name, "m"),
			"--eval-source", eval, "--eval-interval", "10", "--max-eval-batches", "3")
		return append(a, extra...)
	}
	if out, err := runCtrkit(t, args("one")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := runCtrkit(t, args("inproc", "--gpus", "0,1")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	outs := runProcesses(t, 2, args("samples", "--data-shard", "samples")...)
	if !strings.Contains(outs[0], "iter 20: loss") || !strings.Contains(outs[0], "data: --data-shard samples: each of the 2 ranks reads its 128 samples of every global batch of 256") {
		t.Errorf("process 0 does not log:\n%s", outs[0])
	}
	one, inproc, shard := metricLosses(t, filepath.Join(dir, "one.jsonl")), metricLosses(t, filepath.Join(dir, "inproc.jsonl")), metricLosses(t, filepath.Join(dir, "samples.jsonl"))
	closeLosses(t, "--data-shard samples, 2 processes", shard, one)
	for i := range inproc {
		if i < len(shard) && shard[i] != inproc[i] {
			t.Errorf("step %d: loss %.9g with --data-shard samples, %.9g reading all (one process of 2 ranks)", i+1, shard[i], inproc[i])
		}
	}
	sameSnapshot(t, "--data-shard samples (2 processes) vs 1 process of 2 ranks", filepath.Join(dir, "inproc"), filepath.Join(dir, "samples"))
	if a, b := evalRecords(t, filepath.Join(dir, "inproc.jsonl")), evalRecords(t, filepath.Join(dir, "samples.jsonl")); len(a) != 2 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("evaluations reading all:\n%s\nwith --data-shard samples:\n%s", a, b)
	}
	// The ranks of one process share the reading too.
	if out, err := runCtrkit(t, args("inshard", "--gpus", "0,1", "--data-shard", "samples")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	sameSnapshot(t, "--gpus 0,1 --data-shard samples vs reading all", filepath.Join(dir, "inproc"), filepath.Join(dir, "inshard"))

	// files: a Norm list of 2 files of 8192 samples, one each; one epoch
	// is 64 global batches of 2 × 128.
	norm, normEval, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	fa := rankArgs(norm)
	for i, a := range fa {
		if a == "--max-iter" {
			fa[i], fa[i+1] = "--num-epochs", "1"
		}
	}
	outs = runProcesses(t, 2, append(fa, "--data-shard", "files", "--display", "16", "--snapshot-prefix", filepath.Join(dir, "files", "m"))...)
	if !strings.Contains(outs[0], "trained 64 iterations (16384 samples, 1 epoch)") {
		t.Errorf("--data-shard files: one epoch of both files:\n%s", outs[0])
	}
	if _, err := os.Stat(filepath.Join(dir, "files", "m_dense_64.model")); err != nil {
		t.Errorf("--data-shard files: %v", err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{append(rankArgs(norm), "--data-shard", "samples"), "--data-shard samples reads a part of every batch from Raw files (fixed-size records), not Norm data"},
		{append(rankArgs(src), "--format", "raw", "--float-label-dense", "--data-shard", "files"), "--data-shard files: the Raw source is one file"},
		{append(rankArgs(src), "--data-shard", "rows"), `--data-shard "rows" (want none, samples or files)`},
		{append(rankArgs(norm), "--gpus", "0,1", "--data-shard", "files", "--eval-source", normEval), "eval_source: --data-shard files: file list " + normEval + " has 1 file for 2 ranks"},
	} {
		if out, err := runCtrkit(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q\n%s", c.args[len(c.args)-2:], err, c.want, out)
		}
	}
}
