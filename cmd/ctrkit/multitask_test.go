package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mtConfig is a two-task model (labels click and buy, one BCE loss each)
// over gen's default-shaped Norm data with 2 label columns, 4 dense, 3 slots.
const mtConfig = `{"layers": [
  {"name": "data", "type": "Data", "format": "Norm",
   "label": {"top": ["click", "buy"], "label_dim": [1, 1]},
   "dense": {"top": "dense", "dense_dim": 4},
   "sparse": [{"top": "data1", "slot_num": 3, "is_fixed_length": true, "nnz_per_slot": 1}]},
  {"name": "emb", "type": "DistributedSlotSparseEmbeddingHash", "bottom": "data1", "top": "emb",
   "sparse_embedding_hparam": {"embedding_vec_size": 8, "combiner": "sum", "max_vocabulary_size_per_gpu": 200}},
  {"name": "reshape1", "type": "Reshape", "bottom": "emb", "top": "reshape1", "leading_dim": 24},
  {"name": "concat1", "type": "Concat", "bottom": ["reshape1", "dense"], "top": "concat1"},
  {"name": "fc1", "type": "InnerProduct", "bottom": "concat1", "top": "fc1", "fc_param": {"num_output": 16}},
  {"name": "relu1", "type": "ReLU", "bottom": "fc1", "top": "relu1"},
  {"name": "fc_click", "type": "InnerProduct", "bottom": "relu1", "top": "fc_click", "fc_param": {"num_output": 1}},
  {"name": "fc_buy", "type": "InnerProduct", "bottom": "relu1", "top": "fc_buy", "fc_param": {"num_output": 1}},
  {"name": "loss_click", "type": "BinaryCrossEntropyLoss", "bottom": ["fc_click", "click"], "top": "loss_click"},
  {"name": "loss_buy", "type": "BinaryCrossEntropyLoss", "bottom": ["fc_buy", "buy"], "top": "loss_buy"}
]}`

