package model

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/input"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// inputBackends are the backends the input tests run on: the CPU, and the
// GPU when a CUDA driver loads (CTRKIT_REQUIRE_GPU=1: it must).
func inputBackends(t *testing.T) map[string]func() tensor.Backend {
	bes := map[string]func() tensor.Backend{"cpu": func() tensor.Backend { return cpuBackend(t) }}
	// The staged (GPU) path on the CPU: lent reader batches, Stage, Commit.
	bes["staged"] = func() tensor.Backend { return newStagingBackend(t) }
	g, err := gpu.New(gpu.Options{})
	switch {
	case err == nil:
		t.Cleanup(func() { g.Close() })
		bes["gpu"] = func() tensor.Backend { g.Reset(); return g }
	case !errors.Is(err, cuda.ErrNoDriver) || os.Getenv("CTRKIT_REQUIRE_GPU") != "":
		t.Fatalf("GPU backend: %v", err)
	}
	return bes
}

// inputLayout is one sparse-input layout of the acceptance test.
type inputLayout struct {
	name  string
	model string
	opt   graph.RefOptions
	multi bool // some slot holds several keys
}

var inputLayouts = []inputLayout{
	{"one-hot", "dlrm", graph.RefOptions{DenseDim: 3, SlotSizes: []int64{50, 7, 300, 20}, VecSize: 4, Width: 1.0 / 64, EmbeddingType: graph.LocalizedOneHot}, false},
	{"multi-hot", "dlrm", graph.RefOptions{DenseDim: 3, SlotSizes: []int64{50, 7, 300, 20}, NNZ: 3, VecSize: 4, Width: 1.0 / 64}, true},
	{"several inputs", "wdl", graph.RefOptions{DenseDim: 3, SlotSizes: []int64{40, 9, 300, 20, 11}, VecSize: 4, Width: 1.0 / 64}, false},
	{"several inputs multi-hot", "wdl", graph.RefOptions{DenseDim: 3, SlotSizes: []int64{40, 9, 300, 20, 11}, NNZ: 2, WideNNZ: 3, VecSize: 4, Width: 1.0 / 64}, true},
}

// TestInputPipelineMatchesReference is #14's acceptance test of the data
// path: for each sparse-input layout (one-hot, multi-hot, several inputs),
// 32- and 64-bit keys, with and without the reader's slot_size_array, and
// each format (Norm, Raw, Parquet, RawAsync), every batch the prefetcher
// hands the backend (labels, dense values, each input's keys and CSR,
// NNZ) equals the reference built on the host from the samples written to
// the file: keys in sample, slot order, slot-local for one-hot
// embeddings, plus the slot offsets for hash embeddings when the data has
// a slot_size_array, short batches padded with empty samples. It runs on
// the CPU backend and, when there is a GPU, on the GPU (staged uploads,
// the device's SplitInputs).
func TestInputPipelineMatchesReference(t *testing.T) {
	for beName, newBE := range inputBackends(t) {
		for _, lay := range inputLayouts {
			for _, i64 := range []bool{false, true} {
				for _, withSizes := range []bool{false, true} {
					for _, format := range []string{"Norm", "Raw", "Parquet", "RawAsync"} {
						name := fmt.Sprintf("%s/%s/i64=%v/sizes=%v/%s", beName, lay.name, i64, withSizes, format)
						t.Run(name, func(t *testing.T) { checkInputPipeline(t, newBE(), lay, i64, withSizes, format) })
					}
				}
			}
		}
	}
}

