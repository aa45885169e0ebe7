package graph

import (
	"fmt"
	"strings"
)

// Shape is a tensor's shape per sample: Rows rows of Dims each (Rows is 1
// except after HugeCTR reshapes that fold slots into the batch, as DIN's
// [B·10, 36]). Dims has one entry ([B, D]), two ([B, S, V]) or three ([B, h,
// m, n]: SequenceMask and attention scores).
type Shape struct {
	Rows int
	Dims []int
}

// Last is the innermost dimension.
func (s Shape) Last() int { return s.Dims[len(s.Dims)-1] }

// Elems is the element count per sample.
func (s Shape) Elems() int {
	n := s.Rows
	for _, d := range s.Dims {
		n *= d
	}
	return n
}

func (s Shape) String() string {
	var b strings.Builder
	if s.Rows == 1 {
		b.WriteString("[B")
	} else {
		fmt.Fprintf(&b, "[B·%d", s.Rows)
	}
	for _, d := range s.Dims {
		fmt.Fprintf(&b, ", %d", d)
	}
	b.WriteString("]")
	return b.String()
}

func flat(d ...int) Shape { return Shape{Rows: 1, Dims: d} }

// LayerInfo is what Infer learned about one dense layer.
type LayerInfo struct {
	In, Out []Shape
	// ParamShapes are the trainable tensors in dense-model-file order
	// (InnerProduct: W [in, out] then b [out]).
	ParamShapes [][]int
	Params      int64
}

// EmbeddingInfo is what Infer learned about one embedding.
type EmbeddingInfo struct {
	Out Shape
	// Rows is the table capacity on one device: Σ slot_size_array for
	// OneHot or when no workspace was given, else HugeCTR's
	// max_vocabulary_size_per_gpu.
	Rows int64
}

// Info is the result of shape inference over a Graph.
type Info struct {
	Tensors     map[string]Shape
	Layers      []LayerInfo
	Embeddings  []EmbeddingInfo
	DenseParams int64
	// EmbeddingParams is Σ Rows·VecSize over the embeddings.
	EmbeddingParams int64
}

