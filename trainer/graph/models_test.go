package graph

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

var kaggleSlots = []int64{1459, 583, 6373320, 1977439, 305, 24, 12513, 633, 3, 92719, 5681, 5666265, 3193,
	27, 14986, 4209368, 10, 5652, 2173, 4, 5058596, 18, 15, 282062, 105, 141594}

// TestReferenceMatchesHugeCTR: the reference WDL and DLRM, sized like
// HugeCTR's samples, write HugeCTR's graph JSON byte for byte.
func TestReferenceMatchesHugeCTR(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "reconstructed")
	for _, c := range []struct {
		file, model string
		o           RefOptions
		gpus        int
	}{
		{"wdl_graph_v23.09.json", "wdl", RefOptions{DenseDim: 13, SlotSizes: append([]int64{1}, kaggleSlots...),
			NNZ: 2, WideNNZ: 30, WorkspaceMB: []int64{69, 1074}}, 1},
		{"dlrm_kaggle_fp32_graph_v23.09.json", "dlrm", RefOptions{DenseDim: 13, SlotSizes: kaggleSlots, NNZ: 2,
			EmbeddingType: LocalizedOneHot, WorkspaceMB: []int64{11645}}, 8},
	} {
		want, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Reference(c.model, c.o)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := cfg.Graph.WriteJSON(&got, WriteOptions{Optimizer: cfg.Optimizer, GPUs: c.gpus}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: %s", c.file, firstDiff(got.String(), string(want)))
		}
	}
}

// TestReferenceModels: every reference model infers, and DCN and DeepFM get
// HugeCTR's automatic slices.
func TestReferenceModels(t *testing.T) {
	o := RefOptions{DenseDim: 13, SlotSizes: kaggleSlots}
	want := map[string]int64{
		// bottom 13·512+512 + 512·256+256 + 256·128+128; top 480·1024+1024 +
		// 1024·1024+1024 + 1024·512+512 + 512·256+256 + 256+1
		"dlrm": 13*512 + 512 + 512*256 + 256 + 256*128 + 128 + 480*1024 + 1024 + 1024*1024 + 1024 + 1024*512 + 512 + 512*256 + 256 + 256 + 1,
		// slot 0 wide, 25 deep slots: 25·16 + 13 = 413 inputs
		"wdl": 413*1024 + 1024 + 1024*1024 + 1024 + 1024 + 1,
		// 26·16 + 13 = 429; cross 6·(429+429); deep as WDL; 1453 → 1
		"dcn": 6*2*429 + 429*1024 + 1024 + 1024*1024 + 1024 + (1024 + 429) + 1,
		// d = 128 + 26·128 = 3456; three low-rank cross layers U, V [d, 512]
		// and a bias [d]; the top MLP from d.
		"dcnv2": 13*512 + 512 + 512*256 + 256 + 256*128 + 128 + 3*(2*3456*512+3456) +
			3456*1024 + 1024 + 1024*1024 + 1024 + 1024*512 + 512 + 512*256 + 256 + 256 + 1,
	}
	for _, m := range ReferenceModels {
		cfg, err := Reference(m, o)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		info, err := cfg.Graph.Infer(cfg.Optimizer)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if w, ok := want[m]; ok && info.DenseParams != w {
			t.Errorf("%s: %d dense parameters, want %d", m, info.DenseParams, w)
		}
		var slices int
		for _, l := range cfg.Graph.Layers {
			if l.Type == Slice {
				slices++
			}
		}
		wantSlices := map[string]int{"dlrm": 0, "wdl": 0, "dcn": 1, "deepfm": 3}[m]
		if slices != wantSlices {
			t.Errorf("%s: %d Slice layers, want %d", m, slices, wantSlices)
		}
		// Written and read back, the graph is the same.
		var a, b bytes.Buffer
		cfg.Graph.WriteJSON(&a, WriteOptions{Optimizer: cfg.Optimizer})
		back, err := Read(bytes.NewReader(a.Bytes()), m)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		back.Graph.WriteJSON(&b, WriteOptions{Optimizer: cfg.Optimizer})
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: round trip changed the graph: %s", m, firstDiff(b.String(), a.String()))
		}
	}
	cfg, _ := Reference("dcn", o)
	if l := cfg.Graph.Layers[2]; l.Type != Slice || l.Top[0] != "concat1_slice0" || l.Ranges[1] != [2]int{0, 429} {
		t.Errorf("dcn layer 2 = %+v, want HugeCTR's concat1 slice", l)
	}
}
