package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/ctrkit/ctrkit/internal/suggest"
)

// MaxSlots bounds slot_num of one sparse input (HugeCTR's largest models
// have a few hundred slots); it keeps a hostile file from sizing huge arrays.
const MaxSlots = 1 << 16

// maxFileSize bounds a model description file (HugeCTR's largest is a few
// KiB; a graph with thousands of layers stays far below this).
const maxFileSize = 64 << 20

// ReadFile reads a model description (graph JSON or JSON config) from path.
func ReadFile(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads a model description from r; name is used in errors.
func Read(r io.Reader, name string) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading model description %s: %w", name, err)
	}
	if len(data) > maxFileSize {
		return nil, errorf(name, "", ErrValue, "file larger than %d bytes", maxFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var top any
	if err := dec.Decode(&top); err != nil {
		off := int64(len(data))
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// Offset is just past the offending byte.
			off = max(se.Offset-1, 0)
		}
		line, col := lineCol(data, off)
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			msg = "unexpected end of file"
		}
		return nil, errorf(name, "", ErrSyntax, "line %d, column %d (byte offset %d): JSON syntax error: %s", line, col, off, msg)
	}
	if dec.More() {
		line, col := lineCol(data, dec.InputOffset())
		return nil, errorf(name, "", ErrSyntax, "line %d, column %d (byte offset %d): data after the top-level value", line, col, dec.InputOffset())
	}
	rr := newRd(name)
	root := node{r: rr}
	m, ok := top.(map[string]any)
	if !ok {
		return nil, errorf(name, "", ErrType, "top level: want object, have %s", typeName(top))
	}
	root.m = m
	if !root.has("layers") {
		return nil, errorf(name, "layers", ErrMissing, "not a model description: no \"layers\" array")
	}
	cfg := &Config{Graph: &Graph{}}
	cfg.Graph.ModelName = root.optStr("model_name", "")
	if s, ok := root.optObj("solver"); ok {
		cfg.Solver = readSolver(s)
	}
	if o, ok := root.optObj("optimizer"); ok {
		cfg.Optimizer = readOptimizer(o, true)
	}
	if inf, ok := root.optObj("inference"); ok {
		cfg.Inference = readInference(inf)
	}
	root.accept("all_reduce")
	if ar, ok := root.optObj("all_reduce"); ok {
		// Multi-GPU all-reduce tuning: no effect on one device.
		ar.oneOf("algo", ar.optStr("algo", "Oneshot"), "Oneshot", "NCCL")
		ar.optBool("grouped", false)
	}
	readLayers(root, cfg)
	if rr.err == nil {
		rr.checkUnknown("", top)
	}
	if rr.err != nil {
		return nil, rr.err
	}
	return cfg, nil
}

func readLayers(root node, cfg *Config) {
	layers := root.arr("layers")
	if root.r.err != nil {
		return
	}
	if len(layers) == 0 {
		root.r.fail("layers", ErrValue, "empty layers array")
		return
	}
	g := cfg.Graph
	data := root.asObj("layers[0]", layers[0])
	if t := data.str("type"); t != "Data" && root.r.err == nil {
		data.r.fail(data.at("type"), ErrValue, "first layer must be Data, have %q", t)
		return
	}
	g.Input, cfg.Reader = readData(data)
	i := 1
	for ; i < len(layers) && root.r.err == nil; i++ {
		n := root.asObj(idx("layers", i), layers[i])
		t, _ := n.val("type").(string)
		if !isEmbedding(t) {
			break
		}
		g.Embeddings = append(g.Embeddings, readEmbedding(n))
	}
	for ; i < len(layers) && root.r.err == nil; i++ {
		n := root.asObj(idx("layers", i), layers[i])
		g.Layers = append(g.Layers, readDense(n))
	}
}

func isEmbedding(t string) bool {
	return t == DistributedHash || t == LocalizedHash || t == LocalizedOneHot || t == Hybrid
}

