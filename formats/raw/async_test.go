package raw

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// asyncParams are engine settings with odd block sizes, thread counts and
// depths, and decode worker counts.
var asyncParams = []struct {
	workers int
	p       asyncio.Params
}{
	{1, asyncio.Params{NumThreads: 1, NumBatchesPerThread: 1, IOBlockSize: 512, IODepth: 1}},
	{1, asyncio.Params{NumThreads: 3, NumBatchesPerThread: 2, IOBlockSize: 1000, IODepth: 2}},
	{3, asyncio.Params{NumThreads: 2, NumBatchesPerThread: 3, IOBlockSize: 4608, IODepth: 3}},
	{5, asyncio.Params{NumThreads: 1, NumBatchesPerThread: 2, IOBlockSize: 1 << 20, IODepth: 1, IOAlignment: 4096}},
}

// readBatches reads k batches (all of them when k ≤ 0, up to io.EOF) and
// returns them as one dataset per batch.
func readBatches(t *testing.T, r formats.Reader, bs, k int) []*formatstest.Dataset {
	t.Helper()
	b, err := formats.NewBatch(r.Schema(), bs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*formatstest.Dataset
	for k <= 0 || len(out) < k {
		n, err := r.Read(b)
		if err == io.EOF {
			if k > 0 {
				t.Fatalf("io.EOF after %d of %d batches", len(out), k)
			}
			return out
		}
		if err != nil {
			t.Fatalf("batch %d: %v", len(out), err)
		}
		if err := formatstest.CheckBatch(b); err != nil || n != b.N {
			t.Fatalf("batch %d: n %d, %v", len(out), n, err)
		}
		d := &formatstest.Dataset{Schema: r.Schema().Clone()}
		appendBatch(d, b)
		out = append(out, d)
	}
	return out
}

func sameBatches(t *testing.T, what string, want, got []*formatstest.Dataset) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d batches, want %d", what, len(got), len(want))
	}
	for i := range want {
		if d := formatstest.Diff(want[i], got[i]); d != "" {
			t.Fatalf("%s: batch %d: %s", what, i, d)
		}
	}
}

// TestAsyncMatchesSync reads every configuration with the sync and the
// async reader (real O_DIRECT file) in epoch and repeat mode, with and
// without shuffle and slot offsets, and compares them batch by batch.
func TestAsyncMatchesSync(t *testing.T) {
	dir := t.TempDir()
	for ci, c := range configs {
		d := c.dataset(uint64(10+ci), 523)
		path := writeFile(t, dir, d, c.layout)
		size, _ := SampleSize(&d.Schema, c.layout)
		if (523*size)%512 == 0 {
			t.Fatalf("%s: file size %d is a multiple of 512", c.name, 523*size)
		}
		for pi, ap := range asyncParams {
			for _, mode := range []string{"epoch", "repeat", "shuffle", "shuffle-async", "offsets", "pread"} {
				t.Run(fmt.Sprintf("%s/%d/%s", c.name, pi, mode), func(t *testing.T) {
					bs := []int{37, 64, 523, 1000}[pi]
					o := Options{Layout: c.layout}
					o.BatchSize, o.Workers, o.Seed = bs, 2, 99
					ao := AsyncOptions{Layout: c.layout, Async: ap.p}
					k := 0
					switch mode {
					case "repeat":
						o.Repeat = true
					case "shuffle":
						o.Repeat, o.Shuffle = true, true
					case "shuffle-async":
						o.Repeat, o.Shuffle = true, true
						ao.Async.Shuffle = true
					case "offsets":
						o.SlotSizeArray = d.Schema.SlotSizes()
					case "pread":
						ao.Async.Engine = "pread" // the default is io_uring where the kernel has it
					}
					if o.Repeat {
						k = 2*((523+bs-1)/bs) + 3
					}
					ao.Options = o.Options
					ao.Workers = ap.workers
					if mode == "shuffle-async" {
						ao.Shuffle = false // Async.Shuffle alone asks for it
					}
					sr, err := Open(path, &d.Schema, o)
					if err != nil {
						t.Fatal(err)
					}
					want := readBatches(t, sr, bs, k)
					sr.Close()
					ar, err := OpenAsync(path, &d.Schema, ao)
					if err != nil {
						t.Fatal(err)
					}
					if e := ar.Engine(); ar.NumSamples() != 523 || (e != "pread" && e != "io_uring") || (mode == "pread" && e != "pread") || ar.Alignment() < 512 {
						t.Fatalf("NumSamples %d, Engine %q, Alignment %d", ar.NumSamples(), ar.Engine(), ar.Alignment())
					}
					got := readBatches(t, ar, bs, k)
					if k == 0 {
						if _, err := ar.Read(mustBatch(t, ar.Schema(), bs)); err != io.EOF {
							t.Fatalf("Read after io.EOF: %v", err)
						}
					}
					if err := ar.Close(); err != nil {
						t.Fatal(err)
					}
					sameBatches(t, mode, want, got)
					if mode == "epoch" || mode == "shuffle" {
						ar, err := OpenAsync(path, &d.Schema, ao)
						if err != nil {
							t.Fatal(err)
						}
						lent := nextBatches(t, ar, k)
						ar.Close()
						sameBatches(t, mode+" (Next)", want, lent)
					}
					if mode == "offsets" {
						all := &formatstest.Dataset{Schema: d.Schema}
						for _, b := range got {
							all.Labels = append(all.Labels, b.Labels...)
							all.Dense = append(all.Dense, b.Dense...)
							all.Keys = append(all.Keys, b.Keys...)
						}
						if diff := formatstest.Diff(d.WithOffsets(d.Schema.SlotSizes()), all); diff != "" {
							t.Fatalf("slot offsets: %s", diff)
						}
					}
				})
			}
		}
	}
}

