package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// rawConfig is a JSON config over two slots of 2 keys each and 2 dense
// values; DATA and SOLVER are spliced.
const rawConfig = `{
  "solver": {"lr_policy": "fixed", "display": 20, "max_iter": 40, "gpu": GPU, "batchsize": 128,
             "snapshot": 0, "snapshot_prefix": "PREFIX", "eval_interval": 40, "max_eval_batches": 16 SOLVER},
  "optimizer": {"type": "Adam", "update_type": "Global",
                "adam_hparam": {"learning_rate": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7}},
  "layers": [
    {"name": "data", "type": "Data", "source": SOURCE, "eval_source": "EVAL", "check": "None" DATA,
     "label": {"top": "label", "label_dim": 1}, "dense": {"top": "dense", "dense_dim": 2},
     "sparse": [{"top": "data1", "slot_num": 2, "nnz_per_slot": NNZ, "is_fixed_length": true}]},
    {"name": "emb", "type": "DistributedSlotSparseEmbeddingHash", "bottom": "data1", "top": "emb",
     "sparse_embedding_hparam": {"workspace_size_per_gpu_in_mb": 1, "embedding_vec_size": 4, "combiner": "sum"}},
    {"name": "r", "type": "Reshape", "bottom": "emb", "top": "r", "leading_dim": 8},
    {"name": "c", "type": "Concat", "bottom": ["r", "dense"], "top": "c"},
    {"name": "fc", "type": "InnerProduct", "bottom": "c", "top": "fc", "fc_param": {"num_output": 1}},
    {"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": "loss"}
  ]
}`

// evalLine returns the AUC and loss of the eval line at iter.
func evalLine(t *testing.T, out string, iter int) (auc, loss float64) {
	t.Helper()
	pre := fmt.Sprintf("eval iter %d: AUC ", iter)
	i := strings.Index(out, pre)
	if i < 0 {
		t.Fatalf("no %q in:\n%s", pre, out)
	}
	if _, err := fmt.Sscanf(out[i+len(pre):], "%g, loss %g", &auc, &loss); err != nil {
		t.Fatalf("%v: %s", err, out[i:])
	}
	return auc, loss
}

type rawCase struct {
	src, eval string
	nnz       int
}

