package graph

import (
	"fmt"
	"math"
)

// RefOptions size a reference model (SPEC §9) to a dataset.
type RefOptions struct {
	DenseDim int
	// SlotSizes are the vocabulary sizes of the file's slots (WDL: slot 0
	// is the wide input, the rest the deep input).
	SlotSizes []int64
	// NNZ is the most keys per slot (default 1; WDL's wide slot: WideNNZ).
	NNZ, WideNNZ int
	// NNZPerSlot, when it has one entry per slot, gives each slot's most
	// keys instead of NNZ (multi-hot data such as MLPerf DCNv2's).
	NNZPerSlot []int
	// VecSize overrides the embedding width (DLRM 128, WDL/DCN 16, DeepFM
	// 11 = 10 + 1); it also sets DLRM's last bottom-MLP width.
	VecSize int
	// Width scales every hidden layer (0 or 1: the reference widths),
	// for small models on small machines.
	Width float64
	// EmbeddingType overrides DistributedHash.
	EmbeddingType string
	// WorkspaceMB overrides the per-embedding workspace (default: room for
	// Σ SlotSizes rows with the optimizer's state); with it, no
	// slot_size_array is recorded for hash embeddings.
	WorkspaceMB []int64
	// Optimizer overrides the reference optimizer.
	Optimizer *Optimizer
}

// ReferenceModels lists the names Reference accepts.
var ReferenceModels = []string{"dlrm", "wdl", "dcn", "dcnv2", "deepfm"}

