package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

var update = flag.Bool("update", false, "rewrite docs/CONFORMANCE.md from TestConformance")

// conformanceDoc is the generated table (repository-relative: docs/CONFORMANCE.md).
const conformanceDoc = "../../docs/CONFORMANCE.md"

// conformanceChildEnv carries a child process's job (JSON confChild).
const conformanceChildEnv = "CTRKIT_CONFORMANCE_CHILD"

// expectedFailures are configs that fail today for a defect another change
// owns; the reason names it. TestConformance fails when one of these
// passes (remove it here) or when a config not listed fails.
var expectedFailures = map[string]string{}

// localizedSave: saving a LocalizedSlotSparseEmbeddingHash without
// slot_size_array (its slot_id file) is being fixed elsewhere.
const localizedSave = "localized-embedding save (slot_id without slot_size_array)"

// invalidConfigs are files HugeCTR's own parser rejects too; ctrkit must
// reject them (status "invalid config"), and the test fails if one reads.
var invalidConfigs = map[string]string{
	"v23.09.00/test/scripts/din_fp32_1gpu.json": "layers[22] Reshape reads reduce_item_his's reshape before defining it (bottom and top swapped)",
}

// Conformance kinds of model files.
const (
	kindTraining  = "training config"
	kindGraph     = "graph only"
	kindInference = "inference graph"
	kindNotModel  = "not a model file"
)

// Conformance statuses.
const (
	statusPass        = "pass"
	statusFail        = "FAIL"
	statusExpected    = "expected failure"
	statusUnsupported = "unsupported"
	statusNotTrained  = "not trained"
	statusInvalid     = "invalid config"
)

// confSteps training steps, then predictions over confEvalBatches batches.
const (
	confSteps       = 2
	confEvalBatches = 3
)

type confRow struct {
	Config, Kind, Status, Reason string
}

// confLimits size a conformance run: CPU runs shrink batches, tables and
// slot vocabularies to CI size; GPU runs keep full sizes where they fit.
type confLimits struct {
	gpu       bool
	batch     int   // largest batch
	tableRows int64 // largest embedding table
	slotSize  int64 // largest slot vocabulary of the generated data
}

func conformanceLimits(gpuMode bool) confLimits {
	if gpuMode {
		return confLimits{gpu: true, batch: 65536, tableRows: 1 << 22, slotSize: 1 << 20}
	}
	return confLimits{batch: 16, tableRows: 1 << 14, slotSize: 16}
}

// confPlan is what a conformance run does with one config: the job (its
// data paths under dir) and the data to generate for it.
type confPlan struct {
	kind string
	job  Job
	gen  datagen.Params
	// infer is an inference graph's own config: the job trains its
	// training twin (trainingTwin), the child predicts with infer.
	infer *graph.Config
}

// trainingTwin is the training graph of an inference graph: its final
// Sigmoid replaced by a BinaryCrossEntropyLoss on the Sigmoid's bottom and
// the label, as HugeCTR's inference parser turns the loss into a Sigmoid
// the other way round. The weights are the same (neither has any); nil
// when the graph does not end in a Sigmoid.
func trainingTwin(cfg *graph.Config) *graph.Config {
	g := *cfg.Graph
	n := len(g.Layers)
	if n == 0 || g.Layers[n-1].Type != graph.Sigmoid || len(g.Input.LabelTops) != 1 {
		return nil
	}
	g.Layers = append([]graph.DenseLayer(nil), g.Layers...)
	sig := g.Layers[n-1]
	g.Layers[n-1] = graph.DenseLayer{Type: graph.BinaryCrossEntropyLoss,
		Bottom: []string{sig.Bottom[0], g.Input.LabelTops[0]}, Top: []string{"loss"}}
	twin := *cfg
	twin.Graph, twin.Inference = &g, nil
	return &twin
}

