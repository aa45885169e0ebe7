package norm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

const benchBatch = 65536

// criteoBatch returns a batch of n random Criteo-shaped samples (1 label,
// 13 dense, 26 one-hot slots) and the encoded records (no header).
func criteoBatch(tb testing.TB, n int, kt formats.KeyType, m CheckMode) (*formats.Batch, []byte) {
	tb.Helper()
	s := formats.NewSchema(1, 13, make26(1), nil, kt)
	rng := rand.New(rand.NewPCG(1, 2))
	b, err := formats.NewBatch(&s, n, nil)
	if err != nil {
		tb.Fatal(err)
	}
	labels, dense, offsets, k32, k64 := b.Full()
	for i := 0; i < n; i++ {
		labels[i] = float32(rng.IntN(2))
		for j := 0; j < 13; j++ {
			dense[13*i+j] = rng.Float32()
		}
		for j := 0; j < 26; j++ {
			r := 26*i + j
			if k64 != nil {
				k64[r] = rng.Int64N(1 << 40)
			} else {
				k32[r] = rng.Uint32()
			}
			offsets[r+1] = int32(r + 1)
		}
	}
	b.SetLen(n)
	var src []byte
	for i := 0; i < n; i++ {
		src = AppendRecord(src, b, i, m)
	}
	return b, src
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct {
		kt formats.KeyType
		m  CheckMode
	}{{formats.KeyU32, CheckSum}, {formats.KeyU32, CheckNone}, {formats.KeyI64, CheckSum}, {formats.KeyI64, CheckNone}} {
		b.Run(fmt.Sprintf("%s-%s", c.kt, c.m), func(b *testing.B) {
			batch, src := criteoBatch(b, benchBatch, c.kt, c.m)
			dec, err := NewDecoder(batch.Schema, DecoderOptions{Check: c.m})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch.SetLen(0)
				res, err := dec.Decode(src, batch, benchBatch, Pos{})
				if err != nil || res.Records != benchBatch {
					b.Fatal(res, err)
				}
			}
			b.ReportMetric(float64(benchBatch)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// BenchmarkReader reads a Criteo-shaped i32 checksum file of 4 batches
// (page-cached) through the whole Reader.
func BenchmarkReader(b *testing.B) {
	batch, _ := criteoBatch(b, benchBatch, formats.KeyU32, CheckSum)
	dir := b.TempDir()
	path := filepath.Join(dir, "criteo.data")
	w, err := Create(path, batch.Schema, WriterOptions{Check: CheckSum})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := w.Write(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("i32-sum/workers=%d", workers), func(b *testing.B) {
			o := Options{Check: CheckSum}
			o.BatchSize, o.Workers = benchBatch, workers
			dst, _ := formats.NewBatch(batch.Schema, benchBatch, nil)
			b.SetBytes(fi.Size())
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := Open(path, batch.Schema, o)
				if err != nil {
					b.Fatal(err)
				}
				total := 0
				for {
					n, err := r.Read(dst)
					if err != nil {
						break
					}
					total += n
				}
				r.Close()
				if total != 4*benchBatch {
					b.Fatalf("read %d samples", total)
				}
			}
			b.ReportMetric(float64(4*benchBatch)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

func BenchmarkWriter(b *testing.B) {
	for _, m := range []CheckMode{CheckSum, CheckNone} {
		b.Run("i32-"+m.String(), func(b *testing.B) {
			batch, src := criteoBatch(b, benchBatch, formats.KeyU32, m)
			path := filepath.Join(b.TempDir(), "w.data")
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w, err := Create(path, batch.Schema, WriterOptions{Check: m})
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Write(batch); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var _ = formatstest.Diff

// BenchmarkDecodeParallel is BenchmarkDecode/i32-sum through the scan and
// the parallel decoders the Reader uses with Workers > 1.
func BenchmarkDecodeParallel(b *testing.B) {
	for _, w := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("i32-sum/workers=%d", w), func(b *testing.B) {
			batch, src := criteoBatch(b, benchBatch, formats.KeyU32, CheckSum)
			dec, err := NewDecoder(batch.Schema, DecoderOptions{Check: CheckSum})
			if err != nil {
				b.Fatal(err)
			}
			var sc scanned
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch.SetLen(0)
				res, done, err := dec.decodeParallel(src, batch, benchBatch, benchBatch, Pos{}, w, minParallelRecords, &sc)
				if !done {
					res, err = dec.Decode(src, batch, benchBatch, Pos{})
				}
				if err != nil || res.Records != benchBatch {
					b.Fatal(res, err)
				}
			}
			b.ReportMetric(float64(benchBatch)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
