package dataset

import (
	"errors"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlotSizeArrayChecksKeysWithoutOffsets: --slot-size-array checks key
// ranges whether or not --slot-offsets is given (without offsets, keys
// above the slot sizes passed through, and convert wrote them).
func TestSlotSizeArrayChecksKeysWithoutOffsets(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.data")
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyU32)
	w, err := norm.Create(p, &s, norm.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := formats.NewBatch(&s, 10, nil)
	for i := 0; i < 10; i++ {
		b.AppendSample([]float32{0}, []float32{1}, [][]int64{{int64(i)}, {1}})
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, offsets := range []bool{false, true} {
		d, err := Resolve(p, Spec{KeyType: formats.KeyU32, KeyTypeSet: true, SlotSizeArray: []int64{5, 5}, Offsets: offsets})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.Open(formats.Options{BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := formats.NewBatch(r.Schema(), 4, nil)
		var rerr error
		for rerr == nil {
			_, rerr = r.Read(rb)
		}
		r.Close()
		if errors.Is(rerr, io.EOF) || !errors.Is(rerr, formats.ErrKeyRange) {
			t.Errorf("offsets %v: read ended with %v, want ErrKeyRange (key 5 of slot 0 ≥ 5)", offsets, rerr)
		}
		var fe *formats.Error
		if errors.As(rerr, &fe) && fe.Record != 5 {
			t.Errorf("offsets %v: error at record %d, want 5", offsets, fe.Record)
		}
	}
}

// TestParquetChecksKeysWhileDecoding: a Parquet dataset's --slot-size-array
// range check (without offsets) runs in the reader's decoding workers, not
// as a pass over every batch after it (a quarter of a 2-core read's CPU):
// the reader is not wrapped, still lends batches, passes keys through, and
// a key outside its slot's range (slot-local or global) is an ErrKeyRange
// error naming the data file, its record and the flag.
func TestParquetChecksKeysWhileDecoding(t *testing.T) {
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyI64)
	for _, global := range []bool{false, true} {
		ds := &formatstest.Dataset{Schema: s}
		for i := range 40 {
			k0, k1 := int64(i%5), int64(3)
			if global {
				k1 += 5
			}
			ds.Labels = append(ds.Labels, []float32{float32(i % 2)})
			ds.Dense = append(ds.Dense, []float32{1})
			ds.Keys = append(ds.Keys, [][]int64{{k0}, {k1}})
		}
		sp := Spec{KeyType: formats.KeyI64, KeyTypeSet: true, SlotSizeArray: []int64{5, 5}}
		if global {
			sp.Keys = KeysGlobal
		}
		read := func(ds *formatstest.Dataset) (*formatstest.Dataset, formats.Reader, error) {
			dir := writeDirect(t, t.TempDir(), ds, Output{Format: Parquet, KeyType: formats.KeyI64, RowGroupSize: 16})
			dp, err := Resolve(dir, sp)
			if err != nil {
				t.Fatal(err)
			}
			r, err := dp.Open(formats.Options{BatchSize: 16})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got := &formatstest.Dataset{Schema: s}
			for {
				b, err := r.(formats.Lender).Next()
				if err != nil {
					if errors.Is(err, io.EOF) {
						err = nil
					}
					return got, r, err
				}
				for j := 0; j < b.N; j++ {
					got.AppendFrom(b, j)
				}
			}
		}
		got, r, err := read(ds)
		if err != nil {
			t.Fatalf("global %v: %v", global, err)
		}
		if _, ok := r.(*parquet.Reader); !ok {
			t.Errorf("global %v: the reader is a %T, want the Parquet reader itself", global, r)
		}
		if diff := formatstest.Diff(ds, got); diff != "" {
			t.Errorf("global %v: %s", global, diff)
		}
		for _, bad := range []int64{-1, 5, 10} {
			ds.Keys[33][1][0] = bad
			_, _, err := read(ds)
			var fe *formats.Error
			want := "[0, 5) (--slot-size-array, keys slot-local)"
			if global {
				want = "[5, 10) (--slot-size-array, keys global)"
			}
			inRange := global && bad >= 5 && bad < 10 || !global && bad >= 0 && bad < 5
			if inRange {
				if err != nil {
					t.Errorf("global %v key %d: %v", global, bad, err)
				}
				continue
			}
			if !errors.Is(err, formats.ErrKeyRange) || !errors.As(err, &fe) || fe.Record != 33 || !strings.HasSuffix(fe.Path, ".parquet") || !strings.Contains(err.Error(), want) {
				t.Errorf("global %v key %d: %v, want an ErrKeyRange error at record 33 of a .parquet file, %q", global, bad, err, want)
			}
		}
		ds.Keys[33][1][0] = 3
	}
}

// TestRawKeyCheckInReader: a Raw dataset with --slot-size-array and no
// offsets is checked by the Raw reader's own workers (the reader stays a
// Lender and the error names the key's byte offset); it was wrapped in a
// checker that ran every key through the consumer's goroutine after the
// parallel decode, which capped a 16-core multi-hot read at ~2.4 cores.
func TestRawKeyCheckInReader(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.bin")
	s := formats.NewSchema(1, 1, []int{2, 1}, nil, formats.KeyU32)
	s.Slots[0].Hotness, s.Slots[1].Hotness = 2, 1
	s.LabelType = formats.Int32
	w, err := raw.Create(p, &s, raw.MultiHot)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := formats.NewBatch(&s, 10, nil)
	for i := 0; i < 10; i++ {
		b.AppendSample([]float32{0}, []float32{1}, [][]int64{{1, int64(i)}, {1}})
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2} {
		d, err := Resolve(p, Spec{Format: Raw, LabelDim: 1, DenseDim: 1, NumSlot: 2, NNZ: []int{2, 1}, RawLayout: raw.MultiHot, RawLayoutSet: true,
			KeyType: formats.KeyU32, KeyTypeSet: true, SlotSizeArray: []int64{5, 5}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.Open(formats.Options{BatchSize: 4, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		l, ok := r.(formats.Lender)
		if _, isRaw := r.(*raw.Reader); !ok || !isRaw {
			r.Close()
			t.Fatalf("workers %d: dataset.Open gave a %T, want the Raw reader itself (a Lender checking keys in its workers)", workers, r)
		}
		var rerr error
		for rerr == nil {
			_, rerr = l.Next()
		}
		r.Close()
		var fe *formats.Error
		// Sample 5's second key of slot 0 (byte 4·(1+1) + 4 of a 20-byte sample).
		if !errors.Is(rerr, formats.ErrKeyRange) || !errors.As(rerr, &fe) || fe.Record != 5 || fe.Offset != 5*20+12 {
			t.Errorf("workers %d: read ended with %v, want ErrKeyRange at record 5, byte %d", workers, rerr, 5*20+12)
		}
	}
}
