package model

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// openFlags returns the open flags (/proc/self/fdinfo) of this process's
// descriptors of path.
func openFlags(t *testing.T, path string) []int64 {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var flags []int64
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || l != abs {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				f, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
				if err != nil {
					t.Fatal(err)
				}
				flags = append(flags, f)
			}
		}
	}
	return flags
}

// rawAsyncConfig is a small DLRM and a RawAsync data section over a Raw
// file of n samples written in a directory where O_DIRECT works (the test
// skips when none does: tmpfs refuses it).
func rawAsyncConfig(t *testing.T, n int, async *graph.AsyncParams) (*graph.Config, Source, string) {
	t.Helper()
	sizes := []int64{50, 7, 300, 20}
	cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 3, SlotSizes: sizes, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	s := formats.NewSchema(1, 3, []int{1, 1, 1, 1}, sizes, formats.KeyU32)
	for i := range s.Slots {
		s.Slots[i].Hotness = 1
	}
	d := formatstest.NewDataset(rand.New(rand.NewPCG(1, 2)), s, n, 1, formatstest.IntegerValued)
	var path string
	for _, dir := range []string{t.TempDir(), "."} {
		if dir == "." {
			var err error
			if dir, err = os.MkdirTemp(".", ".odirect-"); err != nil {
				continue
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
		}
		p := filepath.Join(dir, "train.bin")
		out := dataset.Output{Format: dataset.Raw, KeyType: formats.KeyU32, RawLayout: raw.OneHot, RawLayoutSet: true, NoSync: true}
		ws, err := dataset.OutputSchema(s, out)
		if err != nil {
			t.Fatal(err)
		}
		w, err := dataset.Create(p, &ws, out)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.WriteAll(w, 64); err != nil {
			t.Fatal(err)
		}
		if f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECT, 0); err == nil {
			f.Close()
			path = p
			break
		}
		t.Logf("%s refuses O_DIRECT", dir)
	}
	if path == "" {
		t.Skip("no directory here takes O_DIRECT (tmpfs?)")
	}
	rp := &graph.ReaderParams{Format: "RawAsync", Source: []string{path}, EvalSource: path, Check: "None", Async: async}
	train, _, err := ReaderSources(rp, &cfg.Graph.Input, false, "test.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg, train, path
}

// TestRawAsyncTrainingOpensODirect: a training run from a RawAsync config
// (every async_param field set) reads its file with O_DIRECT, as
// /proc/self/fdinfo shows while it trains, in epoch and non-epoch mode.
// Before, RawAsync opened the synchronous Raw reader.
func TestRawAsyncTrainingOpensODirect(t *testing.T) {
	cfg, src, path := rawAsyncConfig(t, 700, &graph.AsyncParams{NumThreads: 2, NumBatchesPerThread: 2,
		IOBlockSize: 8192, IODepth: 2, IOAlignment: 4096, MultiHotReader: false, MultiHotReaderSet: true})
	if src.Async == nil || src.Async.IOBlockSize != 8192 || src.Async.IODepth != 2 || src.Async.IOAlignment != 4096 ||
		src.Async.NumThreads != 2 || src.Async.NumBatchesPerThread != 2 {
		t.Fatalf("async_param not carried: %+v", src.Async)
	}
	for _, epochs := range []int{1, 0} {
		m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		opened := 0
		o := FitOptions{NumEpochs: epochs, MaxIter: 15, OpenTrain: func() (formats.Reader, error) {
			r, err := m.Open(src)
			if err != nil {
				return nil, err
			}
			flags := openFlags(t, path)
			if len(flags) == 0 {
				t.Errorf("epochs %d: the data file is not open while training", epochs)
			}
			for _, f := range flags {
				if f&syscall.O_DIRECT == 0 {
					t.Errorf("epochs %d: data file open with flags %#o, no O_DIRECT", epochs, f)
				}
			}
			opened++
			return r, nil
		}}
		if epochs > 0 {
			o.MaxIter = 0
		}
		res, err := m.Fit(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if opened == 0 || res.Iters == 0 {
			t.Fatalf("epochs %d: %d opens, %d iterations", epochs, opened, res.Iters)
		}
	}
}

// TestRawAsyncShuffle: async_param shuffle gives a different sample order
// per seed and the same order for the same seed, over the same samples.
func TestRawAsyncShuffle(t *testing.T) {
	cfg, src, _ := rawAsyncConfig(t, 640, &graph.AsyncParams{NumThreads: 2, ShuffleFiles: true})
	if !src.Shuffle {
		t.Fatal("async_param.shuffle not carried")
	}
	m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 64, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	order := func(seed uint64) []int64 {
		s := src
		s.Seed = seed
		r, err := m.Open(s)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		d, err := formatstest.ReadAll(r, 64, 0)
		if err != nil {
			t.Fatal(err)
		}
		var keys []int64
		for _, k := range d.Keys {
			keys = append(keys, k[2][0]) // slot 2: 300 values, nearly unique
		}
		return keys
	}
	a, b, a2 := order(1), order(2), order(1)
	if !slices.Equal(a, a2) {
		t.Error("the same seed gave two orders")
	}
	if slices.Equal(a, b) {
		t.Error("seeds 1 and 2 gave the same order")
	}
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.Sort(sa)
	slices.Sort(sb)
	if !slices.Equal(sa, sb) || len(a) != 640 {
		t.Errorf("shuffled passes hold different samples (%d, %d)", len(a), len(b))
	}
}
