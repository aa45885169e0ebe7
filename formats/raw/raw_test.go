package raw

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// config is one combination of layout and on-disk types.
type config struct {
	name      string
	layout    Layout
	labelType formats.ValueType
	denseType formats.ValueType
	keyType   formats.KeyType
}

var configs = []config{
	{"onehot-float", OneHot, formats.Float32, formats.Float32, formats.KeyU32},
	{"onehot-int", OneHot, formats.Int32, formats.Int32, formats.KeyU32},
	{"onehot-int-i64mem", OneHot, formats.Int32, formats.Int32, formats.KeyI64},
	{"multihot-i32-intlabel-float", MultiHot, formats.Int32, formats.Float32, formats.KeyU32},
	{"multihot-i32-int", MultiHot, formats.Int32, formats.Int32, formats.KeyU32},
	{"multihot-i64-float", MultiHot, formats.Float32, formats.Float32, formats.KeyI64},
	{"multihot-i64-int", MultiHot, formats.Int32, formats.Int32, formats.KeyI64},
}

// dataset draws a random dataset for c.
func (c config) dataset(seed uint64, n int) *formatstest.Dataset {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{
		MaxLabel: 2, MaxDense: 5, MaxSlots: 6, MaxNNZ: 4, KeyType: c.keyType,
		OneHot: c.layout == OneHot, FixedHotness: c.layout == MultiHot,
	})
	s.LabelType, s.DenseType = c.labelType, c.denseType
	v := formatstest.AnyFloat
	if c.denseType == formats.Int32 {
		v = formatstest.IntegerValued
	}
	return formatstest.NewDataset(rng, s, n, 1, v)
}

func writeFile(t testing.TB, dir string, d *formatstest.Dataset, l Layout) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("data-%d.raw", rand.Int()))
	w, err := Create(path, &d.Schema, l)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAll(w, 7); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t testing.TB, path string, s *formats.Schema, o Options, limit int) *formatstest.Dataset {
	t.Helper()
	r, err := Open(path, s, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bs := o.BatchSize
	if bs == 0 {
		bs = formats.DefaultBatchSize
	}
	d, err := formatstest.ReadAll(r, bs, limit)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLayout(t *testing.T) {
	for _, l := range []Layout{OneHot, MultiHot} {
		got, err := ParseLayout(l.String())
		if err != nil || got != l {
			t.Errorf("ParseLayout(%q) = %v, %v", l.String(), got, err)
		}
	}
	if _, err := ParseLayout("sparse"); err == nil {
		t.Error("ParseLayout(sparse) succeeded")
	}
	criteo := formats.NewSchema(1, 13, make26(1), nil, formats.KeyU32)
	if n, err := SampleSize(&criteo, OneHot); n != 160 || err != nil {
		t.Errorf("Criteo one-hot sample size %d, %v; want 160", n, err)
	}
	criteo.KeyType = formats.KeyI64
	if n, err := SampleSize(&criteo, OneHot); n != 160 || err != nil {
		t.Errorf("Criteo one-hot sample size with i64 keys %d, %v; want 160", n, err)
	}
	if _, err := SampleSize(&criteo, MultiHot); err == nil {
		t.Error("multi-hot without hotness accepted")
	}
	dcn := dcnv2Schema()
	if n, err := SampleSize(&dcn, MultiHot); n != 912 || err != nil {
		t.Errorf("DCNv2 multi-hot sample size %d, %v; want 912", n, err)
	}
	if _, err := SampleSize(&dcn, OneHot); err == nil {
		t.Error("one-hot with hotness > 1 accepted")
	}
	dcn.Slots[0].Hotness = 1 << 40
	if _, err := SampleSize(&dcn, MultiHot); err == nil {
		t.Error("absurd hotness accepted")
	}
}

func make26(v int) []int {
	s := make([]int, 26)
	for i := range s {
		s[i] = v
	}
	return s
}

var dcnv2Hotness = []int{3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1}

func dcnv2Schema() formats.Schema {
	s := formats.NewSchema(1, 13, dcnv2Hotness, nil, formats.KeyU32)
	for i := range s.Slots {
		s.Slots[i].Hotness = dcnv2Hotness[i]
	}
	s.LabelType = formats.Int32
	return s
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, c := range configs {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/%d", c.name, seed), func(t *testing.T) {
				d := c.dataset(seed, 103)
				path := writeFile(t, dir, d, c.layout)
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				size, _ := SampleSize(&d.Schema, c.layout)
				if st.Size() != int64(103*size) {
					t.Fatalf("file size %d, want %d", st.Size(), 103*size)
				}
				var first *formatstest.Dataset
				for _, workers := range []int{1, 4} {
					for _, bs := range []int{10, 103, 500} {
						o := Options{Layout: c.layout}
						o.BatchSize, o.Workers = bs, workers
						got := readFile(t, path, &d.Schema, o, 0)
						if diff := formatstest.Diff(d, got); diff != "" {
							t.Fatalf("workers %d batch %d: %s", workers, bs, diff)
						}
						if first == nil {
							first = got
						}
					}
				}
				// Slot offsets.
				o := Options{Layout: c.layout}
				o.BatchSize, o.Workers, o.SlotSizeArray = 16, 3, d.Schema.SlotSizes()
				got := readFile(t, path, &d.Schema, o, 0)
				if diff := formatstest.Diff(d.WithOffsets(d.Schema.SlotSizes()), got); diff != "" {
					t.Fatalf("slot offsets: %s", diff)
				}
			})
		}
	}
}