func readData(n node) (Input, *ReaderParams) {
	var in Input
	n.accept("name")
	lab := n.obj("label")
	switch v := lab.val("top").(type) {
	case []any:
		in.LabelTops = lab.strList(lab.at("top"), v)
		in.LabelDims = lab.counts("label_dim")
		if len(in.LabelDims) != len(in.LabelTops) {
			n.r.fail(lab.at("label_dim"), ErrValue, "%d label dims for %d label names", len(in.LabelDims), len(in.LabelTops))
		}
	default:
		// ≤ v3.0 inference configs name no label tensor.
		in.LabelTops = []string{lab.optStr("top", "label")}
		in.LabelDims = []int{lab.count("label_dim")}
	}
	den := n.obj("dense")
	in.DenseTop = den.str("top")
	in.DenseDim = den.count("dense_dim")
	for i, v := range n.arr("sparse") {
		s := n.asObj(idx(n.at("sparse"), i), v)
		sp := SparseParam{Top: s.str("top"), SlotNum: s.count("slot_num")}
		if sp.SlotNum == 0 || sp.SlotNum > MaxSlots {
			s.r.fail(s.at("slot_num"), ErrValue, "slot_num %d not in [1, %d]", sp.SlotNum, MaxSlots)
			sp.SlotNum = 0
		}
		sp.IsFixedLength = s.optBool("is_fixed_length", false)
		switch {
		case s.has("nnz_per_slot"):
			nnz := s.counts("nnz_per_slot")
			if len(nnz) == 1 && sp.SlotNum > 1 {
				if _, scalar := s.val("nnz_per_slot").([]any); scalar && s.r.err == nil {
					s.r.fail(s.at("nnz_per_slot"), ErrValue, "nnz_per_slot.size() != slot_num (1 != %d)", sp.SlotNum)
				}
				for len(nnz) < sp.SlotNum {
					nnz = append(nnz, nnz[0])
				}
			}
			if len(nnz) != sp.SlotNum && s.r.err == nil {
				s.r.fail(s.at("nnz_per_slot"), ErrValue, "nnz_per_slot.size() != slot_num (%d != %d)", len(nnz), sp.SlotNum)
			}
			sp.NNZPerSlot = nnz
		case s.has("max_feature_num_per_sample"):
			// ≤ v3.0: a per-sample budget and an optional per-slot cap.
			sp.MaxFeatureNum = s.count("max_feature_num_per_sample")
			per := s.optCount("max_nnz", sp.MaxFeatureNum)
			sp.NNZPerSlot = make([]int, sp.SlotNum)
			for j := range sp.NNZPerSlot {
				sp.NNZPerSlot[j] = per
			}
		default:
			s.missing("nnz_per_slot")
		}
		if t := s.optStr("type", "DistributedSlot"); s.r.err == nil {
			s.oneOf("type", t, "DistributedSlot", "LocalizedSlot")
		}
		in.Sparse = append(in.Sparse, sp)
	}
	reader := false
	for _, k := range []string{"format", "source", "eval_source", "check", "slot_size_array", "num_samples",
		"eval_num_samples", "float_label_dense", "num_workers", "cache_eval_data", "async_param"} {
		reader = n.has(k) || reader
	}
	if !reader {
		return in, nil
	}
	rp := &ReaderParams{Format: n.optStr("format", "Norm"), Check: n.optStr("check", "Sum")}
	n.oneOf("format", rp.Format, "Norm", "Raw", "Parquet", "RawAsync")
	n.oneOf("check", rp.Check, "Sum", "None")
	if n.has("source") {
		rp.Source = n.strList(n.at("source"), n.val("source"))
	}
	rp.EvalSource = n.optStr("eval_source", "")
	if n.has("slot_size_array") {
		rp.SlotSizeArray = n.ints("slot_size_array")
	}
	rp.NumSamples = n.optInt64("num_samples", 0)
	rp.EvalNumSamples = n.optInt64("eval_num_samples", 0)
	rp.FloatLabelDense = n.optBool("float_label_dense", false)
	rp.NumWorkers = n.optCount("num_workers", 0)
	rp.CacheEvalData = n.optCount("cache_eval_data", 0)
	rp.DenseAligned = den.optStr("aligned", "")
	if a, ok := n.optObj("async_param"); ok {
		rp.Async = &AsyncParams{
			NumThreads: a.optCount("num_threads", 0), NumBatchesPerThread: a.optCount("num_batches_per_thread", 0),
			ShuffleFiles: a.optBool("shuffle", false), IODepth: a.optCount("io_depth", 0),
			IOAlignment: a.optCount("io_alignment", 0), MultiHotReader: a.optBool("multi_hot_reader", false),
			IsDenseFloat: a.optBool("is_dense_float", false),
		}
		rp.Async.IsDenseFloatSet = a.has("is_dense_float")
		rp.Async.MultiHotReaderSet = a.has("multi_hot_reader")
		rp.Async.IOBlockSize = a.optCount("io_block_size", 0)
		n.optCount("num_iterations_statistics", 20)
	}
	return in, rp
}

