package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestBenchCollectivesCPU: in-process CPU ranks, checked results, JSON.
func TestBenchCollectivesCPU(t *testing.T) {
	out, err := runCtrkit(t, "bench", "collectives", "--device", "cpu", "--gpus", "0,1,2", "--sizes", "4KiB,64KiB", "--iters", "2", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep collectivesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Kind != "host" || rep.Ranks != 3 || len(rep.Results) != 4 {
		t.Fatalf("report %+v", rep)
	}
	for _, bad := range [][]string{
		{"--device", "cpu", "--gpus", "0,0"},
		{"--device", "cpu", "--ops", "allreduce"},
		{"--device", "tpu"},
		{"--device", "cpu", "--sizes", "big"},
	} {
		out, code := execCtrkit(t, append([]string{"bench", "collectives"}, bad...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", bad, code, exitUsage, out)
		}
	}
	if out, _ := execCtrkit(t, "bench", "collectives", "--device", "cpu", "--ops", "allreduce"); !strings.Contains(out, "did you mean all_reduce") {
		t.Errorf("no did-you-mean: %s", out)
	}
}

// TestBenchCollectivesTwoProcesses: two ctrkit processes (2 + 1 CPU
// ranks) join over loopback as a launcher would start them; process 0
// reports for the world of 3.
func TestBenchCollectivesTwoProcesses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	outs := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, gpus := range []string{"0,1", "0"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "bench", "collectives", "--device", "cpu", "--gpus", gpus, "--sizes", "16KiB", "--iters", "2", "--timeout", "30s")
			cmd.Env = append(os.Environ(), childEnv+"=1", "CTRKIT_RANK="+string(rune('0'+r)), "CTRKIT_WORLD_SIZE=2", "CTRKIT_MASTER_ADDR="+addr)
			cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
			errs[r] = cmd.Run()
		}()
	}
	wg.Wait()
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("process %d: %v\n%s", r, errs[r], outs[r].String())
		}
	}
	if !strings.Contains(outs[0].String(), "3 ranks in 2 process(es), host") || !strings.Contains(outs[0].String(), "all_to_all") {
		t.Fatalf("process 0 printed:\n%s", outs[0].String())
	}
	if outs[1].Len() != 0 {
		t.Errorf("process 1 printed (only process 0 reports):\n%s", outs[1].String())
	}
}
