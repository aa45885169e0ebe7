package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

func ones(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// mlperfModel is a small MLPerf-form DLRM: Cast on the dense input, a
// FusedInnerProduct Head/Tail bottom MLP, an Interaction with its gradient
// top, a Head(2 bottoms)/Body/Tail top MLP.
func mlperfModel() *graph.Config {
	fc := func(pos, act string, bottom []string, top string, n int) graph.DenseLayer {
		tops := []string{top}
		if pos == "Head" || pos == "Body" {
			tops = []string{top, top + "_mask", top + "_dRelu", top + "_db"}
		}
		return graph.DenseLayer{Type: graph.FusedInnerProduct, Bottom: bottom, Top: tops, NumOutput: n, Position: pos, Activation: act}
	}
	aux := func(t string) []string { return []string{t, t + "_mask", t + "_dRelu", t + "_db"} }
	g := &graph.Graph{
		Input: graph.Input{LabelTops: []string{"label"}, LabelDims: []int{1}, DenseTop: "dense", DenseDim: 4,
			Sparse: []graph.SparseParam{{Top: "data1", SlotNum: 6, NNZPerSlot: ones(6), IsFixedLength: true}}},
		Embeddings: []graph.SparseEmbedding{{Type: graph.LocalizedOneHot, Bottom: "data1", Top: "emb", VecSize: 4,
			Combiner: "sum", SlotSizeArray: smallSlots}},
		Layers: []graph.DenseLayer{
			{Type: graph.Cast, Bottom: []string{"dense"}, Top: []string{"dense16"}},
			fc("Head", "Relu", []string{"dense16"}, "b1", 8),
			fc("Tail", "Relu", aux("b1"), "b2", 4),
			{Type: graph.Interaction, Bottom: []string{"b2", "emb"}, Top: []string{"inter", "inter_grad"}},
			fc("Head", "Relu", []string{"inter", "inter_grad"}, "t1", 16),
			fc("Body", "Relu", aux("t1"), "t2", 8),
			fc("Tail", "None", aux("t2"), "t3", 1),
			{Type: graph.BinaryCrossEntropyLoss, Bottom: []string{"t3", "label"}, Top: []string{"loss"}},
		},
	}
	return &graph.Config{Graph: g}
}

// dinSlots are the twelve slots of dinLikeModel's four sparse inputs.
var dinSlots = append(append([]int64(nil), smallSlots...), smallSlots...)

// dinLikeModel uses FusedReshapeConcat, FusedReshapeConcatGeneral, MLP
// (with an unused bias) and PReLU_Dice.
func dinLikeModel() *graph.Config {
	sp := func(top string) graph.SparseParam {
		return graph.SparseParam{Top: top, SlotNum: 3, NNZPerSlot: ones(3), IsFixedLength: true}
	}
	emb := func(in, top string, v int) graph.SparseEmbedding {
		return graph.SparseEmbedding{Type: graph.DistributedHash, Bottom: in, Top: top, VecSize: v, Combiner: "sum", WorkspaceMB: 1}
	}
	g := &graph.Graph{
		Input: graph.Input{LabelTops: []string{"label"}, LabelDims: []int{1}, DenseTop: "dense", DenseDim: 4,
			Sparse: []graph.SparseParam{sp("data1"), sp("data2"), sp("data3"), sp("data4")}},
		Embeddings: []graph.SparseEmbedding{emb("data1", "e1", 4), emb("data2", "e2", 6), emb("data3", "e3", 2), emb("data4", "e4", 3)},
		Layers: []graph.DenseLayer{
			{Type: graph.FusedReshapeConcat, Bottom: []string{"e1", "e2"}, Top: []string{"hist", "item"}},
			{Type: graph.Reshape, Bottom: []string{"hist"}, Top: []string{"hist_r"}, LeadingDim: 20},
			{Type: graph.FusedReshapeConcatGeneral, Bottom: []string{"e3", "e4"}, Top: []string{"gen"}},
			{Type: graph.Reshape, Bottom: []string{"gen"}, Top: []string{"gen_r"}, LeadingDim: 15},
			{Type: graph.Concat, Bottom: []string{"hist_r", "item", "gen_r", "dense"}, Top: []string{"c"}, Axis: 1},
			{Type: graph.MLP, Bottom: []string{"c"}, Top: []string{"m1"}, NumOutput: 8, NumOutputs: []int{16, 8}, Biases: []bool{true, false}},
			{Type: graph.PReLUDice, Bottom: []string{"m1"}, Top: []string{"d1"}, Alpha: 0.2, Eps: 1e-8},
			{Type: graph.MLP, Bottom: []string{"d1"}, Top: []string{"out"}, NumOutput: 1, NumOutputs: []int{1}, MLPAct: "None", WeightInit: "XavierNorm"},
			{Type: graph.BinaryCrossEntropyLoss, Bottom: []string{"out", "label"}, Top: []string{"loss"}},
		},
	}
	return &graph.Config{Graph: g}
}

// TestMiscLayersTrainSaveLoad: both models train on the CPU, learn, and
// reload from their files to predictions equal bit for bit.
func TestMiscLayersTrainSaveLoad(t *testing.T) {
	for name, cfg := range map[string]*graph.Config{"mlperf": mlperfModel(), "din-like": dinLikeModel()} {
		t.Run(name, func(t *testing.T) {
			slots := smallSlots
			if name == "din-like" {
				slots = dinSlots
			}
			train := newPlanted(1, 4096, 4, slots)
			eval := newPlanted(2, 1024, 4, slots)
			opt := graph.DefaultOptimizer()
			opt.LearningRate = 0.01
			o := Options{BatchSize: 64, Seed: 5, Optimizer: opt, MixedPrecision: name == "mlperf"}
			m, err := Build(cfg, cpuBackend(t), o)
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Fit(context.Background(), FitOptions{
				OpenTrain: func() (formats.Reader, error) { return train.reader(64), nil },
				OpenEval:  func() (formats.Reader, error) { return eval.reader(64), nil },
				NumEpochs: 2, EvalInterval: 128})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: eval AUC %.4f, planted %.4f", name, res.LastAUC, eval.auc)
			if res.LastAUC < 0.6 || math.IsNaN(res.LastAUC) {
				t.Errorf("eval AUC %.4f after %d steps: not learning", res.LastAUC, res.Iters)
			}
			want, err := m.Predict(nil, eval.reader(64), 0)
			if err != nil {
				t.Fatal(err)
			}
			prefix := filepath.Join(t.TempDir(), "m")
			if err := m.Save(prefix, 7); err != nil {
				t.Fatal(err)
			}
			if st, _ := os.Stat(prefix + "_dense_7.model"); st == nil || st.Size() != 4*m.Info.DenseParams {
				t.Errorf("dense file %v, want %d bytes", st, 4*m.Info.DenseParams)
			}
			o.Seed = 99
			m2, err := Build(cfg, cpuBackend(t), o)
			if err != nil {
				t.Fatal(err)
			}
			if err := m2.Load(prefix, 7); err != nil {
				t.Fatal(err)
			}
			got, err := m2.Predict(nil, eval.reader(64), 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("prediction %d: %v after load, %v before", i, got[i], want[i])
				}
			}
		})
	}
}

