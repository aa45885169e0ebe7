package dataset

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// kind is a family of generated data; each output variant says which kinds
// it can hold.
type kind int

const (
	oneHotInt   kind = iota // one key per slot, integer-valued dense: every format
	oneHotFloat             // one key per slot, any float dense: not Raw int32
	fixedHot                // fixed hotness > 1, integer-valued dense: Norm, Parquet, Raw multi-hot
	varNNZ                  // variable nnz (0 included), any float dense: Norm, Parquet
)

var kindNames = []string{"onehot-int", "onehot-float", "fixedhot", "varnnz"}

// variant is one way of writing a dataset and what a user says to read it.
type variant struct {
	name  string
	out   Output
	holds func(kind) bool
}

func all(kind) bool { return true }

var variants = []variant{
	{"norm-sum-i32", Output{Format: Norm, Check: norm.CheckSum, KeyType: formats.KeyU32, SamplesPerFile: 70}, all},
	{"norm-none-i32", Output{Format: Norm, Check: norm.CheckNone, KeyType: formats.KeyU32}, all},
	{"norm-sum-i64", Output{Format: Norm, Check: norm.CheckSum, KeyType: formats.KeyI64}, all},
	{"norm-none-i64", Output{Format: Norm, Check: norm.CheckNone, KeyType: formats.KeyI64, SamplesPerFile: 100}, all},
	{"raw-onehot-int", Output{Format: Raw, KeyType: formats.KeyU32, RawLayout: raw.OneHot, RawLayoutSet: true},
		func(k kind) bool { return k == oneHotInt }},
	{"raw-onehot-float", Output{Format: Raw, KeyType: formats.KeyU32, RawLayout: raw.OneHot, RawLayoutSet: true, FloatLabelDense: true},
		func(k kind) bool { return k == oneHotInt || k == oneHotFloat }},
	{"raw-multihot-int-i32", Output{Format: Raw, KeyType: formats.KeyU32, RawLayout: raw.MultiHot, RawLayoutSet: true},
		func(k kind) bool { return k == oneHotInt || k == fixedHot }},
	{"raw-multihot-float-i64", Output{Format: Raw, KeyType: formats.KeyI64, RawLayout: raw.MultiHot, RawLayoutSet: true,
		FloatLabelDense: true, LabelType: formats.Float32, LabelTypeSet: true},
		func(k kind) bool { return k != varNNZ }},
	{"parquet-snappy-i64", Output{Format: Parquet, KeyType: formats.KeyI64, Compression: "snappy"}, all},
	{"parquet-none-i32", Output{Format: Parquet, KeyType: formats.KeyU32, Compression: "none", CatType: "uint32"}, all},
	{"parquet-zstd-i64", Output{Format: Parquet, KeyType: formats.KeyI64, Compression: "zstd", RowGroupSize: 40, SamplesPerFile: 90, CatType: "int32"}, all},
}

// genKind draws n samples of a kind with the key type kt.
func genKind(seed uint64, k kind, n int, kt formats.KeyType) *formatstest.Dataset {
	rng := rand.New(rand.NewPCG(seed, uint64(k)))
	o := formatstest.RandomSchema{MaxLabel: 2, MaxDense: 5, MaxSlots: 5, MaxNNZ: 4, KeyType: kt}
	v := formatstest.AnyFloat
	switch k {
	case oneHotInt:
		o.OneHot, v = true, formatstest.IntegerValued
	case oneHotFloat:
		o.OneHot = true
	case fixedHot:
		o.FixedHotness, v = true, formatstest.IntegerValued
	}
	s := formatstest.NewSchema(rng, o)
	if k == fixedHot {
		s.Slots[0].Hotness, s.Slots[0].MaxNNZ = 3, 3 // at least one slot really multi-hot
	}
	if k == varNNZ {
		// Parquet writes a slot of max nnz 1 as a scalar column, which
		// cannot hold an empty slot: variable slots have max nnz ≥ 2.
		for i := range s.Slots {
			s.Slots[i].MaxNNZ = max(s.Slots[i].MaxNNZ, 2)
		}
	}
	return formatstest.NewDataset(rng, s, n, 0, v)
}

// readSpec is what a user tells Resolve to read data of schema s written
// with o (Raw needs its shape; Norm and Parquet need nothing but, for Raw
// outputs, the hotness of their one-hot or fixed-hotness slots).
func readSpec(s *formats.Schema, k kind, o Output) Spec {
	var sp Spec
	if k != varNNZ {
		for _, sl := range s.Slots {
			sp.NNZ = append(sp.NNZ, max(sl.Hotness, sl.MaxNNZ))
		}
	}
	if o.Format == Raw {
		sp.Format = Raw
		sp.LabelDim, sp.DenseDim, sp.NumSlot = s.LabelDim, s.DenseDim, len(s.Slots)
		sp.KeyType, sp.KeyTypeSet = o.KeyType, true
		sp.RawLayout, sp.RawLayoutSet = o.RawLayout, o.RawLayoutSet
		sp.FloatLabelDense = o.FloatLabelDense
		sp.LabelType, sp.LabelTypeSet = o.LabelType, o.LabelTypeSet
	}
	return sp
}

