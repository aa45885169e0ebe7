package input

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

var slots = []int64{10, 20, 30}

// seqReader yields n samples in batches of batch: sample i has label i,
// dense −i and key i mod size in every slot.
type seqReader struct {
	s            formats.Schema
	n, batch, at int
	reads        *int
}

func (r *seqReader) Schema() *formats.Schema { return &r.s }
func (r *seqReader) Close() error            { return nil }
func (r *seqReader) Read(b *formats.Batch) (int, error) {
	*r.reads++
	b.SetLen(0)
	for b.N < r.batch && r.at < r.n {
		v := float32(r.at)
		keys := make([][]int64, len(slots))
		for s, size := range slots {
			keys[s] = []int64{int64(r.at) % size}
		}
		if err := b.AppendSample([]float32{v}, []float32{-v, -v}, keys); err != nil {
			return 0, err
		}
		r.at++
	}
	if r.at >= r.n {
		return b.N, io.EOF
	}
	return b.N, nil
}

func newFeeder(t *testing.T, batch int) (*Feeder, formats.Schema) {
	t.Helper()
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 2, SlotSizes: slots, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFeeder(be, batch, cfg.Graph, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, Schema(&cfg.Graph.Input, formats.KeyI64)
}

// labels downloads the label input.
func labels(t *testing.T, f *Feeder) []float32 {
	t.Helper()
	got := make([]float32, f.Label.Value.Len())
	if err := f.be.Download(got, f.Label.Value); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPrefetcherRestart: one prefetcher reads pass after pass (Stop, Start
// on a new reader), each pass whole and in order, also after a pass
// stopped early.
func TestPrefetcherRestart(t *testing.T) {
	f, s := newFeeder(t, 8)
	pf := NewPrefetcher(f)
	defer pf.Close()
	reads := 0
	for pass, stopAfter := range []int{-1, 1, -1} {
		if err := pf.Start(&seqReader{s: s, n: 20, batch: 8, reads: &reads}); err != nil {
			t.Fatal(err)
		}
		var seen []float32
		for b := 0; ; b++ {
			st := pf.Next()
			if st.Err != nil && !errors.Is(st.Err, io.EOF) {
				t.Fatal(st.Err)
			}
			if st.N > 0 {
				if err := pf.Commit(st); err != nil {
					t.Fatal(err)
				}
				seen = append(seen, labels(t, f)[:st.N]...)
			}
			if st.Err != nil || b == stopAfter {
				break
			}
		}
		pf.Stop()
		want := make([]float32, 20)
		for i := range want {
			want[i] = float32(i)
		}
		if stopAfter >= 0 {
			want = want[:8*(stopAfter+1)]
		}
		if !slices.Equal(seen, want) {
			t.Errorf("pass %d: labels %v, want %v", pass, seen, want)
		}
	}
}

// TestEvalCacheReplay: a replayed batch is the batch as loaded (labels,
// dense, keys, offsets, NNZ), also a short one with padding.
func TestEvalCacheReplay(t *testing.T) {
	f, s := newFeeder(t, 8)
	reads := 0
	r := &seqReader{s: s, n: 12, batch: 8, reads: &reads}
	b, err := formats.NewBatch(&s, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := NewEvalCache(5)
	defer c.Free(f.be)
	var want [][]float32
	for {
		n, err := r.Read(b)
		if n > 0 {
			if err := f.Load(b); err != nil {
				t.Fatal(err)
			}
			if err := c.Add(f, n); err != nil {
				t.Fatal(err)
			}
			want = append(want, slices.Concat(labels(t, f), cpu.Data[float32](f.Dense.Value), int64s(cpu.Data[int64](f.Inputs[0].Keys)[:f.Inputs[0].NNZ]),
				int64s(cpu.Data[int32](f.Inputs[0].Offsets))))
		}
		if err != nil {
			break
		}
	}
	if c.Len() != 2 {
		t.Fatalf("%d batches cached", c.Len())
	}
	for i := range 2 {
		j := 1 - i // replay out of order: nothing depends on the last load
		n, err := c.Replay(f, j)
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Concat(labels(t, f), cpu.Data[float32](f.Dense.Value), int64s(cpu.Data[int64](f.Inputs[0].Keys)[:f.Inputs[0].NNZ]),
			int64s(cpu.Data[int32](f.Inputs[0].Offsets)))
		if n != []int{8, 4}[j] || !slices.Equal(got, want[j]) {
			t.Errorf("batch %d: %d samples, %v\nwant %v", j, n, got, want[j])
		}
	}
	if c.Bytes() <= 0 || CacheBytes(f, 2) < float64(c.Bytes()) {
		t.Errorf("%d bytes cached, bound %.0f", c.Bytes(), CacheBytes(f, 2))
	}
}

func int64s[T int32 | int64](x []T) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}
