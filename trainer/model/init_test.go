package model

import (
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// TestBuildInitializers: the graph's initializer keys reach the layers
// (they were refused for InnerProduct and ignored for MultiCross,
// WeightMultiply and BatchNorm), and a bad name is an error naming the
// layer and the key.
func TestBuildInitializers(t *testing.T) {
	zeroParams := func(m *Model, typ string) (zero, all int) {
		for i, gl := range m.Graph.Layers {
			if gl.Type != typ {
				continue
			}
			for _, p := range m.dense[i].Params() {
				for _, v := range cpu.Data[float32](p.Value) {
					all++
					if v == 0 {
						zero++
					}
				}
			}
		}
		return zero, all
	}
	for _, name := range []string{"dcn", "deepfm"} {
		cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Graph.Layers {
			switch l := &cfg.Graph.Layers[i]; l.Type {
			case graph.InnerProduct, graph.MultiCross:
				l.WeightInit, l.BiasInit = "Zero", "Zero"
			case graph.WeightMultiply:
				l.WeightInit = "Zero"
			}
		}
		m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 8, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []string{graph.InnerProduct, graph.MultiCross, graph.WeightMultiply} {
			z, n := zeroParams(m, typ)
			rz, _ := zeroParams(ref, typ)
			if z != n {
				t.Errorf("%s %s: %d of %d weights zero with Zero initializers", name, typ, z, n)
			}
			if n > 0 && rz == n {
				t.Errorf("%s %s: all weights zero by default", name, typ)
			}
		}
		for i := range cfg.Graph.Layers {
			if cfg.Graph.Layers[i].Type == graph.InnerProduct {
				cfg.Graph.Layers[i].BiasInit = "Ones"
			}
		}
		_, err = Build(cfg, cpuBackend(t), Options{BatchSize: 8, Seed: 5})
		if err == nil || !strings.Contains(err.Error(), "bias_init") || !strings.Contains(err.Error(), `"Ones"`) || !strings.Contains(err.Error(), "InnerProduct") {
			t.Errorf("%s: bad bias_init: %v", name, err)
		}
	}
}
