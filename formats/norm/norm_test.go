package norm

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// writeFiles writes d split over nfiles files (file i gets an uneven share,
// possibly none) and a file list, returning the list path and the files.
func writeFiles(t testing.TB, dir string, d *formatstest.Dataset, nfiles int, m CheckMode, rng *rand.Rand) (string, []string, []*formatstest.Dataset) {
	t.Helper()
	cuts := []int{0}
	for i := 1; i < nfiles; i++ {
		cuts = append(cuts, rng.IntN(d.Len()+1))
	}
	cuts = append(cuts, d.Len())
	for i := 1; i < len(cuts); i++ { // sort
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	var files []string
	var parts []*formatstest.Dataset
	for i := 0; i < nfiles; i++ {
		part := &formatstest.Dataset{Schema: d.Schema, Labels: d.Labels[cuts[i]:cuts[i+1]], Dense: d.Dense[cuts[i]:cuts[i+1]], Keys: d.Keys[cuts[i]:cuts[i+1]]}
		path := filepath.Join(dir, fmt.Sprintf("part_%d.data", i))
		w, err := Create(path, &d.Schema, WriterOptions{Check: m})
		if err != nil {
			t.Fatal(err)
		}
		if part.Len() == 0 {
			err = w.Close()
		} else {
			err = part.WriteAll(w, 1+rng.IntN(50))
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
		parts = append(parts, part)
	}
	list := filepath.Join(dir, "file_list.txt")
	if err := formats.WriteFileList(list, files); err != nil {
		t.Fatal(err)
	}
	return list, files, parts
}

func concat(s formats.Schema, parts ...*formatstest.Dataset) *formatstest.Dataset {
	out := &formatstest.Dataset{Schema: s}
	for _, p := range parts {
		out.Labels = append(out.Labels, p.Labels...)
		out.Dense = append(out.Dense, p.Dense...)
		out.Keys = append(out.Keys, p.Keys...)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for _, kt := range []formats.KeyType{formats.KeyU32, formats.KeyI64} {
		for _, m := range []CheckMode{CheckNone, CheckSum} {
			t.Run(kt.String()+"-"+m.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(kt), uint64(m)+7))
				for iter := 0; iter < 4; iter++ {
					s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 2, MaxDense: 5, MaxSlots: 6, MaxNNZ: 4, KeyType: kt})
					d := formatstest.NewDataset(rng, s, 600+rng.IntN(600), 0, formatstest.AnyFloat)
					dir := t.TempDir()
					list, _, _ := writeFiles(t, dir, d, 1+rng.IntN(4), m, rng)
					offsets := d.WithOffsets(s.SlotSizes())
					var ref *formatstest.Dataset
					for _, workers := range []int{1, 4} {
						for _, bufSize := range []int{0, 200, 4096} {
							for _, slot := range []bool{false, true} {
								o := Options{Check: m, BufferSize: bufSize}
								o.BatchSize = 1 + rng.IntN(300)
								o.Workers = workers
								want := d
								if slot {
									o.SlotSizeArray = s.SlotSizes()
									want = offsets
								}
								r, err := OpenList(list, &s, o)
								if err != nil {
									t.Fatal(err)
								}
								r.minRun = 4 // exercise the parallel path on small runs
								got, err := formatstest.ReadAll(r, o.BatchSize, 0)
								if err != nil {
									t.Fatalf("workers %d buf %d: %v", workers, bufSize, err)
								}
								if diff := formatstest.Diff(want, got); diff != "" {
									t.Fatalf("workers %d buf %d offsets %v batch %d: %s", workers, bufSize, slot, o.BatchSize, diff)
								}
								if !slot && ref == nil {
									ref = got
								}
								if n, err := r.Read(mustBatch(t, r.Schema(), o.BatchSize)); n != 0 || err != io.EOF {
									t.Fatalf("Read after end: %d, %v", n, err)
								}
								r.Close()
							}
						}
					}
				}
			})
		}
	}
}

