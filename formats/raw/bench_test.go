package raw

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
)

var kaggleSizes = []int64{1459, 583, 6373320, 1977439, 305, 24, 12513, 633, 3, 92719, 5681, 5666265, 3193, 27,
	14986, 4209368, 10, 5652, 2173, 4, 5058596, 18, 15, 282062, 105, 141594}

// benchData returns a schema, layout and n encoded samples for a benchmark
// name: onehot-int32, onehot-int32-heavytail, onehot-float32 (Criteo shape)
// or multihot-dcnv2. Slot
// sizes are Kaggle's (one-hot) or 40M-capped (DCNv2).
func benchData(name string, n int) (formats.Schema, Layout, []byte) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s formats.Schema
	l := OneHot
	switch {
	case strings.HasPrefix(name, "onehot"):
		s = formats.NewSchema(1, 13, make26(1), kaggleSizes, formats.KeyU32)
		if strings.Contains(name, "int32") {
			s.LabelType, s.DenseType = formats.Int32, formats.Int32
		}
	default:
		s = dcnv2Schema()
		for i := range s.Slots {
			s.Slots[i].Size = 40000000
		}
		l = MultiHot
	}
	size, err := SampleSize(&s, l)
	if err != nil {
		panic(err)
	}
	src := make([]byte, 0, n*size)
	for i := 0; i < n; i++ {
		if s.LabelType == formats.Int32 {
			src = binary.LittleEndian.AppendUint32(src, uint32(rng.IntN(2)))
		} else {
			src = binary.LittleEndian.AppendUint32(src, math.Float32bits(float32(rng.IntN(2))))
		}
		for j := 0; j < s.DenseDim; j++ {
			// Small counts (the shared table) by default; heavytail
			// draws x < 2^e with e uniform in [0, 20), so 20% of the
			// values are ≥ 2^16 and take math.Log.
			x := rng.IntN(1 << uint(rng.IntN(16)))
			if strings.HasSuffix(name, "heavytail") {
				x = rng.IntN(1 << uint(rng.IntN(20)))
			}
			if s.DenseType == formats.Int32 {
				src = binary.LittleEndian.AppendUint32(src, uint32(x))
			} else {
				src = binary.LittleEndian.AppendUint32(src, math.Float32bits(formats.DenseFromInt32(int32(x))))
			}
		}
		for _, sl := range s.Slots {
			for j := 0; j < max(sl.Hotness, 1); j++ {
				src = binary.LittleEndian.AppendUint32(src, uint32(rng.Int64N(sl.Size)))
			}
		}
	}
	return s, l, src
}

// BenchmarkDecode decodes one batch of 65536 samples held in memory on one
// core, without and with slot offsets.
func BenchmarkDecode(b *testing.B) {
	const n = 65536
	for _, name := range []string{"onehot-int32", "onehot-int32-heavytail", "onehot-float32", "multihot-dcnv2"} {
		s, l, src := benchData(name, n)
		for _, mode := range []string{"", "-offsets", "-check"} {
			bn := name + mode
			var sizes []int64
			if mode == "-offsets" {
				sizes = s.SlotSizes()
			}
			b.Run(bn, func(b *testing.B) {
				dec, err := NewDecoder(&s, l, sizes)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "-check" { // the readers' KeyCheck: ranges checked, keys as stored
					if err := dec.CheckKeys(s.SlotSizes(), false); err != nil {
						b.Fatal(err)
					}
				}
				dec.PrepareOffsets(n) // as the readers do
				batch, err := formats.NewBatch(&s, n, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					batch.SetLen(0)
					if err := dec.Decode(src, batch, "mem", 0, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// BenchmarkReader reads a Criteo-shape one-hot int32 file (16 batches of
// 65536 samples, 160 MiB) from the page cache in repeat mode: one op is one
// epoch, in steady state (the reader is opened once).
func BenchmarkReader(b *testing.B) {
	const bs, nb = 65536, 16
	s, l, src := benchData("onehot-int32", bs)
	path := filepath.Join(b.TempDir(), "criteo.raw")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < nb; i++ {
		f.Write(src)
	}
	f.Close()
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers-%d", workers), func(b *testing.B) {
			o := Options{Layout: l}
			o.BatchSize, o.Workers, o.Repeat = bs, workers, true
			r, err := Open(path, &s, o)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			batch, _ := formats.NewBatch(&s, bs, nil)
			if _, err := r.Read(batch); err != nil { // warm up the ring
				b.Fatal(err)
			}
			b.SetBytes(int64(len(src) * nb))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := 0; k < nb; k++ {
					if _, err := r.Read(batch); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(bs*nb)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