// Reference builds one of HugeCTR's sample models (SPEC §9) for a dataset
// shaped by o, with its reference optimizer and solver (batch size
// included). Fan-out tensors get HugeCTR's automatic Slice layers.
func Reference(name string, o RefOptions) (*Config, error) {
	if len(o.SlotSizes) == 0 || o.DenseDim < 0 {
		return nil, fmt.Errorf("reference model %s needs slot sizes and a dense width", name)
	}
	if o.NNZ <= 0 {
		o.NNZ = 1
	}
	if len(o.NNZPerSlot) > 0 && len(o.NNZPerSlot) != len(o.SlotSizes) {
		return nil, fmt.Errorf("reference model %s: %d nnz values for %d slots", name, len(o.NNZPerSlot), len(o.SlotSizes))
	}
	if o.WideNNZ <= 0 {
		o.WideNNZ = o.NNZ
	}
	if o.Width <= 0 {
		o.Width = 1
	}
	w := func(n int) int { return max(1, int(math.Round(float64(n)*o.Width))) }
	b := &builder{o: o, cfg: &Config{Graph: &Graph{}, Solver: DefaultSolver()}}
	g := b.cfg.Graph
	g.Input = Input{LabelTops: []string{"label"}, LabelDims: []int{1}, DenseTop: "dense", DenseDim: o.DenseDim}
	slots := len(o.SlotSizes)
	adam := DefaultOptimizer()
	switch name {
	case "dlrm":
		vec := pick(o.VecSize, 128)
		sgd := &Optimizer{Type: "SGD", UpdateType: "Local", AtomicUpdate: true, LearningRate: 0.5, WarmupSteps: 300}
		b.cfg.Optimizer = sgd
		b.cfg.Solver.BatchSize = 65536
		b.sparse("data1", 0, slots, o.NNZ, o.NNZ == 1)
		b.emb("data1", "sparse_embedding1", vec, o.SlotSizes, 0)
		x := b.mlp(o.DenseTop(), 1, []int{w(512), w(256), vec}, true)
		b.add(DenseLayer{Type: Interaction, Bottom: []string{x, "sparse_embedding1"}, Top: []string{"interaction1"}})
		x = b.mlp("interaction1", 4, []int{w(1024), w(1024), w(512), w(256)}, true)
		b.fc(x, "fc8", 1)
		b.loss("fc8")
	case "wdl":
		if slots < 2 {
			return nil, fmt.Errorf("wdl needs a wide slot and deep slots, have %d slots", slots)
		}
		vec := pick(o.VecSize, 16)
		b.cfg.Optimizer = adam
		b.cfg.Solver.BatchSize = 16384
		b.sparse("wide_data", 0, 1, o.WideNNZ, true)
		b.sparse("deep_data", 1, slots-1, o.NNZ, o.NNZ == 1)
		b.emb("wide_data", "sparse_embedding2", 1, o.SlotSizes[:1], 0)
		b.emb("deep_data", "sparse_embedding1", vec, o.SlotSizes[1:], 1)
		b.add(DenseLayer{Type: Reshape, Bottom: []string{"sparse_embedding1"}, Top: []string{"reshape1"}, LeadingDim: (slots - 1) * vec})
		b.add(DenseLayer{Type: Reshape, Bottom: []string{"sparse_embedding2"}, Top: []string{"reshape2"}, LeadingDim: 1})
		b.add(DenseLayer{Type: Concat, Bottom: []string{"reshape1", "dense"}, Top: []string{"concat1"}, Axis: 1})
		x := b.deep("concat1", 1, 2, w(1024))
		b.fc(x, "fc3", 1)
		b.add(DenseLayer{Type: Add, Bottom: []string{"fc3", "reshape2"}, Top: []string{"add1"}})
		b.loss("add1")
	case "dcn":
		vec := pick(o.VecSize, 16)
		b.cfg.Optimizer = adam
		b.cfg.Solver.BatchSize = 16384
		b.sparse("data1", 0, slots, o.NNZ, o.NNZ == 1)
		b.emb("data1", "sparse_embedding1", vec, o.SlotSizes, 0)
		b.add(DenseLayer{Type: Reshape, Bottom: []string{"sparse_embedding1"}, Top: []string{"reshape1"}, LeadingDim: slots * vec})
		b.add(DenseLayer{Type: Concat, Bottom: []string{"reshape1", "dense"}, Top: []string{"concat1"}, Axis: 1})
		b.add(DenseLayer{Type: MultiCross, Bottom: []string{"concat1"}, Top: []string{"multicross1"}, NumLayers: 6})
		x := b.deep("concat1", 1, 2, w(1024))
		b.add(DenseLayer{Type: Concat, Bottom: []string{x, "multicross1"}, Top: []string{"concat2"}, Axis: 1})
		b.fc("concat2", "fc3", 1)
		b.loss("fc3")
	case "dcnv2":
		// MLPerf Training v3+ DLRM-DCNv2: 128-wide sum-pooled multi-hot
		// embeddings, bottom MLP 512-256-128, three low-rank (512) cross
		// layers over the concatenation, top MLP 1024-1024-512-256-1,
		// Adagrad lr 0.004 (HugeCTR's MLPerf configuration).
		vec := pick(o.VecSize, 128)
		b.cfg.Optimizer = &Optimizer{Type: "AdaGrad", UpdateType: "Global", LearningRate: 0.004, Epsilon: 1e-8}
		b.cfg.Solver.BatchSize = 65536
		b.sparse("data1", 0, slots, o.NNZ, false)
		b.emb("data1", "sparse_embedding1", vec, o.SlotSizes, 0)
		x := b.mlp(o.DenseTop(), 1, []int{w(512), w(256), vec}, true)
		b.add(DenseLayer{Type: Reshape, Bottom: []string{"sparse_embedding1"}, Top: []string{"reshape1"}, LeadingDim: slots * vec})
		b.add(DenseLayer{Type: Concat, Bottom: []string{x, "reshape1"}, Top: []string{"concat1"}, Axis: 1})
		b.add(DenseLayer{Type: MultiCross, Bottom: []string{"concat1"}, Top: []string{"multicross1"}, NumLayers: 3, ProjectionDim: w(512)})
		x = b.mlp("multicross1", 4, []int{w(1024), w(1024), w(512), w(256)}, true)
		b.fc(x, "fc8", 1)
		b.loss("fc8")
	case "deepfm":
		vec := pick(o.VecSize, 11)
		if vec < 2 {
			return nil, fmt.Errorf("deepfm needs an embedding width ≥ 2")
		}
		k := vec - 1
		b.cfg.Optimizer = adam
		b.cfg.Solver.BatchSize = 2048
		b.sparse("data1", 0, slots, o.NNZ, o.NNZ == 1)
		b.emb("data1", "sparse_embedding1", vec, o.SlotSizes, 0)
		b.add(DenseLayer{Type: Reshape, Bottom: []string{"sparse_embedding1"}, Top: []string{"reshape1"}, LeadingDim: vec})
		b.add(DenseLayer{Type: Slice, Bottom: []string{"reshape1"}, Top: []string{"slice11", "slice12"}, Ranges: [][2]int{{0, k}, {k, vec}}})
		b.add(DenseLayer{Type: Reshape, Bottom: []string{"slice11"}, Top: []string{"reshape2"}, LeadingDim: slots * k})
		b.add(DenseLayer{Type: Reshape, Bottom: []string{"slice12"}, Top: []string{"reshape3"}, LeadingDim: slots})
		b.add(DenseLayer{Type: WeightMultiply, Bottom: []string{"dense"}, Top: []string{"weight_multiply1"}, WeightDims: []int{o.DenseDim, k}})
		b.add(DenseLayer{Type: WeightMultiply, Bottom: []string{"dense"}, Top: []string{"weight_multiply2"}, WeightDims: []int{o.DenseDim, 1}})
		b.add(DenseLayer{Type: Concat, Bottom: []string{"reshape2", "weight_multiply1"}, Top: []string{"concat1"}, Axis: 1})
		x := b.deep("concat1", 1, 3, w(400))
		b.fc(x, "fc4", 1)
		b.add(DenseLayer{Type: FmOrder2, Bottom: []string{"concat1"}, Top: []string{"fmorder2"}, OutDim: k})
		b.add(DenseLayer{Type: ReduceSum, Bottom: []string{"fmorder2"}, Top: []string{"reducesum1"}, Axis: 1})
		b.add(DenseLayer{Type: Concat, Bottom: []string{"reshape3", "weight_multiply2"}, Top: []string{"concat2"}, Axis: 1})
		b.add(DenseLayer{Type: ReduceSum, Bottom: []string{"concat2"}, Top: []string{"reducesum2"}, Axis: 1})
		b.add(DenseLayer{Type: Add, Bottom: []string{"fc4", "reducesum1", "reducesum2"}, Top: []string{"add"}})
		b.loss("add")
	default:
		return nil, fmt.Errorf("unknown reference model %q (want one of %v)", name, ReferenceModels)
	}
	if o.Optimizer != nil {
		b.cfg.Optimizer = o.Optimizer
	}
	// Embedding workspaces depend on the final optimizer's state count.
	for i := range g.Embeddings {
		b.size(i)
	}
	b.cfg.Solver.BatchSizeEval = b.cfg.Solver.BatchSize
	if err := g.AutoSlice(b.cfg.Optimizer); err != nil {
		return nil, err
	}
	return b.cfg, nil
}

