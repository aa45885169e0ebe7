package model

import (
	"io"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// countingReader yields batches batches of 4 samples (label = sample index).
type countingReader struct {
	s       formats.Schema
	batches int
	pos     int
}

func (r *countingReader) Schema() *formats.Schema { return &r.s }
func (r *countingReader) Close() error            { return nil }
func (r *countingReader) Read(b *formats.Batch) (int, error) {
	if r.pos >= r.batches {
		b.SetLen(0)
		return 0, io.EOF
	}
	b.SetLen(0)
	for i := range 4 {
		v := float32(r.pos*4 + i)
		if err := b.AppendSample([]float32{v}, []float32{-v}, [][]int64{{int64(v)}}); err != nil {
			return 0, err
		}
	}
	r.pos++
	return 4, nil
}

func passLabels(t *testing.T, open func() (formats.Reader, error), batches int) []float32 {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := formats.NewBatch(r.Schema(), 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	for range batches {
		n, err := r.Read(b)
		for i := range n {
			if b.Dense[i] != -b.Labels[i] || b.Key(i) != int64(b.Labels[i]) {
				t.Fatalf("sample %v: dense %v key %d", b.Labels[i], b.Dense[i], b.Key(i))
			}
		}
		out = append(out, b.Labels[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEvalCache: cache_eval_data replays the cached batches without
// opening (reading) the data again; past the cache it reads on.
func TestEvalCache(t *testing.T) {
	for _, c := range []struct{ limit, batches, read, opens int }{
		{10, 5, 100, 1}, // everything cached: one read of the data
		{5, 5, 100, 1},
		{3, 5, 3, 1}, // evaluations of 3 batches, 3 cached
		{3, 5, 100, 3},
	} {
		opens := 0
		open := func() (formats.Reader, error) {
			opens++
			return &countingReader{s: formats.NewSchema(1, 1, []int{1}, nil, formats.KeyU32), batches: c.batches}, nil
		}
		ec := newEvalCache(open, c.limit)
		first := passLabels(t, ec.Open, c.read)
		for range 2 {
			again := passLabels(t, ec.Open, c.read)
			if len(again) != len(first) || len(first) != 4*min(c.read, c.batches) {
				t.Fatalf("%+v: %d then %d samples", c, len(first), len(again))
			}
			for i := range again {
				if again[i] != first[i] {
					t.Fatalf("%+v: sample %d: %v, first pass %v", c, i, again[i], first[i])
				}
			}
		}
		if opens != c.opens {
			t.Errorf("%+v: data opened %d times, want %d", c, opens, c.opens)
		}
	}
}

// TestReaderSourcesKeys: the data section's num_workers, async shuffle and
// sample counts reach the sources (num_workers was dropped).
func TestReaderSourcesKeys(t *testing.T) {
	rp := &graph.ReaderParams{Format: "Raw", Check: "None", Source: []string{"a", "b"}, EvalSource: "e",
		NumWorkers: 3, NumSamples: 10, EvalNumSamples: 5, CacheEvalData: 7}
	tr, ev, err := ReaderSources(rp, &graph.Input{DenseDim: 13}, false, "m.json")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Workers != 3 || ev.Workers != 3 || len(tr.Paths) != 2 || tr.NumSamples != 10 || ev.NumSamples != 5 ||
		ev.CacheBatches != 7 || tr.CacheBatches != 0 {
		t.Errorf("train %+v\neval %+v", tr, ev)
	}
	rp.Format, rp.NumSamples, rp.EvalNumSamples = "Norm", 10, 0
	if _, _, err := ReaderSources(rp, &graph.Input{}, false, "m.json"); err == nil {
		t.Error("num_samples for Norm accepted (HugeCTR reads it only for Raw)")
	}
}

// TestEvalCacheMemory: a cache larger than the memory is refused by name.
func TestEvalCacheMemory(t *testing.T) {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(memConfig(t, 1024, 1, `"nnz_per_slot": 1`), be, Options{BatchSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	withMemoryLimit(t, 64<<20)
	if err := checkEvalCache(m, 1<<20, 0); err == nil || !strings.Contains(err.Error(), "cache_eval_data") {
		t.Errorf("%v", err)
	}
	if err := checkEvalCache(m, 1<<20, 4096); err != nil {
		t.Errorf("4 batches per evaluation: %v", err)
	}
}