func mustBatch(t testing.TB, s *formats.Schema, n int) *formats.Batch {
	t.Helper()
	b, err := formats.NewBatch(s, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readBatches returns every batch of r as datasets, to compare batch
// boundaries, not only samples.
func readBatches(t *testing.T, r *Reader, size, max int) []*formatstest.Dataset {
	t.Helper()
	b := mustBatch(t, r.Schema(), size)
	var out []*formatstest.Dataset
	for len(out) < max {
		n, err := r.Read(b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		one := &formatstest.Dataset{Schema: *r.Schema()}
		for i := 0; i < n; i++ {
			one.AppendFrom(b, i)
		}
		out = append(out, one)
	}
	return out
}

func TestWorkersIdenticalBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 3, MaxSlots: 5, MaxNNZ: 3})
	d := formatstest.NewDataset(rng, s, 3000, 0, formatstest.AnyFloat)
	list, _, _ := writeFiles(t, t.TempDir(), d, 3, CheckSum, rng)
	var ref []*formatstest.Dataset
	for _, w := range []int{1, 2, 3, 4, 8} {
		o := Options{Check: CheckSum, BufferSize: 8192}
		o.BatchSize, o.Workers = 777, w
		r, err := OpenList(list, &s, o)
		if err != nil {
			t.Fatal(err)
		}
		r.minRun, r.piece = 16, 1000 // refills of 8 KiB split over up to 8 preads
		got := readBatches(t, r, 777, 100)
		r.Close()
		if len(got) != 4 || got[3].Len() != 3000-3*777 {
			t.Fatalf("workers %d: %d batches", w, len(got))
		}
		if ref == nil {
			ref = got
			continue
		}
		for i := range got {
			if diff := formatstest.Diff(ref[i], got[i]); diff != "" {
				t.Fatalf("workers %d batch %d: %s", w, i, diff)
			}
		}
	}
}

// TestShrinkWhileReading truncates a file under an open reader: the
// refill's reads (parallel or not) end early, which is a truncation error
// naming the file.
func TestShrinkWhileReading(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 3, MaxSlots: 4, MaxNNZ: 2})
	d := formatstest.NewDataset(rng, s, 4000, 0, formatstest.AnyFloat)
	for _, w := range []int{1, 4} {
		list, files, _ := writeFiles(t, t.TempDir(), d, 1, CheckSum, rng)
		o := Options{Check: CheckSum, BufferSize: 8192}
		o.BatchSize, o.Workers = 100, w
		r, err := OpenList(list, &s, o)
		if err != nil {
			t.Fatal(err)
		}
		r.minRun, r.piece = 16, 1000
		b, err := formats.NewBatch(&s, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(b); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(files[0], st.Size()/2); err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = r.Read(b)
		}
		r.Close()
		var fe *formats.Error
		if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &fe) || fe.Path != files[0] {
			t.Fatalf("workers %d: %v, want a truncation error naming %s", w, err, files[0])
		}
	}
}

func TestRepeat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 2, MaxSlots: 3, MaxNNZ: 2, KeyType: formats.KeyI64})
	d := formatstest.NewDataset(rng, s, 250, 0, formatstest.AnyFloat)
	list, _, _ := writeFiles(t, t.TempDir(), d, 3, CheckNone, rng)
	o := Options{}
	o.BatchSize, o.Repeat, o.Workers = 64, true, 2
	r, err := OpenList(list, &s, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := formatstest.ReadAll(r, 64, 640)
	if err != nil {
		t.Fatal(err)
	}
	want := concat(s, d, d, d)
	want.Labels, want.Dense, want.Keys = want.Labels[:640], want.Dense[:640], want.Keys[:640]
	if diff := formatstest.Diff(want, got); diff != "" {
		t.Fatal(diff)
	}
}

