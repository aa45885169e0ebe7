package graph

import (
	"fmt"
	"strings"
)

// Precision is the arithmetic a model trains in (docs/PRECISION.md).
type Precision uint8

const (
	// FP32: float32 everywhere, IEEE GEMMs.
	FP32 Precision = iota
	// TF32: float32 storage, GEMMs on TF32 tensor cores
	// (enable_tf32_compute).
	TF32
	// FP16: HugeCTR's use_mixed_precision — the dense network's
	// activations, their gradients and the GEMMs' operands in binary16,
	// float32 master weights, the solver's static loss scale (scaler).
	FP16
	// BF16: as FP16 in bfloat16, without loss scaling unless a scaler is
	// given explicitly (a ctrkit extension: --precision bf16, --bf16,
	// Python's CreateSolver(ctrkit_precision="bf16")).
	BF16
)

var precisionNames = [...]string{FP32: "fp32", TF32: "tf32", FP16: "fp16", BF16: "bf16"}

// String is the precision's name as --precision spells it.
func (p Precision) String() string {
	if int(p) < len(precisionNames) {
		return precisionNames[p]
	}
	return fmt.Sprintf("precision(%d)", uint8(p))
}

// Half reports whether p stores activations in 16 bits (FP16, BF16).
func (p Precision) Half() bool { return p == FP16 || p == BF16 }

// ParsePrecision parses fp32, tf32, fp16 or bf16 (any case).
func ParsePrecision(s string) (Precision, error) {
	for i, n := range precisionNames {
		if strings.EqualFold(s, n) {
			return Precision(i), nil
		}
	}
	return 0, fmt.Errorf("precision %q: want fp32, tf32, fp16 or bf16", s)
}

// Precision is the solver's precision: BF16 when BF16 is set, FP16 with
// UseMixedPrecision, TF32 with EnableTF32, else FP32.
func (s *Solver) Precision() Precision {
	switch {
	case s.BF16:
		return BF16
	case s.UseMixedPrecision:
		return FP16
	case s.EnableTF32:
		return TF32
	}
	return FP32
}

// SetPrecision sets the solver's switches for p (UseMixedPrecision for
// FP16, EnableTF32 for TF32, BF16 for BF16; the others cleared). The
// scaler is kept.
func (s *Solver) SetPrecision(p Precision) {
	s.UseMixedPrecision, s.EnableTF32, s.BF16 = p == FP16, p == TF32, p == BF16
}

// LossScale is the static loss scale the solver trains with (0: none):
// the scaler in FP16 (HugeCTR's use_mixed_precision), and in any other
// precision only when ScalerSet says it was given explicitly.
func (s *Solver) LossScale() float64 {
	if s.Precision() == FP16 || s.ScalerSet {
		return s.Scaler
	}
	return 0
}
