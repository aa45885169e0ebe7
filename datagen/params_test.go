package datagen

import (
	"testing"

	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
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

// TestRawLayoutIsRawLayout: the Raw layout of a run is raw.Layout (datagen
// had its own RawLayout enum with an Auto value in front, shifting the
// values by one); unset, the nnz_array decides.
func TestRawLayoutIsRawLayout(t *testing.T) {
	p := DefaultParams()
	p.Format = Raw
	if p.RawLayoutSet || p.EffectiveRawLayout() != raw.OneHot {
		t.Fatalf("default layout %v (set %v)", p.EffectiveRawLayout(), p.RawLayoutSet)
	}
	p.NNZArray = make([]int, p.NumSlot)
	for i := range p.NNZArray {
		p.NNZArray[i] = 3
	}
	if p.EffectiveRawLayout() != raw.MultiHot {
		t.Errorf("nnz 3: %v, want multihot", p.EffectiveRawLayout())
	}
	for s, want := range map[string]raw.Layout{"Auto": -1, "": -1, "onehot": raw.OneHot, "Multi-Hot": raw.MultiHot} {
		l, set, err := ParseRawLayout(s)
		if err != nil || set != (want >= 0) || set && l != want {
			t.Errorf("ParseRawLayout(%q) = %v, %v, %v", s, l, set, err)
		}
	}
	if _, _, err := ParseRawLayout("dense"); err == nil {
		t.Error("ParseRawLayout(dense) accepted")
	}
}