func TestRepeat(t *testing.T) {
	c := configs[1]
	d := c.dataset(9, 25)
	path := writeFile(t, t.TempDir(), d, c.layout)
	for _, workers := range []int{1, 3} {
		o := Options{Layout: c.layout}
		o.BatchSize, o.Workers, o.Repeat = 10, workers, true
		r, err := Open(path, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(&d.Schema, 10, nil)
		var sizes []int
		got := &formatstest.Dataset{Schema: d.Schema}
		for i := 0; i < 7; i++ {
			n, err := r.Read(b)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, n)
			one, _ := formats.NewBatch(&d.Schema, 10, nil)
			for j := 0; j < n; j++ {
				one.CopySample(b, j)
			}
			appendBatch(got, one)
		}
		if fmt.Sprint(sizes) != "[10 10 5 10 10 5 10]" {
			t.Errorf("workers %d: batch sizes %v", workers, sizes)
		}
		want := &formatstest.Dataset{Schema: d.Schema}
		for len(want.Labels) < got.Len() {
			n := min(d.Len(), got.Len()-want.Len())
			want.Labels = append(want.Labels, d.Labels[:n]...)
			want.Dense = append(want.Dense, d.Dense[:n]...)
			want.Keys = append(want.Keys, d.Keys[:n]...)
		}
		if diff := formatstest.Diff(want, got); diff != "" {
			t.Errorf("workers %d: %s", workers, diff)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(b); !errors.Is(err, ErrClosed) {
			t.Errorf("Read after Close: %v", err)
		}
	}
}

func appendBatch(d *formatstest.Dataset, b *formats.Batch) {
	for i := 0; i < b.N; i++ {
		d.AppendFrom(b, i)
	}
}

// shuffledOrder reads 2 epochs in repeat mode and returns, per batch, the
// index in the file of its first sample (identified by a unique label).
func shuffledOrder(t *testing.T, path string, s *formats.Schema, seed uint64, workers, n, bs int) [][]int {
	t.Helper()
	o := Options{Layout: OneHot}
	o.BatchSize, o.Workers, o.Repeat, o.Shuffle, o.Seed = bs, workers, true, true, seed
	r, err := Open(path, s, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := formats.NewBatch(s, bs, nil)
	nb := (n + bs - 1) / bs
	var epochs [][]int
	for e := 0; e < 2; e++ {
		seen := make([]bool, n)
		var order []int
		for k := 0; k < nb; k++ {
			m, err := r.Read(b)
			if err != nil {
				t.Fatal(err)
			}
			first := int(b.Labels[0])
			if first%bs != 0 {
				t.Fatalf("batch starts at sample %d, not a multiple of %d", first, bs)
			}
			for j := 0; j < m; j++ {
				x := int(b.Labels[j])
				if x != first+j {
					t.Fatalf("batch starting at %d holds sample %d at %d", first, x, j)
				}
				if seen[x] {
					t.Fatalf("epoch %d: sample %d twice", e, x)
				}
				seen[x] = true
			}
			order = append(order, first/bs)
		}
		for x, ok := range seen {
			if !ok {
				t.Fatalf("epoch %d: sample %d missing", e, x)
			}
		}
		epochs = append(epochs, order)
	}
	return epochs
}

func TestShuffle(t *testing.T) {
	const n, bs = 95, 4
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyU32)
	s.LabelType = formats.Int32
	d := &formatstest.Dataset{Schema: s}
	for i := 0; i < n; i++ {
		d.Labels = append(d.Labels, []float32{float32(i)})
		d.Dense = append(d.Dense, []float32{float32(i) / 2})
		d.Keys = append(d.Keys, [][]int64{{int64(i)}, {int64(2 * i)}})
	}
	path := writeFile(t, t.TempDir(), d, OneHot)
	a := shuffledOrder(t, path, &s, 1, 1, n, bs)
	b := shuffledOrder(t, path, &s, 1, 3, n, bs)
	c := shuffledOrder(t, path, &s, 2, 2, n, bs)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("same seed, different order:\n%v\n%v", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("different seeds, same order %v", a)
	}
	if fmt.Sprint(a[0]) == fmt.Sprint(a[1]) {
		t.Errorf("epochs 0 and 1 in the same order %v", a[0])
	}
	sorted := true
	for k, x := range a[0] {
		sorted = sorted && x == k
	}
	if sorted {
		t.Errorf("shuffle kept file order")
	}
}

func TestCloseStopsGoroutines(t *testing.T) {
	c := configs[0]
	d := c.dataset(3, 200)
	path := writeFile(t, t.TempDir(), d, c.layout)
	base := runtime.NumGoroutine()
	for _, repeat := range []bool{false, true} {
		o := Options{Layout: c.layout}
		o.BatchSize, o.Workers, o.Repeat = 8, 4, repeat
		r, err := Open(path, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(&d.Schema, 8, nil)
		if _, err := r.Read(b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // let the workers fill the ring and block
		if runtime.NumGoroutine() <= base {
			t.Fatalf("no worker goroutines running (%d)", runtime.NumGoroutine())
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if g := runtime.NumGoroutine(); g > base {
			t.Fatalf("repeat=%v: %d goroutines after Close, %d before Open", repeat, g, base)
		}
	}
}

func TestEmptyAndErrors(t *testing.T) {
	dir := t.TempDir()
	s := formats.NewSchema(1, 2, []int{1}, nil, formats.KeyU32)
	empty := filepath.Join(dir, "empty.raw")
	os.WriteFile(empty, nil, 0o644)
	d := readFile(t, empty, &s, Options{}, 0)
	if d.Len() != 0 {
		t.Errorf("empty file gave %d samples", d.Len())
	}
	o := Options{}
	o.Repeat = true
	if _, err := Open(empty, &s, o); !errors.Is(err, formats.ErrSize) {
		t.Errorf("repeating an empty file: %v", err)
	}
	// A batch smaller than the batch size, and one of another schema.
	full := filepath.Join(dir, "one.raw")
	os.WriteFile(full, make([]byte, 16*5), 0o644)
	o = Options{}
	o.BatchSize = 4
	r, err := Open(full, &s, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumSamples() != 5 {
		t.Errorf("NumSamples %d, want 5", r.NumSamples())
	}
	small, _ := formats.NewBatch(&s, 3, nil)
	if _, err := r.Read(small); err == nil {
		t.Error("Read into a too small batch succeeded")
	}
	other := formats.NewSchema(1, 3, []int{1}, nil, formats.KeyU32)
	ob, _ := formats.NewBatch(&other, 4, nil)
	if _, err := r.Read(ob); err == nil {
		t.Error("Read into a batch of another schema succeeded")
	}
	// Sticky EOF.
	b, _ := formats.NewBatch(&s, 4, nil)
	for _, want := range []int{4, 1} {
		if n, err := r.Read(b); n != want || err != nil {
			t.Fatalf("Read = %d, %v; want %d", n, err, want)
		}
	}
	for i := 0; i < 2; i++ {
		if n, err := r.Read(b); n != 0 || err != io.EOF {
			t.Fatalf("Read at end = %d, %v", n, err)
		}
	}
}

// shortReaderAt claims more bytes than it holds: the file shrank after Open.
type shortReaderAt struct{ data []byte }

func (s shortReaderAt) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(s.data).ReadAt(p, off)
}

func TestTruncatedAfterOpen(t *testing.T) {
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyU32) // 16 bytes
	for _, workers := range []int{1, 2} {
		o := Options{}
		o.BatchSize, o.Workers = 2, workers
		r, err := NewReader(shortReaderAt{make([]byte, 16*3+5)}, 16*6, "mem", &s, o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(&s, 2, nil)
		if _, err := r.Read(b); err != nil {
			t.Fatal(err)
		}
		_, err = r.Read(b)
		var fe *formats.Error
		if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &fe) || fe.Path != "mem" || fe.Offset != 48 || fe.Record != 3 {
			t.Fatalf("workers %d: truncation error %#v", workers, err)
		}
		if _, err2 := r.Read(b); err2 != err {
			t.Errorf("error not sticky: %v", err2)
		}
		r.Close()
	}
}

func TestClamp(t *testing.T) {
	s := formats.NewSchema(1, 3, []int{1}, nil, formats.KeyU32)
	s.LabelType, s.DenseType = formats.Int32, formats.Int32
	rec := func(label, a, b, c int32, key uint32) []byte {
		var p []byte
		for _, v := range []int32{label, a, b, c} {
			p = le32(p, uint32(v))
		}
		return le32(p, key)
	}
	data := append(rec(1, -5, 3, 70000, 7), rec(0, math.MinInt32, 0, -1, 8)...)
	path := filepath.Join(t.TempDir(), "clamp.raw")
	os.WriteFile(path, data, 0o644)
	for _, workers := range []int{1, 2} {
		o := Options{}
		o.BatchSize, o.Workers = 1, workers
		r, err := Open(path, &s, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := formatstest.ReadAll(r, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := [][]float32{{0, float32(math.Log(4)), float32(math.Log(70001))}, {0, 0, 0}}
		for i := range want {
			if fmt.Sprint(got.Dense[i]) != fmt.Sprint(want[i]) {
				t.Errorf("sample %d dense %v, want %v", i, got.Dense[i], want[i])
			}
		}
		if r.Clamped() != 3 {
			t.Errorf("workers %d: Clamped = %d, want 3", workers, r.Clamped())
		}
		r.Close()
	}
}

func le32(p []byte, v uint32) []byte {
	return append(p, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func TestDenseInverse(t *testing.T) {
	for x := int32(0); x <= MaxExactDense; x++ {
		got, err := DenseToInt32(formats.DenseFromInt32(x))
		if err != nil || got != x {
			t.Fatalf("DenseToInt32(DenseFromInt32(%d)) = %d, %v", x, got, err)
		}
	}
	if formats.DenseFromInt32(MaxExactDense+1) != formats.DenseFromInt32(MaxExactDense) {
		t.Errorf("transform still injective at %d: MaxExactDense is not the bound", MaxExactDense+1)
	}
	for _, v := range []float32{-1, float32(math.NaN()), float32(math.Inf(1)), 30} {
		if _, err := DenseToInt32(v); err == nil {
			t.Errorf("DenseToInt32(%v) succeeded", v)
		}
	}
	// Above the injective range the inverse still gives a preimage, so the
	// float value survives a write and a read.
	for _, x := range []int32{MaxExactDense + 1, 1 << 24, 123456789, math.MaxInt32} {
		v := formats.DenseFromInt32(x)
		got, err := DenseToInt32(v)
		if err != nil || formats.DenseFromInt32(got) != v {
			t.Errorf("x=%d: DenseToInt32(%v) = %d, %v", x, v, got, err)
		}
	}
	if x, err := DenseToInt32(0.5); err == nil { // e^0.5 − 1 = 0.65: no integer maps to 0.5
		t.Errorf("DenseToInt32(0.5) = %d, want an error", x)
	}
}

func TestWriterErrors(t *testing.T) {
	dir := t.TempDir()
	base := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyI64)
	base.LabelType, base.DenseType = formats.Int32, formats.Int32
	multi := base.Clone()
	for i := range multi.Slots {
		multi.Slots[i].Hotness = 1
	}
	cases := []struct {
		name   string
		s      formats.Schema
		l      Layout
		label  float32
		dense  float32
		keys   [][]int64
		target error
	}{
		{"fraction label", base, OneHot, 0.5, 0, [][]int64{{1}, {2}}, formats.ErrValue},
		{"huge label", base, OneHot, 3e9, 0, [][]int64{{1}, {2}}, formats.ErrValue},
		{"NaN label", base, OneHot, float32(math.NaN()), 0, [][]int64{{1}, {2}}, formats.ErrValue},
		{"negative dense", base, OneHot, 1, -0.5, [][]int64{{1}, {2}}, formats.ErrValue},
		{"NaN dense", base, OneHot, 1, float32(math.NaN()), [][]int64{{1}, {2}}, formats.ErrValue},
		{"two keys", base, OneHot, 1, 0, [][]int64{{1, 2}, {2}}, formats.ErrNNZ},
		{"no key", base, OneHot, 1, 0, [][]int64{{}, {2}}, formats.ErrNNZ},
		{"wide key", base, OneHot, 1, 0, [][]int64{{1}, {1 << 32}}, formats.ErrKeyRange},
		{"negative key", base, OneHot, 1, 0, [][]int64{{-1}, {1}}, formats.ErrKeyRange},
		{"hotness", multi, MultiHot, 1, 0, [][]int64{{1}, {1, 2}}, formats.ErrNNZ},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name+".raw")
		w, err := Create(path, &c.s, c.l)
		if err != nil {
			t.Fatal(err)
		}
		good, _ := formats.NewBatch(&c.s, 2, nil)
		good.AppendSample([]float32{1}, []float32{0}, [][]int64{{1}, {2}})
		if err := w.Write(good); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bad, _ := formats.NewBatch(&c.s, 2, nil)
		bad.AppendSample([]float32{1}, []float32{0}, [][]int64{{1}, {2}})
		if err := bad.AppendSample([]float32{c.label}, []float32{c.dense}, c.keys); err != nil {
			t.Fatal(err)
		}
		err = w.Write(bad)
		var fe *formats.Error
		size, _ := SampleSize(&c.s, c.l)
		if !errors.Is(err, c.target) || !errors.As(err, &fe) || fe.Path != path || fe.Record != 2 || fe.Offset != int64(2*size) {
			t.Errorf("%s: error %v, want %v at record 2", c.name, err, c.target)
		}
		if err2 := w.Close(); err2 == nil {
			t.Errorf("%s: Close after failed Write succeeded", c.name)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s: final file exists after failed write", c.name)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestDecodeNoAlloc(t *testing.T) {
	for _, name := range []string{"onehot-int32", "onehot-float32", "multihot-dcnv2"} {
		s, l, src := benchData(name, 100)
		dec, err := NewDecoder(&s, l, s.SlotSizes())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(&s, 100, nil)
		allocs := testing.AllocsPerRun(10, func() {
			b.SetLen(0)
			if err := dec.Decode(src, b, "mem", 0, 0); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Decode", name, allocs)
		}
	}
}

func TestDecodeAppends(t *testing.T) {
	c := configs[4]
	d := c.dataset(5, 9)
	path := writeFile(t, t.TempDir(), d, c.layout)
	data, _ := os.ReadFile(path)
	dec, err := NewDecoder(&d.Schema, c.layout, nil)
	if err != nil {
		t.Fatal(err)
	}
	size := dec.SampleSize()
	b, _ := formats.NewBatch(&d.Schema, 9, nil)
	for _, cut := range [][2]int{{0, 2}, {2, 3}, {3, 3}, {3, 9}} {
		if err := dec.Decode(data[cut[0]*size:cut[1]*size], b, path, int64(cut[0]), int64(cut[0]*size)); err != nil {
			t.Fatal(err)
		}
	}
	got := &formatstest.Dataset{Schema: d.Schema}
	appendBatch(got, b)
	if diff := formatstest.Diff(d, got); diff != "" {
		t.Fatal(diff)
	}
	if err := dec.Decode(data[:size], b, path, 0, 0); err == nil {
		t.Error("Decode past capacity succeeded")
	}
	b.SetLen(0)
	err = dec.Decode(data[:size+3], b, path, 4, 100)
	var fe *formats.Error
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &fe) || fe.Offset != int64(100+size) || fe.Record != 5 || b.N != 0 {
		t.Errorf("partial sample: %v (N %d)", err, b.N)
	}
}

func TestReset(t *testing.T) {
	c := configs[3]
	d := c.dataset(11, 50)
	path := writeFile(t, t.TempDir(), d, c.layout)
	for _, workers := range []int{1, 3} {
		o := Options{Layout: c.layout}
		o.BatchSize, o.Workers, o.Shuffle, o.Seed = 8, workers, true, 5
		r, err := Open(path, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		a, err := formatstest.ReadAll(r, 8, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Reset(); err != nil {
			t.Fatal(err)
		}
		b, err := formatstest.ReadAll(r, 8, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := formatstest.Diff(a, b); diff != "" || a.Len() != 50 {
			t.Errorf("workers %d: after Reset: %s (%d samples)", workers, diff, a.Len())
		}
		r.Close()
		if err := r.Reset(); !errors.Is(err, ErrClosed) {
			t.Errorf("Reset after Close: %v", err)
		}
	}
}

// TestWriteParallel writes large batches, which are encoded in parallel,
// and compares the file with one written a sample at a time; a bad sample
// deep in a large batch fails with its own record and offset, and the
// samples before it are counted as written.
func TestWriteParallel(t *testing.T) {
	s := formats.NewSchema(1, 3, []int{1, 1, 1}, nil, formats.KeyU32)
	for i := range s.Slots {
		s.Slots[i].MaxNNZ, s.Slots[i].Hotness = 1, 1
	}
	const n = 12*parallelMin + 123
	ds := formatstest.NewDataset(rand.New(rand.NewPCG(3, 4)), s, n, 1, formatstest.AnyFloat)
	dir := t.TempDir()
	write := func(name string, chunk int) []byte {
		p := filepath.Join(dir, name)
		w, err := Create(p, &s, OneHot)
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.WriteAll(w, chunk); err != nil { // closes w
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ser := write("ser.raw", 7)
	if par := write("par.raw", n); !bytes.Equal(par, ser) {
		t.Fatal("parallel and serial encodings differ")
	}
	// Six large ranges in a row: more than the background writer's
	// buffers, which are reused in order.
	if par := write("par6.raw", 2*parallelMin); !bytes.Equal(par, ser) {
		t.Fatal("consecutive parallel writes differ from the serial file")
	}
	// Small and large ranges mixed: the buffered and the background writes
	// must append in order.
	mixed := filepath.Join(dir, "mixed.raw")
	mw, err := Create(mixed, &s, OneHot)
	if err != nil {
		t.Fatal(err)
	}
	all, err := ds.Batches(n)
	if err != nil {
		t.Fatal(err)
	}
	for lo, k := 0, 0; lo < n; k++ {
		hi := min(lo+[]int{5, 3 * parallelMin, 7, 2*parallelMin + 1}[k%4], n)
		if err := mw.WriteRange(all[0], lo, hi); err != nil {
			t.Fatal(err)
		}
		lo = hi
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(mixed); !bytes.Equal(got, ser) {
		t.Fatal("mixed ranges differ from the serial file")
	}

	bs, err := ds.Batches(n)
	if err != nil {
		t.Fatal(err)
	}
	b := bs[0]
	const badAt = 3*parallelMin + 17
	b.Keys32[badAt*len(s.Slots)+1] = 1<<32 - 1 // fits u32: still good
	s2 := s.Clone()
	s2.LabelType = formats.Int32
	b.Schema = &s2
	b.Labels[badAt] = 0.5 // not an int32 label
	b.Labels[badAt+parallelMin] = 0.25
	p := filepath.Join(dir, "bad.raw")
	w, err := Create(p, &s2, OneHot)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.N {
		if i != badAt && i != badAt+parallelMin {
			b.Labels[i] = float32(i % 2)
		}
	}
	err = w.Write(b)
	size, _ := SampleSize(&s2, OneHot)
	var fe *formats.Error
	if !errors.Is(err, formats.ErrValue) || !errors.As(err, &fe) || fe.Record != badAt || fe.Offset != int64(badAt*size) {
		t.Fatalf("got %v, want ErrValue at record %d", err, badAt)
	}
	if w.Count() != badAt {
		t.Errorf("Count %d after the failed write, want %d", w.Count(), badAt)
	}
	if w.Close() == nil {
		t.Error("Close after a failed write succeeded")
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Error("a failed write left the final file")
	}
}

// failWriter fails every write after the first ok bytes.
type failWriter struct{ ok int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) <= f.ok {
		f.ok -= len(p)
		return len(p), nil
	}
	return 0, errors.New("disk full (test)")
}

// TestWriteParallelError checks that a failing background write is reported
// by a later Write or by Close, which then leaves no file.
func TestWriteParallelError(t *testing.T) {
	s := formats.NewSchema(1, 2, []int{1, 1}, nil, formats.KeyU32)
	ds := formatstest.NewDataset(rand.New(rand.NewPCG(5, 6)), s, 2*parallelMin, 1, formatstest.AnyFloat)
	bs, err := ds.Batches(2 * parallelMin)
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []int{0, 100000} {
		p := filepath.Join(t.TempDir(), "fail.raw")
		w, err := Create(p, &s, OneHot)
		if err != nil {
			t.Fatal(err)
		}
		w.w.Reset(&failWriter{ok: ok})
		var werr error
		for range 10 {
			if werr = w.Write(bs[0]); werr != nil {
				break
			}
		}
		cerr := w.Close()
		if werr == nil && cerr == nil || cerr == nil {
			t.Fatalf("ok %d: Write %v, Close %v: the write error was lost", ok, werr, cerr)
		}
		if !strings.Contains(cerr.Error(), "disk full") || !strings.Contains(cerr.Error(), "fail.raw from byte ") {
			t.Errorf("ok %d: Close: %v", ok, cerr)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("ok %d: a failed write left the final file", ok)
		}
	}
}

// TestEncodeOneHotFast checks that the copying path of encode (float label
// and dense, one 32-bit key per slot) gives the bytes of the general one,
// and that a sample without one key per slot still fails.
func TestEncodeOneHotFast(t *testing.T) {
	s := formats.NewSchema(2, 5, []int{1, 1, 1, 1}, nil, formats.KeyU32)
	for i := range s.Slots {
		s.Slots[i].MaxNNZ, s.Slots[i].Hotness = 1, 1
	}
	ds := formatstest.NewDataset(rand.New(rand.NewPCG(8, 1)), s, 500, 1, formatstest.AnyFloat)
	bs, err := ds.Batches(500)
	if err != nil {
		t.Fatal(err)
	}
	b := bs[0]
	for _, l := range []Layout{OneHot, MultiHot} {
		fast, err := newEncoder(&s, l)
		if err != nil {
			t.Fatal(err)
		}
		if !fast.oneHot32 {
			t.Fatalf("%s: the fast path is not taken", l)
		}
		slow := fast
		slow.oneHot32 = false
		p, q := make([]byte, fast.size), make([]byte, fast.size)
		for i := range b.N {
			if err := fast.encode(p, b, i); err != nil {
				t.Fatal(err)
			}
			if err := slow.encode(q, b, i); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p, q) {
				t.Fatalf("%s sample %d: fast %x, general %x", l, i, p, q)
			}
		}
	}
	bad, _ := formats.NewBatch(&s, 1, nil)
	if err := bad.AppendSample([]float32{1, 0}, make([]float32, 5), [][]int64{{1}, {}, {2, 3}, {4}}); err != nil || bad.N != 1 {
		t.Fatalf("AppendSample: %v", err)
	}
	enc, _ := newEncoder(&s, OneHot)
	if err := enc.encode(make([]byte, enc.size), bad, 0); !errors.Is(err, formats.ErrNNZ) {
		t.Errorf("slots of 0 and 2 keys: %v, want ErrNNZ", err)
	}
}
