package input

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

var shardInput = &graph.Input{LabelTops: []string{"label"}, LabelDims: []int{1}, DenseTop: "dense", DenseDim: 2,
	Sparse: []graph.SparseParam{{Top: "data1", SlotNum: 3, NNZPerSlot: []int{1, 1, 1}}}}

// writeRaw writes n one-hot float samples numbered from first: label
// first%2, dense (first, -first), keys first, first+1, first+2.
func writeRaw(t *testing.T, path string, first, n int) {
	t.Helper()
	var b []byte
	for i := first; i < first+n; i++ {
		for _, v := range []float32{float32(i % 2), float32(i), -float32(i)} {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		for k := range 3 {
			b = binary.LittleEndian.AppendUint32(b, uint32(i+k))
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// batchText is b's samples, one string each.
func batchText(b *formats.Batch) []string {
	var out []string
	for i := range b.N {
		s := fmt.Sprint(b.Labels[i], b.Dense[2*i:2*i+2])
		for k := range 3 {
			lo, hi := b.Row(i, k)
			for j := lo; j < hi; j++ {
				s += fmt.Sprint(" ", b.Key(j))
			}
		}
		out = append(out, s)
	}
	return out
}

// readAll reads r to the end: every batch's samples.
func readAll(r formats.Reader, batch int) ([][]string, error) {
	defer r.Close()
	b, err := formats.NewBatch(r.Schema(), batch, nil)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for {
		n, err := r.Read(b)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if n != b.N {
			return out, fmt.Errorf("Read returned %d, the batch holds %d", n, b.N)
		}
		out = append(out, batchText(b))
	}
}

// shardRanks opens and reads src on w in-process ranks with mode (rank r
// reading srcOf(r)): each rank's batches and error.
func shardRanks(t *testing.T, w int, mode DataShard, batch int, srcOf func(r int) Source) ([][][]string, []error) {
	t.Helper()
	g, err := collective.NewLocalGroup(w, collective.Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	out := make([][][]string, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	for r := range w {
		x, err := g.Gatherer(r, 1)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd, err := OpenShard(srcOf(r), shardInput, batch, Shard{Mode: mode, X: x, Where: func(q int) string { return fmt.Sprintf("process %d", q) }})
			if err != nil {
				x.Close()
				errs[r] = err
				return
			}
			out[r], errs[r] = readAll(rd, batch)
		}()
	}
	wg.Wait()
	return out, errs
}

// TestShardSamples: 2 and 4 ranks reading their windows of every batch
// (Raw and RawAsync, shuffled, with workers, a short last batch,
// num_samples) each hold
// the batches one reader reads, in the same order.
func TestShardSamples(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.bin")
	writeRaw(t, path, 0, 37)
	for _, c := range []struct {
		w, workers, batch int
		num               int64
		async             bool
	}{{2, 1, 8, 0, false}, {4, 2, 8, 0, false}, {2, 3, 6, 29, false}, {4, 1, 4, 0, false}, {2, 1, 4, 30, false}, {2, 1, 8, 0, true}, {4, 2, 8, 31, true}} {
		src := Source{Format: dataset.Raw, Path: path, FloatLabelDense: true, Shuffle: true, Seed: 3, Workers: c.workers, NumSamples: c.num}
		if c.async {
			src.Async = &asyncio.Params{Buffered: true, NumThreads: 2}
		}
		r, err := Open(src, shardInput, c.batch, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := readAll(r, c.batch)
		if err != nil {
			t.Fatal(err)
		}
		got, errs := shardRanks(t, c.w, ShardSamples, c.batch, func(int) Source { return src })
		for q := range c.w {
			if errs[q] != nil {
				t.Fatalf("%+v rank %d: %v", c, q, errs[q])
			}
			if fmt.Sprint(got[q]) != fmt.Sprint(want) {
				t.Errorf("%+v rank %d: %d batches\n%v\nwant %d\n%v", c, q, len(got[q]), got[q], len(want), want)
			}
		}
	}
}

// TestShardFiles: 2 ranks reading their own Raw files (0 and 2; 1) in
// batches of 2 give every rank the same global batches of ≤ 4 samples,
// which cover every sample exactly once per epoch.
func TestShardFiles(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	first := 0
	for i, n := range []int{9, 4, 6} {
		p := filepath.Join(dir, fmt.Sprintf("d%d.bin", i))
		writeRaw(t, p, first, n)
		first += n
		paths = append(paths, p)
	}
	src := Source{Format: dataset.Raw, Path: paths[0], Paths: paths, FloatLabelDense: true}
	r, err := Open(src, shardInput, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	one, err := readAll(r, 4)
	if err != nil {
		t.Fatal(err)
	}
	got, errs := shardRanks(t, 2, ShardFiles, 4, func(int) Source { return src })
	for q := range 2 {
		if errs[q] != nil {
			t.Fatalf("rank %d: %v", q, errs[q])
		}
		if fmt.Sprint(got[q]) != fmt.Sprint(got[0]) {
			t.Errorf("rank %d's batches differ from rank 0's", q)
		}
	}
	var all, wantAll []string
	for _, b := range got[0] {
		if len(b) > 4 || len(b) == 0 {
			t.Errorf("a global batch of %d samples", len(b))
		}
		all = append(all, b...)
	}
	for _, b := range one {
		wantAll = append(wantAll, b...)
	}
	sort.Strings(all)
	sort.Strings(wantAll)
	if fmt.Sprint(all) != fmt.Sprint(wantAll) {
		t.Errorf("the epoch's samples\n%v\nwant each once\n%v", all, wantAll)
	}
	// Rank 0 reads files 0 and 2 (15 samples), rank 1 file 1 (4): the
	// first batch is rank 0's first 2 samples then rank 1's.
	if len(got[0]) != 8 || got[0][0][2] != one[3][0] {
		t.Errorf("%d batches, first %v (file 1 starts with %v)", len(got[0]), got[0][0], one[3][0])
	}
}

// TestShardRefusals: what a mode cannot shard is refused naming the flag;
// ranks reading different data fail naming the process, never hang.
func TestShardRefusals(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.bin")
	writeRaw(t, a, 0, 20)
	writeRaw(t, b, 0, 12)
	list := filepath.Join(dir, "list.txt")
	os.WriteFile(list, []byte("1\n"+a+"\n"), 0o644)
	for _, c := range []struct {
		mode DataShard
		src  Source
		want string
	}{
		{ShardSamples, Source{Format: dataset.Norm, Path: list}, "--data-shard samples reads a part of every batch from Raw files"},
		{ShardFiles, Source{Format: dataset.Raw, Path: a}, "--data-shard files: the Raw source is one file"},
		{ShardFiles, Source{Format: dataset.Raw, Path: a, Paths: []string{a, b}, NumSamples: 5}, "--data-shard files with num_samples 5"},
		{ShardFiles, Source{Format: dataset.Norm, Path: list}, "--data-shard files: file list " + list + " has 1 file for 2 ranks"},
	} {
		_, errs := shardRanks(t, 2, c.mode, 4, func(int) Source { return c.src })
		if errs[0] == nil || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.mode, c.src, errs[0], c.want)
		}
	}
	_, errs := shardRanks(t, 2, ShardSamples, 4, func(r int) Source {
		return Source{Format: dataset.Raw, Path: []string{a, b}[r], FloatLabelDense: true}
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "--data-shard samples: process 1 reached the end of its data at global batch 3, process 0 did not") {
		t.Errorf("different files: %v", errs)
	}
	if _, err := ParseDataShard("rows"); err == nil || !strings.Contains(err.Error(), "--data-shard") {
		t.Errorf("--data-shard rows: %v", err)
	}
}

// TestShardFilesLists: --data-shard files over a Norm and a Parquet file
// list of 3 files (2 ranks: files 0 and 2, file 1) covers every sample of
// the list once per epoch, each rank holding the same global batches.
func TestShardFilesLists(t *testing.T) {
	for _, f := range []datagen.Format{datagen.Norm, datagen.Parquet} {
		dir := t.TempDir()
		p := datagen.DefaultParams()
		p.Format, p.DenseDim, p.NumSlot, p.SlotSizeArray, p.Seed = f, 2, 3, []int64{50, 60, 70}, 4
		p.NNZArray = []int{1, 1, 1}
		p.Source, p.EvalSource = filepath.Join(dir, "list.txt"), filepath.Join(dir, "test.txt")
		p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 3, 1, 37
		if _, err := datagen.Generate(context.Background(), p, nil); err != nil {
			t.Fatal(err)
		}
		format := dataset.Norm
		if f == datagen.Parquet {
			format = dataset.Parquet
		}
		src := Source{Format: format, Path: p.Source, Check: norm.CheckSum}
		r, err := Open(src, shardInput, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		one, err := readAll(r, 8)
		if err != nil {
			t.Fatal(err)
		}
		got, errs := shardRanks(t, 2, ShardFiles, 8, func(int) Source { return src })
		for q := range 2 {
			if errs[q] != nil {
				t.Fatalf("%v rank %d: %v", f, q, errs[q])
			}
			if fmt.Sprint(got[q]) != fmt.Sprint(got[0]) {
				t.Errorf("%v: rank %d's batches differ from rank 0's", f, q)
			}
		}
		var all, want []string
		for _, b := range got[0] {
			all = append(all, b...)
		}
		for _, b := range one {
			want = append(want, b...)
		}
		sort.Strings(all)
		sort.Strings(want)
		if len(want) != 111 || fmt.Sprint(all) != fmt.Sprint(want) {
			t.Errorf("%v: %d samples in the epoch, want each of the %d once", f, len(all), len(want))
		}
	}
}
