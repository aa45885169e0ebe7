package norm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// FuzzDecode decodes arbitrary bytes as a whole Norm file. mode bit 0 is
// the check mode, bit 1 the key type. No input may panic; errors must be
// *formats.Error values; the parallel decoder must agree with the
// sequential one; and a file that decodes completely must re-encode to the
// same bytes.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.data"))
	more, _ := filepath.Glob(filepath.Join("testdata", "corrupt", "*.data"))
	for _, name := range append(files, more...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for mode := uint8(0); mode < 4; mode++ {
			f.Add(mode, data)
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for mode := uint8(0); mode < 4; mode++ {
		s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 2, MaxDense: 3, MaxSlots: 3, MaxNNZ: 3, KeyType: formats.KeyType(mode >> 1)})
		d := formatstest.NewDataset(rng, s, 5, 0, formatstest.AnyFloat)
		f.Add(mode, encode(f, d, CheckMode(mode&1)))
	}
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		m, kt := CheckMode(mode&1), formats.KeyType(mode>>1&1)
		var naive byte // differential: the word-at-a-time checksum
		for _, c := range data {
			naive += c
		}
		if got := checksum(data); got != naive {
			t.Fatalf("checksum %#x, byte sum %#x", got, naive)
		}
		h, hl, err := ParseHeader(data, m)
		if err != nil {
			mustFormatsError(t, err)
			return
		}
		if err := h.Validate(nil, m, int64(len(data))); err != nil {
			mustFormatsError(t, err)
			return
		}
		n := int(h.NumRecords)
		if (h.LabelDim+h.DenseDim+h.SlotNum)*int64(max(n, 1)) > 1<<22 {
			t.Skip("batch too large for a fuzz run")
		}
		s := h.Schema(kt)
		dec, err := NewDecoder(&s, DecoderOptions{Check: m})
		if err != nil {
			t.Fatal(err)
		}
		b, err := formats.NewBatch(&s, max(n, 1), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := dec.Decode(data[hl:], b, n, Pos{Path: "fuzz", Offset: int64(hl)})
		if err != nil {
			mustFormatsError(t, err)
		}
		// Differential: the parallel path gives the same batch and error.
		b2, _ := formats.NewBatch(&s, max(n, 1), nil)
		res2, err2 := decodeInSteps(dec, data[hl:], b2, n, Pos{Path: "fuzz", Offset: int64(hl)})
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("sequential error %v, parallel %v", err, err2)
		}
		if err != nil {
			return
		}
		if res != res2 || b.N != b2.N {
			t.Fatalf("sequential %+v (%d samples), parallel %+v (%d)", res, b.N, res2, b2.N)
		}
		x, y := datasetOf(b), datasetOf(b2)
		if diff := formatstest.Diff(x, y); diff != "" {
			t.Fatalf("sequential and parallel differ: %s", diff)
		}
		if res.Records != n || hl+res.Consumed != len(data) {
			return // truncated or trailing bytes: the reader reports those
		}
		out := AppendHeader(nil, h, m)
		for i := 0; i < b.N; i++ {
			out = AppendRecord(out, b, i, m)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("re-encoded %d bytes differ from the %d decoded", len(out), len(data))
		}
	})
}

func mustFormatsError(t *testing.T, err error) {
	t.Helper()
	var fe *formats.Error
	if !errors.As(err, &fe) || !formats.IsCorrupt(err) {
		t.Fatalf("error %v is not a corruption *formats.Error", err)
	}
}

func datasetOf(b *formats.Batch) *formatstest.Dataset {
	d := &formatstest.Dataset{Schema: *b.Schema}
	for i := 0; i < b.N; i++ {
		d.AppendFrom(b, i)
	}
	return d
}

// decodeInSteps decodes like Reader.step does with several workers: runs
// found by scan in parallel, the rest sequentially, until no progress.
func decodeInSteps(dec *Decoder, src []byte, b *formats.Batch, limit int, pos Pos) (Result, error) {
	var total Result
	var sc scanned
	for total.Records < limit {
		p := Pos{Path: pos.Path, Offset: pos.Offset + int64(total.Consumed), Record: pos.Record + int64(total.Records)}
		rest := src[total.Consumed:]
		res, done, err := dec.decodeParallel(rest, b, limit-total.Records, b.Cap(), p, 3, 2, &sc)
		if !done {
			res, err = dec.Decode(rest, b, limit-total.Records, p)
		}
		total.Consumed += res.Consumed
		total.Records += res.Records
		total.Skipped += res.Skipped
		if err != nil || res.Records == 0 {
			return total, err
		}
	}
	return total, nil
}
