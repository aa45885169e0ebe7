package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// TestPrecisionFlags: --precision and its shorthands set the solver's
// precision over the config's, --loss-scale its explicit scale; two
// precisions at once are refused by name.
func TestPrecisionFlags(t *testing.T) {
	fp16 := graph.Solver{UseMixedPrecision: true, Scaler: 512} // a config's mixed_precision: 512
	tf32 := graph.Solver{EnableTF32: true, Scaler: 1}
	for _, c := range []struct {
		args  []string
		base  graph.Solver
		want  graph.Precision
		scale float64 // the solver's LossScale after
		err   string
	}{
		{nil, fp16, graph.FP16, 512, ""},
		{nil, tf32, graph.TF32, 0, ""},
		{[]string{"--precision", "bf16"}, fp16, graph.BF16, 0, ""},
		{[]string{"--bf16"}, tf32, graph.BF16, 0, ""},
		{[]string{"--bf16", "--loss-scale", "256"}, tf32, graph.BF16, 256, ""},
		{[]string{"--precision", "FP32"}, fp16, graph.FP32, 0, ""},
		{[]string{"--precision", "fp32", "--loss-scale", "1024"}, tf32, graph.FP32, 1024, ""},
		{[]string{"--mixed-precision"}, graph.Solver{Scaler: 1}, graph.FP16, 1, ""},
		{[]string{"--mixed-precision", "--loss-scale", "1024"}, tf32, graph.FP16, 1024, ""},
		{[]string{"--tf32"}, fp16, graph.TF32, 0, ""},
		{[]string{"--precision", "tf32", "--tf32"}, fp16, graph.TF32, 0, ""},
		{[]string{"--mixed-precision=false"}, fp16, graph.FP32, 0, ""},
		{[]string{"--tf32=false"}, fp16, graph.FP16, 512, ""},
		{[]string{"--tf32", "--bf16"}, fp16, 0, 0, "--tf32 and --bf16 cannot be used together"},
		{[]string{"--tf32", "--mixed-precision", "--bf16"}, fp16, 0, 0, "--tf32 and --mixed-precision and --bf16 cannot be used together"},
		{[]string{"--precision", "fp16", "--bf16"}, fp16, 0, 0, "--precision fp16 and --bf16 disagree"},
		{[]string{"--precision", "bf16", "--bf16=false"}, fp16, 0, 0, "--precision bf16 and --bf16=false disagree"},
		{[]string{"--precision", "fp64"}, fp16, 0, 0, `--precision: precision "fp64": want fp32, tf32, fp16 or bf16`},
		{[]string{"--loss-scale", "0"}, fp16, 0, 0, "--loss-scale 0: want a finite scale > 0"},
		{[]string{"--loss-scale", "-8"}, fp16, 0, 0, "--loss-scale -8"},
	} {
		var ch precisionChoice
		var rerr error
		app := &cli.App{Flags: precisionFlags("x", true), Action: func(c *cli.Context) error {
			ch, rerr = readPrecision(c)
			return nil
		}}
		if err := app.Run(append([]string{"x"}, c.args...)); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if c.err != "" {
			if rerr == nil || !strings.Contains(rerr.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.args, rerr, c.err)
			}
			continue
		}
		if rerr != nil {
			t.Errorf("%v: %v", c.args, rerr)
			continue
		}
		s := c.base
		ch.apply(&s)
		if s.Precision() != c.want || s.LossScale() != c.scale {
			t.Errorf("%v over %+v: precision %s, loss scale %g; want %s, %g", c.args, c.base, s.Precision(), s.LossScale(), c.want, c.scale)
		}
	}
}

// TestTrainPrecisionRefused: fp16 and bf16 on the CPU, and conflicting
// precision flags, stop train and bench train with a usage error naming
// the flags.
func TestTrainPrecisionRefused(t *testing.T) {
	src, _, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	common := []string{"train", "--model", "wdl", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4",
		"--vec-size", "8", "--width", "0.03125", "--batchsize", "64", "--source", src, "--max-iter", "2", "--device", "cpu"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mixed-precision"}, "precision fp16 (--precision fp16, --mixed-precision or the solver's mixed_precision"},
		{[]string{"--precision", "bf16"}, "precision bf16 (--precision bf16 or --bf16"},
		{[]string{"--tf32", "--bf16"}, "--tf32 and --bf16 cannot be used together"},
	} {
		out, code := execCtrkit(t, append(common, c.args...)...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, output lacks %q:\n%s", c.args, code, c.want, out)
		}
		if strings.HasPrefix(c.want, "precision ") && !strings.Contains(out, "trains on the GPU only: the CPU backend trains fp32; use --device gpu, or --precision fp32") {
			t.Errorf("%v: %s", c.args, out)
		}
	}
	out, code := execCtrkit(t, "bench", "train", src, "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4", "--device", "cpu", "--bf16", "--batchsize", "64", "--steps", "1", "--warmup", "0")
	if code == 0 || !strings.Contains(out, "precision bf16 (--precision bf16 or --bf16") {
		t.Errorf("bench train --bf16 on the CPU: exit %d:\n%s", code, out)
	}
	out, code = execCtrkit(t, "bench", "train", src, "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4", "--device", "cpu", "--tf32", "--mixed-precision")
	if code != 2 || !strings.Contains(out, "--tf32 and --mixed-precision cannot be used together") {
		t.Errorf("bench train --tf32 --mixed-precision: exit %d:\n%s", code, out)
	}
}