func readEmbedding(n node) SparseEmbedding {
	e := SparseEmbedding{Type: n.str("type"), Bottom: firstName(n, "bottom"), Top: firstName(n, "top")}
	n.accept("name")
	h := n.obj("sparse_embedding_hparam")
	e.VecSize = h.count("embedding_vec_size")
	if n.r.err == nil && (e.VecSize == 0 || e.VecSize > 1024) {
		h.r.fail(h.at("embedding_vec_size"), ErrValue, "embedding_vec_size %d not in [1, 1024]", e.VecSize)
	}
	switch c := h.val("combiner").(type) {
	case string:
		e.Combiner = c
		h.oneOf("combiner", c, "sum", "mean")
	case json.Number:
		switch h.int64("combiner") {
		case 0:
			e.Combiner = "sum"
		case 1:
			e.Combiner = "mean"
		default:
			h.r.fail(h.at("combiner"), ErrValue, "combiner %s is not 0 (sum) or 1 (mean)", c)
		}
	case nil:
		h.missing("combiner")
	default:
		h.wrong(h.at("combiner"), "string", c)
	}
	e.WorkspaceMB = h.optInt64("workspace_size_per_gpu_in_mb", 0)
	e.MaxVocabPerGPU = h.optInt64("max_vocabulary_size_per_gpu", 0)
	e.MaxVocabGlobal = h.optInt64("max_vocabulary_size_global", 0)
	if h.has("slot_size_array") {
		e.SlotSizeArray = h.ints("slot_size_array")
		for i, s := range e.SlotSizeArray {
			if s < 0 {
				h.r.fail(idx(h.at("slot_size_array"), i), ErrValue, "negative slot size %d", s)
			}
		}
	}
	if e.WorkspaceMB < 0 || e.MaxVocabPerGPU < 0 || e.WorkspaceMB > 1<<30 || e.MaxVocabPerGPU > 1<<40 {
		h.r.fail(h.path, ErrValue, "vocabulary size out of range (workspace %d MB, %d rows)", e.WorkspaceMB, e.MaxVocabPerGPU)
	}
	if !h.has("workspace_size_per_gpu_in_mb") && !h.has("max_vocabulary_size_per_gpu") && len(e.SlotSizeArray) == 0 {
		h.missing("workspace_size_per_gpu_in_mb")
	}
	if (e.Type == LocalizedOneHot || e.Type == Hybrid) && len(e.SlotSizeArray) == 0 {
		h.missing("slot_size_array")
	}
	if h.has("default_emb_vec_value") {
		v := h.float("default_emb_vec_value")
		e.DefaultEmbVecValue = &v
	}
	if e.Type == Hybrid {
		e.Hybrid = &HybridParams{
			MaxNumFrequentCategories: uint64(h.optInt64("max_num_frequent_categories", 1)),
			MaxNumInfrequentSamples:  h.optInt64("max_num_infrequent_samples", -1),
			PDupMax:                  h.optFloat("p_dup_max", 0.01),
			MaxAllReduceBandwidth:    h.optFloat("max_all_reduce_bandwidth", 1.3e11),
			MaxAllToAllBandwidth:     h.optFloat("max_all_to_all_bandwidth", 1.9e11),
			EfficiencyBandwidthRatio: h.optFloat("efficiency_bandwidth_ratio", 1.0),
			CommunicationType:        h.optStr("communication_type", "IB_NVLink"),
			HybridEmbeddingType:      h.optStr("hybrid_embedding_type", "Distributed"),
		}
		// Statistics warm-up of the frequent-category search: tuning only.
		h.optCount("num_iterations_statistics", 20)
	}
	if o, ok := n.optObj("optimizer"); ok {
		e.Optimizer = readOptimizer(o, false)
	}
	return e
}

// firstName reads a bottom/top that must name exactly one tensor.
func firstName(n node, k string) string {
	s := n.names(k)
	if len(s) != 1 {
		if n.r.err == nil {
			n.r.fail(n.at(k), ErrValue, "want one tensor name, have %d", len(s))
		}
		return ""
	}
	return s[0]
}

