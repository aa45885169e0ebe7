package model

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
)

// head is one output of the model: a loss layer's prediction with its
// label columns and loss weight (a multi-task model has one per loss), or,
// in an inference graph (no loss layer), the last layer's output.
//
// HugeCTR multi-label input: the data's label columns hold the label
// tensors in alphabetical order of their names (hugectr.Input keeps them
// in a std::map and slices "combined_multi_label" in that order), whatever
// order the JSON lists them in.
type head struct {
	loss   *layers.Loss // nil: an inference output (already probabilities)
	g      graph.DenseLayer
	pred   *layers.Blob
	label  string // the label tensor (the loss's second bottom)
	col    int    // its first column in the data's labels
	dim    int    // its width
	off    int    // the head's first column in a prediction row
	weight float64
	host   []float32 // [B·width] download buffer (several heads)
}

// width is the head's prediction width.
func (h *head) width() int { return h.pred.Value.Cols() }

// labelColumns maps each label tensor of in to its first column and width
// in the data's label row (alphabetical order of the names).
func labelColumns(in *graph.Input) (map[string][2]int, []string) {
	names := slices.Clone(in.LabelTops)
	dims := map[string]int{}
	for i, t := range in.LabelTops {
		dims[t] = in.LabelDims[i]
	}
	sort.Strings(names)
	cols := map[string][2]int{}
	c := 0
	for _, n := range names {
		cols[n] = [2]int{c, dims[n]}
		c += dims[n]
	}
	return cols, names
}

// bindLabels makes the label tensors of the graph: the feeder's label
// blob itself for one label, else a Slice of it (HugeCTR's
// combined_multi_label split) run before the network.
func (m *Model) bindLabels(blobs map[string]*layers.Blob) error {
	in := &m.Graph.Input
	if len(in.LabelTops) == 1 {
		blobs[in.LabelTops[0]] = m.labelBlob()
		return nil
	}
	cols, names := labelColumns(in)
	var ranges [][2]int
	for _, n := range names {
		if cols[n][1] < 1 {
			return fmt.Errorf("label %q: label_dim %d (each label needs ≥ 1 column)", n, cols[n][1])
		}
		ranges = append(ranges, [2]int{cols[n][0], cols[n][0] + cols[n][1]})
	}
	s, err := layers.NewSlice(m.ctx, m.labelBlob(), ranges)
	if err != nil {
		return err
	}
	for i, n := range names {
		blobs[n] = s.Outputs()[i]
	}
	m.labelSlice = s
	return nil
}

// addHead records the loss layer gl (bottoms pred, label) as an output.
func (m *Model) addHead(gl graph.DenseLayer, l *layers.Loss, pred *layers.Blob) error {
	cols, _ := labelColumns(&m.Graph.Input)
	c, ok := cols[gl.Bottom[1]]
	for _, l := range m.Graph.Layers {
		// HugeCTR's automatic Slice of a label read twice.
		if _, isLabel := cols[l.Bottom[0]]; !ok && isLabel && l.Type == graph.Slice && slices.Contains(l.Top, gl.Bottom[1]) {
			return fmt.Errorf("%w: label %q is read by more than one layer (HugeCTR keys losses by label name: one loss a label)", ErrUnsupported, l.Bottom[0])
		}
	}
	if !ok {
		return fmt.Errorf("%w: loss label %q is not a label tensor of the input (%s)", ErrUnsupported, gl.Bottom[1], strings.Join(m.Graph.Input.LabelTops, ", "))
	}
	for _, h := range m.heads {
		if h.label == gl.Bottom[1] {
			return fmt.Errorf("%w: two loss layers read label %q (HugeCTR keys losses by label name)", ErrUnsupported, gl.Bottom[1])
		}
	}
	m.heads = append(m.heads, &head{loss: l, g: gl, pred: pred, label: gl.Bottom[1], col: c[0], dim: c[1], weight: 1})
	return nil
}

