package raw

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

var update = flag.Bool("update", false, "rewrite testdata fixtures and golden files")

// fixture is a tiny file in testdata/, built by the Writer from a dataset.
type fixture struct {
	name   string
	layout Layout
	schema formats.Schema
	data   *formatstest.Dataset
	extra  []byte // appended after the samples (corrupt fixtures)
}

func smallSchema(kt formats.KeyType, l Layout) formats.Schema {
	s := formats.NewSchema(1, 2, []int{1, 1, 1}, []int64{10, 20, 30}, kt)
	if l == MultiHot {
		for i, h := range []int{2, 1, 3} {
			s.Slots[i].Hotness, s.Slots[i].MaxNNZ = h, h
		}
		s.LabelType = formats.Int32
	}
	return s
}

func fixtures() []fixture {
	criteo := formats.NewSchema(1, 13, make26(1), nil, formats.KeyU32)
	criteo.LabelType, criteo.DenseType = formats.Int32, formats.Int32
	cd := &formatstest.Dataset{Schema: criteo}
	for i := 0; i < 2; i++ {
		dense := make([]float32, 13)
		for j := range dense {
			dense[j] = formats.DenseFromInt32(int32(100*i + j)) // sample 0: dense 3 → ln 4
		}
		keys := make([][]int64, 26)
		for s := range keys {
			keys[s] = []int64{int64(1000*i + s)}
		}
		cd.Labels = append(cd.Labels, []float32{float32(1 - i)})
		cd.Dense = append(cd.Dense, dense)
		cd.Keys = append(cd.Keys, keys)
	}
	small := func(kt formats.KeyType, l Layout, n int, badKey bool) *formatstest.Dataset {
		s := smallSchema(kt, l)
		d := &formatstest.Dataset{Schema: s}
		for i := 0; i < n; i++ {
			keys := make([][]int64, 3)
			for si, sl := range s.Slots {
				for j := 0; j < max(sl.Hotness, 1); j++ {
					keys[si] = append(keys[si], int64(i+j+si)%sl.Size)
				}
			}
			if badKey && i == 2 {
				keys[1][0] = 20 // slot 1 has size 20
			}
			d.Labels = append(d.Labels, []float32{float32(i % 2)})
			d.Dense = append(d.Dense, []float32{float32(i) + 0.5, -float32(i)})
			d.Keys = append(d.Keys, keys)
		}
		return d
	}
	return []fixture{
		{name: "onehot-criteo-int.raw", layout: OneHot, data: cd},
		{name: "onehot-float.raw", layout: OneHot, data: small(formats.KeyU32, OneHot, 2, false)},
		{name: "multihot-i32.raw", layout: MultiHot, data: small(formats.KeyU32, MultiHot, 2, false)},
		{name: "multihot-i64.raw", layout: MultiHot, data: small(formats.KeyI64, MultiHot, 2, false)},
		{name: "corrupt/size.raw", layout: OneHot, data: small(formats.KeyU32, OneHot, 2, false), extra: []byte{1, 2, 3, 4, 5}},
		{name: "corrupt/keyrange.raw", layout: OneHot, data: small(formats.KeyU32, OneHot, 3, true)},
	}
}

// build encodes f with the Writer.
func (f fixture) build(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.raw")
	w, err := Create(path, &f.data.Schema, f.layout)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.data.WriteAll(w, 2); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, f.extra...)
}

// dump renders a dataset as text for the golden file.
func dump(d *formatstest.Dataset) string {
	var sb strings.Builder
	for i := 0; i < d.Len(); i++ {
		fmt.Fprintf(&sb, "sample %d: label %v dense %v keys %v\n", i, d.Labels[i], d.Dense[i], d.Keys[i])
	}
	return sb.String()
}

