package parquet

import (
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// readNext reads a whole epoch with Next.
func readNext(t *testing.T, r *Reader) *formatstest.Dataset {
	t.Helper()
	got := &formatstest.Dataset{Schema: *r.Schema()}
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := formatstest.CheckBatch(b); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			got.AppendFrom(b, i)
		}
	}
}

// TestNext checks that Next lends the batches Read returns: one-hot
// datasets with row groups that are and are not multiples of the batch size
// (views and copies), a multi-hot dataset (copies), with 1 and 3 workers.
func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name          string
		oneHot        bool
		rows, per, rg int
		batch         int
		kt            formats.KeyType
	}{
		{"onehot-aligned", true, 1000, 400, 128, 64, formats.KeyI64},
		{"onehot-aligned-u32", true, 1000, 0, 128, 64, formats.KeyU32},
		{"onehot-unaligned", true, 1000, 300, 70, 64, formats.KeyI64},
		{"multihot", false, 600, 0, 100, 50, formats.KeyI64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, uint64(tc.rows)))
			s := formats.NewSchema(2, 3, []int{1, 1, 1, 1}, nil, tc.kt)
			if !tc.oneHot {
				s = formatstest.NewSchema(rng, formatstest.RandomSchema{MaxLabel: 2, MaxDense: 4, MaxSlots: 5, MaxNNZ: 3, KeyType: tc.kt})
				for i := range s.Slots {
					s.Slots[i].MaxNNZ = max(s.Slots[i].MaxNNZ, 2)
				}
			}
			minNNZ := 0
			if tc.oneHot {
				minNNZ = 1
			}
			d := formatstest.NewDataset(rng, s, tc.rows, minNNZ, formatstest.AnyFloat)
			list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: tc.rg}, RowsPerFile: int64(tc.per)})
			for _, workers := range []int{1, 3} {
				r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: tc.batch, Workers: workers}})
				if err != nil {
					t.Fatal(err)
				}
				got := readNext(t, r)
				if _, err := r.Next(); !errors.Is(err, io.EOF) {
					t.Fatalf("Next after the end: %v", err)
				}
				r.Close()
				if _, err := r.Next(); err == nil {
					t.Fatal("Next after Close: no error")
				}
				if diff := formatstest.Diff(d, got); diff != "" {
					t.Fatalf("workers=%d: %s", workers, diff)
				}
			}
		})
	}
}

