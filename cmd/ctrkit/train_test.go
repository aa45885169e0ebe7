package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
)

func genData(t *testing.T, f datagen.Format, slots []int64, dense int) (src, eval string, auc float64) {
	t.Helper()
	dir := t.TempDir()
	p := datagen.DefaultParams()
	p.Format = f
	p.DenseDim = dense
	p.NumSlot = len(slots)
	p.SlotSizeArray = slots
	p.Seed = 5
	if f == datagen.Raw {
		p.Source, p.EvalSource = filepath.Join(dir, "train.bin"), filepath.Join(dir, "test.bin")
		p.NumSamples, p.EvalNumSamples = 16384, 4096
		p.FloatLabelDense = true
	} else {
		p.Source, p.EvalSource = filepath.Join(dir, "file_list.txt"), filepath.Join(dir, "file_list_test.txt")
		p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 2, 1, 8192
	}
	res, err := datagen.Generate(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Source, p.EvalSource, res.PlantedAUC
}

func TestTrainEvaluatePredict(t *testing.T) {
	src, eval, planted := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	dir := t.TempDir()
	prefix := filepath.Join(dir, "wdl")
	metrics, png := filepath.Join(dir, "m.jsonl"), filepath.Join(dir, "p.png")
	common := []string{"--model", "wdl", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4",
		"--vec-size", "8", "--width", "0.03125", "--batchsize", "256"}
	args := append([]string{"train"}, common...)
	args = append(args, "--source", src, "--eval-source", eval, "--num-epochs", "2", "--display", "16",
		"--eval-interval", "32", "--lr", "0.01", "--snapshot-prefix", prefix, "--out-metrics", metrics, "--out-plot", png,
		"--out-graph", filepath.Join(dir, "wdl.json"))
	out, err := runCtrkit(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"iter 16: loss", "samples/s", "eval iter 32: AUC", "saved " + prefix + " at iter 128"} {
		if !strings.Contains(out, want) {
			t.Errorf("train output lacks %q:\n%s", want, out)
		}
	}
	// JSON lines: display and eval records.
	f, err := os.Open(metrics)
	if err != nil {
		t.Fatal(err)
	}
	var evals, displays int
	var lastAUC float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("metrics line %q: %v", sc.Text(), err)
		}
		if a, ok := rec["eval_auc"].(float64); ok {
			evals++
			lastAUC = a
		}
		if _, ok := rec["loss"]; ok {
			displays++
		}
	}
	f.Close()
	if displays != 8 || evals != 4 {
		t.Errorf("%d display and %d eval records, want 8 and 4", displays, evals)
	}
	if lastAUC < planted-0.05 {
		t.Errorf("eval AUC %.4f, planted %.4f", lastAUC, planted)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
	// evaluate and predict from the saved files.
	ev := append([]string{"evaluate"}, common...)
	ev = append(ev, "--eval-source", eval, "--load-prefix", prefix, "--load-iter", "128")
	out, err = runCtrkit(t, ev...)
	if err != nil || !strings.Contains(out, "eval: AUC 0.") || !strings.Contains(out, "8192 samples") {
		t.Errorf("evaluate: %v\n%s", err, out)
	}
	pred := filepath.Join(dir, "pred.txt")
	pr := append([]string{"predict"}, common...)
	pr = append(pr, "--eval-source", eval, "--load-prefix", prefix, "--load-iter", "128", "-o", pred)
	if out, err = runCtrkit(t, pr...); err != nil || !strings.Contains(out, "wrote 8192 predictions") {
		t.Fatalf("predict: %v\n%s", err, out)
	}
	a, _ := os.ReadFile(pred)
	pred2 := filepath.Join(dir, "pred2.txt")
	pr[len(pr)-1] = pred2
	if _, err := runCtrkit(t, pr...); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(pred2)
	if len(a) == 0 || string(a) != string(b) {
		t.Error("two predictions from the same files differ")
	}
	// Errors: no model files, wrong iteration.
	bad := append([]string{"evaluate"}, common...)
	bad = append(bad, "--eval-source", eval, "--load-prefix", prefix, "--load-iter", "127")
	if _, err := runCtrkit(t, bad...); err == nil {
		t.Error("evaluate with missing model files succeeded")
	}
}