var hparamKeys = map[string]string{
	"Adam": "adam_hparam", "AdaGrad": "adagrad_hparam", "MomentumSGD": "momentum_sgd_hparam",
	"Nesterov": "nesterov_hparam", "SGD": "sgd_hparam", "Ftrl": "ftrl_hparam", "RMSProp": "rmsprop_hparam",
}

func readOptimizer(n node, model bool) *Optimizer {
	d := DefaultOptimizer()
	o := &Optimizer{Type: n.str("type"), Beta1: d.Beta1, Beta2: d.Beta2, Epsilon: d.Epsilon}
	n.oneOf("type", o.Type, "Adam", "AdaGrad", "MomentumSGD", "Nesterov", "SGD", "Ftrl", "RMSProp")
	switch {
	case n.has("update_type"):
		o.UpdateType = n.str("update_type")
		n.oneOf("update_type", o.UpdateType, "Global", "Local", "LazyGlobal")
	case n.has("global_update"):
		o.UpdateType = "Local"
		if n.optBool("global_update", false) {
			o.UpdateType = "Global"
		}
	default:
		o.UpdateType = "Global"
	}
	if o.Type == "AdaGrad" {
		o.Epsilon = 1e-7
	}
	hk := hparamKeys[o.Type]
	for t, k := range hparamKeys {
		if t != o.Type && n.has(k) && n.r.err == nil {
			n.r.fail(n.at(k), ErrValue, "%s given, but the optimizer type is %s (its parameters are %s)", k, o.Type, hk)
		}
	}
	h, ok := n.optObj(hk)
	if !ok {
		return o
	}
	switch o.Type {
	case "Adam":
		o.Beta1 = h.optF32("beta1", o.Beta1)
		o.Beta2 = h.optF32("beta2", o.Beta2)
		o.Epsilon = h.optF32("epsilon", o.Epsilon)
	case "AdaGrad":
		o.InitialAccuValue = h.optF32("initial_accu_value", 0)
		o.Epsilon = h.optF32("epsilon", o.Epsilon)
	case "MomentumSGD", "Nesterov":
		o.MomentumFactor = h.optF32("momentum_factor", 0)
	case "SGD":
		o.AtomicUpdate = h.optBool("atomic_update", true)
	case "Ftrl":
		o.Beta = h.optF32("beta", 0)
		o.Lambda1 = h.optF32("lambda1", 0)
		o.Lambda2 = h.optF32("lambda2", 0)
	}
	o.LearningRate = h.optF32("learning_rate", 0)
	o.WarmupSteps = h.optInt64("warmup_steps", 0)
	o.DecayStart = h.optInt64("decay_start", 0)
	o.DecaySteps = h.optInt64("decay_steps", 0)
	o.DecayPower = h.optF32("decay_power", 0)
	o.EndLR = h.optF32("end_lr", 0)
	_ = model
	return o
}

