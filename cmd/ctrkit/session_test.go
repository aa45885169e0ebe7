package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/trainer/model"
)

// sessionRun sends the requests to one session and returns its responses.
func sessionRun(t *testing.T, reqs ...string) []map[string]any {
	t.Helper()
	var out strings.Builder
	err := model.ServeSession(context.Background(), strings.NewReader(strings.Join(reqs, "\n")+"\n"), &out,
		func(args []string) (model.Job, error) { return sessionJob(args, io.Discard) })
	if err != nil {
		t.Fatal(err)
	}
	var resps []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("response %q: %v", sc.Text(), err)
		}
		resps = append(resps, m)
	}
	if len(resps) != len(reqs) {
		t.Fatalf("%d responses to %d requests:\n%s", len(resps), len(reqs), out.String())
	}
	return resps
}

func loadArgs(t *testing.T, extra ...string) string {
	b, err := json.Marshal(map[string]any{"cmd": "load", "args": extra})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSessionMatchesTrain: a session's train/loss loop gives the losses
// ctrkit train prints for the same model, data and seed, and its eval the
// AUC of train's evaluation.
func TestSessionMatchesTrain(t *testing.T) {
	src, eval, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	common := []string{"--model", "wdl", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4",
		"--vec-size", "8", "--width", "0.03125", "--batchsize", "256", "--seed", "7", "--lr", "0.01",
		"--device", "cpu", "--source", src, "--eval-source", eval, "--max-eval-batches", "4"}
	dir := t.TempDir()
	metrics := filepath.Join(dir, "m.jsonl")
	args := append([]string{"train", "--max-iter", "6", "--display", "1", "--eval-interval", "6", "--metrics-out", metrics}, common...)
	if out, err := runCtrkit(t, args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var want []float64
	var wantAUC float64
	data, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var p model.Point
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		if p.Loss != nil {
			want = append(want, *p.Loss)
		}
		if p.EvalAUC != nil {
			wantAUC = *p.EvalAUC
		}
	}
	reqs := []string{loadArgs(t, common...), `{"cmd":"start_data_reading"}`}
	for range 6 {
		reqs = append(reqs, `{"cmd":"lr_next"}`, `{"cmd":"train"}`, `{"cmd":"loss"}`)
	}
	// set_lr takes HugeCTR's float: 0.01 is the config's float32 rate, so
	// the losses stay train's.
	reqs = append(reqs, `{"cmd":"set_lr","lr":0.01}`, `{"cmd":"info"}`)
	reqs = append(reqs, `{"cmd":"eval","batches":4}`)
	// save writes HugeCTR's files, which predict reads back to the
	// session's own predictions.
	snap, pred := filepath.Join(dir, "sess"), filepath.Join(dir, "sess_pred.txt")
	reqs = append(reqs, `{"cmd":"save","prefix":`+jsonString(snap)+`,"iter":6}`, `{"cmd":"predict","output":`+jsonString(pred)+`}`,
		`{"cmd":"quit"}`)
	resps := sessionRun(t, reqs...)
	for i, r := range resps {
		if r["ok"] != true {
			t.Fatalf("request %s: %v", reqs[i], r["error"])
		}
	}
	if len(want) != 6 {
		t.Fatalf("train logged %d losses, want 6", len(want))
	}
	for i := range 6 {
		lr := resps[2+3*i]["lr"].(float64)
		if lr != float64(float32(0.01)) {
			t.Errorf("lr_next %d = %v, want 0.01", i+1, lr)
		}
		got := resps[4+3*i]["loss"].(float64)
		if got != want[i] {
			t.Errorf("step %d: session loss %v, train %v", i+1, got, want[i])
		}
	}
	if lr := resps[len(resps)-5]["lr"].(float64); lr != float64(float32(0.01)) {
		t.Errorf("set_lr 0.01: lr %v, want float32 0.01", lr)
	}
	ev := resps[len(resps)-4]
	if ev["auc"].(float64) != wantAUC || ev["samples"].(float64) != 4*2048 {
		t.Errorf("eval %v, want AUC %v over 4 batches of batchsize_eval 2048", ev, wantAUC)
	}
	cli := filepath.Join(dir, "cli_pred.txt")
	pargs := append([]string{"predict", "--load-prefix", snap, "--load-iter", "6", "-o", cli, "--eval-source", eval,
		"--device", "cpu", "--batchsize", "256"}, common[:10]...)
	if out, err := runCtrkit(t, pargs...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	a, _ := os.ReadFile(pred)
	b, _ := os.ReadFile(cli)
	if len(a) == 0 || string(a) != string(b) {
		t.Errorf("session predict (%d bytes) differs from ctrkit predict of its saved files (%d bytes)", len(a), len(b))
	}
}

// TestSessionErrors: a failing request gets its message and the session
// goes on.
func TestSessionErrors(t *testing.T) {
	src, eval, _ := genData(t, datagen.Norm, []int64{40, 60}, 2)
	resps := sessionRun(t,
		`{"cmd":"train"}`,
		`not json`,
		`{"cmd":"load","args":["--model","wdl","--slot-size-array","40,60","--dense-dim","2","--width","0.03125","--device","cpu"]}`,
		loadArgs(t, "--model", "wdl", "--slot-size-array", "40,60", "--dense-dim", "2", "--width", "0.03125",
			"--device", "cpu", "--batchsize", "64", "--source", src, "--eval-source", eval),
		`{"cmd":"frobnicate"}`,
		`{"cmd":"freeze_embedding","name":"nope"}`,
		`{"cmd":"set_source","source":"/nonexistent/list.txt"}`,
		`{"cmd":"load","args":["--bogus-flag"]}`,
		`{"cmd":"train"}`,
		`{"cmd":"info"}`,
		`{"cmd":"quit"}`,
	)
	wantErr := map[int]string{0: "send load first", 1: "request line 2", 2: "give --source", 4: "unknown command",
		5: "nope", 6: "/nonexistent/list.txt", 7: "bogus-flag"}
	for i, r := range resps {
		if w, bad := wantErr[i]; bad {
			msg, _ := r["error"].(string)
			if r["ok"] != false || !strings.Contains(msg, w) {
				t.Errorf("response %d = %v, want an error containing %q", i, r, w)
			}
		} else if r["ok"] != true {
			t.Errorf("response %d: %v", i, r["error"])
		}
	}
	if resps[8]["iter"].(float64) != 1 || resps[9]["iter"].(float64) != 1 {
		t.Errorf("train after the failed requests: %v, info %v", resps[8], resps[9])
	}
}

// TestSessionEpochEOF: without repeat, train reports eof with the last
// (short) batch and trains nothing after it until set_source.
func TestSessionEpochEOF(t *testing.T) {
	src, eval, _ := genData(t, datagen.Norm, []int64{40, 60}, 2)
	// 3 files × 8192 samples: batch 10000 gives 2 batches of the 16384
	// training samples, the second short.
	reqs := []string{strings.Replace(loadArgs(t, "--model", "wdl", "--slot-size-array", "40,60", "--dense-dim", "2", "--width", "0.03125",
		"--device", "cpu", "--batchsize", "10000", "--source", src, "--eval-source", eval), `"cmd":"load"`, `"cmd":"load","repeat":false`, 1),
		`{"cmd":"train"}`, `{"cmd":"train"}`, `{"cmd":"train"}`, `{"cmd":"set_source","source":` + jsonString(src) + `}`, `{"cmd":"train"}`}
	resps := sessionRun(t, reqs...)
	for i, r := range resps {
		if r["ok"] != true {
			t.Fatalf("request %d: %v", i, r["error"])
		}
	}
	check := func(i int, trained, eof bool, samples float64) {
		r := resps[i]
		if r["trained"] != trained || r["eof"] != eof || (trained && r["samples"] != samples) {
			t.Errorf("train %d: %v, want trained %v eof %v samples %v", i, r, trained, eof, samples)
		}
	}
	check(1, true, false, 10000)
	check(2, true, true, 6384)
	check(3, false, true, 0)
	check(5, true, false, 10000)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
