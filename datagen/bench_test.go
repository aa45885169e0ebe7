package datagen

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// kaggleSlotSizes are the Criteo Kaggle vocabulary sizes (SPEC §9).
var kaggleSlotSizes = []int64{1459, 583, 6373320, 1977439, 305, 24, 12513, 633, 3, 92719, 5681, 5666265, 3193, 27, 14986, 4209368, 10, 5652, 2173, 4, 5058596, 18, 15, 282062, 105, 141594}

// benchParams is the Criteo shape (1 label, 13 dense, 26 one-hot slots of
// the Kaggle sizes, power law α 1.2, planted labels):
// 8 train and 2 eval files of 40960 samples, or 327680 + 81920 Raw
// samples.
func benchParams(f Format, dir string) Params {
	p := DefaultParams()
	p.Format = f
	p.SlotSizeArray = kaggleSlotSizes
	p.NumFiles, p.EvalNumFiles = 8, 2
	p.NumSamples, p.EvalNumSamples = 8*40960, 2*40960
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	if f == Raw {
		p.Source = filepath.Join(dir, "train_data.bin")
		p.EvalSource = filepath.Join(dir, "test_data.bin")
	}
	p.Seed = 1
	return p
}

// BenchmarkGenerate measures generation throughput in bytes written per
// second at the Criteo shape. Set CTRKIT_BENCH_DIR to write on a chosen
// file system (default: the test's temporary directory).
func BenchmarkGenerate(b *testing.B) {
	for _, f := range []Format{Norm, Raw, Parquet, Criteo} {
		b.Run(f.String(), func(b *testing.B) {
			root := os.Getenv("CTRKIT_BENCH_DIR")
			if root == "" {
				root = b.TempDir()
			}
			b.ReportAllocs()
			var bytes int64
			for b.Loop() {
				dir, err := os.MkdirTemp(root, "bench")
				if err != nil {
					b.Fatal(err)
				}
				res, err := Generate(context.Background(), benchParams(f, dir), nil)
				if err != nil {
					b.Fatal(err)
				}
				bytes = res.Bytes
				os.RemoveAll(dir)
			}
			b.SetBytes(bytes)
		})
	}
}

// BenchmarkFill measures generation alone (no encoding, no I/O): one chunk
// of ChunkSamples Criteo-shaped samples per op; bytes are the Raw bytes of
// the chunk.
func BenchmarkFill(b *testing.B) {
	for _, f := range []Format{Norm, Raw} {
		for _, mode := range []LabelMode{Planted, UniformLabels} {
			b.Run(f.String()+"/"+mode.String(), func(b *testing.B) {
				p := benchParams(f, b.TempDir())
				p.LabelMode = mode
				g, err := newGenerator(&p)
				if err != nil {
					b.Fatal(err)
				}
				batch, _ := g.newBatch()
				of := OutputFile{Samples: 1 << 40}
				b.ReportAllocs()
				b.SetBytes(ChunkSamples * 160)
				c := 0
				for b.Loop() {
					g.fill(batch, of, 0, c)
					c++
				}
			})
		}
	}
}