func readSolver(n node) *Solver {
	s := DefaultSolver()
	s.BatchSize = n.optCount("batchsize", s.BatchSize)
	s.BatchSizeEval = n.optCount("batchsize_eval", s.BatchSize)
	s.MaxEvalBatches = n.optCount("max_eval_batches", n.optCount("eval_batches", s.MaxEvalBatches))
	s.MaxEvalSamples = n.optCount("max_eval_samples", 0)
	s.MaxIter = n.optCount("max_iter", 0)
	s.NumEpochs = n.optCount("num_epochs", 0)
	if n.has("max_iter") && n.has("num_epochs") && n.r.err == nil {
		n.r.fail(n.at("num_epochs"), ErrValue, "max_iter and num_epochs cannot be used together")
	}
	if n.has("max_eval_batches") && n.has("max_eval_samples") && n.r.err == nil {
		n.r.fail(n.at("max_eval_samples"), ErrValue, "max_eval_batches and max_eval_samples cannot be used together")
	}
	if n.has("mixed_precision") && n.has("enable_tf32_compute") && n.r.err == nil {
		n.r.fail(n.at("enable_tf32_compute"), ErrValue, "mixed_precision and enable_tf32_compute cannot be used together")
	}
	// Multi-node device order and CUDA execution switches: they change
	// how HugeCTR schedules work, not what it computes.
	if n.has("device_layout") {
		n.oneOf("device_layout", n.str("device_layout"), "LocalFirst", "NodeFirst")
	}
	for _, k := range []string{"enable_overlap", "holistic_cuda_graph"} {
		n.optBool(k, false)
	}
	// algorithm_search and cuda_graph (HugeCTR's defaults true): the GPU
	// backend's cuBLASLt algorithm search and the training step's CUDA graph.
	s.NoAlgorithmSearch = !n.optBool("algorithm_search", true)
	s.CUDAGraph = n.optBool("cuda_graph", true)
	s.Display = n.optCount("display", s.Display)
	s.EvalInterval = n.optCount("eval_interval", s.EvalInterval)
	s.Snapshot = n.optCount("snapshot", 0)
	s.SnapshotPrefix = n.optStr("snapshot_prefix", "")
	s.Seed = uint64(n.optInt64("seed", 0))
	s.LRPolicy = n.optStr("lr_policy", "fixed")
	n.oneOf("lr_policy", s.LRPolicy, "fixed")
	if n.has("gpu") {
		for i, v := range n.arr("gpu") {
			switch g := v.(type) {
			case []any:
				var dev []int
				for j, x := range g {
					dev = append(dev, gpuID(n, idx(idx(n.at("gpu"), i), j), x))
				}
				s.GPU = append(s.GPU, dev)
			default:
				if len(s.GPU) == 0 {
					s.GPU = [][]int{nil}
				}
				s.GPU[0] = append(s.GPU[0], gpuID(n, idx(n.at("gpu"), i), v))
			}
		}
	}
	if kt := n.optStr("input_key_type", "I32"); n.r.err == nil {
		n.oneOf("input_key_type", kt, "I32", "I64")
		s.I64InputKey = kt == "I64"
	}
	if n.has("mixed_precision") {
		s.UseMixedPrecision = true
		s.Scaler = n.float("mixed_precision")
		if !(s.Scaler > 0) || math.IsInf(s.Scaler, 0) {
			// The value is the static loss scale (docs/PRECISION.md); 0
			// would silently train unscaled fp16.
			n.r.fail(n.at("mixed_precision"), ErrValue, "mixed_precision %v: the loss scale must be > 0 (HugeCTR uses 128, 256, 512 or 1024)", s.Scaler)
		}
	}
	s.EnableTF32 = n.optBool("enable_tf32_compute", false)
	if n.has("eval_metrics") {
		s.EvalMetrics = n.strList(n.at("eval_metrics"), n.val("eval_metrics"))
		for i, m := range s.EvalMetrics {
			name, arg, hasArg := strings.Cut(m, ":")
			t := 1.0
			if hasArg {
				_, err := fmt.Sscan(arg, &t)
				if err != nil || t < 0 || (name != "AverageLoss" && t > 1) {
					n.r.fail(idx(n.at("eval_metrics"), i), ErrValue, "bad %s threshold %q (want a number in [0, 1])", name, arg)
				}
			}
			switch name {
			case "AUC":
				s.AUCThreshold = t
			case "HitRate":
				if hasArg {
					s.HitRateThreshold = t
				}
			case "AverageLoss":
				if hasArg {
					s.AverageLossThreshold = t
				}
			default:
				n.r.fail(idx(n.at("eval_metrics"), i), ErrValue, "unknown metric %q (want AUC, AverageLoss or HitRate, each with an optional :threshold)", m)
			}
		}
	}
	if n.has("auc_threshold") {
		s.AUCThreshold = n.float("auc_threshold")
	}
	s.DenseModelFile = n.optStr("dense_model_file", "")
	s.DenseOptStatesFile = n.optStr("dense_opt_states_file", "")
	if n.has("sparse_model_file") {
		s.SparseModelFiles = n.strList(n.at("sparse_model_file"), n.val("sparse_model_file"))
	}
	if n.has("sparse_opt_states_file") {
		s.SparseOptStatesFiles = n.strList(n.at("sparse_opt_states_file"), n.val("sparse_opt_states_file"))
	}
	s.ExportPredictionsPrefix = n.optStr("export_predictions_prefix", "")
	return s
}

// gpuID reads one device id of the solver's gpu list.
func gpuID(n node, path string, v any) int {
	id := n.numInt(path, v)
	if (id < 0 || id > 1<<16) && n.r.err == nil {
		n.r.fail(path, ErrValue, "gpu id %d out of range", id)
	}
	return int(id)
}

