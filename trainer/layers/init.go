package layers

import (
	"fmt"
	"math"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Init is one of HugeCTR's initializers (Initializer_t). A trainable layer
// takes a list of them, HugeCTR's initializer_types: its weight tensor i
// (in the layer's Params order) uses list[i % len(list)]; an empty list is
// all Default. What each name means is the layer's own choice (HugeCTR's
// get_*_initializer overrides); the constructors document theirs, and
// docs/INITIALIZERS.md lists them with the HugeCTR sources.
type Init uint8

// Initializers, in Initializer_t order.
const (
	InitDefault Init = iota
	InitUniform
	InitXavierNorm
	InitXavierUniform
	// InitSinusoidal is the positional table of HugeCTR's embedding
	// collection (SinusoidalTable); no dense layer accepts it.
	InitSinusoidal
	InitZero
)

var initNames = [...]string{"Default", "Uniform", "XavierNorm", "XavierUniform", "Sinusoidal", "Zero"}

// String returns HugeCTR's name of the initializer.
func (i Init) String() string {
	if int(i) < len(initNames) {
		return initNames[i]
	}
	return fmt.Sprintf("Init(%d)", uint8(i))
}

// ParseInit maps HugeCTR's initializer names to an Init; "" is Default
// (the graph JSON omits Default).
func ParseInit(name string) (Init, error) {
	if name == "" {
		return InitDefault, nil
	}
	for i, s := range initNames {
		if s == name {
			return Init(i), nil
		}
	}
	return 0, fmt.Errorf("unknown initializer %q (want one of %v)", name, initNames[:])
}

// FillKind is the distribution of a Filler.
type FillKind uint8

// Filler kinds.
const (
	FillConstant FillKind = iota // every element A
	FillUniform                  // U(A, B)
	FillNormal                   // N(A, B²): mean A, standard deviation B
)

// Filler is the distribution one weight tensor starts from (HugeCTR's
// DataSimulator). HugeCTR's GaussianDataSimulator takes truncation bounds
// but ignores them, so FillNormal is an untruncated normal.
type Filler struct {
	Kind FillKind
	A, B float64
}

func constant(v float64) Filler    { return Filler{Kind: FillConstant, A: v} }
func uniform(limit float64) Filler { return Filler{Kind: FillUniform, A: -limit, B: limit} }
func normal(stddev float64) Filler { return Filler{Kind: FillNormal, B: stddev} }

// String returns "Kind(A, B)".
func (f Filler) String() string { return fmt.Sprintf("%v(%g, %g)", f.Kind, f.A, f.B) }

// String names the kind.
func (k FillKind) String() string {
	if int(k) < 3 {
		return [...]string{"Constant", "Uniform", "Normal"}[k]
	}
	return fmt.Sprintf("FillKind(%d)", uint8(k))
}

// fillAll fills each parameter from its filler (in order: the random
// draws follow HugeCTR's weight order).
func (c *Ctx) fillAll(ps []Param, fs []Filler) {
	for i := range ps {
		c.Fill(ps[i].Value, fs[i])
	}
}

// Fill draws t from f on the host (the context's random source, so the
// same seed gives the same weights on every backend) and uploads it.
func (c *Ctx) Fill(t tensor.Tensor, f Filler) {
	if f.Kind == FillConstant {
		c.BE.Fill(t, f.A)
		return
	}
	v := make([]float64, t.Len())
	for i := range v {
		if f.Kind == FillUniform {
			v[i] = f.A + (f.B-f.A)*c.Rand.Float64()
		} else {
			v[i] = f.A + f.B*c.Rand.NormFloat64()
		}
	}
	c.upload(t, v)
}

// truncNormalStd is the standard deviation of a unit normal truncated to
// ±2σ; HugeCTR's "truncated" variance scaling divides by it.
const truncNormalStd = 0.87962566103423978

// FanMode selects the fan of VarianceScaling.
type FanMode uint8

// Fan modes.
const (
	FanIn FanMode = iota
	FanOut
	FanAvg
)

// VarianceScaling is HugeCTR's VarianceScalingSimulator with scale 1:
// s = 1/max(1, fan) with fan = in, out or (in+out)/2; uniform draws
// U(±√(3s)), normal draws N(0, σ²) with σ = √s/0.8796… when truncated,
// else σ = √s.
func VarianceScaling(mode FanMode, uniformDist bool, in, out float64, truncated bool) Filler {
	fan := (in + out) / 2
	switch mode {
	case FanIn:
		fan = in
	case FanOut:
		fan = out
	}
	s := 1 / math.Max(1, fan)
	if uniformDist {
		return uniform(math.Sqrt(3 * s))
	}
	if truncated {
		return normal(math.Sqrt(s) / truncNormalStd)
	}
	return normal(math.Sqrt(s))
}

// InnerProductSigma is the σ of the default InnerProduct weight initializer
// (HugeCTR FullyConnectedLayer, SPEC §8): √(1/max(1,(in+out)/2))/0.8796….
func InnerProductSigma(in, out int) float64 {
	return VarianceScaling(FanAvg, false, float64(in), float64(out), true).B
}

// pick returns the initializer of weight index i.
func pick(inits []Init, i int) Init {
	if len(inits) == 0 {
		return InitDefault
	}
	return inits[i%len(inits)]
}

func badInit(layer string, i Init, index int) error {
	if i == InitSinusoidal {
		return fmt.Errorf("%s: initializer Sinusoidal fills embedding tables only (weight %d)", layer, index)
	}
	return fmt.Errorf("%s: unknown initializer %v (weight %d)", layer, i, index)
}

// InnerProductFiller is HugeCTR's FullyConnectedLayer initializer of
// weight index (0 the [in, out] weight, 1 the bias):
//
//	Default        W N(0, (√(1/max(1,(in+out)/2))/0.8796…)²), b N(0, 1/out)
//	Uniform        W U(±1/(in+out)),                          b U(±1/out)
//	XavierUniform  W VarianceScaling(avg, uniform, in, out),  b (avg, uniform, 0, out)
//	XavierNorm     W VarianceScaling(avg, normal, in, out),   b (avg, normal, 0, out)
//	Zero           0
func InnerProductFiller(i Init, index, in, out int) (Filler, error) {
	bottom, top := float64(in), float64(out)
	if index == 1 {
		bottom = 0
	}
	switch i {
	case InitDefault:
		if index == 0 {
			return VarianceScaling(FanAvg, false, bottom, top, true), nil
		}
		return normal(math.Sqrt(1 / top)), nil
	case InitUniform:
		return uniform(1 / (bottom + top)), nil
	case InitXavierUniform:
		return VarianceScaling(FanAvg, true, bottom, top, true), nil
	case InitXavierNorm:
		return VarianceScaling(FanAvg, false, bottom, top, true), nil
	case InitZero:
		return constant(0), nil
	}
	return Filler{}, badInit("InnerProduct", i, index)
}

// MultiCrossFiller is HugeCTR's MultiCrossLayer initializer of weight index
// over the layer's weights (v1: w_0, b_0, w_1, …; v2: U_0, V_0, b_0, U_1,
// …) for input width d and projection dimension p (0: v1). Only Zero (0)
// differs from Default; Uniform and the Xavier names fall back to it:
//
//	v1  w N(0, 1/d)                  b 0
//	v2  U N(0, 1/max(1,(d+p)/2))     V N(0, 1/max(1,(p+d)/2))   b 0
func MultiCrossFiller(i Init, index, d, p int) (Filler, error) {
	switch i {
	case InitZero:
		return constant(0), nil
	case InitDefault, InitUniform, InitXavierNorm, InitXavierUniform:
	default:
		return Filler{}, badInit("MultiCross", i, index)
	}
	fd, fp := float64(d), float64(p)
	if p == 0 {
		if index%2 == 0 {
			return VarianceScaling(FanAvg, false, fd, fd, false), nil
		}
		return constant(0), nil
	}
	switch index % 3 {
	case 0:
		return VarianceScaling(FanAvg, false, fd, fp, false), nil
	case 1:
		return VarianceScaling(FanAvg, false, fp, fd, false), nil
	}
	return constant(0), nil
}

// BatchNormFiller is HugeCTR's BatchNormLayer initializer (index 0 γ,
// 1 β): Default γ 1, β 0; Zero 0; Uniform and the Xavier names fall back
// to Default.
func BatchNormFiller(i Init, index int) (Filler, error) {
	switch i {
	case InitZero:
		return constant(0), nil
	case InitDefault, InitUniform, InitXavierNorm, InitXavierUniform:
		if index == 0 {
			return constant(1), nil
		}
		return constant(0), nil
	}
	return Filler{}, badInit("BatchNorm", i, index)
}

// WeightMultiplyFiller is HugeCTR's WeightMultiplyLayer initializer of its
// [d0, d1] weight, with fans bottom = d0 and top = d0·d1:
//
//	Default, XavierUniform  VarianceScaling(avg, uniform, d0, d0·d1)
//	XavierNorm              VarianceScaling(avg, normal, d0, d0·d1)
//	Uniform                 U(±1/(d0 + d0·d1))
//	Zero                    0
func WeightMultiplyFiller(i Init, d0, d1 int) (Filler, error) {
	bottom, top := float64(d0), float64(d0)*float64(d1)
	switch i {
	case InitDefault, InitXavierUniform:
		return VarianceScaling(FanAvg, true, bottom, top, true), nil
	case InitXavierNorm:
		return VarianceScaling(FanAvg, false, bottom, top, true), nil
	case InitUniform:
		return uniform(1 / (bottom + top)), nil
	case InitZero:
		return constant(0), nil
	}
	return Filler{}, badInit("WeightMultiply", i, 0)
}

// SinusoidalTable is HugeCTR's Sinusoidal initializer (the positional
// embedding table of its embedding collection): a [maxSeqLen, evSize]
// row-major table with row r, column c holding sin(r·e_c) for even c and
// cos(r·e_c) for odd c, e_c = exp(−2⌊c/2⌋·ln(10000)/evSize).
func SinusoidalTable(evSize, maxSeqLen int) ([]float64, error) {
	if evSize <= 0 || maxSeqLen <= 0 || evSize > 1<<20 || maxSeqLen > (1<<28)/evSize {
		return nil, fmt.Errorf("Sinusoidal: table of %d rows × %d is not positive or too large", maxSeqLen, evSize)
	}
	v := make([]float64, evSize*maxSeqLen)
	l := math.Log(10000) / float64(evSize)
	for r := 0; r < maxSeqLen; r++ {
		for c := 0; c < evSize; c++ {
			e := math.Exp(-float64(c&^1) * l)
			if c%2 == 1 {
				v[r*evSize+c] = math.Cos(e * float64(r))
			} else {
				v[r*evSize+c] = math.Sin(e * float64(r))
			}
		}
	}
	return v, nil
}