// Infer checks the tensor graph (every bottom defined before use, every top
// new, shapes that fit each layer) and computes shapes and parameter counts.
// opt is the model optimizer, used for embeddings without their own (it
// sizes hash tables); nil means DefaultOptimizer. On error, Info holds
// everything inferred up to the failing layer and the error names it.
func (g *Graph) Infer(opt *Optimizer) (*Info, error) {
	if opt == nil {
		opt = DefaultOptimizer()
	}
	info := &Info{Tensors: map[string]Shape{}}
	sparse := map[string]SparseParam{}
	def := func(path, name string, s Shape) error {
		if _, dup := info.Tensors[name]; dup || sparse[name].Top != "" {
			return errorf("", path, ErrTensor, "tensor %q defined twice", name)
		}
		info.Tensors[name] = s
		return nil
	}
	in := g.Input
	if len(in.LabelTops) != len(in.LabelDims) || len(in.LabelTops) == 0 {
		return info, errorf("", "layers[0].label", ErrValue, "need one label_dim per label name")
	}
	for i, t := range in.LabelTops {
		if err := def("layers[0].label", t, flat(in.LabelDims[i])); err != nil {
			return info, err
		}
	}
	if err := def("layers[0].dense", in.DenseTop, flat(in.DenseDim)); err != nil {
		return info, err
	}
	for i, s := range in.Sparse {
		if _, dup := info.Tensors[s.Top]; dup || sparse[s.Top].Top != "" {
			return info, errorf("", fmt.Sprintf("layers[0].sparse[%d]", i), ErrTensor, "tensor %q defined twice", s.Top)
		}
		sparse[s.Top] = s
	}
	for i := range g.Embeddings {
		e := &g.Embeddings[i]
		path := fmt.Sprintf("layers[%d]", 1+i)
		sp, ok := sparse[e.Bottom]
		if !ok {
			return info, errorf("", path+".bottom", ErrTensor, "%q is not a sparse input", e.Bottom)
		}
		if e.OneHot() && len(e.SlotSizeArray) != sp.SlotNum {
			return info, errorf("", path+".sparse_embedding_hparam.slot_size_array", ErrValue,
				"%d slot sizes for %d slots", len(e.SlotSizeArray), sp.SlotNum)
		}
		ei := EmbeddingInfo{Out: flat(sp.SlotNum, e.VecSize)}
		o := e.Optimizer
		if o == nil {
			o = opt
		}
		if e.OneHot() || (e.WorkspaceMB == 0 && e.MaxVocabPerGPU == 0) {
			for _, s := range e.SlotSizeArray {
				ei.Rows += s
			}
		} else {
			ei.Rows = e.VocabPerGPU(o)
		}
		if err := def(path+".top", e.Top, ei.Out); err != nil {
			return info, err
		}
		info.Embeddings = append(info.Embeddings, ei)
		info.EmbeddingParams += ei.Rows * int64(e.VecSize)
	}
	base := 1 + len(g.Embeddings)
	for i := range g.Layers {
		l := &g.Layers[i]
		path := fmt.Sprintf("layers[%d]", base+i)
		li := LayerInfo{}
		for j, b := range l.Bottom {
			s, ok := info.Tensors[b]
			if !ok {
				return info, errorf("", fmt.Sprintf("%s.bottom[%d]", path, j), ErrTensor, "%s: tensor %q is not defined by an earlier layer", l.Type, b)
			}
			li.In = append(li.In, s)
		}
		if err := inferLayer(l, &li); err != nil {
			err.Path = path
			return info, err
		}
		if len(li.Out) != len(l.Top) {
			return info, errorf("", path+".top", ErrTensor, "%s has %d outputs, %d top names", l.Type, len(li.Out), len(l.Top))
		}
		for j, t := range l.Top {
			if err := def(fmt.Sprintf("%s.top[%d]", path, j), t, li.Out[j]); err != nil {
				return info, err
			}
		}
		for _, p := range li.ParamShapes {
			n := int64(1)
			for _, d := range p {
				n *= int64(d)
			}
			li.Params += n
		}
		for j, o := range li.Out {
			if o.Rows <= 0 || float64(o.Rows)*prod(o.Dims) > maxElems {
				return info, errorf("", fmt.Sprintf("%s.top[%d]", path, j), ErrValue, "%s output %v is too large", l.Type, o)
			}
		}
		if float64(li.Params) > maxElems {
			return info, errorf("", path, ErrValue, "%s has %d parameters", l.Type, li.Params)
		}
		info.DenseParams += li.Params
		info.Layers = append(info.Layers, li)
	}
	return info, nil
}

// maxElems bounds a tensor's elements per sample and a layer's parameters.
const maxElems = 1 << 31

func prod(d []int) float64 {
	p := 1.0
	for _, x := range d {
		p *= float64(x)
	}
	return p
}

func bad(format string, args ...any) *Error { return errorf("", "", ErrTensor, format, args...) }

func nIn(l *DenseLayer, li *LayerInfo, lo, hi int) *Error {
	if len(li.In) < lo || (hi > 0 && len(li.In) > hi) {
		return bad("%s: %d bottoms, want %d..%d", l.Type, len(li.In), lo, hi)
	}
	return nil
}

func withLast(s Shape, d int) Shape {
	dims := append([]int(nil), s.Dims...)
	dims[len(dims)-1] = d
	return Shape{Rows: s.Rows, Dims: dims}
}

func same(a, b Shape) bool {
	if a.Rows != b.Rows || len(a.Dims) != len(b.Dims) {
		return false
	}
	for i := range a.Dims {
		if a.Dims[i] != b.Dims[i] {
			return false
		}
	}
	return true
}