// TestTrainConfigRaw trains a hand-written ≤ v3.0 JSON config on Raw data,
// taking data paths from flags.
func TestTrainConfigRaw(t *testing.T) {
	src, eval, _ := genData(t, datagen.Raw, []int64{10, 20, 30}, 4)
	prefix := filepath.Join(t.TempDir(), "old")
	cfg := "../../trainer/graph/testdata/old_config.json"
	out, err := runCtrkit(t, "train", "--config", cfg,
		"--source", src, "--eval-source", eval, "--float-label-dense", "--i64-input-key=false", "--max-iter", "40",
		"--eval-interval", "20", "--display", "20", "--snapshot-prefix", prefix)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "eval iter 40: AUC") || !strings.Contains(out, "lr 0.") {
		t.Errorf("output:\n%s", out)
	}
	// The file's max_iter (100) was overridden; predict on Raw from the saved files.
	pred := filepath.Join(t.TempDir(), "p.txt")
	out, err = runCtrkit(t, "predict", "--config", cfg, "--eval-source", eval, "--float-label-dense",
		"--i64-input-key=false", "--load-prefix", prefix, "--load-iter", "40", "--max-eval-batches", "0", "-o", pred)
	if err != nil || !strings.Contains(out, "wrote 4096 predictions") {
		t.Errorf("predict: %v\n%s", err, out)
	}
	// predict and evaluate cover the whole data unless --max-eval-batches
	// caps them (the file's eval_batches, 4 × 64, is for training-time
	// evaluation).
	load := []string{"--config", cfg, "--eval-source", eval, "--float-label-dense", "--i64-input-key=false",
		"--load-prefix", prefix, "--load-iter", "40"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"predict", "-o", pred}, load...), "wrote 4096 predictions"},
		{append([]string{"predict", "-o", pred, "--max-eval-batches", "2"}, load...), "wrote 128 predictions"},
		{append([]string{"evaluate"}, load...), "4096 samples in 64 batches"},
		{append([]string{"evaluate", "--max-eval-batches", "3"}, load...), "192 samples in 3 batches"},
	} {
		if out, err := runCtrkit(t, c.args...); err != nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v\n%s, want %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}

// TestTrainParquet: a reference model on Parquet data (slot-local keys, so
// the reader adds slot offsets from --slot-size-array).
func TestTrainParquet(t *testing.T) {
	src, eval, planted := genData(t, datagen.Parquet, []int64{40, 60, 20, 80}, 3)
	out, err := runCtrkit(t, "train", "--model", "dcn", "--slot-size-array", "40,60,20,80", "--dense-dim", "3",
		"--vec-size", "8", "--width", "0.03125", "--batchsize", "256", "--format", "parquet",
		"--source", src, "--eval-source", eval, "--num-epochs", "2", "--lr", "0.01", "--eval-interval", "64")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "eval iter 128: AUC") {
		t.Errorf("output:\n%s (planted AUC %.4f)", out, planted)
	}
	t.Logf("%s planted %.4f", out, planted)
}

// TestTrainFreezeExport: --freeze-dense and --freeze-embedding keep the
// model fixed (every evaluation gives the same AUC), an unknown embedding
// name is an error listing the names, and --export-predictions-prefix
// writes each evaluation's scores and labels.
func TestTrainFreezeExport(t *testing.T) {
	src, eval, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	prefix := filepath.Join(t.TempDir(), "x")
	args := []string{"train", "--model", "wdl", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4",
		"--vec-size", "8", "--width", "0.03125", "--batchsize", "256", "--source", src, "--eval-source", eval,
		"--max-iter", "32", "--eval-interval", "16", "--max-eval-batches", "1", "--lr", "0.01"}
	if out, err := runCtrkit(t, append(args, "--freeze-embedding", "nope")...); err == nil ||
		!strings.Contains(err.Error(), "sparse_embedding1") || !strings.Contains(err.Error(), "sparse_embedding2") {
		t.Errorf("unknown embedding: %v\n%s", err, out)
	}
	out, err := runCtrkit(t, append(args, "--freeze-dense", "--freeze-embedding", "sparse_embedding1",
		"--freeze-embedding", "sparse_embedding2", "--export-predictions-prefix", prefix)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var aucs []string
	samples := ""
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, ": AUC "); strings.HasPrefix(l, "eval iter") && i > 0 {
			f := strings.Fields(l[i+6:])
			aucs, samples = append(aucs, f[0]), f[len(f)-2]
		}
	}
	if len(aucs) != 2 || aucs[0] != aucs[1] {
		t.Errorf("frozen model's eval AUCs %v, want two equal:\n%s", aucs, out)
	}
	for _, f := range []string{"_pred_16", "_label_16", "_pred_32", "_label_32"} {
		b, err := os.ReadFile(prefix + f)
		if err != nil || fmt.Sprint(strings.Count(string(b), "\n")) != samples {
			t.Errorf("%s: %v, %d lines", f, err, strings.Count(string(b), "\n"))
		}
	}
	// Not frozen: the model learns.
	out, err = runCtrkit(t, args...)
	if err != nil || strings.Count(out, "eval iter") != 2 {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestTrainDefaultDisplay: without --display (and a config without one) a
// non-terminal log shows a line every 200 iterations, HugeCTR's default.
func TestTrainDefaultDisplay(t *testing.T) {
	src, _, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	out, err := runCtrkit(t, "train", "--model", "wdl", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4",
		"--vec-size", "4", "--width", "0.03125", "--batchsize", "8", "--source", src, "--max-iter", "400")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"\niter 200: loss", "\niter 400: loss"} {
		if !strings.Contains(out, want) {
			t.Errorf("train output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\niter ") != 2 {
		t.Errorf("want 2 display lines:\n%s", out)
	}
}