// nextBatches is readBatches through AsyncReader.Next.
func nextBatches(t *testing.T, r *AsyncReader, k int) []*formatstest.Dataset {
	t.Helper()
	var out []*formatstest.Dataset
	for k <= 0 || len(out) < k {
		b, err := r.Next()
		if err == io.EOF && k <= 0 {
			if b != nil {
				t.Fatal("Next returned a batch with io.EOF")
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("Next after io.EOF: %v", err)
			}
			return out
		}
		if err != nil {
			t.Fatalf("batch %d: %v", len(out), err)
		}
		if err := formatstest.CheckBatch(b); err != nil {
			t.Fatalf("batch %d: %v", len(out), err)
		}
		d := &formatstest.Dataset{Schema: r.Schema().Clone()}
		appendBatch(d, b)
		out = append(out, d)
	}
	return out
}

func mustBatch(t testing.TB, s *formats.Schema, n int) *formats.Batch {
	t.Helper()
	b, err := formats.NewBatch(s, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAsyncShuffleOrder checks that the async reader's shuffled order is
// the sync reader's, and a real permutation.
func TestAsyncShuffleOrder(t *testing.T) {
	const n, bs = 95, 4
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyU32)
	s.LabelType = formats.Int32
	d := &formatstest.Dataset{Schema: s}
	for i := 0; i < n; i++ {
		d.Labels = append(d.Labels, []float32{float32(i)})
		d.Dense = append(d.Dense, []float32{float32(i) / 2})
		d.Keys = append(d.Keys, [][]int64{{int64(i)}, {int64(2 * i)}})
	}
	path := writeFile(t, t.TempDir(), d, OneHot)
	want := shuffledOrder(t, path, &s, 5, 1, n, bs)
	ao := AsyncOptions{Layout: OneHot, Async: asyncio.Params{NumThreads: 2, IOBlockSize: 512, Shuffle: true}}
	ao.BatchSize, ao.Repeat, ao.Seed, ao.Workers = bs, true, 5, 3
	r, err := OpenAsync(path, &s, ao)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := mustBatch(t, &s, bs)
	nb := (n + bs - 1) / bs
	for e := 0; e < 2; e++ {
		sorted := true
		for k := 0; k < nb; k++ {
			if _, err := r.Read(b); err != nil {
				t.Fatal(err)
			}
			first := int(b.Labels[0]) / bs
			if first != want[e][k] {
				t.Fatalf("epoch %d batch %d starts at batch %d of the file, sync reader says %d", e, k, first, want[e][k])
			}
			sorted = sorted && first == k
		}
		if sorted {
			t.Fatalf("epoch %d in file order", e)
		}
	}
}

// TestAsyncFaults injects short reads, EIO and a file that shrank into an
// in-memory file.
func TestAsyncFaults(t *testing.T) {
	c := configs[3] // multi-hot
	d := c.dataset(4, 301)
	path := writeFile(t, t.TempDir(), d, c.layout)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ss, _ := SampleSize(&d.Schema, c.layout)
	const name = "/data/faulty.raw"
	for _, workers := range []int{1, 3, 4} {
		o := AsyncOptions{Layout: c.layout, Async: asyncio.Params{NumThreads: 2, IODepth: 2, IOBlockSize: 1024, NumBatchesPerThread: 2}}
		o.BatchSize, o.Workers = 16, workers

		// Short reads are retried; the data stays exact.
		f := asyncio.NewMemFile(name, data)
		f.Short = 77
		r, err := NewAsyncReader(f, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := formatstest.ReadAll(r, 16, 0)
		if err != nil {
			t.Fatalf("short reads: %v", err)
		}
		if diff := formatstest.Diff(d, got); diff != "" {
			t.Fatalf("short reads: %s", diff)
		}
		r.Close()
		if !f.Closed() {
			t.Fatal("Close did not close the file")
		}
		if f.Reads() < len(data)/77 {
			t.Fatalf("%d reads for %d bytes cut at 77", f.Reads(), len(data))
		}

		// EIO at a byte in batch 5: batches 0-4 come, then the error,
		// sticky, naming the file and the failing block's offset.
		// The byte is past batch 4's read rounded out to 512 bytes, so batch
		// 5 is the first to fail; its blocks start at its own rounded
		// offset.
		start5 := int64(5*16*ss) &^ 511
		failAt := start5 + 512 + 10
		if failAt >= int64(6*16*ss) {
			t.Fatalf("sample size %d too small for the test", ss)
		}
		blockOff := start5 + (failAt-start5)/1024*1024
		f = asyncio.NewMemFile(name, data)
		f.FailAt, f.FailErr = failAt, syscall.EIO
		r, err = NewAsyncReader(f, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		b := mustBatch(t, r.Schema(), 16)
		for k := 0; k < 5; k++ {
			if _, err := r.Read(b); err != nil {
				t.Fatalf("workers %d: batch %d before the fault: %v", workers, k, err)
			}
		}
		for i := 0; i < 2; i++ {
			_, err = r.Read(b)
			var fe *formats.Error
			if !errors.As(err, &fe) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("workers %d: EIO read %d: %v", workers, i, err)
			}
			if fe.Path != name || fe.Offset != blockOff || fe.Record != blockOff/int64(ss) || fe.Format != "raw" {
				t.Fatalf("workers %d: EIO error %+v, want path %s offset %d record %d", workers, fe, name, blockOff, blockOff/int64(ss))
			}
		}
		r.Close()

		// The file shrank after opening: premature EOF at the cut.
		cut := int64(9*16*ss + 5*ss + 100)
		f = asyncio.NewMemFile(name, data)
		f.Trunc = cut
		r, err = NewAsyncReader(f, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 9; k++ {
			if _, err := r.Read(b); err != nil {
				t.Fatalf("workers %d: batch %d before the cut: %v", workers, k, err)
			}
		}
		for i := 0; i < 2; i++ {
			_, err = r.Read(b)
			var fe *formats.Error
			if !errors.As(err, &fe) || !errors.Is(err, io.ErrUnexpectedEOF) || !formats.IsCorrupt(err) {
				t.Fatalf("workers %d: truncated read %d: %v", workers, i, err)
			}
			if fe.Path != name || fe.Offset != cut || fe.Record != cut/int64(ss) {
				t.Fatalf("workers %d: truncation error %+v, want offset %d record %d", workers, fe, cut, cut/int64(ss))
			}
		}
		r.Close()
	}
}

// TestAsyncOpenErrors checks the size check, empty files and options.
func TestAsyncOpenErrors(t *testing.T) {
	c := configs[0]
	d := c.dataset(5, 20)
	path := writeFile(t, t.TempDir(), d, c.layout)
	data, _ := os.ReadFile(path)
	o := AsyncOptions{Layout: c.layout}
	o.BatchSize = 8

	_, serr := NewReader(nil, int64(len(data)-1), "/x.raw", &d.Schema, Options{Options: o.Options, Layout: c.layout})
	_, aerr := NewAsyncReader(asyncio.NewMemFile("/x.raw", data[:len(data)-1]), &d.Schema, o)
	if !errors.Is(aerr, formats.ErrSize) || serr == nil || aerr.Error() != serr.Error() {
		t.Fatalf("size not a multiple: async %v, sync %v", aerr, serr)
	}

	f := asyncio.NewMemFile("/empty.raw", nil)
	r, err := NewAsyncReader(f, &d.Schema, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(mustBatch(t, &d.Schema, 8)); err != io.EOF {
		t.Fatalf("empty file: %v", err)
	}
	r.Close()
	if !f.Closed() {
		t.Fatal("Close did not close the empty file")
	}
	o.Repeat = true
	if _, err := NewAsyncReader(asyncio.NewMemFile("/empty.raw", nil), &d.Schema, o); !errors.Is(err, formats.ErrSize) {
		t.Fatalf("repeating an empty file: %v", err)
	}
	o.Repeat = false
	o.Async.IOAlignment = 1000
	if _, err := NewAsyncReader(asyncio.NewMemFile("/x.raw", data), &d.Schema, o); err == nil {
		t.Fatal("io_alignment 1000 accepted")
	}
	o.Async.IOAlignment = 0
	if _, err := OpenAsync(filepath.Join(t.TempDir(), "missing.raw"), &d.Schema, o); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}

	r, err = NewAsyncReader(asyncio.NewMemFile("/x.raw", data), &d.Schema, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(mustBatch(t, &d.Schema, 4)); err == nil {
		t.Fatal("batch below the batch size accepted")
	}
	r.Close()
	if _, err := r.Read(mustBatch(t, &d.Schema, 8)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}

// TestAsyncCloseStopsGoroutines closes readers at the start, mid-epoch and
// after an error, with batches queued and in flight, and checks that no
// goroutine survives.
func TestAsyncCloseStopsGoroutines(t *testing.T) {
	c := configs[0]
	d := c.dataset(6, 500)
	path := writeFile(t, t.TempDir(), d, c.layout)
	data, _ := os.ReadFile(path)
	base := runtime.NumGoroutine()
	for _, workers := range []int{1, 4} {
		for _, repeat := range []bool{false, true} {
			for reads := 0; reads < 4; reads++ {
				o := AsyncOptions{Layout: c.layout, Async: asyncio.Params{NumThreads: 3, IODepth: 2, IOBlockSize: 512}}
				o.BatchSize, o.Workers, o.Repeat = 8, workers, repeat
				f := asyncio.NewMemFile("/x.raw", data)
				if reads == 3 {
					f.FailAt, f.FailErr = 8*int64(len(data))/10, syscall.EIO
				}
				r, err := NewAsyncReader(f, &d.Schema, o)
				if err != nil {
					t.Fatal(err)
				}
				b := mustBatch(t, &d.Schema, 8)
				for k := 0; k < reads; k++ {
					if _, err := r.Read(b); err != nil {
						t.Fatal(err)
					}
					if k == 1 { // close with a lent batch outstanding
						if _, err := r.Next(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if reads == 3 {
					for {
						if _, err := r.Read(b); err != nil {
							if !errors.Is(err, syscall.EIO) {
								t.Fatal(err)
							}
							break
						}
					}
				}
				time.Sleep(2 * time.Millisecond) // let the goroutines fill the ring and block
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base {
		t.Fatalf("%d goroutines after Close, %d before", g, base)
	}
}

// TestAlignedDense checks aligned_type Auto in both readers: DenseDim
// rounded up to a multiple of 8, padding columns zero, the rest equal to
// the unpadded read.
func TestAlignedDense(t *testing.T) {
	for _, c := range []config{configs[1], configs[5]} {
		d := c.dataset(8, 77)
		d.Schema.DenseDim = 0
		// Force a dense width that needs padding (13 → 16, as Criteo).
		d = widenDense(d, 13)
		path := writeFile(t, t.TempDir(), d, c.layout)
		o := Options{Layout: c.layout, AlignDense: true}
		o.BatchSize, o.Workers = 10, 1
		sr, err := Open(path, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		if sr.Schema().DenseDim != 16 {
			t.Fatalf("sync: aligned DenseDim %d, want 16", sr.Schema().DenseDim)
		}
		syncPad := readBatches(t, sr, 10, 0)
		sr.Close()
		o.Workers = 3
		sr, err = Open(path, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		sameBatches(t, "aligned sync, 1 vs 3 workers", syncPad, readBatches(t, sr, 10, 0))
		sr.Close()
		ao := AsyncOptions{Layout: c.layout, Async: asyncio.Params{AlignedType: asyncio.AlignAuto, IOBlockSize: 512}}
		ao.BatchSize, ao.Workers = 10, 2
		ar, err := OpenAsync(path, &d.Schema, ao)
		if err != nil {
			t.Fatal(err)
		}
		if ar.Schema().DenseDim != 16 || d.Schema.DenseDim != 13 {
			t.Fatalf("async: aligned DenseDim %d, want 16 (input schema %d)", ar.Schema().DenseDim, d.Schema.DenseDim)
		}
		asyncPad := readBatches(t, ar, 10, 0)
		ar.Close()
		sameBatches(t, "aligned sync vs async", syncPad, asyncPad)
		plain := readFile(t, path, &d.Schema, Options{Layout: c.layout}, 0)
		i := 0
		for _, b := range asyncPad {
			for j := range b.Dense {
				row := b.Dense[j]
				if len(row) != 16 {
					t.Fatalf("row of %d dense values", len(row))
				}
				for x := 13; x < 16; x++ {
					if row[x] != 0 {
						t.Fatalf("sample %d padding column %d = %v", i, x, row[x])
					}
				}
				b.Dense[j] = row[:13]
				i++
			}
		}
		all := &formatstest.Dataset{Schema: d.Schema}
		for _, b := range asyncPad {
			all.Labels = append(all.Labels, b.Labels...)
			all.Dense = append(all.Dense, b.Dense...)
			all.Keys = append(all.Keys, b.Keys...)
		}
		if diff := formatstest.Diff(plain, all); diff != "" {
			t.Fatalf("%s: aligned read differs from the unpadded one: %s", c.name, diff)
		}
	}
	// Widths already a multiple of 8 and zero are unchanged.
	for _, w := range []int{0, 8, 16} {
		if AlignedDenseDim(w) != w {
			t.Errorf("AlignedDenseDim(%d) = %d", w, AlignedDenseDim(w))
		}
	}
	if AlignedDenseDim(1) != 8 || AlignedDenseDim(13) != 16 {
		t.Errorf("AlignedDenseDim(1), (13) = %d, %d", AlignedDenseDim(1), AlignedDenseDim(13))
	}
}

// widenDense gives every sample of d w dense values (derived from its
// label, so they are valid for both dense types).
func widenDense(d *formatstest.Dataset, w int) *formatstest.Dataset {
	d.Schema.DenseDim = w
	for i := range d.Dense {
		row := make([]float32, w)
		for j := range row {
			row[j] = formats.DenseFromInt32(int32((i*31 + j*7) % 1000))
		}
		d.Dense[i] = row
	}
	return d
}

// BenchmarkAsyncReader reads a ~120 MiB file (Criteo one-hot int32, or
// DLRM-DCNv2 multi-hot, 912 B/sample) in repeat mode with the RawAsync
// reader, through the page cache (buffered) or with O_DIRECT: one op is one
// epoch in steady state. N is the number of I/O threads; decoding uses
// GOMAXPROCS workers.
func BenchmarkAsyncReader(b *testing.B) {
	for _, bench := range []struct {
		name, data string
		bs, nb     int
	}{
		{"onehot-criteo", "onehot-int32", 16384, 48},
		{"multihot-dcnv2", "multihot-dcnv2", 8192, 16},
	} {
		s, l, src := benchData(bench.data, bench.bs)
		path := filepath.Join(b.TempDir(), bench.name+".raw")
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < bench.nb; i++ {
			if _, err := f.Write(src); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		size := int64(len(src) * bench.nb)
		for _, threads := range []int{1, 4, 16} {
			for _, mode := range []string{"buffered", "direct", "buffered-next"} {
				b.Run(fmt.Sprintf("%s/threads=%d/%s", bench.name, threads, mode), func(b *testing.B) {
					o := AsyncOptions{Layout: l, Async: asyncio.Params{
						NumThreads: threads, NumBatchesPerThread: 2, IODepth: 2, Buffered: mode != "direct"}}
					o.BatchSize, o.Repeat = bench.bs, true
					r, err := OpenAsync(path, &s, o)
					if err != nil {
						b.Fatal(err)
					}
					defer r.Close()
					batch := mustBatch(b, r.Schema(), bench.bs)
					if _, err := r.Read(batch); err != nil { // warm up the ring
						b.Fatal(err)
					}
					read := func() error { _, err := r.Read(batch); return err }
					if mode == "buffered-next" { // no copy: the ring batch is lent
						read = func() error { _, err := r.Next(); return err }
					}
					b.SetBytes(size)
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						for k := 0; k < bench.nb; k++ {
							if err := read(); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ReportMetric(float64(bench.bs*bench.nb)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
				})
			}
		}
	}
}

// TestAsyncKeyRange checks that a key out of range gives the sync reader's
// error (file, byte offset of the key, record), after the same batches.
func TestAsyncKeyRange(t *testing.T) {
	c := configs[5] // multi-hot i64
	d := c.dataset(9, 200)
	path := writeFile(t, t.TempDir(), d, c.layout)
	sizes := d.Schema.SlotSizes()
	// Shrink the last slot so that some key falls outside it.
	last := len(sizes) - 1
	var maxKey int64
	for _, ks := range d.Keys {
		for _, k := range ks[last] {
			maxKey = max(maxKey, k)
		}
	}
	if maxKey == 0 {
		t.Skip("no key to put out of range")
	}
	sizes[last] = maxKey
	o := Options{Layout: c.layout}
	o.BatchSize, o.SlotSizeArray, o.Workers = 16, sizes, 1
	sr, err := Open(path, &d.Schema, o)
	if err != nil {
		t.Fatal(err)
	}
	_, serr := formatstest.ReadAll(sr, 16, 0)
	sr.Close()
	if !errors.Is(serr, formats.ErrKeyRange) {
		t.Fatalf("sync reader: %v", serr)
	}
	for _, workers := range []int{1, 3} {
		ao := AsyncOptions{Layout: c.layout, Async: asyncio.Params{NumThreads: 2, IOBlockSize: 512}}
		ao.BatchSize, ao.SlotSizeArray, ao.Workers = 16, sizes, workers
		ar, err := OpenAsync(path, &d.Schema, ao)
		if err != nil {
			t.Fatal(err)
		}
		_, aerr := formatstest.ReadAll(ar, 16, 0)
		_, again := ar.Read(mustBatch(t, ar.Schema(), 16))
		ar.Close()
		if aerr == nil || aerr.Error() != serr.Error() || again != aerr {
			t.Fatalf("workers %d: async %v (then %v), sync %v", workers, aerr, again, serr)
		}
	}
}

// TestAsyncManyWorkersOutOfOrder reads with more decode workers than ring
// slots minus two and I/O that completes in random order, through Read and
// Next, in epoch and shuffled repeat mode, and compares with the sync
// reader.
func TestAsyncManyWorkersOutOfOrder(t *testing.T) {
	c := configs[3] // multi-hot
	d := c.dataset(12, 611)
	path := writeFile(t, t.TempDir(), d, c.layout)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, repeat := range []bool{false, true} {
		const bs = 16
		o := Options{Layout: c.layout}
		o.BatchSize, o.Workers, o.Seed, o.Repeat, o.Shuffle = bs, 1, 5, repeat, repeat
		k := 0
		if repeat {
			k = 3 * (611 + bs - 1) / bs
		}
		sr, err := Open(path, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		want := readBatches(t, sr, bs, k)
		sr.Close()
		for _, next := range []bool{false, true} {
			ao := AsyncOptions{Layout: c.layout, Async: asyncio.Params{NumThreads: 4, IODepth: 3, IOBlockSize: 512, NumBatchesPerThread: 3}}
			ao.Options = o.Options
			ao.Workers = 8
			f := asyncio.NewMemFile("/j.raw", data)
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(3, 4))
			f.Delay = func() time.Duration {
				mu.Lock()
				defer mu.Unlock()
				return time.Duration(rng.IntN(300)) * time.Microsecond
			}
			ar, err := NewAsyncReader(f, &d.Schema, ao)
			if err != nil {
				t.Fatal(err)
			}
			var got []*formatstest.Dataset
			if next {
				got = nextBatches(t, ar, k)
			} else {
				got = readBatches(t, ar, bs, k)
			}
			if err := ar.Close(); err != nil {
				t.Fatal(err)
			}
			sameBatches(t, fmt.Sprintf("repeat %v next %v", repeat, next), want, got)
		}
	}
}