func repeat(s Shape, n int) []Shape {
	out := make([]Shape, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func inferLayer(l *DenseLayer, li *LayerInfo) *Error {
	if err := nIn(l, li, 1, 0); err != nil {
		return err
	}
	x := li.In[0]
	switch l.Type {
	case InnerProduct, FusedInnerProduct:
		if l.NumOutput <= 0 {
			return errorf("", "", ErrValue, "num_output must be positive")
		}
		li.Out = repeat(withLast(x, l.NumOutput), len(l.Top))
		li.ParamShapes = [][]int{{x.Last(), l.NumOutput}, {l.NumOutput}}
	case MLP:
		outs := l.NumOutputs
		if len(outs) == 0 {
			outs = []int{l.NumOutput}
		}
		prev := x.Last()
		for _, o := range outs {
			// HugeCTR's MLPLayer owns a bias per layer, used or not
			// (use_bias / biases only switch it off in the kernels), and
			// the dense file holds it.
			li.ParamShapes = append(li.ParamShapes, []int{prev, o}, []int{o})
			prev = o
		}
		li.Out = []Shape{withLast(x, prev)}
	case ReLU, Sigmoid, Cast, Dropout, ELU, PReLUDice:
		li.Out = []Shape{x}
	case BatchNorm, LayerNorm:
		li.Out = []Shape{x}
		li.ParamShapes = [][]int{{x.Last()}, {x.Last()}}
	case Concat:
		if len(x.Dims) == 2 && l.Axis != 1 && l.Axis != 2 {
			return errorf("", "", ErrValue, "axis %d: a 3-D Concat joins on axis 1 (slots) or 2 (widths)", l.Axis)
		}
		out := Shape{Rows: x.Rows, Dims: append([]int(nil), x.Dims...)}
		ax := len(x.Dims) - 1
		if len(x.Dims) == 2 && l.Axis == 1 {
			ax = 0
		}
		for i, s := range li.In[1:] {
			if s.Rows != x.Rows || len(s.Dims) != len(x.Dims) {
				return bad("Concat: bottom %d is %v, bottom 0 %v", i+1, s, x)
			}
			for d := range s.Dims {
				if d != ax && s.Dims[d] != x.Dims[d] {
					return bad("Concat: bottom %d is %v, bottom 0 %v", i+1, s, x)
				}
			}
			out.Dims[ax] += s.Dims[ax]
		}
		li.Out = []Shape{out}
	case Reshape:
		if len(l.Selected) > 0 {
			if len(x.Dims) != 2 {
				return bad("Reshape with selected needs a 3-D input, have %v", x)
			}
			for _, s := range l.Selected {
				if s >= x.Dims[0] {
					return errorf("", "", ErrValue, "selected slot %d of %d", s, x.Dims[0])
				}
			}
			li.Out = []Shape{{Rows: x.Rows, Dims: []int{len(l.Selected) * x.Dims[1]}}}
			break
		}
		per := l.LeadingDim
		dims := []int{l.LeadingDim}
		if l.TimeStep > 0 {
			per *= l.TimeStep
			dims = []int{l.TimeStep, l.LeadingDim}
		}
		if per <= 0 || x.Elems()%per != 0 {
			return bad("Reshape: %v (%d values a sample) does not split into rows of %d", x, x.Elems(), per)
		}
		li.Out = []Shape{{Rows: x.Elems() / per, Dims: dims}}
	case Slice:
		if len(l.Ranges) == 0 {
			return errorf("", "", ErrValue, "Slice without ranges")
		}
		for _, r := range l.Ranges {
			if r[1] > x.Last() {
				return bad("Slice: range [%d, %d] beyond width %d", r[0], r[1], x.Last())
			}
			li.Out = append(li.Out, withLast(x, r[1]-r[0]))
		}
	case Interaction:
		if err := nIn(l, li, 2, 2); err != nil {
			return err
		}
		e := li.In[1]
		if len(x.Dims) != 1 || len(e.Dims) != 2 || e.Dims[1] != x.Dims[0] || x.Rows != e.Rows {
			return bad("Interaction: want [B, d] and [B, n, d], have %v and %v", x, e)
		}
		n := e.Dims[0]
		li.Out = repeat(flat(x.Dims[0]+n*(n+1)/2+1), len(l.Top))
	case MultiCross:
		if l.NumLayers <= 0 {
			return errorf("", "", ErrValue, "num_layers must be positive")
		}
		d := x.Last()
		for range l.NumLayers {
			if l.ProjectionDim == 0 {
				li.ParamShapes = append(li.ParamShapes, []int{d, 1})
			} else {
				li.ParamShapes = append(li.ParamShapes, []int{d, l.ProjectionDim}, []int{l.ProjectionDim, d})
			}
			li.ParamShapes = append(li.ParamShapes, []int{d})
		}
		li.Out = []Shape{x}
	case WeightMultiply:
		if len(x.Dims) != 1 || x.Dims[0] != l.WeightDims[0] {
			return bad("WeightMultiply: input %v does not match weight_dims[0] = %d", x, l.WeightDims[0])
		}
		li.ParamShapes = [][]int{{l.WeightDims[0], l.WeightDims[1]}}
		li.Out = []Shape{{Rows: x.Rows, Dims: []int{l.WeightDims[0] * l.WeightDims[1]}}}
	case FmOrder2:
		if l.OutDim <= 0 || x.Elems()%l.OutDim != 0 {
			return bad("FmOrder2: input %v does not split into vectors of %d", x, l.OutDim)
		}
		li.Out = []Shape{{Rows: x.Rows, Dims: []int{l.OutDim}}}
	case ReduceSum, ReduceMean:
		if l.Axis < 1 || l.Axis > len(x.Dims) {
			return errorf("", "", ErrValue, "axis %d of a %d-D input", l.Axis, len(x.Dims)+1)
		}
		dims := append([]int(nil), x.Dims...)
		dims[l.Axis-1] = 1
		li.Out = []Shape{{Rows: x.Rows, Dims: dims}}
	case Add, ElementwiseMultiply, Sub:
		if l.Type == Sub {
			if err := nIn(l, li, 2, 2); err != nil {
				return err
			}
		}
		for i, s := range li.In[1:] {
			if !same(s, x) {
				return bad("%s: bottom %d is %v, bottom 0 %v", l.Type, i+1, s, x)
			}
		}
		li.Out = []Shape{x}
	case MatrixMultiply, Softmax, GRU, MultiHeadAttention, SequenceMask:
		if err := inferSeq(l, li); err != nil {
			return err
		}
	case Scale:
		if !(l.Factor >= 1 && l.Factor <= 1<<20) {
			return errorf("", "", ErrValue, "Scale factor %v must be an integer in [1, 2^20]", l.Factor)
		}
		f := int(l.Factor)
		if float32(f) != l.Factor {
			return errorf("", "", ErrValue, "Scale factor %v must be a positive integer", l.Factor)
		}
		if l.Axis == 0 {
			li.Out = []Shape{withLast(x, x.Last()*f)}
		} else {
			li.Out = []Shape{{Rows: x.Rows * f, Dims: x.Dims}}
		}
	case FusedReshapeConcat, FusedReshapeConcatGeneral:
		w := 0
		for _, s := range li.In {
			if len(s.Dims) != 2 || s.Dims[0] != x.Dims[0] || s.Rows != x.Rows {
				return bad("%s: inputs must be [B, S, V_i] with one S, have %v", l.Type, s)
			}
			w += s.Dims[1]
		}
		if l.Type == FusedReshapeConcatGeneral {
			// HugeCTR's output is 2-D [B·S, W].
			li.Out = []Shape{{Rows: x.Rows * x.Dims[0], Dims: []int{w}}}
			break
		}
		if x.Dims[0] < 2 {
			return bad("FusedReshapeConcat needs at least 2 slots")
		}
		li.Out = []Shape{{Rows: x.Rows * (x.Dims[0] - 1), Dims: []int{w}}, {Rows: x.Rows, Dims: []int{w}}}
	case BinaryCrossEntropyLoss, CrossEntropyLoss, MultiCrossEntropyLoss:
		if err := nIn(l, li, 2, 2); err != nil {
			return err
		}
		y := li.In[1]
		if l.Type != CrossEntropyLoss && (x.Elems() != y.Elems()) {
			return bad("%s: prediction %v and label %v differ", l.Type, x, y)
		}
		if l.Type == BinaryCrossEntropyLoss && x.Elems() != 1 {
			return bad("BinaryCrossEntropyLoss: prediction %v is not [B, 1]", x)
		}
		if l.Type == MultiCrossEntropyLoss && len(l.TargetWeight) > 0 && len(l.TargetWeight) != x.Elems() {
			return errorf("", "", ErrValue, "%d target weights for %d targets", len(l.TargetWeight), x.Elems())
		}
		li.Out = []Shape{{Rows: 1, Dims: []int{1}}}
	case Gather:
		// HugeCTR v23.09 and later build Gather as SelectLayer on dim 0,
		// which refuses it ("Dim 0 is not allowed to do select because
		// it's batch dim"); the older GatherLayer picked rows of the batch
		// (top [len(indices), D]), which no per-sample network can train
		// on (docs/LAYERS.md).
		return errorf("", "", ErrUnsupported, "shape inference for Gather: its indices pick batch rows "+
			"(HugeCTR's top is [len(indices), D], and v23.09 and later refuse the layer: dim 0 is the batch dim); "+
			"use Slice for columns or Reshape with selected for slots")
	default: // GRU, MultiHeadAttention, SequenceMask
		return errorf("", "", ErrUnsupported, "shape inference for %s", l.Type)
	}
	return nil
}