// planConformance reads path, classifies it and, for a trainable model,
// shrinks it to lim and plans its data and job under dir. It is
// deterministic: the child process re-plans the same job. A nil plan with a
// nil error is a file that is not trained (row explains).
func planConformance(path, dir string, lim confLimits) (*confPlan, confRow, error) {
	row := confRow{}
	cfg, err := graph.ReadFile(path)
	if err != nil {
		var ge *graph.Error
		if errors.As(err, &ge) && ge.Path == "layers" && errors.Is(err, graph.ErrMissing) || errors.Is(err, graph.ErrType) && ge != nil && ge.Path == "" {
			row.Kind, row.Status, row.Reason = kindNotModel, statusNotTrained, "no \"layers\" array"
			return nil, row, nil
		}
		return nil, row, err
	}
	hasLoss := false
	for _, l := range cfg.Graph.Layers {
		hasLoss = hasLoss || graph.IsLoss(l.Type)
	}
	var infer *graph.Config
	switch {
	case cfg.Inference != nil || !hasLoss:
		row.Kind = kindInference
		if hasLoss {
			row.Status, row.Reason = statusNotTrained, "inference section beside a loss layer"
			return nil, row, nil
		}
		if infer, cfg = cfg, trainingTwin(cfg); cfg == nil {
			row.Status, row.Reason = statusNotTrained, "no loss layer and no final Sigmoid"
			return nil, row, nil
		}
	case cfg.Solver != nil && cfg.Reader != nil:
		row.Kind = kindTraining
	default:
		row.Kind = kindGraph
	}
	p := &confPlan{kind: row.Kind, infer: infer}
	s := graph.DefaultSolver()
	if cfg.Solver != nil {
		s = cfg.Solver
	}
	opt := cfg.Optimizer
	if opt == nil {
		opt = graph.DefaultOptimizer()
	}
	rp := cfg.Reader
	if rp == nil {
		rp = &graph.ReaderParams{Format: "Norm", Check: "Sum"}
	}
	g := cfg.Graph

	// Slots of the file: every sparse input's, in order.
	var first []int
	total := 0
	for _, sp := range g.Input.Sparse {
		first = append(first, total)
		total += sp.SlotNum
	}
	sizes := make([]int64, total)
	if len(rp.SlotSizeArray) == total {
		copy(sizes, rp.SlotSizeArray)
	}
	for _, e := range g.Embeddings {
		for k, sp := range g.Input.Sparse {
			if sp.Top == e.Bottom && len(e.SlotSizeArray) == sp.SlotNum {
				for i, v := range e.SlotSizeArray {
					if sizes[first[k]+i] == 0 {
						sizes[first[k]+i] = v
					}
				}
			}
		}
	}
	for i := range sizes {
		if sizes[i] <= 0 {
			sizes[i] = 10000 // datagen's default vocabulary
		}
		sizes[i] = min(sizes[i], lim.slotSize)
	}
	// Tables: hash capacity capped at lim.tableRows, every slot's
	// vocabulary within its table; OneHot tables are the slot sizes.
	for ei := range g.Embeddings {
		e := &g.Embeddings[ei]
		k := -1
		for j, sp := range g.Input.Sparse {
			if sp.Top == e.Bottom {
				k = j
			}
		}
		if k < 0 {
			continue // Build reports it
		}
		n := g.Input.Sparse[k].SlotNum
		own := sizes[first[k] : first[k]+n]
		eopt := opt
		if e.Optimizer != nil {
			eopt = e.Optimizer
		}
		if e.Type == graph.LocalizedOneHot || e.Type == graph.Hybrid {
			per := max(1, lim.tableRows/int64(n))
			for i := range own {
				own[i] = min(own[i], per)
			}
			e.SlotSizeArray = append([]int64(nil), own...)
			continue
		}
		if rows := e.VocabPerGPU(eopt); rows > lim.tableRows {
			if e.MaxVocabPerGPU > 0 {
				e.MaxVocabPerGPU = lim.tableRows
			} else {
				e.WorkspaceMB = max(1, lim.tableRows*int64(1+eopt.StateCopies())*4*int64(e.VecSize)>>20)
			}
		}
		if rows := e.VocabPerGPU(eopt); rows > 0 {
			per := max(1, rows/int64(n))
			for i := range own {
				own[i] = min(own[i], per)
			}
		}
		if len(e.SlotSizeArray) == n {
			e.SlotSizeArray = append([]int64(nil), own...)
		}
	}
	var readerSizes []int64
	// A OneHot embedding takes keys that reach it without reader offsets
	// as HugeCTR's global rows; datagen's Raw and Parquet keys are
	// slot-local, so such data needs the reader's slot_size_array (as
	// HugeCTR's Raw/Parquet users give DataReaderParams.slot_size_array).
	localKeys := rp.Format != "Norm" && len(rp.SlotSizeArray) != total
	oneHot := false
	for _, e := range g.Embeddings {
		oneHot = oneHot || e.OneHot()
	}
	if len(rp.SlotSizeArray) == total || (localKeys && oneHot) {
		readerSizes = append([]int64(nil), sizes...)
		if cfg.Reader != nil {
			cfg.Reader.SlotSizeArray = readerSizes
		}
	}
	// Keys a sample: nnz_per_slot, within a v3.0 per-sample budget; Raw is
	// one-hot.
	var nnz []int
	for _, sp := range g.Input.Sparse {
		sum := 0
		for _, v := range sp.NNZPerSlot {
			sum += v
		}
		for _, v := range sp.NNZPerSlot {
			if sum > sp.MaxFeatures() {
				v = max(1, min(v, sp.MaxFeatures()/max(1, sp.SlotNum)))
			}
			if rp.Format == "Raw" {
				v = 1
			}
			nnz = append(nnz, v)
		}
	}

	batch := min(s.BatchSize, lim.batch)
	labels := 0
	for _, d := range g.Input.LabelDims {
		labels += d
	}
	gp := datagen.DefaultParams()
	gp.LabelDim, gp.DenseDim, gp.NumSlot = labels, g.Input.DenseDim, total
	gp.I64InputKey = s.I64InputKey
	gp.SlotSizeArray, gp.NNZArray = sizes, nnz
	gp.FloatLabelDense = rp.FloatLabelDense
	gp.Seed, gp.Threads = 1, 2
	gp.NumFiles, gp.EvalNumFiles, gp.NumSamplesPerFile = 1, 1, confSteps*batch
	gp.NumSamples, gp.EvalNumSamples = int64(confSteps*batch), int64(confEvalBatches*batch)
	if rp.Check == "None" {
		gp.CheckType = norm.CheckNone
	}
	switch rp.Format {
	case "Raw", "RawAsync":
		gp.Format = datagen.Raw
		gp.Source, gp.EvalSource = filepath.Join(dir, "train.bin"), filepath.Join(dir, "eval.bin")
	case "Parquet":
		gp.Format = datagen.Parquet
		gp.Source, gp.EvalSource = filepath.Join(dir, "file_list.txt"), filepath.Join(dir, "file_list_test.txt")
	default:
		gp.Format = datagen.Norm
		gp.Source, gp.EvalSource = filepath.Join(dir, "file_list.txt"), filepath.Join(dir, "file_list_test.txt")
	}
	p.gen = gp

	sv := *s
	sv.BatchSize, sv.BatchSizeEval = batch, batch
	sv.MaxIter, sv.NumEpochs = confSteps, 0
	sv.Display, sv.EvalInterval, sv.Snapshot, sv.MaxEvalBatches = 0, 0, 0, 0
	sv.SnapshotPrefix = filepath.Join(dir, "snap")
	sv.AUCThreshold, sv.ExportPredictionsPrefix = 0, ""
	sv.DenseModelFile, sv.DenseOptStatesFile, sv.SparseModelFiles, sv.SparseOptStatesFiles = "", "", nil, nil
	sv.Seed = 7
	format, async, err := ParseFormat(rp.Format)
	if err != nil {
		return p, row, err
	}
	check, err := ParseCheck(rp.Check)
	if err != nil {
		return p, row, err
	}
	src := Source{Format: format, Check: check, SlotSizeArray: readerSizes, FloatLabelDense: rp.FloatLabelDense,
		I64Keys: s.I64InputKey, Workers: 1}
	if async {
		src.Async = &asyncio.Params{}
	}
	p.job = Job{Config: cfg, Solver: sv, Optimizer: cfg.Optimizer, Train: src, Eval: src}
	if infer != nil {
		// The inference graph's own tables, shrunk as the twin's.
		ig := *infer.Graph
		ig.Embeddings = g.Embeddings
		ic := *infer
		ic.Graph = &ig
		p.infer = &ic
	}
	p.job.Train.Path, p.job.Eval.Path = gp.Source, gp.EvalSource
	return p, row, nil
}

