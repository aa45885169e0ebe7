package parquet

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"

	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// fragmentedSnappy encodes snappy blocks as the C++ library does (pyarrow,
// Spark, DuckDB): the input cut into 64 KiB fragments, each compressed on
// its own, so that an incompressible page is one literal a fragment.
type fragmentedSnappy struct{ fastSnappy }

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
	fast, ok := c.(fastSnappy)
	if !ok {
		t.Fatalf("snappy codec %T, want fastSnappy", c)
	}
	compress.RegisterCodec(compress.Codecs.Snappy, fragmentedSnappy{fast})
	defer compress.RegisterCodec(compress.Codecs.Snappy, fast)
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