func TestGolden(t *testing.T) {
	var golden strings.Builder
	for _, f := range fixtures() {
		want := f.build(t)
		path := filepath.Join("testdata", f.name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: fixture differs from the generator's bytes (run with -update)\n%s", f.name, hex.Dump(got))
		}
		if strings.HasPrefix(f.name, "corrupt/") {
			continue
		}
		o := Options{Layout: f.layout}
		o.BatchSize = 1
		d := readFile(t, path, &f.data.Schema, o, 0)
		if diff := formatstest.Diff(f.data, d); diff != "" {
			t.Errorf("%s: %s", f.name, diff)
		}
		fmt.Fprintf(&golden, "== %s (%d bytes)\n%s", f.name, len(got), dump(d))
	}
	gpath := filepath.Join("testdata", "decoded.golden")
	if *update {
		if err := os.WriteFile(gpath, []byte(golden.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(gpath)
	if err != nil {
		t.Fatal(err)
	}
	if golden.String() != string(want) {
		t.Errorf("decoded fixtures differ from %s (run with -update):\n%s", gpath, golden.String())
	}
}

// TestGoldenBytes asserts the exact bytes of the fixtures, independently of
// the Writer that generated them.
func TestGoldenBytes(t *testing.T) {
	criteo, err := os.ReadFile("testdata/onehot-criteo-int.raw")
	if err != nil {
		t.Fatal(err)
	}
	if len(criteo) != 2*160 {
		t.Fatalf("Criteo fixture holds %d bytes, want 2 × 160", len(criteo))
	}
	want0 := "01000000" + // label 1
		"00000000010000000200000003000000040000000500000006000000" + // dense 0..6
		"0700000008000000090000000a0000000b0000000c000000" + // dense 7..12
		"00000000010000000200000003000000040000000500000006000000070000000800000009000000" + // keys 0..9
		"0a0000000b0000000c0000000d0000000e0000000f000000100000001100000012000000130000001400000015000000" +
		"1600000017000000180000001900000" + "0" // keys 10..25
	if got := hex.EncodeToString(criteo[:160]); got != want0 {
		t.Errorf("Criteo sample 0:\n got %s\nwant %s", got, want0)
	}
	// Sample 1: label 0, dense 100, key of slot 0 = 1000 (0x3e8).
	if got := hex.EncodeToString(criteo[160:168]); got != "0000000064000000" {
		t.Errorf("Criteo sample 1 starts %s", got)
	}
	if got := hex.EncodeToString(criteo[160+56 : 160+60]); got != "e8030000" {
		t.Errorf("Criteo sample 1 key 0 is %s", got)
	}
	s := formats.NewSchema(1, 13, make26(1), nil, formats.KeyU32)
	s.LabelType, s.DenseType = formats.Int32, formats.Int32
	dec, _ := NewDecoder(&s, OneHot, nil)
	b, _ := formats.NewBatch(&s, 2, nil)
	if err := dec.Decode(criteo, b, "criteo", 0, 0); err != nil {
		t.Fatal(err)
	}
	if b.Labels[0] != 1 || b.Dense[3] != float32(math.Log(4)) || b.Dense[13] != float32(math.Log(101)) || b.Keys32[26] != 1000 {
		t.Errorf("decoded label %v dense[3] %v dense[13] %v key %v", b.Labels[0], b.Dense[3], b.Dense[13], b.Keys32[26])
	}

	// Multi-hot i64: int32 label 1, float dense 0.5 and -0, keys [0 1] [1] [2 3 4] as int64.
	mh, err := os.ReadFile("testdata/multihot-i64.raw")
	if err != nil {
		t.Fatal(err)
	}
	want := "00000000" + "0000003f" + "00000080" +
		"0000000000000000" + "0100000000000000" + "0100000000000000" +
		"0200000000000000" + "0300000000000000" + "0400000000000000"
	if len(mh) != 2*60 || hex.EncodeToString(mh[:60]) != want {
		t.Errorf("multi-hot i64 sample 0 (%d bytes): %s\nwant %s", len(mh), hex.EncodeToString(mh[:60]), want)
	}
}

func TestCorruptFixtures(t *testing.T) {
	s := smallSchema(formats.KeyU32, OneHot)
	for _, workers := range []int{1, 2} {
		o := Options{Layout: OneHot}
		o.BatchSize, o.Workers = 2, workers
		_, err := Open("testdata/corrupt/size.raw", &s, o)
		var fe *formats.Error
		if !errors.Is(err, formats.ErrSize) || !errors.Is(err, formats.ErrCorrupt) || !errors.As(err, &fe) ||
			fe.Path != "testdata/corrupt/size.raw" || fe.Offset != 48 || fe.Record != 2 || !strings.Contains(err.Error(), "53") {
			t.Errorf("size.raw: %#v", err)
		}

		o.SlotSizeArray = s.SlotSizes()
		r, err := Open("testdata/corrupt/keyrange.raw", &s, o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(&s, 2, nil)
		if n, err := r.Read(b); n != 2 || err != nil {
			t.Fatalf("first batch: %d, %v", n, err)
		}
		_, err = r.Read(b)
		// Record 2, slot 1: 2·24 + 4·(1+2) + 4·1 = 64.
		if !errors.Is(err, formats.ErrKeyRange) || !errors.As(err, &fe) ||
			fe.Path != "testdata/corrupt/keyrange.raw" || fe.Offset != 64 || fe.Record != 2 {
			t.Errorf("keyrange.raw: %#v", err)
		}
		r.Close()
		// Without slot sizes the key is accepted.
		o.SlotSizeArray = nil
		d := readFile(t, "testdata/corrupt/keyrange.raw", &s, o, 0)
		if d.Keys[2][1][0] != 20 {
			t.Errorf("key read without slot sizes: %v", d.Keys[2])
		}
	}
}