// confChild is a child process's job: re-plan config, load the snapshot
// the parent saved and write predictions to Out.
type confChild struct {
	Config, Dir, Out string
	GPU              bool
}

// conformanceBackend opens the run's backend as ctrkit train --device
// does (the solver's precision on the GPU). The CPU trains fp32: an fp16
// or bf16 config trains there in fp32 with its loss scale, as
// ctrkit train --precision fp32 --loss-scale <scaler> would.
func conformanceBackend(gpuMode bool, s *graph.Solver) (tensor.Backend, error) {
	if gpuMode {
		return OpenBackend(DeviceGPU, *s, nil)
	}
	cpuSolver(s)
	return OpenBackend(DeviceCPU, *s, nil)
}

// cpuSolver makes s train on the CPU: fp16 and bf16 become fp32 with
// their loss scale.
func cpuSolver(s *graph.Solver) {
	if s.Precision().Half() {
		if sc := s.LossScale(); sc > 0 {
			s.Scaler, s.ScalerSet = sc, true
		}
		s.SetPrecision(graph.FP32)
	}
}

// TestConformanceChild is the fresh process of TestConformance: it only
// runs with CTRKIT_CONFORMANCE_CHILD set.
func TestConformanceChild(t *testing.T) {
	spec := os.Getenv(conformanceChildEnv)
	if spec == "" {
		t.Skip("runs as TestConformance's child process")
	}
	var c confChild
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatalf("conformance child: %v", err)
	}
	p, _, err := planConformance(c.Config, c.Dir, conformanceLimits(c.GPU))
	if err != nil || p == nil {
		t.Fatalf("conformance child: no plan for %s: %v", c.Config, err)
	}
	j := p.job
	if j.Backend, err = conformanceBackend(c.GPU, &j.Solver); err != nil {
		t.Fatalf("conformance child: %v", err)
	}
	defer CloseBackend(j.Backend)
	if p.infer != nil {
		j.Config = p.infer
	}
	j.Init = SnapshotFiles(j.Solver.SnapshotPrefix, confSteps, len(j.Config.Graph.Embeddings))
	j.Init.DenseOpt, j.Init.SparseOpt = "", nil
	if _, err := RunPredict(j, c.Out); err != nil {
		t.Fatalf("conformance child: %v", err)
	}
}

