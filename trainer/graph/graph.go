package graph

// Graph is a model's network: HugeCTR's Input, SparseEmbeddings and
// DenseLayers in the order graph_to_json writes them.
type Graph struct {
	// ModelName is written as "model_name" when not empty.
	ModelName  string
	Input      Input
	Embeddings []SparseEmbedding
	Layers     []DenseLayer
}

// Input is HugeCTR's hugectr.Input (the graph's "Data" entry).
type Input struct {
	// LabelTops and LabelDims are parallel: one entry per label tensor.
	// Several labels are written in alphabetical order of their names.
	LabelTops []string
	LabelDims []int
	DenseTop  string
	DenseDim  int
	Sparse    []SparseParam
}

// SparseParam is HugeCTR's DataReaderSparseParam: one sparse input of
// SlotNum slots.
type SparseParam struct {
	Top           string
	SlotNum       int
	NNZPerSlot    []int // len SlotNum
	IsFixedLength bool
	// MaxFeatureNum bounds the keys per sample (≤ v3.0 configs'
	// max_feature_num_per_sample); 0 means Σ NNZPerSlot.
	MaxFeatureNum int
}

// MaxFeatures is the most keys one sample holds in this input.
func (s SparseParam) MaxFeatures() int {
	if s.MaxFeatureNum > 0 {
		return s.MaxFeatureNum
	}
	n := 0
	for _, v := range s.NNZPerSlot {
		n += v
	}
	return n
}

// Embedding types (graph JSON "type" of a sparse embedding entry).
const (
	DistributedHash = "DistributedSlotSparseEmbeddingHash"
	LocalizedHash   = "LocalizedSlotSparseEmbeddingHash"
	LocalizedOneHot = "LocalizedSlotSparseEmbeddingOneHot"
	Hybrid          = "HybridSparseEmbedding"
)

// SparseEmbedding is HugeCTR's hugectr.SparseEmbedding.
type SparseEmbedding struct {
	Type     string // DistributedHash, LocalizedHash, LocalizedOneHot, Hybrid
	Bottom   string // a SparseParam's Top
	Top      string
	VecSize  int
	Combiner string // "sum" or "mean"
	// WorkspaceMB is workspace_size_per_gpu_in_mb.
	WorkspaceMB int64
	// MaxVocabPerGPU is the ≤ v3.0 max_vocabulary_size_per_gpu (0 if absent).
	MaxVocabPerGPU int64
	// MaxVocabGlobal is max_vocabulary_size_global as read (derived data;
	// the writer recomputes it, see WriteOptions.GPUs).
	MaxVocabGlobal int64
	SlotSizeArray  []int64
	// DefaultEmbVecValue is the inference-only default_emb_vec_value (nil
	// when absent; never written).
	DefaultEmbVecValue *float64
	// Optimizer is the embedding's own optimizer; nil uses the model's.
	Optimizer *Optimizer
	// Hybrid holds HybridSparseEmbedding's extra hyper-parameters.
	Hybrid *HybridParams
}

// OneHot reports whether e is a one-hot table sized by slot_size_array:
// LocalizedSlotSparseEmbeddingOneHot, and HybridSparseEmbedding, which on
// one device is the same table (its frequent/infrequent split only
// changes how a multi-GPU model communicates; its parameters are kept).
func (e *SparseEmbedding) OneHot() bool { return e.Type == LocalizedOneHot || e.Type == Hybrid }

// HybridParams are HybridSparseEmbedding's hyper-parameters (v23.09).
type HybridParams struct {
	MaxNumFrequentCategories uint64
	MaxNumInfrequentSamples  int64
	PDupMax                  float64
	MaxAllReduceBandwidth    float64
	MaxAllToAllBandwidth     float64
	EfficiencyBandwidthRatio float64
	CommunicationType        string
	HybridEmbeddingType      string
}

// StateCopies is HugeCTR's per-weight optimizer state count c used in the
// vocabulary formula: Adam 2 (+1 LazyGlobal), Ftrl 2, AdaGrad, MomentumSGD,
// Nesterov, RMSProp 1, SGD 0.
func (o *Optimizer) StateCopies() int {
	switch o.Type {
	case "Adam":
		if o.UpdateType == "LazyGlobal" {
			return 3
		}
		return 2
	case "Ftrl":
		return 2
	case "AdaGrad", "MomentumSGD", "Nesterov", "RMSProp":
		return 1
	}
	return 0
}

// VocabPerGPU is HugeCTR's max_vocabulary_size_per_gpu:
// floor(WorkspaceMB·2²⁰ / ((1+c)·4·VecSize)), or MaxVocabPerGPU when the
// file gave it (≤ v3.0).
func (e *SparseEmbedding) VocabPerGPU(opt *Optimizer) int64 {
	if e.MaxVocabPerGPU > 0 {
		return e.MaxVocabPerGPU
	}
	if e.VecSize <= 0 {
		return 0
	}
	c := 0
	if opt != nil {
		c = opt.StateCopies()
	}
	return e.WorkspaceMB << 20 / (int64(1+c) * 4 * int64(e.VecSize))
}

// Optimizer is HugeCTR's CreateOptimizer: a type, an update type and the
// type's hyper-parameters (float32, as HugeCTR stores them). The learning
// rate and its schedule appear only in full JSON configs.
type Optimizer struct {
	Type       string // Adam, AdaGrad, MomentumSGD, Nesterov, SGD, Ftrl, RMSProp
	UpdateType string // Global, Local, LazyGlobal

	Beta1, Beta2, Epsilon  float32 // Adam (Epsilon also AdaGrad)
	InitialAccuValue       float32 // AdaGrad
	MomentumFactor         float32 // MomentumSGD, Nesterov
	AtomicUpdate           bool    // SGD
	Beta, Lambda1, Lambda2 float32 // Ftrl

	// Learning rate and schedule (full configs; 0 = not given).
	LearningRate float32
	WarmupSteps  int64
	DecayStart   int64
	DecaySteps   int64
	DecayPower   float32
	EndLR        float32
}

