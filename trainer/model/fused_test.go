package model

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// fusedRefModels are the reference models whose MLPs fuse.
var fusedRefModels = []string{"dlrm", "wdl", "dcn", "dcnv2"}

// TestFusedMatchesPlain trains each reference model on the CPU twice from
// one seed: with the plain operations, and through tensor.FusedReference
// (the fused semantics run with plain operations; side-stream weight
// gradients deferred until the model joins them). Folding ReLUs into their
// InnerProducts, the chained dReLU/bias-gradient GEMMs and the deferred
// weight gradients must give the same losses and weights: the same float32
// operations on the same values, so equal to the last bit. A model that
// read a weight gradient before joining (or overwrote a side GEMM's
// operand) would differ.
func TestFusedMatchesPlain(t *testing.T) {
	sizes := []int64{50, 80, 30, 120, 60}
	const batch, steps = 64, 6
	data := newPlanted(5, batch*steps, 13, sizes)
	for _, name := range fusedRefModels {
		t.Run(name, func(t *testing.T) {
			opt := &graph.Optimizer{Type: "Adam", UpdateType: "Global", LearningRate: 0.01, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7}
			cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 8, Width: 1.0 / 16, Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c2, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ref := newFusedCPU(c2)
			lp, mp := trainModel(t, cfg, plain, data, batch, steps)
			lf, mf := trainModel(t, cfg, ref, data, batch, steps)
			for i := range lp {
				if lp[i] != lf[i] || math.IsNaN(lp[i]) {
					t.Errorf("step %d: fused loss %.9g, plain %.9g", i+1, lf[i], lp[i])
				}
			}
			for i := range mp.params {
				a, b := downloadF32(t, plain, mp.params[i].Value), downloadF32(t, ref, mf.params[i].Value)
				for j := range a {
					if a[j] != b[j] {
						t.Fatalf("parameter %d (%s) [%d]: fused %g, plain %g", i, mp.params[i].Name, j, b[j], a[j])
					}
				}
			}
			if n := reluIPs(mf); n == 0 || reluIPs(mp) != 0 {
				t.Errorf("%d InnerProducts took their ReLU fused, %d plain", n, reluIPs(mp))
			}
			if ref.Calls["GemmBgrad"] == 0 {
				t.Errorf("fused calls %v: no weight-gradient GEMM", ref.Calls)
			}
			// WDL's and DCN's ReLUs feed Dropout: no chain, no mask.
			if name != "wdl" && name != "dcn" && (ref.Calls["GemmDReLUBgrad"] == 0 || ref.Calls["GemmBiasReLUMask"] == 0) {
				t.Errorf("fused calls %v: no chained dReLU GEMM", ref.Calls)
			}
			t.Logf("%s: fused calls %v", name, ref.Calls)
		})
	}
}

// TestFusedOffBuildsPlain: a backend whose fused kernels are off builds the
// graph as written and calls none of them.
func TestFusedOffBuildsPlain(t *testing.T) {
	sizes := []int64{50, 80, 30}
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 8, Width: 1.0 / 16})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := newFusedCPU(c)
	ref.Off = true
	data := newPlanted(5, 64*2, 13, sizes)
	trainModel(t, cfg, ref, data, 64, 2)
	if len(ref.Calls) != 0 {
		t.Fatalf("fused calls %v with fusion off", ref.Calls)
	}
}