// TestMultiTaskCLI: gen --label-dim 2 reports a planted AUC per label;
// train --loss-weights prints per-task AUCs in its eval lines and metrics;
// evaluate --json carries the tasks; predict writes two scores a sample;
// a malformed --loss-weights is refused.
func TestMultiTaskCLI(t *testing.T) {
	dir := t.TempDir()
	src, eval := filepath.Join(dir, "file_list.txt"), filepath.Join(dir, "file_list_test.txt")
	out, err := runCtrkit(t, "gen", "--format", "norm", "--label-dim", "2", "--dense-dim", "4", "--num-slot", "3",
		"--slot-size-array", "50,60,70", "--num-files", "1", "--eval-num-files", "1", "--num-samples-per-file", "2048",
		"--out-source", src, "--out-eval-source", eval)
	if err != nil || !strings.Contains(out, "planted AUCs label 0") || !strings.Contains(out, ", label 1 ") {
		t.Fatalf("gen: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "mt.json")
	if err := os.WriteFile(cfg, []byte(mtConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	prefix, metrics := filepath.Join(dir, "mt"), filepath.Join(dir, "m.jsonl")
	out, err = runCtrkit(t, "train", "--config", cfg, "--source", src, "--eval-source", eval, "--batchsize", "128",
		"--max-iter", "64", "--eval-interval", "32", "--lr", "0.01", "--snapshot-prefix", prefix, "--metrics-out", metrics,
		"--loss-weights", "click=1,buy=0.5", "--device", "cpu")
	if err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	if !strings.Contains(out, "tasks: click AUC") || !strings.Contains(out, "buy AUC") || !strings.Contains(out, "(weight 0.5)") {
		t.Errorf("train output lacks the per-task AUCs:\n%s", out)
	}
	if m, err := os.ReadFile(metrics); err != nil || !strings.Contains(string(m), `"eval_tasks":[{"label":"click"`) {
		t.Errorf("metrics: %v\n%s", err, m)
	}
	load := []string{"--config", cfg, "--eval-source", eval, "--load-prefix", prefix, "--load-iter", "64", "--batchsize", "128", "--device", "cpu"}
	out, err = runCtrkit(t, append([]string{"evaluate", "--json", "--loss-weights", "buy=0.5"}, load...)...)
	if err != nil {
		t.Fatalf("evaluate: %v\n%s", err, out)
	}
	var res struct {
		AUC   float64 `json:"auc"`
		Tasks []struct {
			Label string  `json:"label"`
			AUC   float64 `json:"auc"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Tasks) != 2 || res.Tasks[1].Label != "buy" || !(res.Tasks[1].AUC > 0.6) {
		t.Errorf("evaluate --json: %v\n%s", err, out)
	}
	pred := filepath.Join(dir, "pred.txt")
	if out, err := runCtrkit(t, append([]string{"predict", "-o", pred}, load...)...); err != nil {
		t.Fatalf("predict: %v\n%s", err, out)
	}
	p, _ := os.ReadFile(pred)
	if line, _, _ := strings.Cut(string(p), "\n"); len(strings.Fields(line)) != 2 {
		t.Errorf("predictions: first line %q, want two scores", line)
	}
	for _, bad := range []string{"click", "click=x", "click=1,click=2", "like=1"} {
		out, err := runCtrkit(t, append([]string{"evaluate", "--loss-weights", bad}, load...)...)
		if err == nil || !strings.Contains(err.Error()+out, "loss") {
			t.Errorf("--loss-weights %s: %v\n%s", bad, err, out)
		}
	}
}

// TestMultiTaskSession: a session loaded with --loss-weights trains a
// two-task model and its eval carries the tasks (label, weight, AUC, loss)
// with the model's loss their weighted sum (before: only auc and loss).
func TestMultiTaskSession(t *testing.T) {
	dir := t.TempDir()
	src, eval := filepath.Join(dir, "file_list.txt"), filepath.Join(dir, "file_list_test.txt")
	if out, err := runCtrkit(t, "gen", "--format", "norm", "--label-dim", "2", "--dense-dim", "4", "--num-slot", "3",
		"--slot-size-array", "50,60,70", "--num-files", "1", "--eval-num-files", "1", "--num-samples-per-file", "1024",
		"--out-source", src, "--out-eval-source", eval); err != nil {
		t.Fatalf("gen: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "mt.json")
	if err := os.WriteFile(cfg, []byte(mtConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := sessionRun(t, loadArgs(t, "--config", cfg, "--source", src, "--eval-source", eval, "--batchsize", "128",
		"--lr", "0.01", "--loss-weights", "click=1,buy=0.5", "--device", "cpu"),
		`{"cmd":"train"}`, `{"cmd":"train"}`, `{"cmd":"eval","batches":2}`)
	for i, r := range rs {
		if r["error"] != nil {
			t.Fatalf("response %d: %v", i, r["error"])
		}
	}
	ev := rs[3]
	tasks, _ := ev["tasks"].([]any)
	if len(tasks) != 2 {
		t.Fatalf("eval: tasks %v", ev)
	}
	var sum float64
	for i, want := range []struct {
		label  string
		weight float64
	}{{"click", 1}, {"buy", 0.5}} {
		tk, _ := tasks[i].(map[string]any)
		auc, _ := tk["auc"].(float64)
		loss, _ := tk["loss"].(float64)
		if tk["label"] != want.label || tk["weight"] != want.weight || !(auc > 0 && auc < 1) || !(loss > 0) {
			t.Errorf("task %d: %v, want label %s weight %v", i, tk, want.label, want.weight)
		}
		sum += want.weight * loss
	}
	if l, _ := ev["loss"].(float64); !(math.Abs(l-sum) <= 1e-9*sum) {
		t.Errorf("eval loss %v, Σ weight·task loss %v", l, sum)
	}
}
