package graph

import (
	"errors"
	"strings"
	"testing"
)

const initGraph = `{"layers": [
 {"name": "data", "type": "Data", "label": {"top": "label", "label_dim": 1},
  "dense": {"top": "dense", "dense_dim": 13},
  "sparse": [{"top": "data1", "type": "DistributedSlot", "max_feature_num_per_sample": 30, "slot_num": 26}]},
 {"name": "sparse_embedding1", "type": "DistributedSlotSparseEmbeddingHash", "bottom": "data1", "top": "sparse_embedding1",
  "sparse_embedding_hparam": {"max_vocabulary_size_per_gpu": 1000, "embedding_vec_size": 4, "combiner": 0}},
 {"type": "Reshape", "bottom": "sparse_embedding1", "top": "reshape1", "leading_dim": 104},
 {"type": "Concat", "bottom": ["reshape1", "dense"], "top": "concat1"},
 {"type": "BatchNorm", "bottom": "concat1", "top": "bn1", "bn_param": {"factor": 0.9, "eps": 1e-5 GAMMA}},
 {"type": "MultiCross", "bottom": "bn1", "top": "mc1", "mc_param": {"num_layers": 2 MC}},
 {"type": "WeightMultiply", "bottom": "dense", "top": "wm1", "weight_dims": [13, 2] WM},
 {"type": "InnerProduct", "bottom": "mc1", "top": "fc1", "fc_param": {"num_output": 1 FC}},
 {"type": "BinaryCrossEntropyLoss", "bottom": ["fc1", "label"], "top": "loss"}
]}`

func readInits(t *testing.T, gamma, mc, wm, fc string) (*Config, error) {
	t.Helper()
	s := strings.NewReplacer("GAMMA", gamma, "MC", mc, "WM", wm, "FC", fc).Replace(initGraph)
	return Read(strings.NewReader(s), "inits.json")
}

// TestInitializerKeys: every layer's initializer keys are read (Default
// as the omitted key), and an unknown or embedding-only name is an error
// that names the file, the key and the layer.
func TestInitializerKeys(t *testing.T) {
	cfg, err := readInits(t, `, "gamma_init": "Zero", "beta_init": "Uniform"`, `, "weight_init": "XavierNorm", "bias_init": "Zero"`,
		`, "weight_init": "Uniform"`, `, "weight_init": "XavierUniform", "bias_init": "Default"`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]string{}
	for _, l := range cfg.Graph.Layers {
		got[l.Type] = [2]string{l.WeightInit + l.GammaInit, l.BiasInit + l.BetaInit}
	}
	want := map[string][2]string{BatchNorm: {"Zero", "Uniform"}, MultiCross: {"XavierNorm", "Zero"},
		WeightMultiply: {"Uniform", ""}, InnerProduct: {"XavierUniform", ""}}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s initializers %q, want %q", k, got[k], w)
		}
	}
	for _, tc := range []struct {
		gamma, mc, wm, fc string
		want              []string
	}{
		{`, "gamma_init": "Ones"`, "", "", "", []string{"inits.json", "layers[4].bn_param.gamma_init", "BatchNorm bn1", `"Ones"`}},
		{"", `, "bias_init": "xavier"`, "", "", []string{"layers[5].mc_param.bias_init", "MultiCross mc1", `"xavier"`}},
		{"", "", `, "weight_init": "Sinusoidal"`, "", []string{"layers[6].weight_init", "WeightMultiply wm1", "Sinusoidal", "embedding tables"}},
		{"", "", "", `, "weight_init": ""`, []string{"layers[7].fc_param.weight_init", "InnerProduct fc1", `""`}},
		{"", "", "", `, "bias_init": 0`, []string{"layers[7].fc_param.bias_init", "string"}},
	} {
		_, err := readInits(t, tc.gamma, tc.mc, tc.wm, tc.fc)
		if err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: error %v", tc.want, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not name %s", err, w)
			}
		}
	}
}
