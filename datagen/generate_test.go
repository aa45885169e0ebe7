package datagen

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// smallParams is a small dataset of format f under dir: 5 slots of varied
// sizes and nnz, files of 10000 samples (two chunks, the last short).
func smallParams(f Format, dir string) Params {
	p := DefaultParams()
	p.Format = f
	p.DenseDim = 4
	p.NumSlot = 5
	p.SlotSizeArray = []int64{7, 1000, 1, 50000, 300}
	p.NNZArray = []int{1, 3, 1, 2, 4}
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 3, 2, 10000
	p.NumSamples, p.EvalNumSamples = 30000, 9000
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.Seed = 12345
	if f == Raw {
		p.Source = filepath.Join(dir, "train_data.bin")
		p.EvalSource = filepath.Join(dir, "test_data.bin")
		p.RawLayout, p.RawLayoutSet = raw.MultiHot, true
	}
	if f == Criteo {
		p.NNZArray = nil
	}
	return p
}

// treeFiles returns the regular files under dir by relative path.
func treeFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReproducibleAcrossThreads(t *testing.T) {
	for _, f := range []Format{Norm, Raw, Parquet, Criteo} {
		t.Run(f.String(), func(t *testing.T) {
			var trees []map[string][]byte
			for _, threads := range []int{1, 4} {
				dir := t.TempDir()
				p := smallParams(f, dir)
				p.Threads = threads
				res, err := Generate(context.Background(), p, nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.Samples == 0 || res.Bytes == 0 {
					t.Fatalf("empty result %+v", res)
				}
				tr := treeFiles(t, dir)
				// gen_params.json records the thread-independent params only.
				trees = append(trees, tr)
			}
			a, b := trees[0], trees[1]
			pf := filepath.Base(ParamsPath(smallParams(f, "")))
			if len(a) != len(b) {
				t.Fatalf("file sets differ: %d vs %d files", len(a), len(b))
			}
			if !bytes.Contains(a[pf], []byte(`"seed": 12345`)) {
				t.Errorf("%s lacks the seed:\n%s", pf, a[pf])
			}
			for name, data := range a {
				if name == pf {
					continue // it names the (different) output directories
				}
				if !bytes.Equal(data, b[name]) {
					t.Errorf("%s differs between 1 and 4 threads", name)
				}
			}
			// A different seed gives different data.
			dir := t.TempDir()
			p := smallParams(f, dir)
			p.Seed++
			if _, err := Generate(context.Background(), p, nil); err != nil {
				t.Fatal(err)
			}
			c := treeFiles(t, dir)
			same := 0
			for name, data := range a {
				if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".txt") && bytes.Equal(data, c[name]) {
					same++
				}
			}
			if same != 0 {
				t.Errorf("%d data files identical with another seed", same)
			}
		})
	}
}

