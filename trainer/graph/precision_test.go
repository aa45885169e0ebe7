package graph

import (
	"strings"
	"testing"
)

// TestPrecision: the solver's switches map to one precision, JSON's
// mixed_precision is fp16 with its scaler as the loss scale, bf16 and an
// explicit scale are ctrkit's.
func TestPrecision(t *testing.T) {
	for _, s := range []string{"fp32", "TF32", "fp16", "Bf16"} {
		p, err := ParsePrecision(s)
		if err != nil || !strings.EqualFold(p.String(), s) {
			t.Errorf("ParsePrecision(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := ParsePrecision("half"); err == nil || !strings.Contains(err.Error(), "want fp32, tf32, fp16 or bf16") {
		t.Errorf("ParsePrecision(half): %v", err)
	}
	for _, c := range []struct {
		s     Solver
		p     Precision
		scale float64
	}{
		{Solver{Scaler: 1}, FP32, 0},
		{Solver{EnableTF32: true, Scaler: 1}, TF32, 0},
		{Solver{UseMixedPrecision: true, Scaler: 1024}, FP16, 1024},
		{Solver{BF16: true, Scaler: 1}, BF16, 0},
		{Solver{BF16: true, Scaler: 256, ScalerSet: true}, BF16, 256},
		{Solver{Scaler: 8, ScalerSet: true}, FP32, 8},
	} {
		if c.s.Precision() != c.p || c.s.LossScale() != c.scale || c.p.Half() != (c.p == FP16 || c.p == BF16) {
			t.Errorf("%+v: %s, scale %g", c.s, c.s.Precision(), c.s.LossScale())
		}
		var s Solver
		s.SetPrecision(c.p)
		if s.Precision() != c.p {
			t.Errorf("SetPrecision(%s) gives %s", c.p, s.Precision())
		}
	}
	cfg, err := Read(strings.NewReader(`{"solver": {"batchsize": 64, "mixed_precision": 128, "max_iter": 1},
		"optimizer": {"type": "SGD", "sgd_hparam": {"learning_rate": 0.1}}, "layers": [
		{"name": "data", "type": "Data", "source": "x", "eval_source": "y", "label": {"top": "label", "label_dim": 1},
		 "dense": {"top": "dense", "dense_dim": 2}, "sparse": []},
		{"name": "fc", "type": "InnerProduct", "bottom": ["dense"], "top": ["fc"], "fc_param": {"num_output": 1}},
		{"name": "loss", "type": "BinaryCrossEntropyLoss", "bottom": ["fc", "label"], "top": ["loss"]}]}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Solver; s.Precision() != FP16 || s.LossScale() != 128 {
		t.Errorf("mixed_precision 128: %s, scale %g", s.Precision(), s.LossScale())
	}
}
