package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCachedFractionAndDrop(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	os.ReadFile(p)
	if f := CachedFraction([]string{p}); f < 0.99 {
		t.Fatalf("a file just read is %.2f cached", f)
	}
	if err := DropCache([]string{p}); err != nil {
		t.Fatal(err)
	}
	// The kernel may keep pages (dirty ones, or where fadvise is a no-op),
	// so only check the call reports a fraction.
	if f := CachedFraction([]string{p}); f < 0 || f > 1 {
		t.Fatalf("fraction %v", f)
	}
}

func TestPercentile(t *testing.T) {
	if percentileMillis(nil, 0.5) != 0 {
		t.Fatal("empty")
	}
}