// TestNextJoins checks the batches Next lends across row groups (the head
// of the next row group copied into the room of the one the batch begins
// in, rgBuf.room): files of 244 rows in row groups of 128 and 116, batches
// of 64, the shape of `ctrkit gen`'s files of 250000 rows (row groups of
// 131072 and 118928) and batches of 65536 scaled down, in epoch
// and repeat mode, with shuffled files, both key types, 1–3 workers, with
// Read and Next interleaved, and a memory limit; the batches are those
// Read returns, and joins copy fewer rows than copying the batches would.
func TestNextJoins(t *testing.T) {
	for _, kt := range []formats.KeyType{formats.KeyI64, formats.KeyU32} {
		rng := rand.New(rand.NewPCG(7, uint64(kt)))
		s := formats.NewSchema(1, 3, []int{1, 1, 1, 1, 1}, nil, kt)
		d := formatstest.NewDataset(rng, s, 4*244, 1, formatstest.AnyFloat)
		list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 128}, RowsPerFile: 244})
		for _, workers := range []int{1, 2, 3} {
			o := Options{Options: formats.Options{BatchSize: 64, Workers: workers}}
			r, err := OpenList(list, &s, o)
			if err != nil {
				t.Fatal(err)
			}
			got := readNext(t, r)
			joined := r.joined
			r.Close()
			if diff := formatstest.Diff(d, got); diff != "" {
				t.Fatalf("%s workers=%d: %s", kt, workers, diff)
			}
			// Every row group but the first ends inside a batch that the
			// next one completes (the last one's is the short last batch):
			// at rows 244, 372 (12 rows to the next batch end), 488, 616
			// (24), 732, 860 (36, more than half a row group: copied
			// before roomFor gave room for any head), where copying the
			// batches would copy 6·64 rows.
			if want := int64(2 * (12 + 24 + 36)); joined != want {
				t.Fatalf("%s workers=%d: %d rows joined, want %d", kt, workers, joined, want)
			}
			// The short last batch is a view too, not a copy.
			if r, err = OpenList(list, &s, o); err != nil {
				t.Fatal(err)
			}
			var last *formats.Batch
			for {
				b, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				last = b
			}
			if last.N != 976%64 || last == r.own || r.own != nil {
				t.Fatalf("%s workers=%d: last batch of %d rows, copied %v, a batch copied %v", kt, workers, last.N, last == r.own, r.own != nil)
			}
			r.Close()

			// Repeat, shuffled, 3 epochs, Read and Next alternating.
			o.Repeat, o.Shuffle, o.Seed = true, true, 9
			const n = 64 * 47
			want, err := readList(list, &s, o, n)
			if err != nil {
				t.Fatal(err)
			}
			r, err = OpenList(list, &s, o)
			if err != nil {
				t.Fatal(err)
			}
			got = &formatstest.Dataset{Schema: s}
			rb, _ := formats.NewBatch(&s, 64, nil)
			for i := 0; got.Len() < n; i++ {
				b := rb
				if i%3 == 2 {
					if _, err := r.Read(rb); err != nil {
						t.Fatal(err)
					}
				} else if b, err = r.Next(); err != nil {
					t.Fatal(err)
				}
				if err := formatstest.CheckBatch(b); err != nil {
					t.Fatal(err)
				}
				for j := 0; j < b.N; j++ {
					got.AppendFrom(b, j)
				}
			}
			if r.joined == 0 {
				t.Fatalf("%s workers=%d repeat: no batch joined", kt, workers)
			}
			r.Close()
			if diff := formatstest.Diff(want, got); diff != "" {
				t.Fatalf("%s workers=%d repeat: %s", kt, workers, diff)
			}
		}
	}
}

// readList reads n rows with Read only.
func readList(list string, s *formats.Schema, o Options, n int) (*formatstest.Dataset, error) {
	r, err := OpenList(list, s, o)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return formatstest.ReadAll(r, o.BatchSize, n)
}

// TestRecyclerAcrossReaders: readers opened with the same formats.Recycler
// as Alloc leave their row-group, page and batch buffers to it at Close, and
// the next reader takes them, making a row-group buffer only when none is
// left, and reads the same batches.
func TestRecyclerAcrossReaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := formats.NewSchema(1, 3, []int{1, 3}, []int64{50, 70}, formats.KeyI64) // a list slot: Next copies into its own batch
	d := formatstest.NewDataset(rng, s, 600, 1, formatstest.AnyFloat)
	list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 100}, RowsPerFile: 300})
	rec := formats.NewRecycler(nil)
	count := func(key any) int {
		var l []any
		for v := rec.Take(key); v != nil; v = rec.Take(key) {
			l = append(l, v)
		}
		for _, v := range l {
			rec.Keep(key, v)
		}
		return len(l)
	}
	o := Options{Options: formats.Options{BatchSize: 64, Workers: 2, Alloc: rec}}
	for epoch := 0; epoch < 3; epoch++ {
		before := count(rgBufKey{})
		r, err := OpenList(list, &s, o)
		if err != nil {
			t.Fatal(err)
		}
		got := readNext(t, r)
		nbuf, made := r.nbuf, r.made
		r.Close()
		if diff := formatstest.Diff(d, got); diff != "" {
			t.Fatalf("epoch %d: %s", epoch, diff)
		}
		if made != max(0, nbuf-before) {
			t.Errorf("epoch %d: %d row-group buffers made new, %d used, %d kept before", epoch, made, nbuf, before)
		}
		if after := count(rgBufKey{}); after != max(before, nbuf) {
			t.Errorf("epoch %d: %d row-group buffers kept after, want %d", epoch, after, max(before, nbuf))
		}
		if count(poolKey(sizeClass(streamWindow))) == 0 {
			t.Errorf("epoch %d: no column window kept", epoch)
		}
		if rec.Held() == 0 {
			t.Errorf("epoch %d: the reader's own batch was not kept", epoch)
		}
	}
}

