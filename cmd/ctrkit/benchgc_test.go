package main

import (
	"runtime/debug"
	"testing"
)

// TestSetBenchGC checks that bench read raises GOGC unless the user set it,
// and restores the setting.
func TestSetBenchGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	restore := setBenchGC(func(string) string { return "" })
	if got := debug.SetGCPercent(benchGCPercent); got != benchGCPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, benchGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after restore: GC percent %d, want 100", got)
	}
	restore = setBenchGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=50 set by the user: GC percent changed to %d", got)
	}
	restore()
}
