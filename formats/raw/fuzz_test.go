package raw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
)

// A fuzz input is a header describing the schema followed by the file bytes:
//
//	flags    byte: 1 multi-hot, 2 int32 label, 4 int32 dense, 8 i64 keys, 16 slot sizes
//	label    byte (mod 4)
//	dense    byte (mod 16)
//	slots    byte (mod 27) = S
//	hotness  S bytes (mod 8, + 1; multi-hot only)
//	size     S bytes (+ 1; slot sizes)
const fuzzMaxSamples = 64

func fuzzHeader(s *formats.Schema, l Layout, sizes bool) []byte {
	var flags byte
	if l == MultiHot {
		flags |= 1
	}
	if s.LabelType == formats.Int32 {
		flags |= 2
	}
	if s.DenseType == formats.Int32 {
		flags |= 4
	}
	if s.KeyType == formats.KeyI64 {
		flags |= 8
	}
	if sizes {
		flags |= 16
	}
	h := []byte{flags, byte(s.LabelDim), byte(s.DenseDim), byte(len(s.Slots))}
	for _, sl := range s.Slots {
		h = append(h, byte(max(sl.Hotness, 1)-1))
	}
	for _, sl := range s.Slots {
		h = append(h, byte(max(sl.Size, 1)-1))
	}
	return h
}

func parseFuzz(data []byte) (s formats.Schema, l Layout, sizes []int64, rest []byte, ok bool) {
	if len(data) < 4 {
		return s, l, nil, nil, false
	}
	flags := data[0]
	S := int(data[3] % 27)
	if len(data) < 4+2*S {
		return s, l, nil, nil, false
	}
	s = formats.Schema{LabelDim: int(data[1] % 4), DenseDim: int(data[2] % 16)}
	if flags&1 != 0 {
		l = MultiHot
	}
	if flags&2 != 0 {
		s.LabelType = formats.Int32
	}
	if flags&4 != 0 {
		s.DenseType = formats.Int32
	}
	if flags&8 != 0 {
		s.KeyType = formats.KeyI64
	}
	for i := 0; i < S; i++ {
		sl := formats.Slot{Size: int64(data[4+S+i]) + 1}
		if l == MultiHot {
			sl.Hotness = int(data[4+i]%8) + 1
		}
		s.Slots = append(s.Slots, sl)
	}
	if flags&16 != 0 {
		sizes = s.SlotSizes()
	}
	return s, l, sizes, data[4+2*S:], true
}

func FuzzDecode(f *testing.F) {
	for _, fx := range fixtures() {
		data, err := os.ReadFile(filepath.Join("testdata", fx.name))
		if err != nil {
			f.Fatal(err)
		}
		for _, sizes := range []bool{false, true} {
			f.Add(append(fuzzHeader(&fx.data.Schema, fx.layout, sizes), data...))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, l, sizes, src, ok := parseFuzz(data)
		if !ok {
			return
		}
		dec, err := NewDecoder(&s, l, sizes)
		if err != nil {
			return
		}
		size := dec.SampleSize()
		n := min(len(src)/size, fuzzMaxSamples)
		src = src[:n*size]
		b, err := formats.NewBatch(&s, max(n, 1), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = dec.Decode(src, b, "fuzz", 10, 1000)
		if err != nil {
			var fe *formats.Error
			if sizes == nil || !errors.Is(err, formats.ErrKeyRange) || !errors.As(err, &fe) ||
				fe.Path != "fuzz" || fe.Offset < 1000 || fe.Offset >= 1000+int64(len(src)) || fe.Record < 10 || fe.Record >= 10+int64(n) ||
				(fe.Offset-1000)/int64(size) != fe.Record-10 || b.N != 0 {
				t.Fatalf("Decode: %v", err)
			}
			return
		}
		if b.N != n {
			t.Fatalf("decoded %d samples of %d", b.N, n)
		}
		checkReference(t, &s, l, sizes, src, b)
		if sizes != nil {
			return
		}
		checkKeyCheck(t, &s, dec, src, b, data[0]&32 != 0)
		enc, err := newEncoder(&s, l)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, size)
		for i := 0; i < n; i++ {
			rec := src[i*size : (i+1)*size]
			if !invertible(&s, rec) {
				continue
			}
			if err := enc.encode(out, b, i); err != nil {
				t.Fatalf("sample %d: re-encoding: %v", i, err)
			}
			if !bytes.Equal(out, rec) {
				t.Fatalf("sample %d re-encodes to\n%x\nnot\n%x", i, out, rec)
			}
		}
	})
}

