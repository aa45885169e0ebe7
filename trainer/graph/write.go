package graph

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// WriteOptions tune WriteJSON.
type WriteOptions struct {
	// Optimizer is the model optimizer, written for embeddings without
	// their own (HugeCTR copies it in at add time); nil is DefaultOptimizer.
	Optimizer *Optimizer
	// GPUs multiplies max_vocabulary_size_global (HugeCTR writes per-GPU
	// vocabulary × global GPU count). 0 keeps a value read from a file
	// and otherwise means 1.
	GPUs int
	// HEAD writes like HugeCTR v25 (no sparse-input "type"); the default
	// is v23.09.
	HEAD bool
}

// Validate reports invalid options.
func (o *WriteOptions) Validate() error {
	if o.GPUs < 0 {
		return fmt.Errorf("GPUs %d < 0", o.GPUs)
	}
	return nil
}

// obj is a JSON object; the encoder sorts its keys like nlohmann::json.
type obj map[string]any

// f32 is a float32 hyper-parameter, printed as nlohmann prints the double it
// widens to.
type f32 float32

// WriteJSON writes g as HugeCTR's graph_to_json does (see the package doc).
func (g *Graph) WriteJSON(w io.Writer, o WriteOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	var buf bytes.Buffer
	encode(&buf, g.jsonValue(o), 0)
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteFile writes the graph JSON to path atomically (temporary file and
// rename).
func (g *Graph) WriteFile(path string, o WriteOptions) error {
	var buf bytes.Buffer
	if err := g.WriteJSON(&buf, o); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

func names(s []string) any {
	if len(s) == 1 {
		return s[0]
	}
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func ints[T int | int64](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

func (g *Graph) jsonValue(o WriteOptions) obj {
	model := o.Optimizer
	if model == nil {
		model = DefaultOptimizer()
	}
	var layers []any
	layers = append(layers, g.dataJSON(o))
	for i := range g.Embeddings {
		layers = append(layers, g.Embeddings[i].jsonValue(model, o))
	}
	for i := range g.Layers {
		layers = append(layers, g.denseJSON(&g.Layers[i]))
	}
	top := obj{"layers": layers}
	if g.ModelName != "" {
		top["model_name"] = g.ModelName
	}
	return top
}

func (g *Graph) dataJSON(o WriteOptions) obj {
	in := g.Input
	label := obj{}
	if len(in.LabelTops) == 1 {
		label["top"] = in.LabelTops[0]
		label["label_dim"] = int64(in.LabelDims[0])
	} else {
		idx := make([]int, len(in.LabelTops))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return in.LabelTops[idx[a]] < in.LabelTops[idx[b]] })
		var tops, dims []any
		for _, i := range idx {
			tops = append(tops, in.LabelTops[i])
			dims = append(dims, int64(in.LabelDims[i]))
		}
		label["top"], label["label_dim"] = tops, dims
	}
	var sparse []any
	for _, s := range in.Sparse {
		so := obj{"top": s.Top, "slot_num": int64(s.SlotNum), "is_fixed_length": s.IsFixedLength,
			"nnz_per_slot": ints(s.NNZPerSlot)}
		if !o.HEAD {
			so["type"] = "DistributedSlot"
		}
		sparse = append(sparse, so)
	}
	if sparse == nil {
		sparse = []any{}
	}
	return obj{"type": "Data", "label": label,
		"dense": obj{"top": in.DenseTop, "dense_dim": int64(in.DenseDim)}, "sparse": sparse}
}

func (e *SparseEmbedding) jsonValue(model *Optimizer, o WriteOptions) obj {
	opt := e.Optimizer
	if opt == nil {
		opt = model
	}
	mb := e.WorkspaceMB
	if mb == 0 && e.MaxVocabPerGPU > 0 {
		// ≤ v3.0 vocabulary: the smallest workspace that holds it.
		per := int64(1+opt.StateCopies()) * 4 * int64(e.VecSize)
		mb = (e.MaxVocabPerGPU*per + 1<<20 - 1) >> 20
	}
	perGPU := (&SparseEmbedding{WorkspaceMB: mb, VecSize: e.VecSize}).VocabPerGPU(opt)
	global := perGPU
	switch {
	case o.GPUs > 0:
		global = perGPU * int64(o.GPUs)
	case e.MaxVocabGlobal > 0:
		global = e.MaxVocabGlobal
	}
	h := obj{"embedding_vec_size": int64(e.VecSize), "combiner": e.Combiner,
		"workspace_size_per_gpu_in_mb": mb, "max_vocabulary_size_global": global}
	if len(e.SlotSizeArray) > 0 {
		h["slot_size_array"] = ints(e.SlotSizeArray)
	}
	if hp := e.Hybrid; hp != nil {
		h["max_num_frequent_categories"] = int64(hp.MaxNumFrequentCategories)
		h["max_num_infrequent_samples"] = hp.MaxNumInfrequentSamples
		h["p_dup_max"] = hp.PDupMax
		h["max_all_reduce_bandwidth"] = hp.MaxAllReduceBandwidth
		h["max_all_to_all_bandwidth"] = hp.MaxAllToAllBandwidth
		h["efficiency_bandwidth_ratio"] = hp.EfficiencyBandwidthRatio
		h["communication_type"] = hp.CommunicationType
		h["hybrid_embedding_type"] = hp.HybridEmbeddingType
	}
	return obj{"type": e.Type, "bottom": e.Bottom, "top": e.Top,
		"sparse_embedding_hparam": h, "optimizer": opt.jsonValue()}
}

func (o *Optimizer) jsonValue() obj {
	v := obj{"type": o.Type, "update_type": o.UpdateType}
	switch o.Type {
	case "Adam":
		v["adam_hparam"] = obj{"beta1": f32(o.Beta1), "beta2": f32(o.Beta2), "epsilon": f32(o.Epsilon)}
	case "AdaGrad":
		v["adagrad_hparam"] = obj{"initial_accu_value": f32(o.InitialAccuValue), "epsilon": f32(o.Epsilon)}
	case "MomentumSGD":
		v["momentum_sgd_hparam"] = obj{"momentum_factor": f32(o.MomentumFactor)}
	case "Nesterov":
		v["nesterov_hparam"] = obj{"momentum_factor": f32(o.MomentumFactor)}
	case "SGD":
		v["sgd_hparam"] = obj{"atomic_update": o.AtomicUpdate}
	case "Ftrl":
		v["ftrl_hparam"] = obj{"beta": f32(o.Beta), "lambda1": f32(o.Lambda1), "lambda2": f32(o.Lambda2)}
	}
	return v
}

func inits(m obj, l *DenseLayer, weight, bias string) {
	if l.WeightInit != "" && weight != "" {
		m[weight] = l.WeightInit
	}
	if l.BiasInit != "" && bias != "" {
		m[bias] = l.BiasInit
	}
}

func (g *Graph) denseJSON(l *DenseLayer) obj {
	m := obj{"type": l.Type, "bottom": names(l.Bottom), "top": names(l.Top)}
	switch l.Type {
	case InnerProduct, FusedInnerProduct:
		p := obj{"num_output": int64(l.NumOutput)}
		inits(p, l, "weight_init", "bias_init")
		m["fc_param"] = p
		if l.Type == FusedInnerProduct {
			m["position"], m["activation"] = l.Position, l.Activation
		}
	case MLP:
		p := obj{"num_output": int64(l.NumOutput)}
		if len(l.NumOutputs) > 0 {
			p["num_outputs"] = ints(l.NumOutputs)
		}
		if len(l.Biases) > 0 {
			var b []any
			for _, v := range l.Biases {
				b = append(b, v)
			}
			p["biases"] = b
		} else {
			p["use_bias"] = l.UseBias == nil || *l.UseBias
		}
		if len(l.Activations) > 0 {
			var a []any
			for _, v := range l.Activations {
				a = append(a, v)
			}
			p["activations"] = a
		} else {
			act := l.MLPAct
			if act == "" {
				act = "Relu"
			}
			p["activation"] = act
		}
		inits(p, l, "weight_init", "bias_init")
		m["mlp_param"] = p
	case Dropout:
		m["rate"] = f32(l.Rate)
	case ELU:
		m["elu_param"] = obj{"alpha": f32(l.Alpha)}
	case PReLUDice:
		m["prelu_dice_param"] = obj{"alpha": f32(l.Alpha), "elu_alpha": f32(l.Alpha), "eps": f32(l.Eps)}
	case BatchNorm:
		p := obj{"factor": f32(l.Factor), "eps": f32(l.Eps)}
		if l.GammaInit != "" {
			p["gamma_init"] = l.GammaInit
		}
		if l.BetaInit != "" {
			p["beta_init"] = l.BetaInit
		}
		m["bn_param"] = p
	case LayerNorm:
		p := obj{"eps": f32(l.Eps)}
		if l.GammaInit != "" {
			p["gamma_init"] = l.GammaInit
		}
		if l.BetaInit != "" {
			p["beta_init"] = l.BetaInit
		}
		m["ln_param"] = p
	case Concat, ReduceSum, ReduceMean:
		m["axis"] = int64(l.Axis)
	case Reshape:
		if len(l.Selected) > 0 {
			m["selected"] = ints(l.Selected)
		} else {
			m["leading_dim"], m["time_step"] = int64(l.LeadingDim), int64(l.TimeStep)
		}
	case Slice:
		var r []any
		for _, p := range l.Ranges {
			r = append(r, []any{int64(p[0]), int64(p[1])})
		}
		m["ranges"] = r
	case MultiCross:
		p := obj{"num_layers": int64(l.NumLayers)}
		if l.ProjectionDim != 0 {
			p["projection_dim"] = int64(l.ProjectionDim)
		}
		inits(p, l, "weight_init", "bias_init")
		m["mc_param"] = p
	case WeightMultiply:
		m["weight_dims"] = ints(l.WeightDims)
		inits(m, l, "weight_init", "")
	case FmOrder2:
		m["out_dim"] = int64(l.OutDim)
	case Softmax:
		m["factor"] = f32(l.Factor)
	case Scale:
		m["scale_param"] = obj{"axis": int64(l.Axis), "factor": f32(l.Factor)}
	case Gather:
		m["indices"] = ints(l.Indices)
	case GRU:
		p := obj{"num_output": int64(l.NumOutput), "batchsize": int64(l.GRUBatchSize),
			"SeqLength": int64(l.SeqLength), "vector_size": int64(l.VectorSize)}
		inits(p, l, "weight_init", "bias_init")
		m["gru_param"] = p
	case MultiHeadAttention:
		m["num_attention_heads"], m["transpose_b"] = int64(l.NumAttentionHeads), l.TransposeB
	case SequenceMask:
		m["max_sequence_len_from"], m["max_sequence_len_to"] = int64(l.MaxSeqLenFrom), int64(l.MaxSeqLenTo)
	case BinaryCrossEntropyLoss, CrossEntropyLoss, MultiCrossEntropyLoss:
		if l.Regularizer != "" {
			m["regularizer"], m["lambda"] = l.Regularizer, f32(l.Lambda)
		}
		if l.Type == MultiCrossEntropyLoss {
			tw := l.TargetWeight
			if len(tw) == 0 && len(l.Bottom) == 2 {
				// HugeCTR's reader requires target_weight; the default is
				// one weight per label column.
				for i, t := range g.Input.LabelTops {
					if t == l.Bottom[1] {
						tw = make([]float32, g.Input.LabelDims[i])
						for j := range tw {
							tw[j] = 1
						}
					}
				}
			}
			if len(tw) > 0 {
				var a []any
				for _, v := range tw {
					a = append(a, f32(v))
				}
				m["target_weight"] = a
			}
		}
	}
	return m
}

// encode writes v as nlohmann::json's dump(2) does.
func encode(b *bytes.Buffer, v any, depth int) {
	switch x := v.(type) {
	case obj:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("{\n")
		for i, k := range keys {
			indent(b, depth+1)
			encodeString(b, k)
			b.WriteString(": ")
			encode(b, x[k], depth+1)
			if i < len(keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		indent(b, depth)
		b.WriteByte('}')
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, e := range x {
			indent(b, depth+1)
			encode(b, e, depth+1)
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		indent(b, depth)
		b.WriteByte(']')
	case string:
		encodeString(b, x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case f32:
		b.WriteString(FormatFloat(float64(x)))
	case float64:
		b.WriteString(FormatFloat(x))
	default:
		panic(fmt.Sprintf("graph: encode %T", v)) // unreachable: jsonValue builds only the types above
	}
}

func indent(b *bytes.Buffer, depth int) { b.WriteString(strings.Repeat("  ", depth)) }

func encodeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// FormatFloat prints x the way nlohmann/json 3.9 dumps a double: Grisu2
// digits (round-trip, not always the shortest: 86.86599731445313 where the
// shortest is …312), then the "1.0", "0.001", "1e-07" layout of nlohmann's
// format_buffer; NaN and infinities as null.
func FormatFloat(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "null"
	}
	if x == 0 {
		if math.Signbit(x) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if x < 0 {
		sign, x = "-", -x
	}
	d, e10 := grisu2(x)
	digits := string(d)
	k := len(digits)
	n := k + e10 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 15:
		return sign + digits + strings.Repeat("0", n-k) + ".0"
	case 0 < n && n <= 15:
		return sign + digits[:n] + "." + digits[n:]
	case -4 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	m := digits[:1]
	if k > 1 {
		m += "." + digits[1:]
	}
	e := n - 1
	es := "+"
	if e < 0 {
		es, e = "-", -e
	}
	return fmt.Sprintf("%s%se%s%02d", sign, m, es, e)
}