func readInference(n node) *Inference {
	inf := &Inference{
		MaxBatchSize:     n.optCount("max_batchsize", 0),
		HitRateThreshold: n.optFloat("hit_rate_threshold", 0),
		DenseModelFile:   n.optStr("dense_model_file", ""),
		MixedPrecision:   n.has("mixed_precision") && n.optFloat("mixed_precision", 0) != 0,
	}
	if n.has("sparse_model_file") {
		inf.SparseModelFiles = n.strList(n.at("sparse_model_file"), n.val("sparse_model_file"))
	}
	inf.I64InputKey = n.optStr("input_key_type", "I32") == "I64"
	return inf
}

// init reads an initializer key: HugeCTR's INITIALIZER_TYPE_MAP names, or
// "Default" (the Python enum's name for the omitted key), which reads as "".
func (n node) init(k string) string {
	if !n.has(k) {
		return ""
	}
	s := n.str(k)
	switch s {
	case "Default":
		return ""
	case "Uniform", "XavierNorm", "XavierUniform", "Zero":
		return s
	case "Sinusoidal":
		n.r.fail(n.at(k), ErrValue, "%s: initializer Sinusoidal fills embedding tables only; dense layers take Default, Uniform, XavierNorm, XavierUniform or Zero", n.r.layer)
	default:
		if n.r.err == nil {
			n.r.fail(n.at(k), ErrValue, "%s: unknown initializer %q (want Default, Uniform, XavierNorm, XavierUniform or Zero)", n.r.layer, s)
		}
	}
	return ""
}

