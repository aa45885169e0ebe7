package keysets

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/raw"
)

func TestKeysetBytes(t *testing.T) {
	// A tiny dataset written by hand: 2 one-hot slots of sizes 3 and 5.
	s := formats.NewSchema(1, 0, []int{1, 1}, []int64{3, 5}, formats.KeyU32)
	for i := range s.Slots {
		s.Slots[i].Hotness = 1
	}
	s.LabelType = formats.Int32
	d := &formatstest.Dataset{Schema: s}
	for _, ks := range [][2]int64{{2, 0}, {0, 4}, {2, 4}, {1, 0}} {
		d.Labels = append(d.Labels, []float32{1})
		d.Dense = append(d.Dense, []float32{})
		d.Keys = append(d.Keys, [][]int64{{ks[0]}, {ks[1]}})
	}
	path := filepath.Join(t.TempDir(), "train.raw")
	w, err := raw.Create(path, &s, raw.OneHot)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAll(w, 3); err != nil {
		t.Fatal(err)
	}
	for _, kt := range []formats.KeyType{formats.KeyU32, formats.KeyI64} {
		s2 := s.Clone()
		s2.KeyType = kt
		r, err := raw.Open(path, &s2, raw.Options{Options: formats.Options{SlotSizeArray: []int64{3, 5}, BatchSize: 3}})
		if err != nil {
			t.Fatal(err)
		}
		for _, space := range []int64{8, 0} { // bitmap and hash set
			r.Reset()
			set, err := Build(r, space, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := set.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			// Keys with offsets: slot 0 {0,1,2}, slot 1 {3+0, 3+4} = {0,1,2,3,7}.
			want := []byte{0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0}
			if kt == formats.KeyI64 {
				want = nil
				for _, k := range []byte{0, 1, 2, 3, 7} {
					want = append(want, k, 0, 0, 0, 0, 0, 0, 0)
				}
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("%s space %d: keyset bytes % x, want % x", kt, space, buf.Bytes(), want)
			}
			got, err := Read(buf.Bytes(), kt)
			if err != nil || !slices.Equal(got, []int64{0, 1, 2, 3, 7}) {
				t.Fatalf("Read: %v %v", got, err)
			}
		}
		r.Close()
	}
}

func TestBitmapAndHashAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 1, MaxSlots: 5, MaxNNZ: 4})
	d := formatstest.NewDataset(rng, s, 500, 0, formatstest.AnyFloat)
	bs, _ := d.Batches(128)
	a, b := NewSet(s.KeyType, 1000), NewSet(s.KeyType, 0)
	for _, bt := range bs {
		a.Add(bt)
		b.Add(bt)
	}
	if a.Len() == 0 || !slices.Equal(a.Keys(), b.Keys()) {
		t.Fatalf("bitmap %d keys, hash %d keys", a.Len(), b.Len())
	}
	if err := NewSet(formats.KeyU32, 0).WriteFile(filepath.Join(t.TempDir(), "x")); err == nil {
		t.Fatal("empty keyset written")
	}
	p := filepath.Join(t.TempDir(), "k.keyset")
	if err := a.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Size() != a.Len()*4 {
		t.Fatalf("file size %d", st.Size())
	}
}