// TestMLPDenseFileLayout: an MLP's dense-file block is W_0, b_0, W_1, b_1
// with a bias per layer even without use_bias (HugeCTR's MLPLayer).
func TestMLPDenseFileLayout(t *testing.T) {
	cfg := dinLikeModel()
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var shapes [][]int
	for _, li := range m.Info.Layers {
		shapes = append(shapes, li.ParamShapes...)
	}
	want := "[[49 16] [16] [16 8] [8] [8 1] [1]]"
	if got := fmt.Sprint(shapes); got != want {
		t.Fatalf("param shapes %s, want %s", got, want)
	}
	// FusedReshapeConcatGeneral's top is HugeCTR's 2-D [B·S, W].
	if s := m.Info.Tensors["gen"]; s.Rows != 3 || fmt.Sprint(s.Dims) != "[5]" {
		t.Errorf("FusedReshapeConcatGeneral top %v, want [B·3, 5]", s)
	}
	for i, p := range m.params {
		if p.Value.Len() != prod1(shapes[i]) {
			t.Errorf("param %d: %v, graph %v", i, p.Value, shapes[i])
		}
	}
}

func prod1(d []int) int {
	p := 1
	for _, x := range d {
		p *= x
	}
	return p
}

// TestFusedFormErrors: the plumbing tops of the fused forms are refused
// anywhere but in their consumer, and a wrong order is named.
func TestFusedFormErrors(t *testing.T) {
	for _, c := range []struct {
		edit func(g *graph.Graph)
		want string
	}{
		{func(g *graph.Graph) {
			g.Layers[2].Bottom[1], g.Layers[2].Bottom[2] = g.Layers[2].Bottom[2], g.Layers[2].Bottom[1]
		}, `must be the mask top of "b1"`},
		{func(g *graph.Graph) {
			g.Layers[4].Position = "None"
		}, `"inter_grad" is the gradient top of "inter"`},
		{func(g *graph.Graph) { g.Layers[1].Activation = "None" }, "only the Tail"},
		{func(g *graph.Graph) { g.Layers[2].Top = append(g.Layers[2].Top, "x") }, "Tail has 1 top"},
	} {
		cfg := mlperfModel()
		c.edit(cfg.Graph)
		_, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	cfg := dinLikeModel()
	cfg.Graph.Layers[5].Activations = []string{"Relu"}
	if _, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8}); err == nil || !strings.Contains(err.Error(), "1 activations for 2 layers") {
		t.Errorf("MLP with 1 activation for 2 layers: %v", err)
	}
	cfg = dinLikeModel()
	cfg.Graph.Layers[5].MLPAct = "Tanh"
	if _, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8}); err == nil || !strings.Contains(err.Error(), `activation "Tanh"`) {
		t.Errorf("MLP activation Tanh: %v", err)
	}
}