func TestShuffle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 2, MaxSlots: 3, MaxNNZ: 2})
	d := formatstest.NewDataset(rng, s, 400, 1, formatstest.AnyFloat)
	list, _, parts := writeFiles(t, t.TempDir(), d, 6, CheckSum, rng)
	read := func(seed uint64) *formatstest.Dataset {
		o := Options{Check: CheckSum}
		o.BatchSize, o.Repeat, o.Shuffle, o.Seed = 50, true, true, seed
		r, err := OpenList(list, &s, o)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got, err := formatstest.ReadAll(r, 50, 3*400)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	a, b := read(42), read(42)
	if diff := formatstest.Diff(a, b); diff != "" {
		t.Fatalf("same seed, different data: %s", diff)
	}
	// The documented order: epoch e visits files in the permutation of
	// rand.New(rand.NewPCG(seed, e)).Shuffle.
	var want []*formatstest.Dataset
	for e := 0; e < 3; e++ {
		order := []int{0, 1, 2, 3, 4, 5}
		prng := rand.New(rand.NewPCG(42, uint64(e)))
		prng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			want = append(want, parts[i])
		}
	}
	if diff := formatstest.Diff(concat(s, want...), a); diff != "" {
		t.Fatalf("order: %s", diff)
	}
	if formatstest.Diff(a, read(43)) == "" {
		t.Fatal("seeds 42 and 43 give the same order")
	}
}

func TestSchemaFromHeader(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, kt := range []formats.KeyType{formats.KeyU32, formats.KeyI64} {
		s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 2, MaxDense: 4, MaxSlots: 4, MaxNNZ: 5, KeyType: kt})
		d := formatstest.NewDataset(rng, s, 300, 0, formatstest.AnyFloat)
		_, files, _ := writeFiles(t, t.TempDir(), d, 2, CheckSum, rng)
		o := Options{Check: CheckSum, KeyType: kt}
		o.BatchSize = 128
		r, err := OpenFiles(files, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		rs := r.Schema()
		if rs.LabelDim != s.LabelDim || rs.DenseDim != s.DenseDim || len(rs.Slots) != len(s.Slots) || rs.KeyType != kt || rs.MaxKeysPerSample() != -1 {
			t.Fatalf("schema from header %+v, want shape of %+v", rs, s)
		}
		if h := r.Header(1); h.ErrorCheck != 1 || h.NumRecords+r.Header(0).NumRecords != 300 || len(r.Files()) != 2 {
			t.Fatalf("headers %+v %+v", r.Header(0), h)
		}
		got, err := formatstest.ReadAll(r, 128, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := formatstest.Diff(d, got); diff != "" {
			t.Fatal(diff)
		}
		r.Close()
	}
}

func TestDetect(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, kt := range []formats.KeyType{formats.KeyU32, formats.KeyI64} {
		for _, m := range []CheckMode{CheckNone, CheckSum} {
			s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 3, MaxSlots: 4, MaxNNZ: 3, KeyType: kt})
			d := formatstest.NewDataset(rng, s, 200, 1, formatstest.AnyFloat)
			_, files, _ := writeFiles(t, t.TempDir(), d, 1, m, rng)
			det, err := Detect(files[0])
			if err != nil {
				t.Fatal(err)
			}
			got, ok := det.KeyType()
			if !ok || got != kt || det.Check != m || det.Ambiguous || det.Header.NumRecords != 200 {
				t.Fatalf("%s/%s: detected %+v", kt, m, det)
			}
		}
	}
	// All nnz 0: both widths fit.
	s := formats.NewSchema(1, 1, []int{2, 2}, nil, formats.KeyU32)
	d := formatstest.NewDataset(rng, s, 10, 0, formatstest.AnyFloat)
	for i := range d.Keys {
		d.Keys[i] = [][]int64{{}, {}}
	}
	_, files, _ := writeFiles(t, t.TempDir(), d, 1, CheckSum, rng)
	det, err := Detect(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := det.KeyType(); ok || !det.Ambiguous || len(det.KeyTypes) != 2 {
		t.Fatalf("all-empty slots: %+v, want ambiguous", det)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 3, MaxSlots: 5, MaxNNZ: 3})
	d := formatstest.NewDataset(rng, s, 2000, 0, formatstest.AnyFloat)
	list, _, _ := writeFiles(t, t.TempDir(), d, 2, CheckSum, rng)
	base := runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		o := Options{Check: CheckSum}
		o.BatchSize, o.Workers, o.Repeat = 1000, 8, i == 2
		r, err := OpenList(list, &s, o)
		if err != nil {
			t.Fatal(err)
		}
		r.minRun = 8
		b := mustBatch(t, &s, 1000)
		if _, err := r.Read(b); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(b); err == nil {
			t.Fatal("Read after Close succeeded")
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines after Close, %d before", n, base)
	}
}