// trainModel trains steps batches and returns the losses and the model.
func trainModel(t *testing.T, cfg *graph.Config, be tensor.Backend, data *planted, batch, steps int) ([]float64, *Model) {
	t.Helper()
	m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	r := data.reader(batch)
	b, err := formats.NewBatch(r.Schema(), batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for i := 0; i < steps; i++ {
		if _, err := r.Read(b); err != nil && i < steps-1 {
			t.Fatal(err)
		}
		if err := m.TrainStep(b); err != nil {
			t.Fatalf("%s step %d: %v", be.Name(), i+1, err)
		}
		l, err := m.Loss()
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	return losses, m
}

func downloadF32(t *testing.T, be tensor.Backend, x tensor.Tensor) []float32 {
	t.Helper()
	v := make([]float32, x.Len())
	if err := be.Download(v, x); err != nil {
		t.Fatal(err)
	}
	return v
}

// fusedCPU is the CPU backend (with its optional interfaces) plus the
// reference fused operations.
type fusedCPU struct {
	*cpu.Backend
	*tensor.FusedReference
}

func newFusedCPU(c *cpu.Backend) fusedCPU { return fusedCPU{c, tensor.NewFusedReference(c)} }

func (f fusedCPU) Sync() error { return f.FusedReference.Sync() }
func (f fusedCPU) Download(dst any, src tensor.Tensor) error {
	return f.FusedReference.Download(dst, src)
}

// reluIPs counts m's InnerProducts with a ReLU.
func reluIPs(m *Model) int {
	n := 0
	for _, l := range m.dense {
		if ip, ok := l.(*layers.InnerProduct); ok && ip.Act == tensor.ReLU {
			n++
		}
	}
	return n
}

// TestFusedFixturesMatchPlain: HugeCTR's fused forms — the MLP layer
// (dlrm_mlp_group_fc.json) and FusedInnerProduct Head/Body/Tail chains
// (dlrm_dgx_a100_fused.json) — train the same through the fused
// operations as through the plain ones, to the last bit.
func TestFusedFixturesMatchPlain(t *testing.T) {
	slots := make([]int64, 26)
	for i := range slots {
		slots[i] = int64(3 + i%5)
	}
	data := newPlanted(3, 16*3, 13, slots)
	for _, name := range []string{"dlrm_mlp_group_fc.json", "dlrm_dgx_a100_fused.json"} {
		t.Run(name, func(t *testing.T) {
			cfg := fixtureConfig(t, name, slots)
			plain, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c2, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ref := newFusedCPU(c2)
			lp, _ := trainModel(t, cfg, plain, data, 16, 3)
			lf, _ := trainModel(t, cfg, ref, data, 16, 3)
			for i := range lp {
				if lp[i] != lf[i] || math.IsNaN(lp[i]) {
					t.Errorf("step %d: fused loss %.9g, plain %.9g", i+1, lf[i], lp[i])
				}
			}
			if ref.Calls["GemmDReLUBgrad"] == 0 || ref.Calls["GemmBiasReLUMask"] == 0 {
				t.Errorf("fused calls %v: no chained dReLU GEMM", ref.Calls)
			}
			t.Logf("%s: losses %.5f → %.5f, fused calls %v", name, lp[0], lp[len(lp)-1], ref.Calls)
		})
	}
}

// TestGPUFusedMatchesUnfused trains the reference DLRM and DCNv2 (full MLP
// widths) on the GPU with the fused InnerProduct kernels and without
// (gpu.Options.Unfused: today's separate kernels), from one seed on the same
// batches: the losses must agree step by step, and what training changed
// in every dense parameter must agree, within the arithmetic's tolerance
// (the two paths run different cuBLAS kernels, so they round differently).
func TestGPUFusedMatchesUnfused(t *testing.T) {
	gpuOrSkip(t, gpu.Options{})
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 5000
	}
	const batch, steps = 2048, 12
	data := newPlanted(9, batch*steps, 13, sizes)
	for _, tc := range []struct {
		math     cuda.Math
		tol, upd float64 // losses; parameter updates
	}{{cuda.FP32, 1e-4, 1e-3}, {cuda.TF32, 5e-3, 3e-2}} {
		for _, name := range []string{"dlrm", "dcnv2"} {
			t.Run(name+"/"+tc.math.String(), func(t *testing.T) {
				opt := &graph.Optimizer{Type: "SGD", UpdateType: "Local", LearningRate: 0.01}
				cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 13, SlotSizes: sizes, Optimizer: opt})
				if err != nil {
					t.Fatal(err)
				}
				fused := gpuOrSkip(t, gpu.Options{Math: tc.math, Fused: true})
				plain := gpuOrSkip(t, gpu.Options{Math: tc.math})
				lf, mf := trainModel(t, cfg, fused, data, batch, steps)
				lp, mp := trainModel(t, cfg, plain, data, batch, steps)
				if n := reluIPs(mf); n == 0 || reluIPs(mp) != 0 {
					t.Fatalf("%d InnerProducts took their ReLU fused, %d unfused", n, reluIPs(mp))
				}
				// What training changed in each dense parameter (both start
				// from the seed's weights): a wrong gradient shows here long
				// before it moves the loss.
				m0, err := Build(cfg, plain, Options{BatchSize: batch, Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				for i, p0 := range m0.params {
					w0 := downloadF32(t, plain, p0.Value)
					df, dp := downloadF32(t, fused, mf.params[i].Value), downloadF32(t, plain, mp.params[i].Value)
					a, b := make([]float64, len(w0)), make([]float64, len(w0))
					for j := range w0 {
						a[j], b[j] = float64(df[j])-float64(w0[j]), float64(dp[j])-float64(w0[j])
					}
					if e := relErr(a, b); !(e <= tc.upd) {
						t.Errorf("parameter %d (%s %d): fused update differs from unfused by %.2e relative", i, p0.Name, len(w0), e)
					}
				}
				worst := 0.0
				for i := range lp {
					d := math.Abs(lf[i]-lp[i]) / math.Abs(lp[i])
					if !(d <= tc.tol) {
						t.Errorf("step %d: fused loss %.7f, unfused %.7f (relative %.2e)", i+1, lf[i], lp[i], d)
					}
					worst = max(worst, d)
				}
				t.Logf("%s %s: loss %.5f → %.5f, worst relative difference %.2e", name, tc.math, lp[0], lp[steps-1], worst)
			})
		}
	}
}

// relErr is ‖a−b‖₂/‖b‖₂ (NaN: +Inf).
func relErr(a, b []float64) float64 {
	var d, r float64
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
		r += b[i] * b[i]
	}
	if math.IsNaN(d) || math.IsNaN(r) {
		return math.Inf(1)
	}
	if r == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / r)
}

