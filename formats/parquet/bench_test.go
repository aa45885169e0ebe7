package parquet

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/klauspost/compress/s2"
)

const (
	benchRows  = 1 << 20
	benchBatch = 65536
)

func criteoSchema() formats.Schema {
	nnz := make([]int, 26)
	for i := range nnz {
		nnz[i] = 1
	}
	return formats.NewSchema(1, 13, nnz, nil, formats.KeyI64)
}

// criteoBatch fills a batch of n random Criteo-shaped samples.
func criteoBatch(s *formats.Schema, n int, seed uint64) *formats.Batch {
	b, err := formats.NewBatch(s, n, nil)
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	labels, dense, offsets, _, keys := b.Full()
	for i := 0; i < n; i++ {
		labels[i] = float32(rng.IntN(2))
		for j := 0; j < 13; j++ {
			dense[i*13+j] = rng.Float32() * 10
		}
		for j := 0; j < 26; j++ {
			keys[i*26+j] = rng.Int64N(1 << 20)
			offsets[i*26+j+1] = int32(i*26 + j + 1)
		}
	}
	b.SetLen(n)
	return b
}

// genKeys redraws b's keys by a power law (α 1.2) over 10⁴ values per
// slot and its dense values uniformly in [0, 1), as `ctrkit gen` does.
func genKeys(b *formats.Batch, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	const a, n = 1.2, 1e4
	lo, hi := 1.0, math.Pow(n+1, 1-a)
	for i := range b.Keys64 {
		u := rng.Float64()
		b.Keys64[i] = int64(math.Pow(lo+u*(hi-lo), 1/(1-a))) - 1
	}
	for i := range b.Dense {
		b.Dense[i] = rng.Float32()
	}
}

// decodedBytes is what one Criteo sample occupies in a batch: label, dense
// and keys (offsets not counted): 4·14 + 8·26 = 264 bytes.
const decodedBytes = 4*14 + 8*26

var (
	benchDir     string
	benchDirOnce sync.Once
	benchLists   = map[string]string{}
	benchMu      sync.Mutex
)

