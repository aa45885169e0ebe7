package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestBatched: the operations issued inside batched are kept, not run, until
// it returns, then run in order in one call of the device goroutine: an
// upload, a copy reading it and a conversion reading the copy give the
// values they give eagerly. An error inside is the backend's, named by the
// operation that failed.
func TestBatched(t *testing.T) {
	be := gpuBackend(t)
	n := 5000
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i%97) - 40
	}
	a, b := be.Alloc(tensor.Float32, n), be.Alloc(tensor.Float32, n)
	c := be.Alloc(tensor.Int64, n)
	defer func() { be.Free(a); be.Free(b); be.Free(c) }()
	be.Fill(b, 7)
	be.Fill(c, 0)
	be.batched(func() {
		be.Upload(a, vals)
		be.Copy(b, a)
		be.Convert(c, b)
		if len(be.batch) != 3 {
			t.Errorf("inside batched: %d operations kept, want 3", len(be.batch))
		}
	})
	if be.batch != nil {
		t.Fatal("batched left its batch set")
	}
	got := make([]int64, n)
	if err := be.Download(got, c); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != int64(vals[i]) {
			t.Fatalf("element %d: %d, want %d (operations out of order?)", i, v, int64(vals[i]))
		}
	}
	// Nested: the inner call adds to the outer batch.
	be.batched(func() {
		be.Fill(a, 1)
		be.batched(func() { be.Fill(b, 2) })
		if len(be.batch) != 2 {
			t.Errorf("nested batched: %d operations kept, want 2", len(be.batch))
		}
	})
	f := make([]float32, n)
	if err := be.Download(f, b); err != nil || f[0] != 2 || f[n-1] != 2 {
		t.Fatalf("nested: %v, b[0] = %v", err, f[0])
	}
	// A failing operation is the sticky error, under its name.
	be.batched(func() {
		be.Fill(a, 3)
		be.do("bad_op", func(*cuda.Ctx) error { return errors.New("refused by the test") })
		be.Fill(b, 4)
	})
	if err := be.Err(); err == nil || !strings.Contains(err.Error(), "bad_op") {
		t.Fatalf("error from a batched op: %v, want one naming bad_op", err)
	}
	be.Reset()
}
