package model

import (
	"fmt"
	"io"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Half-precision training (docs/PRECISION.md). In fp16 and bf16 the
// layers halfLayer accepts run in half: their outputs, the gradients of
// those outputs and their activation-like scratch are Float16 or BFloat16,
// their GEMM weights have a half operand copy refreshed from the float32
// masters (refreshHalf); the embeddings' pooled outputs are half too. Every
// other layer runs in float32, and the builder inserts a conversion
// (layers.Convert) wherever a tensor crosses between the regions: once per
// tensor and dtype, so the float32 dense input is converted once however
// many half layers read it. Labels stay float32 (the losses read them so).

// halfLayer reports whether dense layer gl (with shapes li) runs in half
// precision in fp16 and bf16: the one list of half-capable layers.
func halfLayer(gl graph.DenseLayer, li graph.LayerInfo) bool {
	threeD := len(li.In) > 0 && len(li.In[0].Dims) == 2 // [B, rows, cols]: row-wise or sequence forms
	switch gl.Type {
	case graph.InnerProduct, graph.Slice:
		return !threeD
	case graph.Concat:
		return !(threeD && gl.Axis == 2)
	case graph.FusedInnerProduct, graph.MLP, graph.ReLU, graph.Sigmoid, graph.ELU,
		graph.Reshape, graph.Interaction, graph.MultiCross,
		graph.Add, graph.Sub, graph.ElementwiseMultiply, graph.Dropout, graph.BinaryCrossEntropyLoss:
		return true
	}
	return false
}

// halfDType is the activation dtype of precision p (Invalid: float32).
func halfDType(p graph.Precision) tensor.DType {
	switch p {
	case graph.FP16:
		return tensor.Float16
	case graph.BF16:
		return tensor.BFloat16
	}
	return tensor.Invalid
}

// precisionPlan is the dtype every part of a graph runs in: computed from
// the graph alone (planPrecision), so it can be checked without building.
type precisionPlan struct {
	Precision graph.Precision
	// Act is the half dtype (Invalid in fp32 and tf32).
	Act tensor.DType
	// Half[i] says g.Layers[i] runs in Act.
	Half []bool
	// Float32 lists the layers that stay float32 in a half precision
	// ("Type top", in graph order).
	Float32 []string
}

// planPrecision plans g (with Infer's info) in precision p.
func planPrecision(g *graph.Graph, info *graph.Info, p graph.Precision) precisionPlan {
	pl := precisionPlan{Precision: p, Act: halfDType(p), Half: make([]bool, len(g.Layers))}
	if !p.Half() {
		return pl
	}
	for i, gl := range g.Layers {
		var li graph.LayerInfo
		if i < len(info.Layers) {
			li = info.Layers[i]
		}
		pl.Half[i] = halfLayer(gl, li)
		if !pl.Half[i] {
			pl.Float32 = append(pl.Float32, fmt.Sprintf("%s %s", gl.Type, strings.Join(gl.Top, ",")))
		}
	}
	return pl
}

// dtype is the activation dtype of layer i.
func (pl *precisionPlan) dtype(i int) tensor.DType {
	if pl.Act != tensor.Invalid && pl.Half[i] {
		return pl.Act
	}
	return tensor.Float32
}

// summary is the plan's log line ("" in fp32 and tf32).
func (pl *precisionPlan) summary(convs int) string {
	if !pl.Precision.Half() {
		return ""
	}
	n := len(pl.Half) - len(pl.Float32)
	if len(pl.Float32) == 0 {
		return fmt.Sprintf("%s: all %d dense layers and the embeddings' outputs in %s, %d conversions (the dense input)", pl.Precision, n, pl.Precision, convs)
	}
	return fmt.Sprintf("%s: %d dense layers in %s, %d layers in float32 with conversions (%d): %s", pl.Precision, n, pl.Precision,
		len(pl.Float32), convs, strings.Join(pl.Float32, "; "))
}

// converter inserts the conversions of one Build.
type converter struct {
	m     *Model
	plan  *precisionPlan
	fixed map[*layers.Blob]bool // labels: never converted
	done  map[convKey]*layers.Blob
	// dts is the planned dtype of each blob built so far (the dense
	// input: float32; a layer's outputs: the layer's dtype).
	dts map[*layers.Blob]tensor.DType
	n   int
}

type convKey struct {
	b  *layers.Blob
	dt tensor.DType
}

func newConverter(m *Model, plan *precisionPlan, labels map[string]*layers.Blob) *converter {
	cv := &converter{m: m, plan: plan, fixed: map[*layers.Blob]bool{}, done: map[convKey]*layers.Blob{}, dts: map[*layers.Blob]tensor.DType{}}
	for _, b := range labels {
		cv.fixed[b] = true
	}
	return cv
}

// inputs sets Ctx.Act for layer i and points its bottoms in blobs at
// tensors of its dtype, converting where needed; the returned restore puts
// the bottoms back (a conversion serves one layer's reading, the original
// stays for the others) and the conversions to run before the layer.
func (cv *converter) inputs(i int, gl graph.DenseLayer, blobs map[string]*layers.Blob) (restore func(), convs []*layers.Convert, err error) {
	dt := cv.plan.dtype(i)
	c := cv.m.ctx
	if dt == tensor.Float32 {
		c.Act = tensor.Invalid
	} else {
		c.Act = dt
	}
	saved := map[string]*layers.Blob{}
	restore = func() {
		for k, b := range saved {
			blobs[k] = b
		}
	}
	if cv.plan.Act == tensor.Invalid {
		return restore, nil, nil
	}
	for _, name := range gl.Bottom {
		b, ok := blobs[name]
		if !ok || b == nil || b.Value.IsZero() || cv.fixed[b] || cv.dtype(b) == dt {
			continue
		}
		if _, ok := saved[name]; ok {
			continue
		}
		k := convKey{b, dt}
		out := cv.done[k]
		if out == nil {
			act := c.Act
			c.Act = dt
			l, cerr := layers.NewConvert(c, b)
			c.Act = act
			if cerr != nil {
				return restore, nil, fmt.Errorf("converting %q to %v: %w", name, dt, cerr)
			}
			convs = append(convs, l)
			out = l.Outputs()[0]
			cv.done[k] = out
			cv.dts[out] = dt
			cv.n++
		}
		saved[name] = b
		blobs[name] = out
	}
	return restore, convs, nil
}

// dtype is b's planned dtype (its tensor's when unplanned).
func (cv *converter) dtype(b *layers.Blob) tensor.DType {
	if dt, ok := cv.dts[b]; ok {
		return dt
	}
	return b.Value.DType
}

// outputs records the dtype of blobs made by a part planned to run in dt.
func (cv *converter) outputs(dt tensor.DType, bs ...*layers.Blob) {
	if dt == tensor.Invalid {
		dt = tensor.Float32
	}
	for _, b := range bs {
		if _, ok := cv.dts[b]; !ok {
			cv.dts[b] = dt
		}
	}
}

// converted is a layer run after the conversions of its inputs (forward)
// and before their backward passes.
type converted struct {
	layers.Layer
	convs []*layers.Convert
}

func (c *converted) Forward(p layers.Pass) {
	for _, cv := range c.convs {
		cv.Forward(p)
	}
	c.Layer.Forward(p)
}

func (c *converted) Backward(p layers.Pass) {
	c.Layer.Backward(p)
	for i := len(c.convs) - 1; i >= 0; i-- {
		c.convs[i].Backward(p)
	}
}

// Unwrap returns the layer itself.
func (c *converted) Unwrap() layers.Layer { return c.Layer }

// refreshHalf rewrites the dense weights' half operand copies from their
// float32 masters: after initialisation, each update and each load.
func (m *Model) refreshHalf() {
	if m.prec.Half() {
		layers.RefreshHalf(m.be, m.params)
	}
}

// Precision is the precision the model trains in.
func (m *Model) Precision() graph.Precision { return m.prec }

// PrecisionSummary is the model's precision line for logs ("" in fp32 and
// tf32): which layers stay float32 and how many conversions join them.
func (m *Model) PrecisionSummary() string { return m.precLine }

// ReportPrecision writes PrecisionSummary as a line to w (nothing when
// empty).
func (m *Model) ReportPrecision(w io.Writer) {
	if m.precLine != "" {
		fmt.Fprintln(w, m.precLine)
	}
}
