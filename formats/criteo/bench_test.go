package criteo

import (
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
)

func benchFile(b *testing.B) (string, int64) {
	b.Helper()
	paths := genFiles(b, 1, genConfig{Lines: 200000, Sep: '\t', Frequent: 1000, PRare: 0.3, PMissing: 0.1})
	st, err := os.Stat(paths[0])
	if err != nil {
		b.Fatal(err)
	}
	return paths[0], st.Size()
}

func BenchmarkRead(b *testing.B) {
	path, size := benchFile(b)
	const batch = 65536
	vocab, err := BuildVocab([]string{path}, VocabOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		w       int
		buckets []int64
		vocab   *Vocab
	}{
		{"hash/workers=1", 1, buckets(DefaultNumCat, 1<<20), nil},
		{"hash/workers=2", 2, buckets(DefaultNumCat, 1<<20), nil},
		{"vocab/workers=2", 2, nil, vocab},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := Options{Buckets: c.buckets, Vocab: c.vocab}
			o.BatchSize, o.Workers = batch, c.w
			sc := o.schema()
			bt, err := formats.NewBatch(&sc, batch, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			var samples int64
			for b.Loop() {
				r, err := Open([]string{path}, o)
				if err != nil {
					b.Fatal(err)
				}
				for {
					n, err := r.Read(bt)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					samples += int64(n)
				}
				r.Close()
			}
			b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

func BenchmarkBuildVocab(b *testing.B) {
	path, size := benchFile(b)
	for _, budget := range []int64{4 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("budget=%dMiB", budget>>20), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			var samples int64
			for b.Loop() {
				v, err := BuildVocab([]string{path}, VocabOptions{MemoryBudget: budget, Workers: 2, TempDir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				samples += v.Stats().Samples
			}
			b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

func BenchmarkParseLine(b *testing.B) {
	data, err := os.ReadFile("testdata/small.tsv")
	if err != nil {
		b.Fatal(err)
	}
	line := data[:len(data)-1]
	for i, c := range data {
		if c == '\n' {
			line = data[:i]
			break
		}
	}
	s := newSample()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseLine(&s, line, '\t'); err != nil {
			b.Fatal(err)
		}
	}
}
