package layers

import "github.com/ctrkit/ctrkit/trainer/tensor"

// Convert joins a half-precision region of the network to a float32 one
// (docs/PRECISION.md): its output is its input in the Ctx's activation
// dtype (Forward: Convert(out, in)), and Backward converts the output's
// gradient back into the input's (Convert(in.Grad, out.Grad)). An input
// without a gradient (the dense input) gives an output without one.
type Convert struct {
	c       *Ctx
	in, out *Blob
	dt      tensor.DType
}

// NewConvert builds a conversion of in to c.ActDT().
func NewConvert(c *Ctx, in *Blob) (*Convert, error) {
	if in == nil || in.Value.IsZero() {
		return nil, shapeErr("Convert", "missing input")
	}
	dt := c.ActDT()
	if !dt.IsFloat() || !in.Value.DType.IsFloat() {
		return nil, shapeErr("Convert", "%v to %v: both must be floating point", in.Value.DType, dt)
	}
	out := &Blob{Value: c.BE.Alloc(dt, in.Value.Shape...)}
	if !in.Grad.IsZero() {
		out.Grad = c.BE.Alloc(dt, in.Value.Shape...)
	}
	return &Convert{c: c, in: in, out: out, dt: dt}, nil
}

// Forward converts the input.
func (l *Convert) Forward(Pass) { l.c.BE.Convert(l.out.Value, l.in.Value) }

// Backward converts the gradient back.
func (l *Convert) Backward(Pass) {
	if !l.in.Grad.IsZero() {
		l.c.BE.Convert(l.in.Grad, l.out.Grad)
	}
}

// Params returns nothing.
func (l *Convert) Params() []Param { return nil }

// Outputs returns the converted blob.
func (l *Convert) Outputs() []*Blob { return []*Blob{l.out} }

// DType is the dtype the layer converts to.
func (l *Convert) DType() tensor.DType { return l.dt }

// Input is the blob the layer converts.
func (l *Convert) Input() *Blob { return l.in }