// invertible reports whether the Writer can reproduce rec exactly: float
// values always; int32 labels within ±2^24 and int32 dense values within
// [0, MaxExactDense].
func invertible(s *formats.Schema, rec []byte) bool {
	for j := 0; j < s.LabelDim+s.DenseDim; j++ {
		x := int32(binary.LittleEndian.Uint32(rec[4*j:]))
		if j < s.LabelDim && s.LabelType == formats.Int32 && (x > 1<<24 || x < -(1<<24)) {
			return false
		}
		if j >= s.LabelDim && s.DenseType == formats.Int32 && (x < 0 || x > MaxExactDense) {
			return false
		}
	}
	return true
}

// checkReference decodes src with plain encoding/binary and compares with b
// (differential check of the unsafe fast paths).
func checkReference(t *testing.T, s *formats.Schema, l Layout, sizes []int64, src []byte, b *formats.Batch) {
	t.Helper()
	size, _ := SampleSize(s, l)
	offs := formats.SlotOffsets(sizes)
	kpos := 0
	for i := 0; i < b.N; i++ {
		p := src[i*size:]
		for j := 0; j < s.LabelDim; j++ {
			u := binary.LittleEndian.Uint32(p[4*j:])
			want := math.Float32frombits(u)
			if s.LabelType == formats.Int32 {
				want = float32(int32(u))
			}
			if got := b.Labels[i*s.LabelDim+j]; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("sample %d label %d: %v, want %v", i, j, got, want)
			}
		}
		p = p[4*s.LabelDim:]
		for j := 0; j < s.DenseDim; j++ {
			u := binary.LittleEndian.Uint32(p[4*j:])
			want := math.Float32frombits(u)
			if s.DenseType == formats.Int32 {
				want = formats.DenseFromInt32(int32(u))
			}
			if got := b.Dense[i*s.DenseDim+j]; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("sample %d dense %d: %v, want %v", i, j, got, want)
			}
		}
		p = p[4*s.DenseDim:]
		for si, sl := range s.Slots {
			h := 1
			if l == MultiHot {
				h = sl.Hotness
			}
			lo, hi := b.Row(i, si)
			if lo != kpos || hi-lo != h {
				t.Fatalf("sample %d slot %d: row [%d, %d), want %d keys at %d", i, si, lo, hi, h, kpos)
			}
			for j := 0; j < h; j++ {
				var k int64
				if l == MultiHot && s.KeyType == formats.KeyI64 {
					k = int64(binary.LittleEndian.Uint64(p))
					p = p[8:]
				} else {
					k = int64(binary.LittleEndian.Uint32(p))
					p = p[4:]
				}
				if offs != nil {
					k += offs[si]
				}
				if got := b.Key(kpos); got != k {
					t.Fatalf("sample %d slot %d key %d: %d, want %d", i, si, j, got, k)
				}
				kpos++
			}
		}
	}
}

// checkKeyCheck decodes src again with prepared offsets and the workers'
// key check (slot-local, or global), in two pieces: the same bytes as the
// plain decode b when every key is in its slot's range, else an
// ErrKeyRange error at the first key outside.
func checkKeyCheck(t *testing.T, s *formats.Schema, plain *Decoder, src []byte, b *formats.Batch, global bool) {
	t.Helper()
	sizes := s.SlotSizes()
	dec := plain.Clone()
	dec.PrepareOffsets(b.N/2 + 1)
	if err := dec.CheckKeys(sizes, global); err != nil {
		return // sizes too large together
	}
	lo := make([]int64, len(sizes))
	if global {
		lo = formats.SlotOffsets(sizes)
	}
	S := len(sizes)
	bad := int64(-1) // first sample with a key outside
	for r := 0; r < b.N && bad < 0; r++ {
		for sl := 0; sl < S; sl++ {
			for i := b.Offsets[r*S+sl]; i < b.Offsets[r*S+sl+1]; i++ {
				k := int64(0)
				if b.Keys64 != nil {
					k = b.Keys64[i]
				} else {
					k = int64(b.Keys32[i])
				}
				if uint64(k)-uint64(lo[sl]) >= uint64(sizes[sl]) && bad < 0 {
					bad = int64(r)
				}
			}
		}
	}
	got, err := formats.NewBatch(s, max(b.N, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	size := dec.SampleSize()
	cut := b.N / 3 * size
	err = dec.Decode(src[:cut], got, "fuzz", 10, 1000)
	if err == nil {
		err = dec.Decode(src[cut:], got, "fuzz", 10+int64(cut/size), 1000+int64(cut))
	}
	if bad < 0 {
		if err != nil {
			t.Fatalf("key check: %v, every key is in range", err)
		}
		if !bytes.Equal(snapshot(got), snapshot(b)) {
			t.Fatal("key check or prepared offsets changed the batch")
		}
		return
	}
	var fe *formats.Error
	if !errors.Is(err, formats.ErrKeyRange) || !errors.As(err, &fe) || fe.Record != 10+bad || (fe.Offset-1000)/int64(size) != bad {
		t.Fatalf("key check: %v, want ErrKeyRange at record %d", err, 10+bad)
	}
}
