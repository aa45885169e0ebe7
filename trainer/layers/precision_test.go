package layers

import (
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// builders construct every layer on random inputs; the same seed gives the
// same values (rounded) in either dtype.
var builders = map[string]func(c *Ctx) (Layer, []*Blob, Pass){
	"InnerProduct": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 37, 29)
		l, _ := NewInnerProduct(c, in, 70, tensor.Identity)
		return l, []*Blob{in}, Pass{}
	},
	"FusedInnerProduct": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 37, 29)
		l, _ := NewInnerProduct(c, in, 3, tensor.ReLU)
		return l, []*Blob{in}, Pass{}
	},
	"ELU": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 9, 8)
		l, _ := NewActivation(c, in, tensor.ELU, 1)
		return l, []*Blob{in}, Pass{}
	},
	"Sigmoid": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 9, 8)
		l, _ := NewActivation(c, in, tensor.Sigmoid, 0)
		return l, []*Blob{in}, Pass{}
	},
	"Concat": func(c *Ctx) (Layer, []*Blob, Pass) {
		a, b := input(c, 5, 3), input(c, 5, 4)
		l, _ := NewConcat(c, a, b)
		return l, []*Blob{a, b}, Pass{}
	},
	"Slice": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 5, 8)
		l, _ := NewSlice(c, in, [][2]int{{0, 5}, {3, 8}})
		return l, []*Blob{in}, Pass{}
	},
	"Reshape": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 5, 12)
		l, _ := NewReshape(c, in, 0, []int{2, 0}, 4)
		return l, []*Blob{in}, Pass{}
	},
	"Interaction": func(c *Ctx) (Layer, []*Blob, Pass) {
		x0, e := input(c, 6, 8), input(c, 6, 5*8)
		l, _ := NewInteraction(c, x0, e)
		return l, []*Blob{x0, e}, Pass{}
	},
	"MultiCrossV1": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 6, 9)
		l, _ := NewMultiCross(c, in, 2, 0)
		return l, []*Blob{in}, Pass{}
	},
	"MultiCrossV2": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 6, 9)
		l, _ := NewMultiCross(c, in, 2, 4)
		return l, []*Blob{in}, Pass{}
	},
	"Dropout": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 6, 9)
		l, _ := NewDropout(c, in, 0.5)
		return l, []*Blob{in}, Pass{Training: true, Iter: 3}
	},
	"BatchNorm": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 16, 5)
		l, _ := NewBatchNorm(c, in, tensor.BNParams{Factor: 0.5, Eps: 1e-5})
		return l, []*Blob{in}, Pass{Training: true}
	},
	"ElementwiseMultiply": func(c *Ctx) (Layer, []*Blob, Pass) {
		a, b := input(c, 5, 3), input(c, 5, 3)
		l, _ := NewElementwise(c, Multiply, a, b)
		return l, []*Blob{a, b}, Pass{}
	},
	"Sub": func(c *Ctx) (Layer, []*Blob, Pass) {
		a, b := input(c, 5, 3), input(c, 5, 3)
		l, _ := NewElementwise(c, Sub, a, b)
		return l, []*Blob{a, b}, Pass{}
	},
	"WeightMultiply": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 5, 3)
		l, _ := NewWeightMultiply(c, in, 4)
		return l, []*Blob{in}, Pass{}
	},
	"FmOrder2": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 5, 12)
		l, _ := NewFmOrder2(c, in, 4)
		return l, []*Blob{in}, Pass{}
	},
	"ReduceMean": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 5, 12)
		l, _ := NewReduce(c, in, []int{5, 3, 4}, 1, true)
		return l, []*Blob{in}, Pass{}
	},
	"Scale": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 5, 3)
		l, _ := NewScale(c, in, 0, 2)
		return l, []*Blob{in}, Pass{}
	},
	"Softmax": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 5, 6)
		l, _ := NewSoftmax(c, in)
		return l, []*Blob{in}, Pass{}
	},
	"BCE": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 50, 1)
		lab := &Blob{Value: c.alloc(50, 1)}
		c.Uniform(lab.Value, 0, 1)
		l, _ := NewLoss(c, BinaryCrossEntropy, in, lab, nil)
		return l, []*Blob{in}, Pass{Training: true}
	},
	"CrossEntropy": func(c *Ctx) (Layer, []*Blob, Pass) {
		in := input(c, 20, 3)
		lab := &Blob{Value: c.alloc(20, 1)}
		v := make([]float64, 20)
		for i := range v {
			v[i] = float64(i % 3)
		}
		c.upload(lab.Value, v)
		l, _ := NewLoss(c, CrossEntropy, in, lab, nil)
		return l, []*Blob{in}, Pass{Training: true}
	},
}

func values(t tensor.Tensor) []float64 {
	if t.DType == tensor.Float64 {
		return cpu.Data[float64](t)
	}
	f := cpu.Data[float32](t)
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out
}

// TestFloat32MatchesFloat64 runs every layer's forward and backward in
// float32 and float64 from the same values: the float32 kernels (the
// training path) must agree with the float64 reference to ‖Δ‖/‖ref‖ < 1e-5.
func TestFloat32MatchesFloat64(t *testing.T) {
	for name, build := range builders {
		var res [2][][]float64
		for k, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
			c := newCtx(t, 99)
			c.DT = dt
			l, ins, p := build(c)
			l.Forward(p)
			for _, o := range l.Outputs() {
				if !o.Grad.IsZero() {
					c.Normal(o.Grad, 1)
				}
			}
			l.Backward(p)
			if err := c.BE.Err(); err != nil {
				t.Fatalf("%s %v: %v", name, dt, err)
			}
			for _, o := range l.Outputs() {
				res[k] = append(res[k], values(o.Value))
			}
			for _, b := range ins {
				res[k] = append(res[k], values(b.Grad))
			}
			for _, pr := range l.Params() {
				res[k] = append(res[k], values(pr.Grad))
			}
		}
		for i := range res[0] {
			var num, den float64
			for j, w := range res[0][i] {
				d := res[1][i][j] - w
				num += d * d
				den += w * w
			}
			if e := math.Sqrt(num / math.Max(den, 1e-300)); e > 1e-5 || math.IsNaN(e) {
				t.Errorf("%s: tensor %d: float32 vs float64 relative error %g", name, i, e)
			}
		}
	}
}