var unsupportedLayer = regexp.MustCompile(`unsupported: layer type (\S+)|shape inference for (\S+)`)

// runConformance trains one config, saves it, reloads it in a fresh process
// and compares the predictions bit for bit.
// beforeReload, when set, runs on the snapshot prefix before the child
// process reloads it (tests damage the snapshot with it).
func runConformance(t *testing.T, path string, gpuMode bool, beforeReload func(prefix string) error) confRow {
	dir := t.TempDir()
	clean := func(err error) string {
		return strings.ReplaceAll(strings.ReplaceAll(err.Error(), dir, "$TMP"), filepath.Dir(path)+"/", "")
	}
	p, row, err := planConformance(path, dir, conformanceLimits(gpuMode))
	if err != nil {
		row.Status, row.Reason = statusFail, "reading: "+clean(err)
		return row
	}
	if p == nil {
		return row
	}
	fail := func(step string, err error) confRow {
		row.Status, row.Reason = statusFail, step+": "+clean(err)
		if m := unsupportedLayer.FindStringSubmatch(err.Error()); m != nil && errors.Is(err, ErrUnsupported) {
			row.Status, row.Reason = statusUnsupported, "unsupported layer "+m[1]+m[2]
		}
		return row
	}
	j := p.job
	if j.Backend, err = conformanceBackend(gpuMode, &j.Solver); err != nil {
		return fail("opening the backend", err)
	}
	defer CloseBackend(j.Backend) // one config's tables at a time on the GPU
	if _, err := datagen.Generate(context.Background(), p.gen, nil); err != nil {
		return fail("generating data", err)
	}
	m, _, err := Train(context.Background(), j, TrainOutput{SaveFinal: true})
	if err != nil {
		return fail("training", err)
	}
	r, err := m.Open(j.Eval)
	if err != nil {
		return fail("opening eval data", err)
	}
	scores, err := m.PredictSamples(nil, r, 0)
	r.Close()
	if err != nil {
		return fail("predicting", err)
	}
	width := m.PredictionWidth()
	want := predictionText(scores, width)
	if beforeReload != nil {
		if err := beforeReload(j.Solver.SnapshotPrefix); err != nil {
			return fail("before reload", err)
		}
	}
	out := filepath.Join(dir, "child_predictions.txt")
	spec, _ := json.Marshal(confChild{Config: path, Dir: dir, Out: out, GPU: gpuMode})
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), conformanceChildEnv+"="+string(spec))
	log, err := cmd.CombinedOutput()
	if err != nil {
		msg := string(log)
		if i := strings.Index(msg, "conformance child: "); i >= 0 {
			msg = msg[i+len("conformance child: "):]
		}
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return fail("reloading in a fresh process", errors.New(msg))
	}
	got, err := os.ReadFile(out)
	if err != nil {
		return fail("reloading", err)
	}
	if p.infer != nil {
		// The inference graph's Sigmoid runs on the backend in float32,
		// the trained model's σ on the host in float64.
		if msg := closePredictions(string(got), want.String(), inferTolerance); msg != "" {
			return fail("inference graph with the saved weights", errors.New(msg))
		}
		row.Status = statusPass
		row.Reason = fmt.Sprintf("trained as its training twin (final Sigmoid → BinaryCrossEntropyLoss), batch %d, %d steps, saved; the inference graph reloaded with those weights in a fresh process predicts the %d samples within %g",
			j.Solver.BatchSize, confSteps, len(scores)/width, inferTolerance)
		return row
	}
	if g, w := string(got), want.String(); g != w {
		gl, wl := strings.Split(g, "\n"), strings.Split(w, "\n")
		diff, firstDiff := 0, -1
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				diff++
				if firstDiff < 0 {
					firstDiff = i
				}
			}
		}
		if firstDiff < 0 {
			return fail("reloaded predictions", fmt.Errorf("%d lines, trained model %d", len(gl), len(wl)))
		}
		return fail("reloaded predictions", fmt.Errorf("%d of %d samples differ; sample %d: %s, trained model %s",
			diff, len(wl)-1, firstDiff, gl[firstDiff], wl[firstDiff]))
	}
	row.Status = statusPass
	row.Reason = fmt.Sprintf("batch %d, %d steps, %d predictions bit-identical after reload", j.Solver.BatchSize, confSteps, len(scores)/width)
	return row
}

