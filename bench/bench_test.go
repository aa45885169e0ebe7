package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
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

// slowFirst is a repeat-mode reader of 10-sample batches whose first
// epoch (of epoch samples) sleeps before every batch.
type slowFirst struct {
	s     formats.Schema
	epoch int64
	n     int64
}

func (r *slowFirst) Schema() *formats.Schema { return &r.s }
func (r *slowFirst) Close() error            { return nil }
func (r *slowFirst) Read(b *formats.Batch) (int, error) {
	if r.n < r.epoch {
		time.Sleep(2 * time.Millisecond)
	}
	r.n += 10
	b.SetLen(10)
	return 10, nil
}

// TestBestEpoch checks that a steady run reports its fastest epoch after
// the first: here the first is slow, the three others are not.
func TestBestEpoch(t *testing.T) {
	r := &slowFirst{s: formats.NewSchema(1, 0, []int{1}, nil, formats.KeyU32), epoch: 200}
	res, err := Read(func() (formats.Reader, error) { return r, nil }, 1,
		ReadOptions{MaxSamples: 800, EpochSamples: 200, BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples != 800 || res.BestEpochSamplesPerSecond <= 2*res.SamplesPerSecond {
		t.Fatalf("%d samples at %.0f/s, best epoch %.0f/s: want the best epoch well above the mean", res.Samples, res.SamplesPerSecond, res.BestEpochSamplesPerSecond)
	}
	res, _ = Read(func() (formats.Reader, error) { return &slowFirst{s: r.s, epoch: 200}, nil }, 1,
		ReadOptions{MaxSamples: 200, EpochSamples: 200, BatchSize: 10})
	if res.BestEpochSamplesPerSecond != 0 {
		t.Fatalf("one epoch: best epoch %v, want 0", res.BestEpochSamplesPerSecond)
	}
}
