package model

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/input"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// countedReads counts the opens of a data source and the batches read
// from it.
type countedReads struct{ opens, reads int }

type countedReader struct {
	formats.Reader
	c *countedReads
}

func (r countedReader) Read(b *formats.Batch) (int, error) {
	r.c.reads++
	return r.Reader.Read(b)
}

func (c *countedReads) open(p *planted, batch int) func() (formats.Reader, error) {
	return func() (formats.Reader, error) {
		c.opens++
		return countedReader{p.reader(batch), c}, nil
	}
}

// cacheBackends are the backends of the cache tests: the CPU (synchronous
// loads), the CPU with staged uploads (the GPU's path), and the GPU when
// a CUDA driver loads (CTRKIT_REQUIRE_GPU=1: it must).
func cacheBackends(t *testing.T) map[string]func() tensor.Backend {
	bes := inputBackends(t)
	bes["staged"] = func() tensor.Backend { return newStagingBackend(t) }
	return bes
}

func cacheModel(t *testing.T, be tensor.Backend, name string, batch int) *Model {
	t.Helper()
	cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(cfg, be, Options{BatchSize: batch, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEvalCacheDevice: cache_eval_data keeps the evaluation batches on the
// backend as the model loaded them; a second evaluation of cached batches
// opens and reads nothing and gives the metrics of the first, bit for bit,
// and of an evaluation without a cache. Past the cache it reads on (the
// cached batches skipped), with the same metrics.
func TestEvalCacheDevice(t *testing.T) {
	data := newPlanted(2, 1000, 4, smallSlots) // 16 batches of 64, the last short
	const batch = 64
	for beName, newBE := range cacheBackends(t) {
		for _, name := range []string{"dlrm", "wdl"} {
			for _, c := range []struct {
				limit      int
				maxSamples int64
				opens      int // for the 2nd and 3rd evaluations
			}{
				{100, 0, 0},    // the whole data cached
				{16, 0, 0},     // exactly
				{5, 0, 2},      // the first 5 cached, the rest read
				{5, 5 * 64, 0}, // evaluations of 5 batches
				{5, 3 * 64, 0}, // of 3
				{3, 300, 2},    // 300 samples: 4.7 batches, 3 cached
				{1, 1000, 2},   // a cache of one batch
			} {
				t.Run(fmt.Sprintf("%s/%s/%+v", beName, name, c), func(t *testing.T) {
					m := cacheModel(t, newBE(), name, batch)
					var plain, cached countedReads
					want, err := m.evaluateFrom(plain.open(data, batch), c.maxSamples, nil, nil)
					if err != nil {
						t.Fatal(err)
					}
					cache := input.NewEvalCache(c.limit)
					defer cache.Free(m.be)
					for pass := range 3 {
						before := cached
						got, err := m.evaluateFrom(cached.open(data, batch), c.maxSamples, nil, cache)
						if err != nil {
							t.Fatal(err)
						}
						if !sameEval(got, want, beName != "gpu") {
							t.Errorf("pass %d: %+v, without a cache %+v", pass, got, want)
						}
						opens, reads := cached.opens-before.opens, cached.reads-before.reads
						switch {
						case pass == 0 && opens != 1:
							t.Errorf("first pass opened the data %d times", opens)
						case pass > 0 && opens != c.opens/2:
							t.Errorf("pass %d opened the data %d times, want %d", pass, opens, c.opens/2)
						case pass > 0 && opens == 0 && reads != 0:
							t.Errorf("pass %d read %d batches from a closed source", pass, reads)
						}
					}
					if n := min(c.limit, 16); c.maxSamples == 0 && cache.Len() != n {
						t.Errorf("%d batches cached, want %d", cache.Len(), n)
					}
				})
			}
		}
	}
}

// sameEval: a and b are equal (bit for bit when exact, else to float32
// rounding).
func sameEval(a, b EvalResult, exact bool) bool {
	if exact {
		return fmt.Sprint(a) == fmt.Sprint(b)
	}
	near := func(x, y float64) bool {
		return math.Abs(x-y) <= 1e-5*max(1, math.Abs(y)) || math.IsNaN(x) && math.IsNaN(y) // no hit rate: NaN both
	}
	return a.Samples == b.Samples && a.Batches == b.Batches && near(a.AUC, b.AUC) && near(a.Loss, b.Loss) && near(a.HitRate, b.HitRate)
}

// TestFitEvalCache: a Fit with cache_eval_data opens the evaluation data
// once for all its evaluations and logs what a Fit without the cache logs.
func TestFitEvalCache(t *testing.T) {
	train := newPlanted(1, 2048, 4, smallSlots)
	eval := newPlanted(2, 700, 4, smallSlots)
	for beName, newBE := range cacheBackends(t) {
		t.Run(beName, func(t *testing.T) {
			var hist [2][]Point
			for i, cacheN := range []int{0, 20} {
				m := cacheModel(t, newBE(), "dcn", 64)
				var c countedReads
				res, err := m.Fit(context.Background(), FitOptions{
					OpenTrain:        func() (formats.Reader, error) { return train.reader(64), nil },
					OpenEval:         c.open(eval, 64),
					CacheEvalBatches: cacheN,
					NumEpochs:        3,
					EvalInterval:     16,
				})
				if err != nil {
					t.Fatal(err)
				}
				hist[i] = res.History
				evals := len(res.History)
				if evals < 6 {
					t.Fatalf("%d evaluations", evals)
				}
				if want := map[int]int{0: evals, 20: 1}[cacheN]; c.opens != want {
					t.Errorf("cache %d: eval data opened %d times over %d evaluations, want %d", cacheN, c.opens, evals, want)
				}
			}
			a, _ := json.Marshal(hist[0])
			b, _ := json.Marshal(hist[1])
			same := string(a) == string(b)
			if beName == "gpu" { // the device's sums may round differently run to run
				same = len(hist[0]) == len(hist[1])
				for i := range hist[0] {
					same = same && math.Abs(*hist[0][i].EvalAUC-*hist[1][i].EvalAUC) < 1e-4
				}
			}
			if !same || !strings.Contains(string(a), "eval_auc") {
				t.Errorf("with the cache:\n%s\nwithout:\n%s", b, a)
			}
		})
	}
}

// TestEvalCacheDeviceMemory: on a device backend the cache is checked
// against the device's free memory: refused up front by name when it
// cannot fit, and caching stops with a note when a batch does not fit.
func TestEvalCacheDeviceMemory(t *testing.T) {
	be := &deviceBackend{stagingBackend: newStagingBackend(t), free: 64 << 20}
	m := cacheModel(t, be, "dlrm", 64)
	if err := checkEvalCache(m, 1<<20, 0); err == nil || !strings.Contains(err.Error(), "cache_eval_data") || !strings.Contains(err.Error(), "free on") {
		t.Errorf("a cache of 2^20 batches in 64 MiB: %v", err)
	}
	if err := checkEvalCache(m, 10, 0); err != nil {
		t.Errorf("10 batches: %v", err)
	}
	data := newPlanted(2, 640, 4, smallSlots)
	var c countedReads
	cache := input.NewEvalCache(10)
	defer cache.Free(m.be)
	be.free = input.EvalCacheReserve + 1 // the reserve only: nothing fits
	want, err := m.evaluateFrom(c.open(data, 64), 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := m.evaluateFrom(c.open(data, 64), 0, nil, cache)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%+v, want %+v", got, want)
		}
	}
	if cache.Len() != 0 || !strings.Contains(cacheNote(cache), "cache_eval_data 10") || c.opens != 3 {
		t.Errorf("%d cached, %d opens, note %q", cache.Len(), c.opens, cacheNote(cache))
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