// trackAlloc is a heap allocator that records what it has handed out.
type trackAlloc struct {
	mu   sync.Mutex
	live map[*byte]int
}

func (a *trackAlloc) Alloc(n int) ([]byte, error) {
	b, err := formats.HeapAllocator{}.Alloc(n)
	if err == nil && n > 0 {
		a.mu.Lock()
		a.live[&b[0]] = n
		a.mu.Unlock()
	}
	return b, err
}

func (a *trackAlloc) Free(b []byte) {
	if len(b) > 0 {
		a.mu.Lock()
		delete(a.live, &b[0])
		a.mu.Unlock()
	}
}

// holds reports whether the memory of s lies inside one live allocation.
func (a *trackAlloc) holds(p unsafe.Pointer, n int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for base, size := range a.live {
		lo := uintptr(unsafe.Pointer(base))
		if uintptr(p) >= lo && uintptr(p)+uintptr(n) <= lo+uintptr(size) {
			return true
		}
	}
	return false
}

// TestNextLendsAllocatorMemory: given a formats.Recycler as Options.Alloc
// (the trainer's, over the GPU's pinned allocator), Next lends one-hot
// batches, views included, in memory from that allocator, so they upload
// without a host copy; the next reader reuses it, and Drain hands every
// byte back. Before the change the views lay in the reader's heap buffers
// (each batch uploaded from pageable memory).
func TestNextLendsAllocatorMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, kt := range []formats.KeyType{formats.KeyU32, formats.KeyI64} {
		s := formats.NewSchema(1, 3, []int{1, 1, 1}, []int64{50, 70, 90}, kt)
		d := formatstest.NewDataset(rng, s, 1000, 1, formatstest.AnyFloat)
		list := writeDataset(t, t.TempDir(), d, DatasetOptions{WriterOptions: WriterOptions{RowGroupSize: 256}, RowsPerFile: 500})
		ta := &trackAlloc{live: map[*byte]int{}}
		rec := formats.NewRecycler(ta)
		for epoch := 0; epoch < 2; epoch++ {
			r, err := OpenList(list, &s, Options{Options: formats.Options{BatchSize: 64, Workers: 2, Alloc: rec}})
			if err != nil {
				t.Fatal(err)
			}
			got := &formatstest.Dataset{Schema: s}
			views := 0
			for {
				b, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if b == &r.view {
					views++
				}
				for name, m := range map[string]struct {
					p unsafe.Pointer
					n int
				}{
					"labels":  {unsafe.Pointer(unsafe.SliceData(b.Labels)), 4 * len(b.Labels)},
					"dense":   {unsafe.Pointer(unsafe.SliceData(b.Dense)), 4 * len(b.Dense)},
					"offsets": {unsafe.Pointer(unsafe.SliceData(b.Offsets)), 4 * len(b.Offsets)},
					"keys32":  {unsafe.Pointer(unsafe.SliceData(b.Keys32)), 4 * len(b.Keys32)},
					"keys64":  {unsafe.Pointer(unsafe.SliceData(b.Keys64)), 8 * len(b.Keys64)},
				} {
					if m.n > 0 && !ta.holds(m.p, m.n) {
						t.Fatalf("%v epoch %d: a batch's %s (%d bytes) is not in the allocator's memory", kt, epoch, name, m.n)
					}
				}
				for i := 0; i < b.N; i++ {
					got.AppendFrom(b, i)
				}
			}
			r.Close()
			if views == 0 {
				t.Fatalf("%v: no batch was lent as a view", kt)
			}
			if diff := formatstest.Diff(d, got); diff != "" {
				t.Fatalf("%v epoch %d: %s", kt, epoch, diff)
			}
		}
		rec.Drain()
		if n := len(ta.live); n != 0 {
			t.Errorf("%v: %d allocations not handed back after Drain", kt, n)
		}
	}
}