// TestFusedFallbacksMatchPlain: a backend may refuse any fused call (a
// shape cuBLASLt has no kernel for); the layers' fallbacks — a mask
// written but its dReLU GEMM refused, a weight-gradient GEMM refused after
// the consumer wrote the bias gradient — still train bit for bit like the
// plain path, for the reference MLPs and HugeCTR's MLP layer.
func TestFusedFallbacksMatchPlain(t *testing.T) {
	slots := make([]int64, 26)
	for i := range slots {
		slots[i] = int64(3 + i%5)
	}
	const batch, steps = 16, 2
	data := newPlanted(6, batch*steps, 13, slots)
	ref, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 13, SlotSizes: slots, VecSize: 8, Width: 1.0 / 16})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []*graph.Config{ref, fixtureConfig(t, "dlrm_mlp_group_fc.json", slots)} {
		plain, err := cpu.New(cpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := trainModel(t, cfg, plain, data, batch, steps)
		for _, refuse := range []string{"GemmBiasReLUMask", "GemmDReLUBgrad", "GemmBgrad"} {
			c, err := cpu.New(cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			be := newFusedCPU(c)
			be.Refuse = map[string]bool{refuse: true}
			got, _ := trainModel(t, cfg, be, data, batch, steps)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("step %d: loss %.9g with %s refused, plain %.9g", i+1, got[i], refuse, want[i])
				}
			}
			if be.Calls[refuse] != 0 || len(be.Calls) == 0 {
				t.Errorf("%s refused: calls %v", refuse, be.Calls)
			}
		}
	}
}

// fixtureConfig reads testdata/name with its tables shrunk to slots (as
// TestFusedFixtures does).
func fixtureConfig(t *testing.T, name string, slots []int64) *graph.Config {
	t.Helper()
	cfg, err := graph.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Graph.Embeddings {
		e := &cfg.Graph.Embeddings[i]
		e.VecSize = 16
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
	return cfg
}
