package gpu

import (
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestTimeline: the spans of a timeline are the compute stream's time
// between its points: a span around a large GEMM takes longer than an
// empty one, all are finite and ≥ 0, a timeline is reusable after Millis,
// and one of fewer than two points is refused. The uploader's copy timer
// counts the Stage calls made while it is on.
func TestTimeline(t *testing.T) {
	be := gpuBackend(t)
	if _, err := be.NewTimeline(1); err == nil {
		t.Error("a timeline of 1 point")
	}
	tl, err := be.NewTimeline(4)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Free()
	const n = 2048
	a, c := be.Alloc(tensor.Float32, n, n), be.Alloc(tensor.Float32, n, n)
	defer be.Free(a)
	defer be.Free(c)
	be.Fill(a, 1)
	for round := 0; round < 2; round++ {
		tl.Mark(0)
		tl.Mark(1) // nothing between 0 and 1
		for range 4 {
			be.Gemm(false, false, 1, a, a, 0, c)
		}
		tl.Mark(2)
		be.Fill(c, 0)
		tl.Mark(3)
		ms := make([]float64, 3)
		if err := tl.Millis(ms); err != nil {
			t.Fatal(err)
		}
		if ms[0] < 0 || ms[1] <= ms[0] || ms[2] < 0 || ms[1] > 1000 {
			t.Errorf("round %d: spans %v ms (want the GEMMs' span above the empty one)", round, ms)
		}
	}

	dst := []tensor.Tensor{be.Alloc(tensor.Float32, 1<<20)}
	defer be.Free(dst[0])
	u, err := be.NewUploader(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	host := make([]byte, 4<<20)
	var ct tensor.CopyTimer = u
	for i, on := range []bool{false, true} {
		ct.TimeCopies(on)
		for range 3 {
			slot, err := u.Stage([][]byte{host})
			if err != nil {
				t.Fatal(err)
			}
			u.Commit(slot, dst, nil)
		}
		ms, stages := ct.CopyMillis()
		if want := 3 * i; stages != want || (on && ms <= 0) || (!on && ms != 0) {
			t.Errorf("timing %v: %d stages in %v ms, want %d", on, stages, ms, want)
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
}
