package dataset

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
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
