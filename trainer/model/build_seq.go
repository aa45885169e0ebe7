package model

import (
	"fmt"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// buildSeq builds the sequence and attention layers (docs/LAYERS.md):
// LayerNorm, MatrixMultiply, Softmax with a mask, SequenceMask,
// MultiHeadAttention, GRU and the axis-2 Concat of 3-D tensors. The shapes
// were checked by graph.Infer; what needs the batch size is checked here.
func (m *Model) buildSeq(gl graph.DenseLayer, li graph.LayerInfo, ins []*layers.Blob) (layers.Layer, error) {
	c := m.ctx
	x := li.In[0]
	switch gl.Type {
	case graph.LayerNorm:
		in, err := initializers("gamma_init", gl.GammaInit, "beta_init", gl.BetaInit)
		if err != nil {
			return nil, err
		}
		return layers.NewLayerNorm(c, ins[0], x.Last(), float64(gl.Eps), in...)
	case graph.MatrixMultiply:
		y := li.In[1]
		rows := ins[0].Value.Rows()
		switch len(x.Dims) {
		case 1:
			// [B, n]·[n, k] or [B, m]·[m, g, h]: the right operand's rows are
			// the batch, so the left operand's width must equal it.
			if x.Dims[0] != rows {
				return nil, fmt.Errorf("MatrixMultiply of %v and %v multiplies by the second tensor's batch dimension: the first tensor's width %d must equal the batch size %d", x, y, x.Dims[0], rows)
			}
			return layers.NewMatrixMultiply(c, ins[0], ins[1], 1, rows, x.Dims[0], y.Elems()/y.Rows)
		case 2:
			return layers.NewMatrixMultiply(c, ins[0], ins[1], rows, x.Dims[0], x.Dims[1], y.Dims[1])
		default:
			return layers.NewMatrixMultiply(c, ins[0], ins[1], rows*x.Dims[0], x.Dims[1], x.Dims[2], y.Dims[2])
		}
	case graph.Softmax: // with a mask (2 bottoms)
		return layers.NewMaskedSoftmax(c, ins[0], ins[1], x.Dims[0], x.Dims[1], x.Dims[2], float64(gl.Factor))
	case graph.SequenceMask:
		return layers.NewSequenceMask(c, ins[0], ins[1], gl.MaxSeqLenFrom, gl.MaxSeqLenTo)
	case graph.MultiHeadAttention:
		var mask *layers.Blob
		if len(ins) == 4 {
			mask = ins[3]
		}
		return layers.NewMultiHeadAttention(c, ins[0], ins[1], ins[2], mask, gl.NumAttentionHeads, x.Dims[0], li.In[1].Dims[0], x.Dims[1])
	case graph.GRU:
		in, err := initializers("weight_init", gl.WeightInit, "bias_init", gl.BiasInit)
		if err != nil {
			return nil, err
		}
		return layers.NewGRU(c, ins[0], gl.SeqLength, gl.VectorSize, gl.NumOutput, gl.GRUBatchSize, in...)
	case graph.Concat: // 3-D, axis 2
		return layers.NewConcat3D(c, x.Dims[0], ins...)
	}
	return nil, fmt.Errorf("%w: layer type %s", ErrUnsupported, gl.Type)
}

// buildRowwise builds InnerProduct and Slice on a 3-D input [B, S, V] (ok
// false for any other layer or shape). Both act on the last dimension, so
// they run on the input seen as B·S rows of V, and their outputs are seen
// again as [B, S·V'] (graph.Infer's [B, S, V'], and the InnerProduct weight
// [V, out] of HugeCTR's dense file).
func (m *Model) buildRowwise(gl graph.DenseLayer, li graph.LayerInfo, ins []*layers.Blob) (l layers.Layer, ok bool, err error) {
	if (gl.Type != graph.InnerProduct && gl.Type != graph.Slice) || len(ins) != 1 || len(li.In[0].Dims) != 2 {
		return nil, false, nil
	}
	x, v := ins[0], li.In[0].Last()
	if x.Value.Len()%v != 0 {
		return nil, true, fmt.Errorf("%s: input %v does not split into rows of %d", gl.Type, x.Value, v)
	}
	rows := x.Value.Len() / v
	view := &layers.Blob{Value: x.Value.Reshape(rows, v)}
	if !x.Grad.IsZero() {
		view.Grad = x.Grad.Reshape(rows, v)
	}
	var inner layers.Layer
	if gl.Type == graph.Slice {
		inner, err = layers.NewSlice(m.ctx, view, gl.Ranges)
	} else {
		in, ierr := initializers("weight_init", gl.WeightInit, "bias_init", gl.BiasInit)
		if ierr != nil {
			return nil, true, ierr
		}
		inner, err = layers.NewInnerProduct(m.ctx, view, gl.NumOutput, tensor.Identity, in...)
	}
	if err != nil {
		return nil, true, err
	}
	r := &rowwise{Layer: inner}
	for _, o := range inner.Outputs() {
		b := x.Value.Rows()
		w := o.Value.Len() / b
		r.outs = append(r.outs, &layers.Blob{Value: o.Value.Reshape(b, w), Grad: o.Grad.Reshape(b, w)})
	}
	return r, true, nil
}

// rowwise is a layer run on B·S rows whose outputs are seen per sample.
type rowwise struct {
	layers.Layer
	outs []*layers.Blob
}

func (r *rowwise) Outputs() []*layers.Blob { return r.outs }