// dstPath is where a variant is written in dir.
func dstPath(dir string, o Output) string {
	switch o.Format {
	case Norm:
		return filepath.Join(dir, "file_list.txt")
	case Raw:
		return filepath.Join(dir, "data.bin")
	}
	return dir
}

// writeDirect writes ds in the variant's format with the format's writer.
func writeDirect(t testing.TB, dir string, ds *formatstest.Dataset, o Output) string {
	t.Helper()
	s, err := OutputSchema(ds.Schema, o)
	if err != nil {
		t.Fatal(err)
	}
	p := dstPath(dir, o)
	w, err := Create(p, &s, o)
	if err != nil {
		t.Fatal(err)
	}
	c := *ds
	c.Schema = s
	if err := c.WriteAll(w, 37); err != nil {
		t.Fatal(err)
	}
	return p
}

// readBack resolves p as a user would and reads every sample.
func readBack(t *testing.T, p string, sp Spec) *formatstest.Dataset {
	t.Helper()
	d, err := Resolve(p, sp)
	if err != nil {
		t.Fatalf("resolve %s: %v", p, err)
	}
	r, err := d.Open(formats.Options{BatchSize: 64})
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer r.Close()
	got, err := formatstest.ReadAll(r, 64, 0)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	if d.Samples >= 0 && d.Samples != int64(got.Len()) {
		t.Errorf("%s: Resolve says %d samples, read %d", p, d.Samples, got.Len())
	}
	return got
}

// TestConvertRoundTrips writes generated data in every variant that can hold
// it, converts it with Convert to every other such variant, and requires the
// same samples back, sample by sample.
func TestConvertRoundTrips(t *testing.T) {
	const n = 211
	conversions := 0
	for k := range kindNames {
		k := kind(k)
		for _, from := range variants {
			if !from.holds(k) {
				continue
			}
			ds := genKind(7, k, n, from.out.KeyType)
			srcDir := t.TempDir()
			src := writeDirect(t, srcDir, ds, from.out)
			if got := readBack(t, src, readSpec(&ds.Schema, k, from.out)); formatstest.Diff(ds, got) != "" {
				t.Fatalf("%s %s: direct write does not read back: %s", kindNames[k], from.name, formatstest.Diff(ds, got))
			}
			for _, to := range variants {
				if !to.holds(k) {
					continue
				}
				name := fmt.Sprintf("%s/%s->%s", kindNames[k], from.name, to.name)
				d, err := Resolve(src, readSpec(&ds.Schema, k, from.out))
				if err != nil {
					t.Fatalf("%s: resolve: %v", name, err)
				}
				dst := dstPath(t.TempDir(), to.out)
				st, err := Convert(context.Background(), d, dst, to.out, formats.Options{BatchSize: 50, Workers: 2}, nil)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if st.Samples != n {
					t.Errorf("%s: converted %d samples, want %d", name, st.Samples, n)
				}
				got := readBack(t, dst, readSpec(&ds.Schema, k, to.out))
				if diff := formatstest.Diff(ds, got); diff != "" {
					t.Errorf("%s: %s", name, diff)
				}
				conversions++
			}
		}
	}
	t.Logf("%d conversions", conversions)
}