// DenseTop returns the name the reference models give the dense input.
func (RefOptions) DenseTop() string { return "dense" }

func pick(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

type builder struct {
	o   RefOptions
	cfg *Config
}

func (b *builder) add(l DenseLayer) { b.cfg.Graph.Layers = append(b.cfg.Graph.Layers, l) }

// sparse adds an input of the data's slots first..first+slots-1.
func (b *builder) sparse(top string, first, slots, nnz int, fixed bool) {
	s := SparseParam{Top: top, SlotNum: slots, NNZPerSlot: make([]int, slots), IsFixedLength: fixed}
	for i := range s.NNZPerSlot {
		s.NNZPerSlot[i] = nnz
	}
	if len(b.o.NNZPerSlot) == len(b.o.SlotSizes) && first+slots <= len(b.o.NNZPerSlot) {
		copy(s.NNZPerSlot, b.o.NNZPerSlot[first:first+slots])
		s.IsFixedLength = true
		for _, n := range s.NNZPerSlot {
			s.IsFixedLength = s.IsFixedLength && n == 1
		}
	}
	b.cfg.Graph.Input.Sparse = append(b.cfg.Graph.Input.Sparse, s)
}

func (b *builder) emb(bottom, top string, vec int, sizes []int64, i int) {
	t := b.o.EmbeddingType
	if t == "" {
		t = DistributedHash
	}
	e := SparseEmbedding{Type: t, Bottom: bottom, Top: top, VecSize: vec, Combiner: "sum",
		SlotSizeArray: append([]int64(nil), sizes...)}
	if i < len(b.o.WorkspaceMB) {
		e.WorkspaceMB = b.o.WorkspaceMB[i]
		if t != LocalizedOneHot {
			e.SlotSizeArray = nil
		}
	}
	b.cfg.Graph.Embeddings = append(b.cfg.Graph.Embeddings, e)
}

// size gives embedding i the smallest workspace holding its slot sizes.
func (b *builder) size(i int) {
	e := &b.cfg.Graph.Embeddings[i]
	if e.WorkspaceMB > 0 {
		return
	}
	var rows int64
	for _, s := range e.SlotSizeArray {
		rows += s
	}
	per := int64(1+b.cfg.Optimizer.StateCopies()) * 4 * int64(e.VecSize)
	e.WorkspaceMB = max(1, (rows*per+1<<20-1)>>20)
}

func (b *builder) fc(bottom, top string, n int) {
	b.add(DenseLayer{Type: InnerProduct, Bottom: []string{bottom}, Top: []string{top}, NumOutput: n})
}

// mlp adds fc<k>-relu<k> pairs numbered from first and returns the last top.
func (b *builder) mlp(x string, first int, widths []int, relu bool) string {
	for i, n := range widths {
		k := first + i
		b.fc(x, fmt.Sprintf("fc%d", k), n)
		x = fmt.Sprintf("fc%d", k)
		if relu {
			b.add(DenseLayer{Type: ReLU, Bottom: []string{x}, Top: []string{fmt.Sprintf("relu%d", k)}})
			x = fmt.Sprintf("relu%d", k)
		}
	}
	return x
}

// deep adds n blocks of FC-ReLU-Dropout(0.5) numbered from first.
func (b *builder) deep(x string, first, n, width int) string {
	for i := range n {
		k := first + i
		x = b.mlp(x, k, []int{width}, true)
		b.add(DenseLayer{Type: Dropout, Bottom: []string{x}, Top: []string{fmt.Sprintf("dropout%d", k)}, Rate: 0.5})
		x = fmt.Sprintf("dropout%d", k)
	}
	return x
}

func (b *builder) loss(pred string) {
	b.add(DenseLayer{Type: BinaryCrossEntropyLoss, Bottom: []string{pred, "label"}, Top: []string{"loss"}})
}

// AutoSlice does what HugeCTR's graph_analysis does before writing or
// compiling: a tensor read by several dense layers (at most 5) gets a Slice
// layer right before its first reader, with tops "<name>_slice<i>" and full
// ranges, and each reader is rewired to its own slice in order.
func (g *Graph) AutoSlice(opt *Optimizer) error {
	info, err := g.Infer(opt)
	if err != nil {
		return err
	}
	readers := map[string]int{}
	for _, l := range g.Layers {
		for _, b := range l.Bottom {
			readers[b]++
		}
	}
	var out []DenseLayer
	next := map[string]int{}
	for _, l := range g.Layers {
		l.Bottom = append([]string(nil), l.Bottom...)
		for j, b := range l.Bottom {
			n := readers[b]
			if n < 2 {
				continue
			}
			if n > 5 {
				return errorf("", "", ErrTensor, "tensor %q has %d readers (HugeCTR allows 5)", b, n)
			}
			k, started := next[b]
			if !started {
				d := info.Tensors[b].Last()
				s := DenseLayer{Type: Slice, Bottom: []string{b}}
				for i := range n {
					s.Top = append(s.Top, fmt.Sprintf("%s_slice%d", b, i))
					s.Ranges = append(s.Ranges, [2]int{0, d})
				}
				out = append(out, s)
			}
			l.Bottom[j] = fmt.Sprintf("%s_slice%d", b, k)
			next[b] = k + 1
		}
		out = append(out, l)
	}
	g.Layers = out
	return nil
}