func readDense(n node) DenseLayer {
	l := DenseLayer{Type: n.str("type")}
	n.accept("name")
	if t, ok := legacyTypes[l.Type]; ok {
		l.Type = t
	}
	if !layerTypes[l.Type] {
		if n.r.err == nil {
			n.r.fail(n.at("type"), ErrValue, "unknown layer type %q%s", l.Type, didYouMean(l.Type, knownLayerTypes()))
		}
		return l
	}
	l.Bottom = n.names("bottom")
	l.Top = n.names("top")
	n.r.layer = fmt.Sprintf("%s %s", l.Type, strings.Join(l.Top, ","))
	switch l.Type {
	case InnerProduct, FusedInnerProduct:
		p := n.obj("fc_param")
		l.NumOutput = p.count("num_output")
		l.WeightInit, l.BiasInit = p.init("weight_init"), p.init("bias_init")
		if l.Type == FusedInnerProduct {
			l.Position = n.optStr("position", "None")
			n.oneOf("position", l.Position, "None", "Head", "Body", "Tail", "Isolated")
			l.Activation = n.optStr("activation", "Relu")
			n.oneOf("activation", l.Activation, "Relu", "None", "Unspecified")
		}
	case MLP:
		p := n.obj("mlp_param")
		l.NumOutput = p.count("num_output")
		if p.has("num_outputs") {
			l.NumOutputs = p.counts("num_outputs")
		}
		if p.has("use_bias") {
			b := p.optBool("use_bias", true)
			l.UseBias = &b
		}
		if p.has("biases") {
			for i, v := range p.arr("biases") {
				b, ok := v.(bool)
				if !ok {
					p.wrong(idx(p.at("biases"), i), "bool", v)
				}
				l.Biases = append(l.Biases, b)
			}
		}
		l.MLPAct = p.optStr("activation", "")
		if p.has("activations") {
			l.Activations = p.strList(p.at("activations"), p.val("activations"))
		}
		l.WeightInit, l.BiasInit = p.init("weight_init"), p.init("bias_init")
	case Dropout:
		l.Rate = n.optF32("rate", 0.5)
		if l.Rate < 0 || l.Rate >= 1 {
			n.r.fail(n.at("rate"), ErrValue, "dropout rate %v not in [0, 1)", l.Rate)
		}
	case ELU:
		l.Alpha = n.obj("elu_param").f32("alpha")
	case PReLUDice:
		p := n.obj("prelu_dice_param")
		switch {
		case p.has("elu_alpha") && p.has("alpha"):
			// ctrkit's writer gives both (HugeCTR's writer and reader
			// disagree on the name); they must agree.
			l.Alpha = p.f32("elu_alpha")
			if a := p.f32("alpha"); a != l.Alpha && n.r.err == nil {
				n.r.fail(p.at("alpha"), ErrValue, "alpha %v and elu_alpha %v differ", a, l.Alpha)
			}
		case p.has("elu_alpha"):
			l.Alpha = p.f32("elu_alpha")
		default:
			l.Alpha = p.f32("alpha")
		}
		l.Eps = p.f32("eps")
	case BatchNorm:
		p := n.obj("bn_param")
		l.Factor, l.Eps = p.f32("factor"), p.f32("eps")
		l.GammaInit, l.BetaInit = p.init("gamma_init"), p.init("beta_init")
	case LayerNorm:
		p := n.obj("ln_param")
		l.Eps = p.f32("eps")
		l.GammaInit, l.BetaInit = p.init("gamma_init"), p.init("beta_init")
	case Concat:
		l.Axis = int(n.optInt64("axis", 1))
	case ReduceSum, ReduceMean:
		l.Axis = int(n.optInt64("axis", 1))
	case Reshape:
		if n.has("selected") {
			l.Selected = n.counts("selected")
		}
		if len(l.Selected) == 0 {
			l.LeadingDim = n.count("leading_dim")
			l.TimeStep = n.optCount("time_step", 0)
		}
	case Slice:
		for i, v := range n.arr("ranges") {
			p := idx(n.at("ranges"), i)
			a, ok := v.([]any)
			if !ok || len(a) != 2 {
				n.r.fail(p, ErrValue, "want a [start, end] pair")
				break
			}
			lo, hi := n.numInt(idx(p, 0), a[0]), n.numInt(idx(p, 1), a[1])
			if lo < 0 || hi <= lo || hi > 1<<31 {
				n.r.fail(p, ErrValue, "bad range [%d, %d]", lo, hi)
			}
			l.Ranges = append(l.Ranges, [2]int{int(lo), int(hi)})
		}
	case MultiCross:
		p := n.obj("mc_param")
		l.NumLayers = p.count("num_layers")
		l.ProjectionDim = p.optCount("projection_dim", 0)
		l.WeightInit, l.BiasInit = p.init("weight_init"), p.init("bias_init")
	case WeightMultiply:
		l.WeightDims = n.counts("weight_dims")
		if len(l.WeightDims) != 2 && n.r.err == nil {
			n.r.fail(n.at("weight_dims"), ErrValue, "weight_dims must have 2 entries, has %d", len(l.WeightDims))
		}
		l.WeightInit = n.init("weight_init")
	case FmOrder2:
		l.OutDim = n.count("out_dim")
	case Softmax:
		l.Factor = n.optF32("factor", 1)
	case Scale:
		p := n.obj("scale_param")
		l.Axis = int(p.float("axis"))
		l.Factor = p.f32("factor")
	case Gather:
		l.Indices = n.counts("indices")
	case GRU:
		p := n.obj("gru_param")
		l.NumOutput = p.count("num_output")
		l.GRUBatchSize = p.count("batchsize")
		l.SeqLength = p.count("SeqLength")
		l.VectorSize = p.count("vector_size")
		l.WeightInit, l.BiasInit = p.init("weight_init"), p.init("bias_init")
	case MultiHeadAttention:
		l.NumAttentionHeads = n.optCount("num_attention_heads", 1)
		l.TransposeB = n.optBool("transpose_b", false)
	case SequenceMask:
		l.MaxSeqLenFrom = n.count("max_sequence_len_from")
		l.MaxSeqLenTo = n.count("max_sequence_len_to")
	case BinaryCrossEntropyLoss, CrossEntropyLoss, MultiCrossEntropyLoss:
		if n.has("regularizer") {
			l.Regularizer = n.str("regularizer")
			n.oneOf("regularizer", l.Regularizer, "L1", "L2")
			l.Lambda = n.f32("lambda")
		}
		if l.Type == MultiCrossEntropyLoss && n.has("target_weight") {
			l.TargetWeight = n.f32s("target_weight")
		}
	}
	return l
}

// knownLayerTypes are the layer types a config may name (dense, embedding
// and legacy names), for did-you-mean hints.
func knownLayerTypes() []string {
	known := []string{DistributedHash, LocalizedHash, LocalizedOneHot, Hybrid}
	for t := range layerTypes {
		known = append(known, t)
	}
	for t := range legacyTypes {
		known = append(known, t)
	}
	sort.Strings(known) // (a tie goes to the same name every run)
	return known
}

// didYouMean is " (did you mean "x"?)" for the value of known nearest to
// s when it looks like a typo of it, else "".
func didYouMean(s string, known []string) string {
	if best, ok := suggest.Nearest(s, known); ok {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
