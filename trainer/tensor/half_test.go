package tensor

import (
	"math"
	"testing"
)

func TestF16Bits(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{
		{0, 0}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff},
		{65519, 0x7bff}, {65520, 0x7c00}, {float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{1.0 / (1 << 14), 0x0400}, {1.0 / (1 << 24), 0x0001}, {1.0 / (1 << 25), 0}, {1.5 / (1 << 24), 0x0002},
		{1 + 1.0/2048, 0x3c00}, {1 + 3.0/2048, 0x3c02}, {0.1, 0x2e66}, {2047.0 / (1 << 24), 0x07ff}, {1023.0 / (1 << 24), 0x03ff},
	} {
		if got := F16Bits(c.f); got != c.h {
			t.Errorf("F16Bits(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if h := F16Bits(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN → %#04x", h)
	}
	// Every half value round-trips, and F16Bits agrees with RoundHalf32.
	for h := 0; h < 1<<16; h++ {
		v := F16Value(uint16(h))
		if v != v {
			continue
		}
		if got := F16Bits(v); got != uint16(h) {
			t.Fatalf("F16Bits(F16Value(%#04x) = %g) = %#04x", h, v, got)
		}
	}
	for i := 0; i < 1<<20; i++ {
		f := math.Float32frombits(uint32(i) * 4099)
		if f != f {
			continue
		}
		if a, b := F16Value(F16Bits(f)), RoundHalf32(f); a != b && !(a == 0 && b == 0) {
			t.Fatalf("%g: F16 %g, RoundHalf32 %g", f, a, b)
		}
	}
}

func TestBF16Bits(t *testing.T) {
	for _, c := range []struct {
		f float32
		b uint16
	}{
		{0, 0}, {1, 0x3f80}, {-1, 0xbf80}, {1 + 1.0/256, 0x3f80}, {1 + 3.0/256, 0x3f82}, {1 + 1.25/128, 0x3f81},
		{float32(math.Inf(1)), 0x7f80}, {math.MaxFloat32, 0x7f80}, {3.0e38, 0x7f62},
	} {
		if got := BF16Bits(c.f); got != c.b {
			t.Errorf("BF16Bits(%g) = %#04x, want %#04x", c.f, got, c.b)
		}
	}
	if b := BF16Bits(float32(math.NaN())); b&0x7f80 != 0x7f80 || b&0x7f == 0 {
		t.Errorf("NaN → %#04x", b)
	}
	for b := 0; b < 1<<16; b++ {
		v := BF16Value(uint16(b))
		if v == v && BF16Bits(v) != uint16(b) {
			t.Fatalf("bf16 %#04x does not round-trip", b)
		}
	}
	if RoundTo(BFloat16, 1.00390625) != 1 || RoundTo(Float32, 0.1) != 0.1 {
		t.Error("RoundTo")
	}
}
