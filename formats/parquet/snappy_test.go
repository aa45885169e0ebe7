package parquet

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"

	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// fragmentedSnappy encodes snappy blocks as the C++ library does (pyarrow,
// Spark, DuckDB): the input cut into 64 KiB fragments, each compressed on
// its own, so that an incompressible page is one literal a fragment.
type fragmentedSnappy struct{ snappyCodec }

// snappyCodec is what arrow-go's snappy codec implements.
type snappyCodec interface {
	compress.ErrorCodec
	compress.StreamingCodec
}

func fragment(src []byte) []byte {
	out := binary.AppendUvarint(nil, uint64(len(src)))
	for len(src) > 0 {
		f := src[:min(len(src), 64<<10)]
		src = src[len(f):]
		enc := s2.EncodeSnappy(nil, f)
		_, k := binary.Uvarint(enc)
		out = append(out, enc[k:]...) // its elements, without its length
	}
	return out
}

func (fragmentedSnappy) Encode(_, src []byte) []byte             { return fragment(src) }
func (fragmentedSnappy) EncodeLevel(_, src []byte, _ int) []byte { return fragment(src) }
func (fragmentedSnappy) CompressBound(n int64) int64             { return maxSnappyBlock(n) }

// TestFragmentedSnappy reads files whose snappy pages (about 800 KB of
// random floats, incompressible) are fragmented as the C++ library writes
// them, required and optional columns, PLAIN and dictionary-encoded: the
// streamed paths must decode them as arrow-go's does. They took the pages
// for corrupt ("snappy page of 992339 bytes for 992288 bytes of data", a
// pyarrow file) while the bound was s2's single-literal one.
func TestFragmentedSnappy(t *testing.T) {
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		t.Fatal(err)
	}
	base, ok := c.(snappyCodec)
	if !ok {
		t.Fatalf("snappy codec %T is not streaming", c)
	}
	compress.RegisterCodec(compress.Codecs.Snappy, fragmentedSnappy{base})
	defer compress.RegisterCodec(compress.Codecs.Snappy, c)
	raw := make([]byte, 300000)
	for i := range raw {
		raw[i] = byte(rand.Uint32())
	}
	if enc := fragment(raw); int64(len(enc)) <= int64(s2.MaxEncodedLen(len(raw))) {
		t.Fatalf("a fragmented block of %d bytes fits s2's bound %d: the test tests nothing", len(enc), s2.MaxEncodedLen(len(raw)))
	}
	d := dictTestData(rand.New(rand.NewPCG(19, 13)), 200000)
	for _, rep := range []parquet.Repetition{req, opt} {
		for _, dict := range []bool{false, true} {
			list := writeScalarFile(t, d, rep, nil, parquet.WithCompression(compress.Codecs.Snappy),
				parquet.WithDataPageSize(4<<20), parquet.WithDictionaryDefault(dict))
			got, err, _ := readPaths(t, list, nil, Options{}, streamedPath{toggles: []*bool{&streamOptional, &streamDicts}, pages: &streamedOptionalPages})
			if err != nil {
				t.Fatalf("%s, dictionary %v: %v", rep, dict, err)
			}
			if df := formatstest.Diff(d, got); df != "" {
				t.Fatalf("%s, dictionary %v: %s", rep, dict, df)
			}
		}
	}
}

// TestValuesInDec: a snappy page body read into the column's own dec
// (litPages predicted a literal) is viewed there when it is one literal,
// and decompressed correctly — into another buffer, as dec is its
// destination — when it is not; litPages follows what the page was.
func TestValuesInDec(t *testing.T) {
	d := &decoder{r: &Reader{pool: &poolAllocator{limit: 1 << 24}}, sc: &scratch{}}
	raw := make([]byte, 300000)
	for i := range raw {
		raw[i] = byte(i / 1000) // compressible: copies
	}
	lit := make([]byte, 300000)
	rng := rand.New(rand.NewPCG(3, 9))
	for i := range lit {
		lit[i] = byte(rng.Uint32())
	}
	for _, c := range []struct {
		name string
		data []byte
		enc  []byte
		lit  bool
	}{
		{"literal", lit, literalBlock(lit), true},
		{"copies", raw, s2.EncodeSnappy(nil, raw), false},
		{"literal again", lit, literalBlock(lit), true},
	} {
		d.dec = d.r.pool.Allocate(len(c.enc)) // as pageBody reads a predicted literal
		src := d.dec[:copy(d.dec, c.enc)]
		got, err := d.values(src, len(c.data), compress.Codecs.Snappy, true)
		if err != nil || !bytes.Equal(got, c.data) {
			t.Fatalf("%s: %v, or the values differ", c.name, err)
		}
		if d.litPages != c.lit {
			t.Errorf("%s: litPages %v, want %v", c.name, d.litPages, c.lit)
		}
		g, lo := uintptr(unsafe.Pointer(unsafe.SliceData(got))), uintptr(unsafe.Pointer(unsafe.SliceData(src)))
		inDec := g >= lo && g < lo+uintptr(len(src))
		if inDec != c.lit {
			t.Errorf("%s: viewed in place %v, want %v", c.name, inDec, c.lit)
		}
	}
}

// literalBlock is data as one snappy literal.
func literalBlock(data []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(data)))
	n := len(data) - 1
	b = append(b, 62<<2, byte(n), byte(n>>8), byte(n>>16)) // 3 length bytes
	return append(b, data...)
}