// finishHeads completes the model's outputs after the layers are built:
// the loss weights (Options.LossWeights, by label name), the weighted sum
// of several losses with the regularizer, or, without a loss layer, the
// inference output (the last layer's top, HugeCTR's inference graphs end
// in a Sigmoid).
func (m *Model) finishHeads(blobs map[string]*layers.Blob, o Options) error {
	if len(m.heads) == 0 {
		if len(o.LossWeights) > 0 {
			return fmt.Errorf("loss weights given for a graph without loss layers")
		}
		if len(m.Graph.Layers) == 0 {
			return fmt.Errorf("the graph has no dense layers")
		}
		last := m.Graph.Layers[len(m.Graph.Layers)-1]
		p := blobs[last.Top[0]]
		if p == nil || len(p.Value.Shape) != 2 || p.Value.Cols() > m.feed.LabelDim {
			return fmt.Errorf("inference graph: the last layer's output %q is not a [batch, ≤ %d] prediction", last.Top[0], m.feed.LabelDim)
		}
		m.heads = []*head{{g: last, pred: p, label: m.Graph.Input.LabelTops[0], dim: m.feed.LabelDim, weight: 1}}
		m.predW = p.Value.Cols()
		return nil
	}
	var labels []string
	for _, h := range m.heads {
		labels = append(labels, h.label)
	}
	for name, w := range o.LossWeights {
		i := slices.Index(labels, name)
		if i < 0 {
			return fmt.Errorf("loss weight for %q: no loss layer reads a label of that name (the losses' labels: %s)", name, strings.Join(labels, ", "))
		}
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("loss weight %v for %q: want a finite weight ≥ 0", w, name)
		}
		m.heads[i].weight = w
	}
	for _, h := range m.heads {
		h.off = m.predW
		m.predW += h.width()
		h.host = make([]float32, m.batch*h.width())
	}
	first := m.heads[0]
	var reg *graph.DenseLayer
	for i := range m.heads {
		g := &m.heads[i].g
		if g.Regularizer == "" {
			continue
		}
		if reg != nil && (reg.Regularizer != g.Regularizer || reg.Lambda != g.Lambda) {
			return fmt.Errorf("%w: loss layers with different regularizers (%s λ %g, %s λ %g): HugeCTR applies one", ErrUnsupported, reg.Regularizer, reg.Lambda, g.Regularizer, g.Lambda)
		}
		reg = g
	}
	if len(m.heads) == 1 && first.weight == 1 {
		// One loss: the loss layer is the model's loss.
		first.loss.Scale = o.LossScale
		if reg != nil {
			m.reg = layers.NewRegularizer(m.ctx, reg.Regularizer == "L1", float64(reg.Lambda), m.batch, m.dense...)
			m.reg.Scale = o.LossScale
			first.loss.Reg = m.reg
		}
		m.lossOut = first.loss.Outputs()[0].Value
		return nil
	}
	var ls []*layers.Loss
	var ws []float64
	for _, h := range m.heads {
		ls, ws = append(ls, h.loss), append(ws, h.weight)
	}
	sum, err := layers.NewLossSum(m.ctx, ls, ws, o.LossScale)
	if err != nil {
		return err
	}
	if reg != nil {
		m.reg = layers.NewRegularizer(m.ctx, reg.Regularizer == "L1", float64(reg.Lambda), m.batch, m.dense...)
		m.reg.Scale = o.LossScale
		sum.Reg = m.reg
	}
	m.total = sum
	m.lossOut = sum.Outputs()[0].Value
	return nil
}

// Inference reports whether the model is an inference graph (no loss
// layer): it predicts and evaluates but cannot train.
func (m *Model) Inference() bool { return m.heads[0].loss == nil }

// errInference is TrainStep's and Fit's error for an inference graph.
var errInference = fmt.Errorf("the graph has no loss layer (an inference graph): it predicts and evaluates with trained weights (--load-prefix, or --dense-model and --sparse-model) but cannot train; train the matching training config")

// PredictionWidth is the number of scores a sample: the loss layers'
// prediction widths summed (HugeCTR's multi_task_combined_pred), in layer
// order.
func (m *Model) PredictionWidth() int { return m.predW }

// Tasks are the label names of the model's outputs, one per loss layer in
// layer order (the label of an inference graph's output).
func (m *Model) Tasks() []string {
	var ts []string
	for _, h := range m.heads {
		ts = append(ts, h.label)
	}
	return ts
}

// runLabels splits the label row into the label tensors (several labels).
func (m *Model) runLabels(p layers.Pass) {
	if m.labelSlice != nil {
		m.labelSlice.Forward(p)
	}
}

// downloadPredictions copies the heads' outputs into scores ([B·T] rows of
// PredictionWidth).
func (m *Model) downloadPredictions(scores []float32) error {
	if m.par != nil {
		if err := m.gatherPredictions(); err != nil {
			return err
		}
	}
	if len(m.heads) == 1 {
		return m.be.Download(scores[:m.batch*m.predW], m.predValue(0))
	}
	T := m.predW
	for i, h := range m.heads {
		if err := m.be.Download(h.host, m.predValue(i)); err != nil {
			return err
		}
		t := h.width()
		for i := 0; i < m.batch; i++ {
			copy(scores[i*T+h.off:i*T+h.off+t], h.host[i*t:i*t+t])
		}
	}
	return nil
}

// TaskResult is the evaluation of one output of a multi-task model.
type TaskResult struct {
	// Label is the task's label tensor; Weight its loss weight.
	Label  string  `json:"label"`
	Weight float64 `json:"weight"`
	// AUC of the task's predictions (the mean over its columns for
	// MultiCrossEntropyLoss); Loss its loss layer's mean loss, unweighted.
	AUC  float64 `json:"auc"`
	Loss float64 `json:"loss"`
}

// aucCol is one AUC column: head h's prediction column c.
type aucCol struct{ h, c int }

// aucColumnList is the model's AUC columns: every column of
// MultiCrossEntropyLoss and of inference outputs, one per other loss.
func (m *Model) aucColumnList() []aucCol {
	var cs []aucCol
	for hi, h := range m.heads {
		n := 1
		if h.loss == nil || h.loss.Kind == layers.MultiCrossEntropy {
			n = h.width()
		}
		for c := 0; c < n; c++ {
			cs = append(cs, aucCol{hi, c})
		}
	}
	return cs
}

// bceFromProbability is the binary cross entropy of probability p for
// label y (an inference graph's outputs are probabilities), p clamped to
// float32's [ε, 1−ε].
func bceFromProbability(p, y float64) float64 {
	const eps = 1e-7
	p = min(max(p, eps), 1-eps)
	return -(y*math.Log(p) + (1-y)*math.Log1p(-p))
}

// TasksText is the per-task part of an evaluation line of a multi-task
// model ("; tasks: click AUC 0.8, loss 0.4 (weight 1), …"), "" for one
// task.
func (r *EvalResult) TasksText() string {
	if len(r.Tasks) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("; tasks:")
	for i, t := range r.Tasks {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s AUC %.6f, loss %.6f (weight %g)", t.Label, t.AUC, t.Loss, t.Weight)
	}
	return b.String()
}