// TestConformance runs every HugeCTR model JSON under the shared fixtures
// (CTRKIT_HUGECTR_JSON names another folder; skipped when absent): it
// classifies each file; trains each trainable one on generated data shaped
// by its data section (CI-sized on the CPU; full sizes where they fit on
// the GPU, CTRKIT_REQUIRE_GPU=1), saves it, reloads the snapshot in a
// fresh process (this test binary re-executed) and requires bit-identical
// predictions. The table is docs/CONFORMANCE.md (-update rewrites it; the
// CPU run fails when its configs, kinds or statuses went stale).
func TestConformance(t *testing.T) {
	if os.Getenv(conformanceChildEnv) != "" {
		t.Skip("child process")
	}
	if testing.Short() {
		// CI's race run is -short: 48 configs trained under the race
		// detector take ~10 minutes; the plain run covers them.
		t.Skip("every HugeCTR config: run without -short")
	}
	dir := os.Getenv("CTRKIT_HUGECTR_JSON")
	if dir == "" {
		dir = "../../../shared/data/hugectr-json"
	}
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if len(paths) == 0 {
		t.Skipf("no HugeCTR configs under %s", dir)
	}
	sort.Strings(paths)
	gpuMode := os.Getenv("CTRKIT_REQUIRE_GPU") != ""
	var rows []confRow
	seen := map[string]bool{}
	for _, p := range paths {
		name := filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		seen[name] = true
		began := time.Now()
		row := runConformance(t, p, gpuMode, nil)
		row.Config = name
		if gpuMode {
			t.Logf("%s: %s (%s) in %.1f s", name, row.Status, row.Reason, time.Since(began).Seconds())
		}
		why, expected := expectedFailures[name]
		if bad, ok := invalidConfigs[name]; ok {
			if row.Status == statusFail {
				row.Status, row.Reason = statusInvalid, bad+" ("+row.Reason+")"
			} else {
				t.Errorf("%s is listed as invalid (%s) but is %s: ctrkit must reject it", name, bad, row.Status)
			}
			rows = append(rows, row)
			continue
		}
		switch {
		case row.Status == statusFail && expected:
			row.Status, row.Reason = statusExpected, why+" ("+row.Reason+")"
		case row.Status == statusFail:
			t.Errorf("%s: %s", name, row.Reason)
		case expected:
			t.Errorf("%s is listed as an expected failure (%s) but is %s now: remove it from expectedFailures", name, why, row.Status)
		}
		rows = append(rows, row)
	}
	for name := range expectedFailures {
		if !seen[name] && dir == "../../../shared/data/hugectr-json" {
			t.Errorf("expected failure %s is not among the configs", name)
		}
	}
	doc := conformanceTable(rows, gpuMode)
	t.Logf("\n%s", doc)
	if gpuMode {
		// CTRKIT_CONFORMANCE_OUT: where the GPU machine's table goes
		// (docs/CONFORMANCE_GPU.md is that table, copied back).
		if out := os.Getenv("CTRKIT_CONFORMANCE_OUT"); out != "" {
			if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if *update {
		if err := os.WriteFile(conformanceDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(conformanceDoc)
	if err != nil {
		t.Fatalf("%v (go test ./trainer/model -run TestConformance -update writes it)", err)
	}
	if a, b := statusColumns(string(old)), statusColumns(doc); a != b {
		t.Errorf("docs/CONFORMANCE.md is stale (go test ./trainer/model -run TestConformance -update rewrites it):\nhave\n%s\nwant\n%s", a, b)
	}
}

// statusColumns keeps the config, kind and status cells of the table
// rows (reasons carry measured details that may change).
func statusColumns(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		c := strings.Split(l, " | ")
		if len(c) == 4 && strings.HasPrefix(l, "| `") {
			fmt.Fprintf(&b, "%s | %s | %s\n", c[0], c[1], c[2])
		}
	}
	return b.String()
}

func conformanceTable(rows []confRow, gpuMode bool) string {
	var b bytes.Buffer
	b.WriteString("# HugeCTR model configs: conformance\n\n")
	b.WriteString("Code generated by `go test ./trainer/model -run TestConformance -update`; DO NOT EDIT.\n\n")
	b.WriteString("Every JSON file under the shared HugeCTR fixtures (`data/hugectr-json`), classified; each\n" +
		"trainable one (a full training config, or a graph with a loss layer, trained on Norm data\n" +
		"with default solver settings) is trained on data generated to its data section (format,\n" +
		"label and dense widths, slots, nnz per slot, key type) for a few steps on the CPU backend,\n" +
		"saved, reloaded in a fresh process and required to predict bit-identically. CPU runs shrink\n" +
		"the batch to 16, hash tables to 16384 rows and slot vocabularies to 16 keys; on the GPU\n" +
		"machine (`CTRKIT_REQUIRE_GPU=1 model.test -test.run TestConformance`, table in\n" +
		"docs/CONFORMANCE_GPU.md) each config keeps its own batch size (up to 65536), tables up to\n" +
		"2^22 rows and slot vocabularies up to 2^20 keys. An inference graph (no loss layer, ending\n" +
		"in a Sigmoid) is trained as its training twin (the Sigmoid replaced by a\n" +
		"BinaryCrossEntropyLoss), saved, and reloaded as itself: its predictions must match the\n" +
		"twin's within 1e-6. `expected failure` rows are defects owned by other changes.\n\n")
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.Status]++
	}
	fmt.Fprintf(&b, "%d files: %d pass, %d expected failures, %d unsupported, %d not trained, %d invalid, %d FAIL.\n\n",
		len(rows), counts[statusPass], counts[statusExpected], counts[statusUnsupported], counts[statusNotTrained], counts[statusInvalid], counts[statusFail])
	b.WriteString("| config | kind | status | reason |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Config, r.Kind, r.Status, strings.ReplaceAll(r.Reason, "|", "\\|"))
	}
	_ = gpuMode
	return b.String()
}

// TestConformanceHarness runs the harness on reference models written as
// graph JSON (so it runs without the shared fixtures): they pass, and a
// snapshot whose dense weights moved by 1e-6 relative between save and
// reload is caught.
func TestConformanceHarness(t *testing.T) {
	if os.Getenv(conformanceChildEnv) != "" {
		t.Skip("child process")
	}
	dir := t.TempDir()
	for _, name := range []string{"dcn", "deepfm"} {
		cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: []int64{50, 30, 20}, VecSize: 4, Width: 1.0 / 64})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".json")
		if err := cfg.Graph.WriteFile(path, graph.WriteOptions{Optimizer: cfg.Optimizer}); err != nil {
			t.Fatal(err)
		}
		if row := runConformance(t, path, false, nil); row.Kind != kindGraph || row.Status != statusPass {
			t.Errorf("%s: %+v", name, row)
		}
		nudge := func(prefix string) error {
			p := SnapshotFiles(prefix, confSteps, 1).Dense
			v, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for i := 0; i+4 <= len(v); i += 4 {
				f := math.Float32frombits(binary.LittleEndian.Uint32(v[i:]))
				binary.LittleEndian.PutUint32(v[i:], math.Float32bits(f*(1+1e-6)))
			}
			return os.WriteFile(p, v, 0o644)
		}
		row := runConformance(t, path, false, nudge)
		t.Logf("%s nudged: %s", name, row.Reason)
		if row.Status != statusFail || !strings.Contains(row.Reason, "differ") {
			t.Errorf("%s with nudged weights: %+v", name, row)
		}
	}
	if row := runConformance(t, filepath.Join("testdata", "no-such.json"), false, nil); row.Status != statusFail {
		t.Errorf("missing file: %+v", row)
	}
}