// checkSamples checks nnz and key ranges of SPEC §5 sample by sample.
func checkSamples(t *testing.T, p *Params, r formats.Reader, want int64) {
	t.Helper()
	b, err := formats.NewBatch(r.Schema(), formats.DefaultBatchSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	offs := formats.SlotOffsets(p.SlotSizeArray)
	var n int64
	nnzSeen := make([]map[int]bool, p.NumSlot)
	for s := range nnzSeen {
		nnzSeen[s] = map[int]bool{}
	}
	for {
		k, err := r.Read(b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < k; i++ {
			for s := 0; s < p.NumSlot; s++ {
				lo, hi := b.Row(i, s)
				nnz := hi - lo
				nnzSeen[s][nnz] = true
				switch p.Format {
				case Parquet:
					if nnz < 1 || nnz > p.NNZ(s) {
						t.Fatalf("sample %d slot %d: nnz %d outside [1, %d]", n+int64(i), s, nnz, p.NNZ(s))
					}
				default:
					if nnz != p.NNZ(s) {
						t.Fatalf("sample %d slot %d: nnz %d, want %d", n+int64(i), s, nnz, p.NNZ(s))
					}
				}
				klo, khi := int64(0), p.SlotSizeArray[s]-1
				if p.Format == Norm {
					klo, khi = offs[s], offs[s]+p.SlotSizeArray[s]-1
				}
				for j := lo; j < hi; j++ {
					if key := b.Key(j); key < klo || key > khi {
						t.Fatalf("sample %d slot %d: key %d outside [%d, %d]", n+int64(i), s, key, klo, khi)
					}
				}
			}
			for _, l := range b.Labels[i*p.LabelDim : (i+1)*p.LabelDim] {
				if p.LabelMode == Planted && l != 0 && l != 1 {
					t.Fatalf("sample %d: planted label %v", n+int64(i), l)
				}
			}
		}
		n += int64(k)
	}
	if n != want {
		t.Fatalf("read %d samples, want %d", n, want)
	}
	if p.Format == Parquet {
		for s := 0; s < p.NumSlot; s++ {
			if len(nnzSeen[s]) != p.NNZ(s) {
				t.Errorf("slot %d: nnz values seen %v, want all of 1..%d", s, nnzSeen[s], p.NNZ(s))
			}
		}
	}
}

func TestReadBackNorm(t *testing.T) {
	for _, check := range []norm.CheckMode{norm.CheckSum, norm.CheckNone} {
		dir := t.TempDir()
		p := smallParams(Norm, dir)
		p.CheckType = check
		p.I64InputKey = check == norm.CheckNone
		res, err := Generate(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range p.Plan() {
			if _, err := os.Stat(f.Path); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.HasSuffix(res.Files[0].Path, filepath.Join("train", "gen_0.data")) || !strings.HasSuffix(res.Files[3].Path, filepath.Join("val", "gen_0.data")) {
			t.Errorf("file names %s, %s", res.Files[0].Path, res.Files[3].Path)
		}
		s := p.Schema()
		mode := check
		for _, list := range []string{p.Source, p.EvalSource} {
			want := int64(p.NumFiles * p.NumSamplesPerFile)
			if list == p.EvalSource {
				want = int64(p.EvalNumFiles * p.NumSamplesPerFile)
			}
			r, err := norm.OpenList(list, &s, norm.Options{Check: mode})
			if err != nil {
				t.Fatal(err)
			}
			checkSamples(t, &p, r, want)
			r.Close()
		}
	}
}

func TestReadBackRaw(t *testing.T) {
	for _, c := range []struct {
		layout     raw.Layout
		float, i64 bool
		labels     LabelMode
	}{{raw.MultiHot, false, false, Planted}, {raw.MultiHot, true, true, UniformLabels}, {raw.OneHot, true, false, UniformLabels}, {raw.OneHot, false, true, Planted}} {
		dir := t.TempDir()
		p := smallParams(Raw, dir)
		p.RawLayout, p.RawLayoutSet, p.FloatLabelDense, p.I64InputKey, p.LabelMode = c.layout, true, c.float, c.i64, c.labels
		if c.layout == raw.OneHot {
			p.NNZArray = nil
		}
		if _, err := Generate(context.Background(), p, nil); err != nil {
			t.Fatal(err)
		}
		s := p.Schema()
		l := raw.OneHot
		if c.layout == raw.MultiHot {
			l = raw.MultiHot
		}
		for _, f := range p.Plan() {
			r, err := raw.Open(f.Path, &s, raw.Options{Layout: l})
			if err != nil {
				t.Fatal(err)
			}
			checkSamples(t, &p, r, f.Samples)
			r.Close()
		}
		if c.labels == UniformLabels {
			// HugeCTR's values: label = i mod 2, dense j = j.
			r, err := raw.Open(p.Source, &s, raw.Options{Options: formats.Options{BatchSize: 16}, Layout: l})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := formats.NewBatch(&s, 16, nil)
			if _, err := r.Read(b); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 16; i++ {
				if b.Labels[i] != float32(i%2) {
					t.Fatalf("raw uniform label %d = %v", i, b.Labels[i])
				}
				for j := 0; j < p.DenseDim; j++ {
					want := float32(j)
					if !c.float {
						want = formats.DenseFromInt32(int32(j))
					}
					if b.Dense[i*p.DenseDim+j] != want {
						t.Fatalf("raw uniform dense %d,%d = %v want %v", i, j, b.Dense[i*p.DenseDim+j], want)
					}
				}
			}
			r.Close()
		}
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		param string
		edit  func(p *Params)
	}{
		{"slot_size_array", func(p *Params) { p.SlotSizeArray = p.SlotSizeArray[:4] }},
		{"slot_size_array", func(p *Params) { p.SlotSizeArray[2] = 0 }},
		{"nnz_array", func(p *Params) { p.NNZArray = []int{1, 2} }},
		{"nnz_array", func(p *Params) { p.NNZArray[0] = 0 }},
		{"alpha", func(p *Params) { p.Alpha = 1 }},
		{"alpha", func(p *Params) { p.Alpha = -0.5 }},
		{"nnz_array", func(p *Params) { p.Format = Raw; p.RawLayout, p.RawLayoutSet = raw.OneHot, true }},
		{"nnz_array", func(p *Params) { p.Format = Criteo }},
		{"num_files", func(p *Params) { p.NumFiles = 0 }},
		{"num_samples", func(p *Params) { p.Format = Raw; p.NumSamples = 0 }},
		{"slot_size_array", func(p *Params) { p.SlotSizeArray[1] = 1 << 32 }},
		{"label_dim", func(p *Params) { p.LabelDim = 0 }},
		{"eval_source", func(p *Params) { p.EvalSource = p.Source }},
		{"missing_rate", func(p *Params) { p.MissingRate = 1 }},
	}
	for _, c := range cases {
		p := smallParams(Norm, filepath.Join(dir, "out"))
		c.edit(&p)
		_, err := Generate(context.Background(), p, nil)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != c.param {
			t.Errorf("%s: got %v", c.param, err)
		}
	}
	// Power law with α = 1 is fine when the preset overrides it or keys
	// are uniform.
	p := smallParams(Norm, dir)
	p.Alpha, p.PowerLawType = 1, Short
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("refused parameters wrote output: %v", err)
	}
}

func TestReadBackParquet(t *testing.T) {
	dir := t.TempDir()
	p := smallParams(Parquet, dir)
	res, err := Generate(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Files[0].Path, filepath.Join("train", "gen_0.parquet")) || !strings.HasSuffix(res.Files[3].Path, filepath.Join("val", "gen_0.parquet")) {
		t.Errorf("file names %s, %s", res.Files[0].Path, res.Files[3].Path)
	}
	for _, sub := range []string{"train", "val"} {
		if _, err := os.Stat(filepath.Join(dir, sub, parquet.MetadataName)); err != nil {
			t.Error(err)
		}
	}
	s := p.Schema()
	for _, list := range []string{p.Source, p.EvalSource} {
		want := int64(p.NumFiles * p.NumSamplesPerFile)
		if list == p.EvalSource {
			want = int64(p.EvalNumFiles * p.NumSamplesPerFile)
		}
		r, err := parquet.OpenList(list, &s, parquet.Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkSamples(t, &p, r, want)
		r.Close()
		// With slot_size_array the reader checks ranges and offsets keys.
		r, err = parquet.OpenList(list, &s, parquet.Options{Options: formats.Options{SlotSizeArray: p.SlotSizeArray}})
		if err != nil {
			t.Fatal(err)
		}
		if n := drain(t, r); n != want {
			t.Errorf("read %d samples with slot offsets, want %d", n, want)
		}
		r.Close()
	}
}

// drain reads r to io.EOF and returns the sample count.
func drain(t *testing.T, r formats.Reader) int64 {
	t.Helper()
	b, err := formats.NewBatch(r.Schema(), formats.DefaultBatchSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for {
		k, err := r.Read(b)
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		n += int64(k)
	}
}

func TestCancel(t *testing.T) {
	dir := t.TempDir()
	p := smallParams(Norm, filepath.Join(dir, "out"))
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32 // progress is called from several goroutines
	_, err := Generate(ctx, p, func(int64) {
		if n.Add(1) == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	// Only complete files may remain: no temporary files, no file lists.
	for name := range treeFiles(t, dir) {
		if strings.Contains(name, ".tmp-") || strings.HasSuffix(name, ".txt") {
			t.Errorf("left %s after cancellation", name)
		}
	}
}
