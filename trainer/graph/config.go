package graph

// Config is a full model description: the graph plus, when the file held
// them (HugeCTR's JSON configs), the solver, the model optimizer, the data
// reader settings and the inference settings. Sections a file lacks are nil;
// the caller supplies them (command-line flags, Python-style defaults).
type Config struct {
	Graph     *Graph
	Solver    *Solver
	Optimizer *Optimizer
	Reader    *ReaderParams
	Inference *Inference
}

// Solver holds HugeCTR's CreateSolver fields (and the JSON config "solver"
// section).
type Solver struct {
	BatchSize      int
	BatchSizeEval  int
	MaxEvalBatches int
	MaxEvalSamples int
	MaxIter        int
	NumEpochs      int
	Display        int
	EvalInterval   int
	Snapshot       int
	SnapshotPrefix string
	Seed           uint64
	LRPolicy       string
	GPU            [][]int
	I64InputKey    bool
	// EvalMetrics are "AUC:<threshold>", "AverageLoss", "HitRate".
	EvalMetrics []string
	// AUCThreshold stops training once eval AUC reaches it (0: never); from
	// "AUC:<t>" metrics ("AUC" alone: 1, as HugeCTR) or the test scripts'
	// auc_threshold.
	AUCThreshold float64
	// HitRateThreshold ("HitRate:<t>") stops training once the eval hit
	// rate reaches it and AverageLossThreshold ("AverageLoss:<t>") once the
	// eval loss falls to it (0: never). HugeCTR parses both and stops only
	// on AUC; ctrkit honours them and says so.
	HitRateThreshold, AverageLossThreshold float64
	// UseMixedPrecision with Scaler (the JSON "mixed_precision" scaler).
	UseMixedPrecision bool
	Scaler            float64
	EnableTF32        bool
	// BF16 trains in bfloat16 (Precision BF16): a ctrkit extension the
	// command line (--precision bf16, --bf16) and Python set; no JSON key
	// reads it.
	BF16 bool
	// ScalerSet says Scaler was given explicitly (--loss-scale): then it
	// scales the loss in every precision, not only with
	// UseMixedPrecision (LossScale).
	ScalerSet bool
	// NoAlgorithmSearch is algorithm_search false (HugeCTR's default is
	// true): the GPU's GEMMs then run cuBLASLt's heuristic's first choice
	// instead of timing its candidates once per shape.
	NoAlgorithmSearch bool
	RepeatDataset     bool
	// Files to start from.
	DenseModelFile          string
	DenseOptStatesFile      string
	SparseModelFiles        []string
	SparseOptStatesFiles    []string
	ExportPredictionsPrefix string
	// CUDAGraph is "cuda_graph" (HugeCTR's use_cuda_graph, default true):
	// train each step as a CUDA graph on the GPU.
	CUDAGraph bool
}

// DefaultSolver returns HugeCTR's CreateSolver defaults.
func DefaultSolver() *Solver {
	return &Solver{BatchSize: 2048, BatchSizeEval: 2048, MaxEvalBatches: 100, Display: 200,
		EvalInterval: 1000, Snapshot: 0, LRPolicy: "fixed", Scaler: 1, RepeatDataset: true, CUDAGraph: true}
}

// ReaderParams are HugeCTR's DataReaderParams (and the JSON config Data
// entry's reader keys).
type ReaderParams struct {
	Format          string // Norm, Raw, Parquet, RawAsync
	Source          []string
	EvalSource      string
	Check           string // Sum, None
	SlotSizeArray   []int64
	NumSamples      int64
	EvalNumSamples  int64
	FloatLabelDense bool
	NumWorkers      int
	CacheEvalData   int
	// Async holds RawAsync's async_param.
	Async *AsyncParams
	// DenseAligned is RawAsync's dense.aligned ("Auto", "None").
	DenseAligned string
}

// AsyncParams are HugeCTR's AsyncParam for the RawAsync reader.
type AsyncParams struct {
	NumThreads          int
	NumBatchesPerThread int
	ShuffleFiles        bool
	IODepth             int
	IOAlignment         int
	IOBlockSize         int
	MultiHotReader      bool
	IsDenseFloat        bool
	// MultiHotReaderSet and IsDenseFloatSet: the file gave the key.
	MultiHotReaderSet, IsDenseFloatSet bool
}

// Inference is the ≤ v3.x "inference" section of inference configs.
type Inference struct {
	MaxBatchSize     int
	HitRateThreshold float64
	DenseModelFile   string
	SparseModelFiles []string
	I64InputKey      bool
	MixedPrecision   bool
}