// inferTolerance bounds the difference between an inference graph's
// Sigmoid (float32, on the backend) and the trained model's σ (float64 on
// the host, rounded to float32).
const inferTolerance = 1e-6

// closePredictions compares two prediction files value by value within
// tol; "" when they agree.
func closePredictions(got, want string, tol float64) string {
	gl, wl := strings.Fields(got), strings.Fields(want)
	if len(gl) != len(wl) || len(gl) == 0 {
		return fmt.Sprintf("%d values, trained model %d", len(gl), len(wl))
	}
	for i := range gl {
		g, err1 := strconv.ParseFloat(gl[i], 64)
		w, err2 := strconv.ParseFloat(wl[i], 64)
		if err1 != nil || err2 != nil || !(math.Abs(g-w) <= tol) {
			return fmt.Sprintf("value %d: %s, trained model %s", i, gl[i], wl[i])
		}
	}
	return ""
}

// TestConformanceInference runs the harness on the shared inference graphs
// (skipped without them): each is trained as its training twin, reloaded
// as itself with the saved weights and predicts what the twin predicts.
func TestConformanceInference(t *testing.T) {
	if os.Getenv(conformanceChildEnv) != "" {
		t.Skip("child process")
	}
	dir := "../../../shared/data/hugectr-json"
	for _, name := range []string{"v23.09.00/test/scripts/dcn_inference.json", "v23.09.00/test/utest/simple_inference_config.json"} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err != nil {
			t.Skipf("no shared HugeCTR configs: %v", err)
		}
		row := runConformance(t, path, false, nil)
		t.Logf("%s: %s (%s)", name, row.Status, row.Reason)
		if row.Kind != kindInference || row.Status != statusPass {
			t.Errorf("%s: %+v", name, row)
		}
	}
}
