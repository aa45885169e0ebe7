package model

import (
	"fmt"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Building HugeCTR's PReLU_Dice, Cast, FusedReshapeConcat(General), MLP,
// the FusedInnerProduct Head/Body/Tail chain and Interaction's second top
// (docs/LAYERS.md, "Cast, PReLU_Dice, …").
//
// The fused MLPerf forms pass plumbing tensors between layers: a Head or
// Body FusedInnerProduct has the tops (x, x_mask, x_dRelu, x_db), which the
// next Body or Tail takes as its four bottoms; a two-top Interaction's
// second top is the buffer its consumer (a two-bottom Head or MLP) writes
// the gradient into. They only let HugeCTR's kernels share buffers: the
// network is the same chain of y = act(x·W + b). ctrkit keeps them as
// views (layers.WithAux) and lets only the matching consumer name them.

// auxRole is what a plumbing top is.
type auxRole uint8

const (
	auxMask  auxRole = 1 + iota // FusedInnerProduct x_mask
	auxDRelu                    // FusedInnerProduct x_dRelu
	auxDB                       // FusedInnerProduct x_db
	auxGrad                     // Interaction's gradient top
)

var auxNames = [...]string{auxMask: "mask", auxDRelu: "dRelu", auxDB: "bias-gradient", auxGrad: "gradient"}

// auxRef is a plumbing top: its role and the tensor it belongs to.
type auxRef struct {
	of   string
	role auxRole
}

// checkAux refuses a layer that reads a plumbing top unless it is the
// consumer HugeCTR's fused forms allow (which check the order themselves).
func (m *Model) checkAux(gl graph.DenseLayer) error {
	for j, b := range gl.Bottom {
		a, ok := m.aux[b]
		if !ok {
			continue
		}
		fused := gl.Type == graph.FusedInnerProduct && (gl.Position == "Head" || gl.Position == "Body" || gl.Position == "Tail")
		if j > 0 && (fused || gl.Type == graph.MLP) {
			continue
		}
		return fmt.Errorf("bottom %q is the %s top of %q, which only the next fused layer (FusedInnerProduct Head/Body/Tail, or MLP) may take, after %q", b, auxNames[a.role], a.of, a.of)
	}
	return nil
}

// auxIn checks that bottoms[1:] are the plumbing tops roles of bottoms[0].
func (m *Model) auxIn(gl graph.DenseLayer, roles ...auxRole) error {
	if len(gl.Bottom) != 1+len(roles) {
		return fmt.Errorf("%d bottoms, want %d", len(gl.Bottom), 1+len(roles))
	}
	for j, r := range roles {
		b := gl.Bottom[1+j]
		if a, ok := m.aux[b]; !ok || a.of != gl.Bottom[0] || a.role != r {
			return fmt.Errorf("bottom %d %q must be the %s top of %q (bottoms %s)", 1+j, b, auxNames[r], gl.Bottom[0], strings.Join(gl.Bottom, ", "))
		}
	}
	return nil
}

func (m *Model) addAux(tops []string, roles ...auxRole) {
	if m.aux == nil {
		m.aux = map[string]auxRef{}
	}
	for j, r := range roles {
		m.aux[tops[1+j]] = auxRef{of: tops[0], role: r}
	}
}

// buildFusedFC builds a FusedInnerProduct at any position.
func (m *Model) buildFusedFC(gl graph.DenseLayer, ins []*layers.Blob) (layers.Layer, error) {
	act := tensor.Identity
	if gl.Activation == "Relu" {
		act = tensor.ReLU
	}
	pos := gl.Position
	var err error
	switch {
	case pos == "None" || pos == "Isolated" || pos == "":
		if len(ins) != 1 || len(gl.Top) != 1 {
			err = fmt.Errorf("position %s takes 1 bottom and 1 top, has %d and %d", pos, len(ins), len(gl.Top))
		}
	case pos == "Head" && len(ins) == 2:
		err = m.auxIn(gl, auxGrad)
	case pos == "Head":
		err = m.auxIn(gl)
	default: // Body, Tail
		err = m.auxIn(gl, auxMask, auxDRelu, auxDB)
	}
	if err == nil && (pos == "Head" || pos == "Body") && len(gl.Top) != 4 {
		err = fmt.Errorf("position %s has 4 tops (x, x_mask, x_dRelu, x_db), not %d", pos, len(gl.Top))
	}
	if err == nil && pos == "Tail" && len(gl.Top) != 1 {
		err = fmt.Errorf("position Tail has 1 top, not %d", len(gl.Top))
	}
	if err == nil && act == tensor.Identity && (pos == "Head" || pos == "Body") {
		// HugeCTR: "The layer without activation function must be the
		// last layer in MLP."
		err = fmt.Errorf("activation %s at position %s: only the Tail (or a lone layer) may have no activation", gl.Activation, pos)
	}
	if err != nil {
		return nil, fmt.Errorf("FusedInnerProduct: %w", err)
	}
	in, err := initializers("weight_init", gl.WeightInit, "bias_init", gl.BiasInit)
	if err != nil {
		return nil, err
	}
	ip, err := layers.NewInnerProduct(m.ctx, ins[0], gl.NumOutput, act, in...)
	if err != nil || len(gl.Top) == 1 {
		return ip, err
	}
	out := ip.Outputs()[0]
	m.addAux(gl.Top, auxMask, auxDRelu, auxDB)
	return layers.WithAux(ip, &layers.Blob{Value: out.Value}, &layers.Blob{Value: out.Grad}, &layers.Blob{Value: ip.B.Grad}), nil
}

// buildInteraction2 builds an Interaction with HugeCTR's gradient top.
func (m *Model) buildInteraction2(gl graph.DenseLayer, ins []*layers.Blob) (layers.Layer, error) {
	l, err := layers.NewInteraction(m.ctx, ins[0], ins[1])
	if err != nil {
		return nil, err
	}
	m.addAux(gl.Top, auxGrad)
	return layers.WithAux(l, &layers.Blob{Value: l.Outputs()[0].Grad}), nil
}

// buildMisc builds Cast, PReLU_Dice, FusedReshapeConcat(General) and MLP.
func (m *Model) buildMisc(gl graph.DenseLayer, li graph.LayerInfo, ins []*layers.Blob, half bool) (layers.Layer, error) {
	c, x, s := m.ctx, ins[0], li.In[0]
	if gl.Type != graph.MLP && gl.Type != graph.FusedReshapeConcat && gl.Type != graph.FusedReshapeConcatGeneral && len(ins) != 1 {
		return nil, fmt.Errorf("%s takes one bottom, has %d", gl.Type, len(ins))
	}
	switch gl.Type {
	case graph.Cast:
		return layers.NewCast(c, x, half)
	case graph.PReLUDice:
		if len(s.Dims) != 1 {
			return nil, fmt.Errorf("%w: PReLU_Dice on %v (HugeCTR's takes 2-D [B, D] inputs)", ErrUnsupported, s)
		}
		return layers.NewDice(c, x, float64(gl.Alpha), float64(gl.Eps))
	case graph.FusedReshapeConcat:
		return layers.NewFusedReshapeConcat(c, ins, s.Dims[0])
	case graph.FusedReshapeConcatGeneral:
		return layers.NewFusedReshapeConcatGeneral(c, ins, s.Dims[0])
	}
	// MLP.
	if len(s.Dims) != 1 {
		return nil, fmt.Errorf("%w: MLP on %v (HugeCTR's takes 2-D [B, D] inputs)", ErrUnsupported, s)
	}
	if len(ins) == 2 {
		if err := m.auxIn(gl, auxGrad); err != nil {
			return nil, fmt.Errorf("MLP: %w", err)
		}
	} else if len(ins) != 1 {
		return nil, fmt.Errorf("MLP takes 1 bottom (or 2, the second an Interaction's gradient top), has %d", len(ins))
	}
	outs := gl.NumOutputs
	if len(outs) == 0 {
		outs = []int{gl.NumOutput}
	}
	act := func(key, a string) (tensor.Activation, error) {
		switch a {
		case "", "Relu": // HugeCTR's DenseLayer default is Relu
			return tensor.ReLU, nil
		case "None":
			return tensor.Identity, nil
		}
		return 0, fmt.Errorf("mlp_param.%s: activation %q (want Relu or None)", key, a)
	}
	acts := make([]tensor.Activation, len(outs))
	bias := make([]bool, len(outs))
	for i := range outs {
		a, err := act("activation", gl.MLPAct)
		if err != nil {
			return nil, err
		}
		acts[i], bias[i] = a, gl.UseBias == nil || *gl.UseBias
	}
	if len(gl.Activations) > 0 {
		if len(gl.Activations) != len(outs) {
			return nil, fmt.Errorf("mlp_param.activations: %d activations for %d layers (num_outputs)", len(gl.Activations), len(outs))
		}
		for i, a := range gl.Activations {
			var err error
			if acts[i], err = act(fmt.Sprintf("activations[%d]", i), a); err != nil {
				return nil, err
			}
		}
	}
	if len(gl.Biases) > 0 {
		if len(gl.Biases) != len(outs) {
			return nil, fmt.Errorf("mlp_param.biases: %d biases for %d layers (num_outputs)", len(gl.Biases), len(outs))
		}
		copy(bias, gl.Biases)
	}
	in, err := initializers("weight_init", gl.WeightInit, "bias_init", gl.BiasInit)
	if err != nil {
		return nil, err
	}
	return layers.NewMLP(c, x, outs, bias, acts, in...)
}