// DefaultOptimizer is HugeCTR's CreateOptimizer() default: Adam, Global,
// β1 0.9, β2 0.999, ε 1e-7, lr 0.001.
func DefaultOptimizer() *Optimizer {
	return &Optimizer{Type: "Adam", UpdateType: "Global", Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7,
		InitialAccuValue: 0, MomentumFactor: 0, AtomicUpdate: true, LearningRate: 0.001}
}

// Layer types of the dense network (graph JSON "type").
const (
	InnerProduct              = "InnerProduct"
	FusedInnerProduct         = "FusedInnerProduct"
	MLP                       = "MLP"
	ReLU                      = "ReLU"
	Sigmoid                   = "Sigmoid"
	Cast                      = "Cast"
	Dropout                   = "Dropout"
	ELU                       = "ELU"
	PReLUDice                 = "PReLU_Dice"
	BatchNorm                 = "BatchNorm"
	LayerNorm                 = "LayerNorm"
	Concat                    = "Concat"
	Reshape                   = "Reshape"
	Slice                     = "Slice"
	Interaction               = "Interaction"
	MultiCross                = "MultiCross"
	WeightMultiply            = "WeightMultiply"
	FmOrder2                  = "FmOrder2"
	ReduceSum                 = "ReduceSum"
	ReduceMean                = "ReduceMean"
	Add                       = "Add"
	ElementwiseMultiply       = "ElementwiseMultiply"
	Sub                       = "Sub"
	MatrixMultiply            = "MatrixMultiply"
	Softmax                   = "Softmax"
	Scale                     = "Scale"
	Gather                    = "Gather"
	GRU                       = "GRU"
	MultiHeadAttention        = "MultiHeadAttention"
	SequenceMask              = "SequenceMask"
	FusedReshapeConcat        = "FusedReshapeConcat"
	FusedReshapeConcatGeneral = "FusedReshapeConcatGeneral"
	BinaryCrossEntropyLoss    = "BinaryCrossEntropyLoss"
	CrossEntropyLoss          = "CrossEntropyLoss"
	MultiCrossEntropyLoss     = "MultiCrossEntropyLoss"
)

// layerTypes are the types the reader accepts (the union of HugeCTR's fp32
// and mixed-precision maps).
var layerTypes = map[string]bool{
	InnerProduct: true, FusedInnerProduct: true, MLP: true, ReLU: true, Sigmoid: true,
	Cast: true, Dropout: true, ELU: true, PReLUDice: true, BatchNorm: true, LayerNorm: true,
	Concat: true, Reshape: true, Slice: true, Interaction: true, MultiCross: true,
	WeightMultiply: true, FmOrder2: true, ReduceSum: true, ReduceMean: true, Add: true,
	ElementwiseMultiply: true, Sub: true, MatrixMultiply: true, Softmax: true, Scale: true,
	Gather: true, GRU: true, MultiHeadAttention: true, SequenceMask: true,
	FusedReshapeConcat: true, FusedReshapeConcatGeneral: true,
	BinaryCrossEntropyLoss: true, CrossEntropyLoss: true, MultiCrossEntropyLoss: true,
}

// legacyTypes maps retired layer names to their successors.
var legacyTypes = map[string]string{"Multiply": WeightMultiply, "DotProduct": ElementwiseMultiply}

// IsLoss reports whether t is a loss layer type.
func IsLoss(t string) bool {
	return t == BinaryCrossEntropyLoss || t == CrossEntropyLoss || t == MultiCrossEntropyLoss
}

// DenseLayer is HugeCTR's hugectr.DenseLayer: a type, its input and output
// tensor names, and the parameters of that type (the others stay zero).
type DenseLayer struct {
	Type   string
	Bottom []string
	Top    []string

	// InnerProduct, FusedInnerProduct, MLP (fc_param / mlp_param).
	NumOutput int
	// Initializers: "" is Default (omitted), else Uniform, XavierNorm,
	// XavierUniform, Zero.
	WeightInit, BiasInit, GammaInit, BetaInit string
	// FusedInnerProduct.
	Position, Activation string
	// MLP.
	NumOutputs  []int
	UseBias     *bool
	Biases      []bool
	MLPAct      string
	Activations []string

	Rate   float32 // Dropout
	Alpha  float32 // ELU, PReLU_Dice
	Eps    float32 // BatchNorm, LayerNorm, PReLU_Dice
	Factor float32 // BatchNorm, Softmax, Scale
	Axis   int     // Concat, ReduceSum, ReduceMean, Scale

	// Reshape: Selected slots, or LeadingDim and TimeStep.
	Selected   []int
	LeadingDim int
	TimeStep   int

	Ranges [][2]int // Slice

	NumLayers     int // MultiCross
	ProjectionDim int // MultiCross (0: DCN v1)

	WeightDims []int // WeightMultiply [d0, d1]
	OutDim     int   // FmOrder2
	Indices    []int // Gather

	// GRU.
	GRUBatchSize, SeqLength, VectorSize int

	NumAttentionHeads int  // MultiHeadAttention
	TransposeB        bool // MultiHeadAttention

	MaxSeqLenFrom, MaxSeqLenTo int // SequenceMask

	// Losses.
	Regularizer  string // "", "L1", "L2"
	Lambda       float32
	TargetWeight []float32
}
