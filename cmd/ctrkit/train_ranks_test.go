package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
)

// rankArgs trains DLRM with SGD for 20 steps on src, a loss line each step.
func rankArgs(src string) []string {
	return []string{"train", "--model", "dlrm", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4", "--vec-size", "8",
		"--width", "0.03125", "--batchsize", "256", "--source", src, "--max-iter", "20", "--display", "1", "--optimizer", "sgd",
		"--lr", "0.05", "--device", "cpu"}
}

// metricLosses reads the display losses of an --out-metrics file.
func metricLosses(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		if l, ok := rec["loss"].(float64); ok {
			out = append(out, l)
		}
	}
	return out
}

func closeLosses(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) || len(want) != 20 {
		t.Fatalf("%s: %d losses, one rank %d (want 20)", what, len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(got[i]-want[i]) / math.Abs(want[i]); d > 1e-5 {
			t.Errorf("%s: step %d loss %.8f, one rank %.8f (relative %.2g)", what, i+1, got[i], want[i], d)
		}
	}
}

// sameSnapshot fails t unless the two directories hold the same files.
func sameSnapshot(t *testing.T, what, a, b string) {
	t.Helper()
	n := 0
	filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s: %s differs (%v)", what, rel, err)
		}
		n++
		return nil
	})
	if n < 5 {
		t.Errorf("%s: %d files in %s", what, n, a)
	}
}

// TestTrainCPURanks: train --device cpu --gpus 0,1 runs two in-process CPU
// ranks that train as one rank (losses within 1e-5), say so, and save the
// same HugeCTR files, which evaluate (one device) loads.
func TestTrainCPURanks(t *testing.T) {
	src, eval, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	dir := t.TempDir()
	run := func(name string, extra ...string) (string, []float64) {
		args := append(rankArgs(src), "--out-metrics", filepath.Join(dir, name+".jsonl"), "--snapshot-prefix", filepath.Join(dir, name, "m"))
		out, err := runCtrkit(t, append(args, extra...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return out, metricLosses(t, filepath.Join(dir, name+".jsonl"))
	}
	_, one := run("one")
	out, two := run("two", "--gpus", "0,1")
	if !strings.Contains(out, "ranks: 2 ranks (CPU ranks, host collectives)") || !strings.Contains(out, "global batch 256 over 2 ranks (128 a rank)") {
		t.Errorf("2 ranks: output lacks the ranks' lines:\n%s", out)
	}
	closeLosses(t, "--gpus 0,1", two, one)
	sameSnapshot(t, "one rank vs --gpus 0,1", filepath.Join(dir, "one"), filepath.Join(dir, "two"))
	ev, err := runCtrkit(t, "evaluate", "--model", "dlrm", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4", "--vec-size", "8",
		"--width", "0.03125", "--batchsize", "256", "--device", "cpu", "--eval-source", eval, "--max-eval-batches", "4",
		"--load-prefix", filepath.Join(dir, "two", "m"), "--load-iter", "20")
	if err != nil || !strings.Contains(ev, "eval: AUC") {
		t.Errorf("evaluate the 2-rank files on one device: %v\n%s", err, ev)
	}
	// Resumed over 4 ranks from the 2-rank snapshot (each rank loading its
	// rows), to iteration 25.
	args := append(rankArgs(src), "--gpus", "0,1,2,3", "--load-prefix", filepath.Join(dir, "two", "m"), "--load-iter", "20", "--max-iter", "25",
		"--snapshot-prefix", filepath.Join(dir, "four", "m"))
	if out, err := runCtrkit(t, args...); err != nil || !strings.Contains(out, "iter 21: loss") || !strings.Contains(out, "at iter 25") {
		t.Errorf("resumed over 4 ranks: %v\n%s", err, out)
	}
	// A snapshot file changed in place (same size) is refused over ranks
	// too: the process's first rank checks the checksums.
	ev2 := filepath.Join(dir, "two", "m0_sparse_20.model", "emb_vector")
	b, err := os.ReadFile(ev2)
	if err != nil {
		t.Fatal(err)
	}
	b[5] ^= 0x40
	os.WriteFile(ev2, b, 0o644)
	if out, err := runCtrkit(t, args...); err == nil || !strings.Contains(err.Error(), "CRC-32C") {
		t.Errorf("a damaged snapshot over 4 ranks: %v\n%s", err, out)
	}
	// Refusals name the flag.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "0,x"}, `--gpus "0,x": "x" is not a device ordinal`},
		{[]string{"--gpus", "0,1", "--device", "gpu:1"}, "--device gpu:1 with --gpus"},
		{[]string{"--gpus", "0,1,2"}, "batch size 256 does not split over 3 ranks"},
	} {
		if out, err := runCtrkit(t, append(rankArgs(src), c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q\n%s", c.args, err, c.want, out)
		}
	}
	// A launcher's process with one --device gpu:N is told to use --gpus.
	t.Setenv("CTRKIT_RANK", "0")
	t.Setenv("CTRKIT_WORLD_SIZE", "2")
	t.Setenv("CTRKIT_MASTER_ADDR", "127.0.0.1:1")
	if out, err := runCtrkit(t, append(rankArgs(src), "--device", "gpu:1")...); err == nil || !strings.Contains(err.Error(), "--device gpu:1 in a run of 2 processes") {
		t.Errorf("gpu:1 in a launcher's run: %v\n%s", err, out)
	}
}

// TestTrainTwoProcesses: two ctrkit processes (this test binary as main)
// joined over loopback by CTRKIT_RANK/CTRKIT_WORLD_SIZE/CTRKIT_MASTER_ADDR,
// one CPU rank each, train as one process of one rank (losses within 1e-5)
// and write the same files as one process of two ranks; process 1 writes
// no outputs of its own.
func TestTrainTwoProcesses(t *testing.T) {
	src, _, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	dir := t.TempDir()
	one := filepath.Join(dir, "one.jsonl")
	if out, err := runCtrkit(t, append(rankArgs(src), "--out-metrics", one)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	inproc := filepath.Join(dir, "inproc")
	if out, err := runCtrkit(t, append(rankArgs(src), "--gpus", "0,1", "--snapshot-prefix", filepath.Join(inproc, "m"))...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	procs := filepath.Join(dir, "procs")
	metrics := filepath.Join(dir, "procs.jsonl")
	outs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append(rankArgs(src), "--snapshot-prefix", filepath.Join(procs, "m"), "--out-metrics", metrics, "--timeout", "60s")
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), childEnv+"=1", "CTRKIT_RANK="+strconv.Itoa(r), "CTRKIT_WORLD_SIZE=2", "CTRKIT_MASTER_ADDR="+addr)
			b, err := cmd.CombinedOutput()
			outs[r], errs[r] = string(b), err
		}()
	}
	wg.Wait()
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("process %d: %v\n%s", r, errs[r], outs[r])
		}
	}
	if !strings.Contains(outs[0], "ranks: 2 ranks in 2 processes (this is process 0, ranks 0–0)") || !strings.Contains(outs[0], "iter 20: loss") ||
		strings.Contains(outs[1], "iter 20: loss") {
		t.Errorf("process 0 logs, process 1 does not:\n--- 0:\n%s\n--- 1:\n%s", outs[0], outs[1])
	}
	closeLosses(t, "2 processes", metricLosses(t, metrics), metricLosses(t, one))
	sameSnapshot(t, "2 processes vs 1 process of 2 ranks", inproc, procs)
}

