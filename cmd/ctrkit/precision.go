package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/trainer/graph"
)

// precisionFlags are the precision flags of train, evaluate, predict and
// bench train (docs/PRECISION.md): one vocabulary, --precision, with
// --tf32, --mixed-precision and --bf16 as its shorthands; train and bench
// train (loss true) also take --loss-scale.
func precisionFlags(what string, loss bool) []cli.Flag {
	fs := []cli.Flag{
		&cli.StringFlag{Name: "precision", Usage: "arithmetic: fp32 | tf32 (TF32 tensor-core GEMMs) | fp16 (HugeCTR's use_mixed_precision: half activations and GEMM operands, " +
			"float32 master weights, static loss scale) | bf16 (the same in bfloat16, no loss scaling); fp16 and bf16 train on the GPU (default: " + what + ")"},
		&cli.BoolFlag{Name: "tf32", Usage: "--precision tf32 (the solver's enable_tf32_compute)"},
		&cli.BoolFlag{Name: "mixed-precision", Usage: "--precision fp16 with the solver's scaler as loss scale (HugeCTR's use_mixed_precision)"},
		&cli.BoolFlag{Name: "bf16", Usage: "--precision bf16"},
	}
	if loss {
		fs = append(fs, &cli.Float64Flag{Name: "loss-scale", Usage: "static loss scale (the solver's scaler / mixed_precision value; default: the config's in fp16, none otherwise); " +
			"a power of two, e.g. 1024, cancels exactly"})
	}
	return fs
}

// precisionChoice is what the precision flags ask for: Precision nil keeps
// the config's (Clear lists the switches a --flag=false turns off), Scale
// nil the config's scaler.
type precisionChoice struct {
	Precision *graph.Precision
	Clear     []graph.Precision
	Scale     *float64
}

// readPrecision resolves the precision flags; conflicting ones are refused
// by name.
func readPrecision(c *cli.Context) (precisionChoice, error) {
	var ch precisionChoice
	short := []struct {
		name string
		p    graph.Precision
	}{{"tf32", graph.TF32}, {"mixed-precision", graph.FP16}, {"bf16", graph.BF16}}
	var on []string
	var onP graph.Precision
	for _, f := range short {
		if !c.IsSet(f.name) {
			continue
		}
		if c.Bool(f.name) {
			on = append(on, "--"+f.name)
			onP = f.p
		} else {
			ch.Clear = append(ch.Clear, f.p)
		}
	}
	if len(on) > 1 {
		return ch, fmt.Errorf("%s cannot be used together: each picks a precision (--precision fp32|tf32|fp16|bf16 picks one)", strings.Join(on, " and "))
	}
	if c.IsSet("precision") {
		p, err := graph.ParsePrecision(c.String("precision"))
		if err != nil {
			return ch, fmt.Errorf("--precision: %w", err)
		}
		if len(on) == 1 && onP != p {
			return ch, fmt.Errorf("--precision %s and %s disagree: give one of them", p, on[0])
		}
		for _, q := range ch.Clear {
			if q == p {
				return ch, fmt.Errorf("--precision %s and --%s=false disagree: give one of them", p, shortName(q))
			}
		}
		ch.Precision = &p
	} else if len(on) == 1 {
		ch.Precision = &onP
	}
	if c.IsSet("loss-scale") {
		v := c.Float64("loss-scale")
		if !(v > 0) || math.IsInf(v, 0) {
			return ch, fmt.Errorf("--loss-scale %v: want a finite scale > 0 (e.g. 1024)", v)
		}
		ch.Scale = &v
	}
	return ch, nil
}

func shortName(p graph.Precision) string {
	switch p {
	case graph.TF32:
		return "tf32"
	case graph.FP16:
		return "mixed-precision"
	}
	return "bf16"
}

// apply sets the choice on a solver: the precision (a shorthand's false
// clears its switch), then the explicit loss scale.
func (ch precisionChoice) apply(s *graph.Solver) {
	for _, q := range ch.Clear {
		if s.Precision() == q {
			s.SetPrecision(graph.FP32)
		}
	}
	if ch.Precision != nil {
		s.SetPrecision(*ch.Precision)
	}
	if ch.Scale != nil {
		s.Scaler, s.ScalerSet = *ch.Scale, true
	}
}
