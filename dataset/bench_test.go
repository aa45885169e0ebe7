package dataset

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/norm"
)

// BenchmarkConvert converts 262144 Criteo-shaped samples (1 label, 13
// dense, 26 one-hot slots) Norm → Parquet and Parquet → Raw; bytes are the
// source's data bytes.
func BenchmarkConvert(b *testing.B) {
	const n = 1 << 18
	s := formats.NewSchema(1, 13, make([]int, 26), nil, formats.KeyU32)
	for i := range s.Slots {
		s.Slots[i].MaxNNZ, s.Slots[i].Hotness, s.Slots[i].Size = 1, 1, 100000
	}
	ds := formatstest.NewDataset(rand.New(rand.NewPCG(1, 2)), s, n, 1, formatstest.AnyFloat)
	dir, err := os.MkdirTemp("", "ctrkit-convert-bench")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, d := range []string{"norm", "pq"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	normOut := Output{Format: Norm, Check: norm.CheckSum, KeyType: formats.KeyU32}
	src := writeDirect(b, filepath.Join(dir, "norm"), ds, normOut)
	pq := filepath.Join(dir, "pq")
	if _, err := convertPath(src, pq, Output{Format: Parquet, KeyType: formats.KeyU32, Compression: "snappy"}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, src string
		out       Output
	}{
		{"norm-parquet", src, Output{Format: Parquet, KeyType: formats.KeyU32, Compression: "snappy"}},
		{"parquet-raw", pq, Output{Format: Raw, KeyType: formats.KeyU32, FloatLabelDense: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, err := Resolve(c.src, Spec{NNZ: []int{1}})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(d.Bytes)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				out := filepath.Join(dir, fmt.Sprint(c.name, i))
				if _, err := Convert(context.Background(), d, dstPath(out, c.out), c.out, formats.Options{}, nil); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(out)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

func convertPath(src, dst string, out Output) (ConvertStats, error) {
	d, err := Resolve(src, Spec{NNZ: []int{1}})
	if err != nil {
		return ConvertStats{}, err
	}
	return Convert(context.Background(), d, dst, out, formats.Options{}, nil)
}