// criteoDataset writes (once per process) benchRows Criteo rows with the
// given compression and returns the file list.
func criteoDataset(b *testing.B, comp string) string {
	benchDirOnce.Do(func() {
		d, err := os.MkdirTemp("", "ctrkit-parquet-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = d
	})
	benchMu.Lock()
	defer benchMu.Unlock()
	if l, ok := benchLists[comp]; ok {
		return l
	}
	s := criteoSchema()
	dir := filepath.Join(benchDir, comp)
	// "gen" is the dataset of the DuckDB comparison: what `ctrkit gen
	// --format parquet --num-files 4 --num-samples-per-file 250000` writes
	// (snappy; keys drawn by a power law over 10⁴ values per slot; dense
	// uniform in [0, 1)): row groups of 131072 and 118928 rows, so most
	// batches straddle two row groups.
	gen := comp == "gen"
	opts := DatasetOptions{WriterOptions: WriterOptions{Compression: comp}}
	if gen {
		opts = DatasetOptions{WriterOptions: WriterOptions{Compression: "snappy"}, RowsPerFile: 250000}
	}
	w, err := NewDatasetWriter(dir, &s, opts)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < benchRows/benchBatch; i++ {
		bt := criteoBatch(&s, benchBatch, uint64(i))
		if gen {
			genKeys(bt, uint64(i))
		}
		if err := w.Write(bt); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	l := filepath.Join(dir, FileListName)
	benchLists[comp] = l
	return l
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// BenchmarkRead decodes Criteo-shaped batches of 65536 in repeat mode; one
// op is one batch. SetBytes counts decoded bytes (label + dense + keys, 264
// per sample); the file size is logged.
func BenchmarkRead(b *testing.B) {
	s := criteoSchema()
	for _, comp := range []string{"snappy", "none"} {
		for _, bc := range []struct{ workers, prefetch int }{{1, 0}, {2, 0}, {4, 0}, {8, 0}, {16, 0}, {16, 4}, {16, 8}} {
			workers := bc.workers
			name := fmt.Sprintf("%s/workers=%d", comp, workers)
			if bc.prefetch > 0 {
				name += fmt.Sprintf("/prefetch=%d", bc.prefetch)
			}
			b.Run(name, func(b *testing.B) {
				list := criteoDataset(b, comp)
				if st, err := os.Stat(filepath.Join(filepath.Dir(list), "part_0.parquet")); err == nil {
					b.Logf("%s file: %d bytes for %d rows (%.1f B/row)", comp, st.Size(), benchRows, float64(st.Size())/benchRows)
				}
				r, err := OpenList(list, &s, Options{Prefetch: bc.prefetch, Options: formats.Options{BatchSize: benchBatch, Workers: workers, Repeat: true}})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				batch, _ := formats.NewBatch(&s, benchBatch, nil)
				if _, err := r.Read(batch); err != nil { // warm up the buffers
					b.Fatal(err)
				}
				b.SetBytes(benchBatch * decodedBytes)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := r.Read(batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// BenchmarkNext is BenchmarkRead through Next: the batches are views of the
// decoded row groups (row groups of 131072 rows hold two batches), no copy.
func BenchmarkNext(b *testing.B) {
	s := criteoSchema()
	for _, comp := range []string{"snappy", "none", "gen"} {
		for _, workers := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("%s/workers=%d", comp, workers), func(b *testing.B) {
				list := criteoDataset(b, comp)
				r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: benchBatch, Workers: workers, Repeat: true}})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(benchBatch * decodedBytes)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := r.Next(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// BenchmarkWrite encodes Criteo-shaped batches of 65536 into one file, PLAIN
// and dictionary-encoded (gen's default); one op is one batch; SetBytes
// counts decoded bytes (264 per sample).
func BenchmarkWrite(b *testing.B) {
	s := criteoSchema()
	batch := criteoBatch(&s, benchBatch, 7)
	for _, tc := range []struct {
		name, comp string
		dict       bool
	}{{"snappy", "snappy", false}, {"none", "none", false}, {"snappy-dict", "snappy", true}} {
		comp := tc.comp
		b.Run(tc.name, func(b *testing.B) {
			w, err := Create(filepath.Join(b.TempDir(), "x.parquet"), &s, WriterOptions{Compression: comp, Dictionary: tc.dict})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchBatch * decodedBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := w.Write(batch); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// BenchmarkSnappyKeys encodes one int64 key column of 1 Mi rows into
// snappy pages as the writer does (PLAIN, 128 KiB pages). The keys follow a
// power law (α 1.2) over 10⁵ values, as `ctrkit gen` draws them: the
// compression dominates a Norm → Parquet conversion's CPU.
func BenchmarkSnappyKeys(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]int64, 1<<20)
	const a, n = 1.2, 1e5
	for i := range keys {
		// inverse CDF of x^-a on [1, n+1)
		u := rng.Float64()
		lo, hi := 1.0, math.Pow(n+1, 1-a)
		keys[i] = int64(math.Pow(lo+u*(hi-lo), 1/(1-a))) - 1
	}
	e := &pageEncoder{codec: codecSnappy}
	var buf []byte
	b.SetBytes(int64(8 * len(keys)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = e.encodeFlat(buf[:0], valueBytes(keys), 8)
	}
	b.ReportMetric(float64(len(buf))/float64(8*len(keys)), "ratio")
}

// BenchmarkSnappyKeysDecode decompresses the pages BenchmarkSnappyKeys
// writes, as the reader does for every int64 key column: the reader's
// largest cost (about half of a 2-worker epoch's CPU on the dev VM). It
// reports the time per snappy element (literal or copy): the decoder is
// bound by its chain of dependent tag reads, not by bytes.
func BenchmarkSnappyKeysDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]int64, 1<<20)
	const a, n = 1.2, 1e5
	for i := range keys {
		u := rng.Float64()
		lo, hi := 1.0, math.Pow(n+1, 1-a)
		keys[i] = int64(math.Pow(lo+u*(hi-lo), 1/(1-a))) - 1
	}
	e := &pageEncoder{codec: codecSnappy}
	buf, _ := e.encodeFlat(nil, valueBytes(keys), 8)
	var bodies [][]byte
	var usize, tags int
	for p := 0; p < len(buf); {
		h, k, err := parsePageHeader(buf[p:])
		if err != nil || h.csize < 0 || p+k+int(h.csize) > len(buf) {
			b.Fatalf("page at %d: %v", p, err)
		}
		body := buf[p+k : p+k+int(h.csize)]
		bodies = append(bodies, body)
		usize = max(usize, int(h.usize))
		tags += snappyElements(b, body)
		p += k + int(h.csize)
	}
	dst := make([]byte, usize)
	b.SetBytes(int64(8 * len(keys)))
	b.ReportAllocs()
	for b.Loop() {
		for _, body := range bodies {
			if _, err := s2.Decode(dst, body); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tags), "ns/element")
	b.ReportMetric(float64(tags)/float64(len(keys)), "elements/key")
}

// snappyElements counts the literals and copies of the snappy block src.
func snappyElements(b *testing.B, src []byte) int {
	_, k := binary.Uvarint(src)
	n := 0
	for s := k; s < len(src); n++ {
		tag := src[s]
		switch tag & 3 {
		case 0:
			l, hdr := int(tag>>2), 1
			if l >= 60 {
				nb := l - 59
				l = 0
				for i := nb; i >= 1; i-- {
					l = l<<8 | int(src[s+i])
				}
				hdr += nb
			}
			s += hdr + l + 1
		case 1:
			s += 2
		case 2:
			s += 3
		default:
			s += 5
		}
	}
	return n
}
