package parquet

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// decodeHybrid is a plain reading of the RLE/bit-packed hybrid format
// (bit width 1, u32 length prefix), the reference for rleLevels.
func decodeHybrid(t *testing.T, b []byte, n int) []int16 {
	t.Helper()
	size := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if size != len(b) {
		t.Fatalf("length prefix %d, body %d", size, len(b))
	}
	var out []int16
	for len(b) > 0 {
		h, k := binary.Uvarint(b)
		b = b[k:]
		if h&1 == 0 {
			for range h >> 1 {
				out = append(out, int16(b[0]))
			}
			b = b[1:]
			continue
		}
		for g := 0; g < int(h>>1); g++ {
			for bit := 0; bit < 8; bit++ {
				out = append(out, int16(b[g]>>bit&1))
			}
		}
		b = b[h>>1:]
	}
	if len(out) < n {
		t.Fatalf("decoded %d levels, want %d", len(out), n)
	}
	if len(out)-n >= 8 {
		t.Fatalf("decoded %d levels for %d: padding beyond the last group", len(out), n)
	}
	return out[:n]
}

func TestRLELevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		n := rng.IntN(300)
		lv := make([]int16, n)
		// Mix runs and noise: run lengths 1..40.
		for i := 0; i < n; {
			r, v := 1+rng.IntN(40), int16(rng.IntN(2))
			if rng.IntN(3) == 0 {
				r = 1 + rng.IntN(3)
			}
			for j := 0; j < r && i < n; j++ {
				lv[i] = v
				i++
			}
		}
		got := decodeHybrid(t, rleLevels(nil, lv), n)
		if !slices.Equal(got, lv) {
			t.Fatalf("trial %d: levels %v decoded as %v", trial, lv, got)
		}
	}
}

func TestThriftCompact(t *testing.T) {
	// Field ids with deltas > 15, negative numbers, nested structs and
	// long lists, against bytes worked out by hand from the compact
	// protocol spec.
	var w thriftWriter
	w.i32(1, -1)       // 0x15 0x01
	w.i64(20, 300)     // 0x06 (zigzag id 40 = 0x28) then zigzag 600 = 0xd8 0x04
	w.begin(21)        // 0x1c
	w.boolean(1, true) // 0x11
	w.end()            // 0x00
	w.list(22, ctI32, 16)
	for i := range 16 {
		w.listI32(int32(i))
	}
	w.b = append(w.b, 0)
	want := []byte{0x15, 0x01, 0x06, 0x28, 0xd8, 0x04, 0x1c, 0x11, 0x00, 0x19, 0xf5, 0x10}
	for i := range 16 {
		want = append(want, byte(2*i))
	}
	want = append(want, 0)
	if !slices.Equal(w.b, want) {
		t.Fatalf("got  % x\nwant % x", w.b, want)
	}
}