// TestFusedFixtures: HugeCTR's own MLP DLRM (test/group_fc_test/dlrm_mlp.py)
// and MLPerf DLRM (samples/dlrm/dgx_a100.py: FusedInnerProduct
// Head/Body/Tail, Interaction with its gradient top), as graph_to_json
// writes them (testdata/README.md), read, build with shrunk tables, train a
// few steps on the CPU and reload from their files bit for bit.
func TestFusedFixtures(t *testing.T) {
	slots := make([]int64, 26)
	for i := range slots {
		slots[i] = int64(3 + i%5)
	}
	train := newPlanted(3, 512, 13, slots)
	eval := newPlanted(4, 200, 13, slots)
	for _, name := range []string{"dlrm_mlp_group_fc.json", "dlrm_dgx_a100_fused.json"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := graph.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			for i := range cfg.Graph.Embeddings {
				e := &cfg.Graph.Embeddings[i]
				e.VecSize = 16 // shrunk; the bottom MLP's last width follows it
				if e.SlotSizeArray != nil {
					e.SlotSizeArray = slots
				} else {
					e.WorkspaceMB, e.MaxVocabGlobal = 1, 0
				}
			}
			for i := range cfg.Graph.Layers {
				l := &cfg.Graph.Layers[i]
				if n := len(l.NumOutputs); n > 0 && l.Bottom[0] == "dense" {
					l.NumOutputs[n-1] = 16
				}
				if l.Top[0] == "fc3" {
					l.NumOutput = 16
				}
			}
			o := Options{BatchSize: 32, Seed: 2, MixedPrecision: true, LossScale: 1024}
			m, err := Build(cfg, cpuBackend(t), o)
			if err != nil {
				t.Fatal(err)
			}
			first, last := 0.0, 0.0
			for it := 0; it < 12; it++ {
				_, err := m.Fit(context.Background(), FitOptions{OpenTrain: func() (formats.Reader, error) { return train.reader(32), nil }, MaxIter: it + 1})
				if err != nil {
					t.Fatal(err)
				}
				l, err := m.Loss()
				if err != nil {
					t.Fatal(err)
				}
				if it == 0 {
					first = l
				}
				last = l
			}
			// The same first batch each step: its loss must fall.
			if !(last < first) {
				t.Fatalf("loss %v → %v over 12 steps on one batch", first, last)
			}
			t.Logf("%s: loss %.4f → %.4f", name, first, last)
			want, err := m.Predict(nil, eval.reader(32), 0)
			if err != nil {
				t.Fatal(err)
			}
			prefix := filepath.Join(t.TempDir(), "m")
			if err := m.Save(prefix, 12); err != nil {
				t.Fatal(err)
			}
			o.Seed = 7
			m2, err := Build(cfg, cpuBackend(t), o)
			if err != nil {
				t.Fatal(err)
			}
			if err := m2.Load(prefix, 12); err != nil {
				t.Fatal(err)
			}
			got, err := m2.Predict(nil, eval.reader(32), 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("prediction %d: %v after load, %v before", i, got[i], want[i])
				}
			}
		})
	}
}

// TestGatherRefused: Gather is refused by name with HugeCTR's reason and
// the layers that select features per sample (docs/LAYERS.md).
func TestGatherRefused(t *testing.T) {
	cfg := mlperfModel()
	cfg.Graph.Layers[0] = graph.DenseLayer{Type: graph.Gather, Bottom: []string{"dense"}, Top: []string{"dense16"}, Indices: []int{0, 2}}
	_, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "Gather: its indices pick batch rows") ||
		!strings.Contains(err.Error(), "use Slice") || !strings.Contains(err.Error(), "Reshape with selected") {
		t.Errorf("Gather: %v", err)
	}
}

// TestFusedChainGradientFlows: through the two-top Interaction and the
// Head/Tail plumbing the bottom MLP's weights train (its first weight
// changes), and the top MLP's Tail bias gets a gradient.
func TestFusedChainGradientFlows(t *testing.T) {
	train := newPlanted(1, 256, 4, smallSlots)
	m, err := Build(mlperfModel(), cpuBackend(t), Options{BatchSize: 64, Seed: 5, MixedPrecision: true})
	if err != nil {
		t.Fatal(err)
	}
	get := func(i int) []float32 {
		v := make([]float32, m.params[i].Value.Len())
		if err := m.be.Download(v, m.params[i].Value); err != nil {
			t.Fatal(err)
		}
		return v
	}
	w0 := get(0) // the bottom Head's W
	if _, err := m.Fit(context.Background(), FitOptions{OpenTrain: func() (formats.Reader, error) { return train.reader(64), nil }, MaxIter: 3}); err != nil {
		t.Fatal(err)
	}
	same := true
	for i, v := range get(0) {
		same = same && v == w0[i]
	}
	if same {
		t.Error("the bottom FusedInnerProduct Head's weight did not change: no gradient through Interaction's gradient top")
	}
}