func checkInputPipeline(t *testing.T, be tensor.Backend, lay inputLayout, i64, withSizes bool, format string) {
	const B, N = 64, 150 // two full batches and a short one
	cfg, err := graph.Reference(lay.model, lay.opt)
	if err != nil {
		t.Fatal(err)
	}
	sizes := lay.opt.SlotSizes
	var readerSizes []int64
	if withSizes {
		readerSizes = sizes
	}
	m, err := Build(cfg, be, Options{BatchSize: B, Seed: 1, SlotSizeArray: readerSizes})
	if err != nil {
		t.Fatal(err)
	}
	f, async, _ := ParseFormat(format)
	kt := formats.KeyU32
	if i64 {
		kt = formats.KeyI64
	}
	// The samples: fixed hotness for Raw and one-hot slots, else 0..nnz keys.
	s := m.Schema(kt)
	for i := range s.Slots {
		s.Slots[i].Size = sizes[i]
		if f == dataset.Raw || !lay.multi {
			s.Slots[i].Hotness = s.Slots[i].MaxNNZ
		}
	}
	d := formatstest.NewDataset(rand.New(rand.NewPCG(uint64(len(lay.name)), 3)), s, N, 0, formatstest.IntegerValued)
	oneHot := lay.opt.EmbeddingType == graph.LocalizedOneHot
	stored := d
	if oneHot && !withSizes {
		stored = d.WithOffsets(sizes) // HugeCTR's one-hot rows: global over the slot sizes
	}
	dir := t.TempDir()
	out := dataset.Output{Format: f, KeyType: kt, Check: norm.CheckSum, NoSync: true}
	dst := filepath.Join(dir, "data")
	if f == dataset.Raw {
		dst += ".bin"
		out.RawLayout, out.RawLayoutSet = raw.OneHot, true
		if lay.multi {
			out.RawLayout = raw.MultiHot
		}
	}
	ws, err := dataset.OutputSchema(s, out)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dataset.Create(dst, &ws, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := stored.WriteAll(w, B); err != nil {
		t.Fatal(err)
	}
	path := dst
	if f == dataset.Parquet {
		path = filepath.Join(dst, "_file_list.txt")
	} else if f == dataset.Norm {
		path = filepath.Join(dst, "file_list.txt")
	}
	src := Source{Format: f, Path: path, Check: norm.CheckSum, SlotSizeArray: readerSizes, I64Keys: i64, Workers: 2}
	if async {
		src.Async = &asyncio.Params{NumThreads: 2, IOBlockSize: 4096}
	}
	if f == dataset.Raw && lay.multi {
		src.Layout, src.LayoutSet = raw.MultiHot, true
	}
	r, err := m.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pf, err := m.newPrefetcher(r)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()

	// The reference's per-slot add: hash inputs get the slot offsets of
	// the reader's slot_size_array; one-hot inputs stay slot-local.
	add := make([]int64, len(sizes))
	if withSizes && !oneHot {
		add = formats.SlotOffsets(sizes)
	}
	seen := 0
	for bi := 0; ; bi++ {
		st := pf.Next()
		if st.Err != nil && !errors.Is(st.Err, io.EOF) {
			t.Fatal(st.Err)
		}
		if st.N > 0 {
			if err := pf.Commit(st); err != nil {
				t.Fatalf("batch %d: %v", bi, err)
			}
			checkFed(t, m, d, seen, st.N, add, bi)
			seen += st.N
		}
		if st.Err != nil {
			break
		}
	}
	if seen != N {
		t.Fatalf("%d samples through the pipeline, want %d", seen, N)
	}
}

// checkFed compares the backend's inputs with samples [lo, lo+n) of d.
func checkFed(t *testing.T, m *Model, d *formatstest.Dataset, lo, n int, add []int64, bi int) {
	t.Helper()
	f, be, B := m.feed, m.be, m.batch
	got := make([]float32, B*f.LabelDim)
	if err := be.Download(got, f.Label.Value); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, B*f.LabelDim)
	for i := range n {
		copy(want[i*f.LabelDim:], d.Labels[lo+i])
	}
	if !slices.Equal(got, want) {
		t.Errorf("batch %d labels %v, want %v", bi, got[:8], want[:8])
	}
	if f.Dense != nil {
		got := make([]float32, B*f.DenseDim)
		if err := be.Download(got, f.Dense.Value); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, B*f.DenseDim)
		for i := range n {
			copy(want[i*f.DenseDim:], d.Dense[lo+i])
		}
		if !slices.Equal(got, want) {
			t.Errorf("batch %d dense values differ: %v, want %v", bi, got[:8], want[:8])
		}
	}
	for k, in := range f.Inputs {
		part := f.Parts[k]
		var keys []int64
		off := []int32{0}
		for i := range B {
			for s := part.First; s < part.First+part.Slots; s++ {
				if i < n {
					for _, key := range d.Keys[lo+i][s] {
						keys = append(keys, key+add[s])
					}
				}
				off = append(off, int32(len(keys)))
			}
		}
		if in.NNZ != len(keys) {
			t.Fatalf("batch %d input %d: NNZ %d, want %d", bi, k, in.NNZ, len(keys))
		}
		gotOff := make([]int32, len(off))
		if err := be.Download(gotOff, in.Offsets); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gotOff, off) {
			t.Errorf("batch %d input %d offsets %v…, want %v…", bi, k, gotOff[:min(12, len(off))], off[:min(12, len(off))])
		}
		gotKeys := make([]int64, len(keys))
		if len(keys) > 0 {
			if err := be.Download(gotKeys, in.Keys.Prefix(len(keys))); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(gotKeys, keys) {
			t.Errorf("batch %d input %d keys %v…, want %v…", bi, k, gotKeys[:min(12, len(keys))], keys[:min(12, len(keys))])
		}
	}
}

// newPrefetcher starts the input pipeline on r.
func (m *Model) newPrefetcher(r formats.Reader) (*input.Prefetcher, error) {
	pf := input.NewPrefetcher(m.feed)
	if err := pf.Start(r); err != nil {
		pf.Close()
		return nil, err
	}
	return pf, nil
}
