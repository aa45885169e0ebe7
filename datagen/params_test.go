package datagen

import (
	"testing"

	"github.com/ctrkit/ctrkit/formats/norm"
)

// TestCheckTypeIsNormCheckMode: the check type of a run is norm's enum,
// whose values are the header's error_check (sum = 1); HugeCTR's default
// is sum, and Raw forces none. (datagen had its own CheckType with the
// opposite values, converted by hand in each caller.)
func TestCheckTypeIsNormCheckMode(t *testing.T) {
	p := DefaultParams()
	if p.CheckType != norm.CheckSum || int(norm.CheckSum) != 1 || int(norm.CheckNone) != 0 {
		t.Fatalf("default check type %v (%d)", p.CheckType, int(p.CheckType))
	}
	if p.EffectiveCheckType() != norm.CheckSum {
		t.Errorf("Norm: effective %v", p.EffectiveCheckType())
	}
	p.Format = Raw
	if p.EffectiveCheckType() != norm.CheckNone {
		t.Errorf("Raw: effective %v, want none", p.EffectiveCheckType())
	}
	m, err := norm.ParseCheckMode("None")
	if err != nil || m != norm.CheckNone {
		t.Errorf("ParseCheckMode(None) = %v, %v", m, err)
	}
}
