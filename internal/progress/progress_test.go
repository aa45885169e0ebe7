package progress

import (
	"bytes"
	"testing"
	"time"
)

func TestETA(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		elapsed     time.Duration
		want        time.Duration
	}{
		{25, 100, 10 * time.Second, 30 * time.Second}, // 75 left at 2.5/s
		{50, 100, time.Minute, time.Minute},
		{1, 3, 2 * time.Second, 4 * time.Second},
		{100, 100, time.Minute, 0},
		{120, 100, time.Minute, 0},
		{0, 100, time.Minute, -1},
		{10, -1, time.Minute, -1},
	} {
		if got := ETA(c.done, c.total, c.elapsed); got != c.want {
			t.Errorf("ETA(%d, %d, %v) = %v, want %v", c.done, c.total, c.elapsed, got, c.want)
		}
	}
	for d, want := range map[time.Duration]string{-1: "?", 0: "0s", 1499 * time.Millisecond: "1s", 65 * time.Second: "1m05s",
		3723 * time.Second: "1h02m03s"} {
		if got := FormatETA(d); got != want {
			t.Errorf("FormatETA(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestNotTerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, 10, "x", "iters")
	b.Add(5)
	b.Finish()
	if w := b.Writer(&buf); w != &buf || buf.Len() != 0 {
		t.Errorf("a bar on a non-terminal wrote %q", buf.String())
	}
}
