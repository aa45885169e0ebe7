package validate

import (
	"strings"
	"testing"
)

// TestTextPlurals: one omitted problem reads "1 more … problem".
func TestTextPlurals(t *testing.T) {
	r := &Report{Files: 1, Checked: 1, Total: 2, Counts: map[Kind]int64{KindClamped: 2},
		Omitted: []Omitted{{Kind: KindClamped, File: "a.bin", Count: 1}}}
	var sb strings.Builder
	if err := r.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "and 1 more clamped problem\n") || !strings.Contains(sb.String(), "FAILED: 2 problems") ||
		!strings.Contains(sb.String(), "1 of 1 file checked, 0 samples") {
		t.Errorf("text:\n%s", sb.String())
	}
}