// genRaw writes Raw train and eval files of the rawConfig shape: multi-hot
// (int32 labels, float32 dense: HugeCTR v25's layout, what `ctrkit gen
// --format raw --raw-layout multihot --float-label-dense` writes) when nnz
// > 1, else one-hot with float32 labels and dense.
func genRaw(t *testing.T, nnz int) rawCase {
	t.Helper()
	dir := t.TempDir()
	p := datagen.DefaultParams()
	p.Format, p.DenseDim, p.NumSlot, p.SlotSizeArray, p.Seed = datagen.Raw, 2, 2, []int64{50, 50}, 3
	p.Source, p.EvalSource = filepath.Join(dir, "train.bin"), filepath.Join(dir, "test.bin")
	p.NumSamples, p.EvalNumSamples = 8192, 2048
	p.FloatLabelDense = true
	if nnz > 1 {
		p.NNZArray = []int{nnz, nnz}
		p.RawLayout, p.RawLayoutSet = raw.MultiHot, true
	}
	if _, err := datagen.Generate(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	return rawCase{p.Source, p.EvalSource, nnz}
}

func writeRawConfig(t *testing.T, rc rawCase, repl ...string) string {
	t.Helper()
	s := rawConfig
	src := fmt.Sprintf("%q", rc.src)
	def := []string{"SOURCE", src, "EVAL", rc.eval, "NNZ", fmt.Sprint(rc.nnz), "GPU", "[0]",
		"PREFIX", filepath.Join(t.TempDir(), "snap")}
	repl = append(repl, def...)
	for i := 0; i+1 < len(repl); i += 2 {
		s = strings.ReplaceAll(s, repl[i], repl[i+1])
	}
	s = strings.ReplaceAll(strings.ReplaceAll(s, " DATA", ""), " SOLVER", "")
	p := filepath.Join(t.TempDir(), "model.json")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTrainRawAsyncMultiHotLabels: a RawAsync config with
// float_label_dense over a multi-hot file reads int32 labels and float32
// dense values (the labels were read as float32, ~1e-45, and nothing was
// learnt: the eval AUC was NaN).
func TestTrainRawAsyncMultiHotLabels(t *testing.T) {
	rc := genRaw(t, 2)
	cfg := writeRawConfig(t, rc, ` DATA`, `, "format": "RawAsync", "float_label_dense": true`)
	out, err := runCtrkit(t, "train", "--config", cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if auc, loss := evalLine(t, out, 40); auc < 0.55 || loss < 0.2 {
		// 0/1 labels: the loss stays well above 0.2; labels read as
		// float32 bits (~1e-45) drive it towards 0 and the AUC to chance.
		t.Errorf("labels misread (AUC %v, loss %v):\n%s", auc, loss, out)
	}
	// async_param settles the layout and dense type the same way; the
	// label type is a flag of its own.
	cfg = writeRawConfig(t, rc, ` DATA`, `, "format": "RawAsync", "async_param": {"num_threads": 4, "num_batches_per_thread": 2,
	  "io_block_size": 524288, "io_depth": 2, "io_alignment": 512, "multi_hot_reader": true, "is_dense_float": true}`)
	out, err = runCtrkit(t, "train", "--config", cfg)
	if auc, loss := evalLine(t, out, 40); err != nil || auc < 0.55 || loss < 0.2 {
		t.Errorf("async_param: %v\n%s", err, out)
	}
	out, err = runCtrkit(t, "train", "--config", cfg, "--label-type", "float32")
	if _, loss := evalLine(t, out, 40); err != nil || loss > 0.2 {
		t.Errorf("--label-type float32 did not change the label type: %v\n%s", err, out)
	}
	// dense.aligned Auto pads the dense input to 8 columns (the model's too).
	cfg = writeRawConfig(t, rc, `"dense_dim": 2}`, `"dense_dim": 2, "aligned": "Auto"}`, ` DATA`, `, "format": "RawAsync", "float_label_dense": true`)
	out, err = runCtrkit(t, "train", "--config", cfg)
	if auc, _ := evalLine(t, out, 40); err != nil || auc < 0.55 || !strings.Contains(out, "model: 4 layers, 17 dense parameters") {
		t.Errorf("aligned Auto: %v\n%s", err, out)
	}
	// One-hot RawAsync reads int32 dense values only (HugeCTR refuses too).
	cfg = writeRawConfig(t, rc, ` DATA`, `, "format": "RawAsync", "async_param": {"multi_hot_reader": false, "is_dense_float": true}`)
	if _, err := runCtrkit(t, "train", "--config", cfg); err == nil || !strings.Contains(err.Error(), "is_dense_float") {
		t.Errorf("one-hot RawAsync with float dense: %v", err)
	}
}

// TestTrainRawMultiHotPointsToRawAsync: a Raw config whose nnz_per_slot
// exceeds 1 names the slot and RawAsync (it said the file size is not a
// multiple of the one-hot sample).
func TestTrainRawMultiHotPointsToRawAsync(t *testing.T) {
	rc := genRaw(t, 2)
	cfg := writeRawConfig(t, rc, ` DATA`, `, "format": "Raw", "float_label_dense": true`)
	_, err := runCtrkit(t, "train", "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), "RawAsync") || !strings.Contains(err.Error(), "nnz_per_slot 2") ||
		strings.Contains(err.Error(), "multiple") {
		t.Errorf("%v", err)
	}
}

// TestTrainRawOneHotNnzPerSlot2: HugeCTR's DLRM samples declare
// DataReaderSparseParam("data1", 2, False, 26) over one-hot Raw data, and
// HugeCTR's Raw reader reads one key per slot whatever nnz_per_slot says:
// so does ctrkit (it refused the config). Multi-hot data of that
// nnz_per_slot still points to RawAsync, also when only num_samples gives
// it away.
func TestTrainRawOneHotNnzPerSlot2(t *testing.T) {
	rc := genRaw(t, 1)
	data := `, "format": "Raw", "float_label_dense": true`
	out, err := runCtrkit(t, "train", "--config", writeRawConfig(t, rc, ` DATA`, data))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	auc1, loss1 := evalLine(t, out, 40)
	rc.nnz = 2
	for _, fixed := range []string{"true", "false"} {
		cfg := writeRawConfig(t, rc, `"is_fixed_length": true`, `"is_fixed_length": `+fixed, ` DATA`, data)
		out, err := runCtrkit(t, "train", "--config", cfg)
		if err != nil {
			t.Fatalf("is_fixed_length %s: %v\n%s", fixed, err, out)
		}
		// The same keys as nnz_per_slot 1: the same training.
		if auc, loss := evalLine(t, out, 40); auc != auc1 || loss != loss1 {
			t.Errorf("is_fixed_length %s: eval AUC %v, loss %v; nnz_per_slot 1: %v, %v\n%s", fixed, auc, loss, auc1, loss1, out)
		}
	}
	// 8192 multi-hot samples of 28 bytes are 11468.8 one-hot ones: the size
	// points to RawAsync. 1024 of them are also 1433.6 one-hot ones; 3 of
	// them are 84 bytes, 4.2 one-hot ones; cut a multi-hot file to 5
	// samples (140 bytes = 7 one-hot samples): only num_samples tells.
	mh := genRaw(t, 2)
	b, err := os.ReadFile(mh.src)
	if err != nil {
		t.Fatal(err)
	}
	five := filepath.Join(t.TempDir(), "five.bin")
	if err := os.WriteFile(five, b[:5*28], 0o644); err != nil {
		t.Fatal(err)
	}
	mh.src = five
	cfg := writeRawConfig(t, mh, ` DATA`, `, "format": "Raw", "float_label_dense": true, "num_samples": 5`)
	_, err = runCtrkit(t, "train", "--config", cfg, "--max-iter", "1")
	if err == nil || !strings.Contains(err.Error(), "RawAsync") || !strings.Contains(err.Error(), "num_samples 5 multi-hot samples") {
		t.Errorf("num_samples of multi-hot samples: %v", err)
	}
	if _, err := runCtrkit(t, "train", "--config", cfg, "--max-iter", "1", "--raw-layout", "onehot"); err != nil && strings.Contains(err.Error(), "RawAsync") {
		t.Errorf("--raw-layout onehot still points to RawAsync: %v", err)
	}
}

// TestTrainDropIncompleteBatch: HugeCTR's drop_incomplete_batch (Python
// CreateSolver; HugeCTR's DLRM samples give False): false trains the short
// last batch of each pass also in max_iter mode, true skips it also in
// epoch mode (was refused by the Python API; no flag).
func TestTrainDropIncompleteBatch(t *testing.T) {
	rc := genRaw(t, 1) // 8192 samples: 8 batches of 1000 and one of 192
	cfg := writeRawConfig(t, rc, ` DATA`, `, "format": "Raw", "float_label_dense": true`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-iter", "10"}, "trained 10 iterations (10000 samples)"},
		{[]string{"--max-iter", "10", "--drop-incomplete-batch=false"}, "trained 10 iterations (9192 samples)"},
		{[]string{"--max-iter", "10", "--drop-incomplete-batch"}, "trained 10 iterations (10000 samples)"},
		{[]string{"--num-epochs", "1"}, "trained 9 iterations (8192 samples, 1 epoch)"},
		{[]string{"--num-epochs", "1", "--drop-incomplete-batch"}, "trained 8 iterations (8000 samples, 1 epoch)"},
	} {
		args := append([]string{"train", "--config", cfg, "--batchsize", "1000", "--eval-interval", "0"}, c.args...)
		out, err := runCtrkit(t, args...)
		if err != nil || !strings.Contains(out, c.want) {
			t.Errorf("%v: want %q: %v\n%s", c.args, c.want, err, out)
		}
	}
}

// TestTrainConfigKeysHonoured: keys of the data and solver sections that
// were accepted and dropped.
func TestTrainConfigKeysHonoured(t *testing.T) {
	rc := genRaw(t, 1)
	raw := `, "format": "Raw", "float_label_dense": true`
	// A list of sources: every one must exist, and an epoch reads them all.
	missing := filepath.Join(t.TempDir(), "nope.bin")
	cfg := writeRawConfig(t, rc, "SOURCE", fmt.Sprintf("[%q, %q]", rc.src, missing), ` DATA`, raw)
	if out, err := runCtrkit(t, "train", "--config", cfg); err == nil || !strings.Contains(err.Error(), missing) || strings.Contains(out, "iter 20") {
		t.Errorf("missing second source: %v\n%s", err, out)
	}
	cfg = writeRawConfig(t, rc, "SOURCE", fmt.Sprintf("[%q, %q]", rc.src, rc.src), ` DATA`, raw)
	out, err := runCtrkit(t, "train", "--config", cfg, "--num-epochs", "1", "--eval-interval", "0")
	if err != nil || !strings.Contains(out, "epoch 1 done at iter 128") { // 2 × 8192 / 128
		t.Errorf("two sources: %v\n%s", err, out)
	}
	// eval_metrics: the selected metrics, and HitRate / AverageLoss
	// thresholds stop training (HugeCTR stops on AUC only; ctrkit says so).
	// The eval losses at iter 10, 20 are 1.551, 1.251 (since the key-derived
	// embedding initialisation of issue #19; 0.830, 0.659 before, with
	// threshold 0.7): 1.4 stops at the second evaluation.
	cfg = writeRawConfig(t, rc, `"eval_interval": 40,`, `"eval_interval": 10,`, ` DATA`, raw, ` SOLVER`, `, "eval_metrics": ["HitRate:0.99", "AverageLoss:1.4"]`)
	out, err = runCtrkit(t, "train", "--config", cfg)
	if err != nil || !strings.Contains(out, "eval iter 10: hit rate ") || strings.Contains(out, "eval iter 10: AUC") ||
		!strings.Contains(out, "reached the threshold 1.400000: stopping") || strings.Contains(out, "iter 30:") ||
		!strings.Contains(out, "HugeCTR stops on AUC only") {
		t.Errorf("eval_metrics: %v\n%s", err, out)
	}
	// gpu [0..7]: one line saying so, and eight GPUs' embedding capacity.
	one, err := runCtrkit(t, "train", "--config", writeRawConfig(t, rc, ` DATA`, raw), "--max-iter", "1")
	if err != nil {
		t.Fatal(err)
	}
	out, err = runCtrkit(t, "train", "--config", writeRawConfig(t, rc, "GPU", "[0, 1, 2, 3, 4, 5, 6, 7]", ` DATA`, raw), "--max-iter", "1")
	if err != nil || !strings.Contains(out, "solver.gpu lists 8 GPUs; ctrkit runs on one device") ||
		!strings.Contains(out, "--device cpu --gpus 0,1,2,3,4,5,6,7 runs 8 in-process CPU ranks") && !strings.Contains(out, "(--gpus picks its GPUs, e.g. --gpus 0)") ||
		!strings.Contains(one, "(21845 rows capacity)") || !strings.Contains(out, "(174760 rows capacity)") {
		t.Errorf("gpu list: %v\n%s\n%s", err, one, out)
	}
	// Optimizer states named by the solver are loaded (a file of the wrong
	// size is an error), and need their model files.
	bogus := filepath.Join(t.TempDir(), "opt.model")
	os.WriteFile(bogus, []byte("1234567"), 0o644)
	cfg = writeRawConfig(t, rc, ` DATA`, raw, ` SOLVER`, fmt.Sprintf(`, "sparse_opt_states_file": [%q]`, bogus))
	if _, err := runCtrkit(t, "train", "--config", cfg); err == nil || !strings.Contains(err.Error(), "sparse_opt_states_file needs sparse_model_file") {
		t.Errorf("sparse_opt_states_file alone: %v", err)
	}
	snap := filepath.Join(t.TempDir(), "s")
	if _, err := runCtrkit(t, "train", "--config", writeRawConfig(t, rc, ` DATA`, raw), "--max-iter", "2", "--snapshot-prefix", snap); err != nil {
		t.Fatal(err)
	}
	files := fmt.Sprintf(`, "dense_model_file": %q, "sparse_model_file": %q, "dense_opt_states_file": %q`, snap+"_dense_2.model", snap+"0_sparse_2.model", bogus)
	cfg = writeRawConfig(t, rc, ` DATA`, raw, ` SOLVER`, files)
	if _, err := runCtrkit(t, "train", "--config", cfg, "--max-iter", "1"); err == nil || !strings.Contains(err.Error(), bogus) {
		t.Errorf("bad dense_opt_states_file accepted: %v", err)
	}
	files = strings.Replace(files, bogus, snap+"_opt_dense_2.model", 1)
	if out, err := runCtrkit(t, "train", "--config", writeRawConfig(t, rc, ` DATA`, raw, ` SOLVER`, files), "--max-iter", "1"); err != nil {
		t.Errorf("snapshot's optimizer states: %v\n%s", err, out)
	}
	// cache_eval_data keeps the evaluation batches: same metrics.
	a, _ := runCtrkit(t, "train", "--config", writeRawConfig(t, rc, `"eval_interval": 40,`, `"eval_interval": 20,`, ` DATA`, raw))
	b, _ := runCtrkit(t, "train", "--config", writeRawConfig(t, rc, `"eval_interval": 40,`, `"eval_interval": 20,`, ` DATA`, raw+`, "cache_eval_data": 4`))
	if evalLines(a) == "" || evalLines(a) != evalLines(b) {
		t.Errorf("cache_eval_data changed the evaluations:\n%s\n%s", a, b)
	}
}

func evalLines(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "eval iter") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestTrainHugeBatchRefused: batchsize 2^31-1 in the model JSON is refused
// with the size it would need, before allocating.
func TestTrainHugeBatchRefused(t *testing.T) {
	rc := genRaw(t, 1)
	cfg := writeRawConfig(t, rc, `"batchsize": 128`, `"batchsize": 2147483647`, ` DATA`, `, "format": "Raw", "float_label_dense": true`)
	_, err := runCtrkit(t, "train", "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), "batchsize 2147483647") || !strings.Contains(err.Error(), "GiB") {
		t.Errorf("%v", err)
	}
}