// TestBenchTrainRanks: bench train --gpus 0,1 on the CPU trains over two
// ranks and reports samples/s in all and per rank and the time in
// collectives.
func TestBenchTrainRanks(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "train.bin")
	if out, err := runCtrkit(t, "gen", "--format", "raw", "--num-samples", "512", "--eval-num-samples", "64", "--out-source", raw,
		"--out-eval-source", filepath.Join(dir, "eval.bin"), "--dense-dim", "3", "--num-slot", "4", "--slot-size-array", "100"); err != nil {
		t.Fatalf("gen: %v\n%s", err, out)
	}
	args := []string{"bench", "train", raw, "--device", "cpu", "--batchsize", "64", "--warmup", "1", "--steps", "2", "--vec-size", "4",
		"--slot-size-array", "100", "--label-dim", "1", "--dense-dim", "3", "--num-slot", "4", "--gpus", "0,1"}
	out, err := runCtrkit(t, append(args, "--json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		Ranks            int
		Pipeline         struct{ Steps int }
		PerRank          float64            `json:"per_rank_samples_per_sec"`
		CollectiveMillis map[string]float64 `json:"collective_ms_per_step"`
	}
	js := out[max(strings.Index(out, "{\n"), 0):]
	if err := json.Unmarshal([]byte(js), &res); err != nil || res.Ranks != 2 || res.Pipeline.Steps != 2 || res.PerRank <= 0 ||
		res.CollectiveMillis["all_reduce"] <= 0 {
		t.Errorf("%v: %+v\n%s", err, res, out)
	}
	if out, err := runCtrkit(t, append(args, "--resident")...); err == nil || !strings.Contains(err.Error(), "--resident and --reader async time one device") {
		t.Errorf("--gpus --resident: %v\n%s", err, out)
	}
}