// TestConvertRefusesLossy: data a format cannot hold is an error naming the
// problem, and nothing is left at the destination.
func TestConvertRefusesLossy(t *testing.T) {
	ds := genKind(3, oneHotFloat, 50, formats.KeyU32)
	src := writeDirect(t, t.TempDir(), ds, variants[0].out)
	d, err := Resolve(src, readSpec(&ds.Schema, oneHotFloat, variants[0].out))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = Convert(context.Background(), d, filepath.Join(dir, "x.bin"), Output{Format: Raw, KeyType: formats.KeyU32}, formats.Options{BatchSize: 16}, nil)
	if !errors.Is(err, formats.ErrValue) {
		t.Errorf("float dense to Raw int32: %v, want ErrValue", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed conversion left %v", ents)
	}

	// Variable nnz has no Raw layout.
	ds = genKind(3, varNNZ, 50, formats.KeyU32)
	src = writeDirect(t, t.TempDir(), ds, variants[0].out)
	d, err = Resolve(src, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(context.Background(), d, filepath.Join(dir, "x.bin"), Output{Format: Raw, KeyType: formats.KeyU32}, formats.Options{}, nil); err == nil {
		t.Error("variable nnz to Raw: no error")
	}
	d.Spec.NNZ = nil
	if _, err := Convert(context.Background(), d, filepath.Join(dir, "y.bin"), Output{Format: Raw, KeyType: formats.KeyU32, RawLayout: raw.OneHot, RawLayoutSet: true}, formats.Options{}, nil); err == nil {
		t.Error("variable nnz to Raw one-hot: no error")
	}
}

// TestConvertKeyRange: i64 keys convert to i32 while they fit; a key beyond
// 2^32−1 (or negative) is an ErrKeyRange error and the output is removed.
func TestConvertKeyRange(t *testing.T) {
	s := formats.NewSchema(1, 1, []int{1, 2}, nil, formats.KeyI64)
	ds := &formatstest.Dataset{Schema: s}
	for i := range 100 {
		ds.Labels = append(ds.Labels, []float32{float32(i % 2)})
		ds.Dense = append(ds.Dense, []float32{0.25})
		ds.Keys = append(ds.Keys, [][]int64{{1<<32 - 1 - int64(i)}, {int64(i), 7}})
	}
	o64 := Output{Format: Norm, Check: norm.CheckSum, KeyType: formats.KeyI64}
	src := writeDirect(t, t.TempDir(), ds, o64)
	sp := Spec{KeyType: formats.KeyI64, KeyTypeSet: true}
	d, err := Resolve(src, sp)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "l.txt")
	o32 := Output{Format: Norm, Check: norm.CheckNone, KeyType: formats.KeyU32}
	if _, err := Convert(context.Background(), d, dst, o32, formats.Options{BatchSize: 30}, nil); err != nil {
		t.Fatal(err)
	}
	got := readBack(t, dst, Spec{KeyType: formats.KeyU32, KeyTypeSet: true})
	if diff := formatstest.Diff(ds, got); diff != "" {
		t.Errorf("i64 → i32: %s", diff)
	}
	// And back to i64, through Parquet.
	pq := t.TempDir()
	d, _ = Resolve(dst, Spec{KeyType: formats.KeyU32, KeyTypeSet: true})
	if _, err := Convert(context.Background(), d, pq, Output{Format: Parquet, KeyType: formats.KeyI64, CatType: "uint64"}, formats.Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := formatstest.Diff(ds, readBack(t, pq, Spec{})); diff != "" {
		t.Errorf("i32 → i64: %s", diff)
	}

	for _, bad := range []int64{1 << 32, -5} {
		ds.Keys[60][1][1] = bad
		src := writeDirect(t, t.TempDir(), ds, o64)
		d, err := Resolve(src, sp)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		_, err = Convert(context.Background(), d, filepath.Join(dir, "l.txt"), o32, formats.Options{BatchSize: 30}, nil)
		var fe *formats.Error
		if !errors.Is(err, formats.ErrKeyRange) || !errors.As(err, &fe) || fe.Record != 60 || !strings.Contains(err.Error(), "slot 1 key") {
			t.Errorf("key %d to i32: %v, want an ErrKeyRange *formats.Error for record 60, slot 1", bad, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("key %d: failed conversion left %v", bad, ents)
		}
		// From Parquet (int64 cats), where the reader narrows the keys.
		pq := t.TempDir()
		if _, err := Convert(context.Background(), d, pq, Output{Format: Parquet, KeyType: formats.KeyI64}, formats.Options{}, nil); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			spec Spec
			hint string
		}{
			{Spec{NNZ: []int{1, 2}}, "--i64-input-key"},
			{Spec{NNZ: []int{1, 2}, KeyType: formats.KeyI64, KeyTypeSet: true}, "--out-key-type i64"},
		} {
			dp, err := Resolve(pq, c.spec)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Convert(context.Background(), dp, filepath.Join(dir, "r.bin"), Output{Format: Raw, KeyType: formats.KeyU32}, formats.Options{BatchSize: 30}, nil)
			if !errors.Is(err, formats.ErrKeyRange) || !errors.As(err, &fe) || fe.Record != 60 || !strings.Contains(err.Error(), `"C2"`) || !strings.Contains(err.Error(), c.hint) {
				t.Errorf("key %d, parquet (%s) to i32 raw: %v, want an ErrKeyRange *formats.Error for record 60, column C2, hint %s", bad, dp.Schema.KeyType, err, c.hint)
			}
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("key %d: failed conversion left %v", bad, ents)
		}
	}
}

// TestReadWorkers: a conversion to Raw decodes on at most three quarters
// of 8 or more cores, on every thread it is given below that.
func TestReadWorkers(t *testing.T) {
	for _, tc := range []struct{ threads, cores, want int }{
		{2, 2, 2}, {4, 4, 4}, {7, 7, 7}, {16, 4, 16},
		{8, 8, 6}, {16, 16, 12}, {12, 16, 12}, {8, 16, 8}, {1, 16, 1}, {64, 64, 48},
	} {
		if got := ReadWorkers(tc.threads, tc.cores); got != tc.want {
			t.Errorf("ReadWorkers(%d, %d) = %d, want %d", tc.threads, tc.cores, got, tc.want)
		}
	}
}