func TestCheckMode(t *testing.T) {
	for in, want := range map[string]CheckMode{"none": CheckNone, "SUM": CheckSum, "Sum": CheckSum, "NONE": CheckNone} {
		got, err := ParseCheckMode(in)
		if err != nil || got != want || got.String() != map[CheckMode]string{CheckNone: "none", CheckSum: "sum"}[want] {
			t.Fatalf("ParseCheckMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseCheckMode("crc"); err == nil {
		t.Fatal("ParseCheckMode(crc) succeeded")
	}
}

func TestSkipCorruptEmptyRepeat(t *testing.T) {
	// Repeat mode over files without samples ends instead of spinning.
	s := formats.NewSchema(1, 0, []int{1}, nil, formats.KeyU32)
	path := filepath.Join(t.TempDir(), "empty.data")
	w, err := Create(path, &s, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	o := Options{}
	o.Repeat = true
	r, err := Open(path, &s, o)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(mustBatch(t, &s, formats.DefaultBatchSize)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("Read = %d, %v; want 0, io.EOF", n, err)
	}
}

func TestChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 1023, 1024, 1025, 2047, 4096, 5000, 70000} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		if n == 70000 {
			for i := range p {
				p[i] = 0xff // worst case for the lane sums
			}
		}
		var want byte
		for _, c := range p {
			want += c
		}
		if got := checksum(p); got != want {
			t.Fatalf("checksum of %d bytes = %#x, want %#x", n, got, want)
		}
	}
}

func TestResetAndAbort(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	s := formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 1, MaxDense: 2, MaxSlots: 3, MaxNNZ: 2})
	d := formatstest.NewDataset(rng, s, 100, 0, formatstest.AnyFloat)
	dir := t.TempDir()
	_, files, _ := writeFiles(t, dir, d, 1, CheckSum, rng)
	o := Options{Check: CheckSum}
	o.BatchSize = 30
	r, err := Open(files[0], &s, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	first, err := formatstest.ReadAll(r, 30, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reset(); err != nil {
		t.Fatal(err)
	}
	again, err := formatstest.ReadAll(r, 30, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := formatstest.Diff(first, again); diff != "" || first.Len() != 100 {
		t.Fatalf("after Reset: %s", diff)
	}
	// Abort leaves nothing behind; the final name never appears.
	path := filepath.Join(dir, "aborted.data")
	w, err := Create(path, &s, WriterOptions{Check: CheckSum})
	if err != nil {
		t.Fatal(err)
	}
	bs, _ := d.Batches(50)
	if err := w.Write(bs[0]); err != nil || w.Records() != 50 {
		t.Fatal(err, w.Records())
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "*aborted*"))
	if len(entries) != 0 {
		t.Fatalf("after Abort: %v", entries)
	}
	// A batch of another shape is refused.
	w, err = Create(path, &s, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := formats.NewSchema(s.LabelDim+1, s.DenseDim, make([]int, len(s.Slots)), nil, s.KeyType)
	if err := w.Write(mustBatch(t, &other, 1)); err == nil {
		t.Fatal("writer accepted a batch of another schema")
	}
	w.Abort()
}

func TestOptionsValidate(t *testing.T) {
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, formats.KeyU32)
	bad := []Options{{Check: 2}, {KeyType: 9}, {BufferSize: -1}}
	o := Options{}
	o.SlotSizeArray = []int64{1 << 31, 1<<31 + 1} // sums past the i32 key range
	bad = append(bad, o)
	o.SlotSizeArray = []int64{5}
	bad = append(bad, o)
	for i, o := range bad {
		if err := o.Validate(&s); err == nil {
			t.Errorf("options %d: %+v validated", i, o)
		}
	}
	if err := (&Options{}).Validate(&s); err != nil {
		t.Fatal(err)
	}
	if err := (&WriterOptions{Check: 3}).Validate(); err == nil {
		t.Fatal("writer check mode 3 validated")
	}
}
