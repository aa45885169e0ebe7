package raw

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// snapshot is a batch's memory as bytes: labels, dense, offsets and keys
// of its N samples, so batches compare byte for byte.
func snapshot(b *formats.Batch) []byte {
	S := b.Schema.NumSlots()
	n := b.N
	k := int(b.Offsets[n*S])
	var out []byte
	out = append(out, bytesOf(b.Labels[:n*b.Schema.LabelDim])...)
	out = append(out, bytesOf(b.Dense[:n*b.Schema.DenseDim])...)
	out = append(out, bytesOf(b.Offsets[:n*S+1])...)
	if b.Keys64 != nil {
		out = append(out, bytesOf(b.Keys64[:k])...)
	} else {
		out = append(out, bytesOf(b.Keys32[:k])...)
	}
	return out
}

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// referenceBatches decodes the file's batches one by one with a plain
// Decoder (no workers, no prepared offsets) in the reader's order: the
// batches every reader must return, byte for byte.
func referenceBatches(t *testing.T, path string, s *formats.Schema, l Layout, sizes []int64, kc KeyCheck,
	bs int, shuffle bool, seed uint64, epochs int) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.Clone()
	dec, err := NewDecoder(&sc, l, sizes)
	if err != nil {
		t.Fatal(err)
	}
	if len(kc.Sizes) > 0 {
		if err := dec.CheckKeys(kc.Sizes, kc.Global); err != nil {
			t.Fatal(err)
		}
	}
	ss := int64(dec.SampleSize())
	n := int64(len(data)) / ss
	nb := (n + int64(bs) - 1) / int64(bs)
	seq := sequencer{nb: nb, repeat: true, shuffle: shuffle, seed: seed, epoch: -1}
	b := mustBatch(t, &sc, bs)
	var out [][]byte
	for i := int64(0); i < int64(epochs)*nb; i++ {
		_, k, _ := seq.claim()
		lo, hi := k*int64(bs), min((k+1)*int64(bs), n)
		b.SetLen(0)
		if err := dec.Decode(data[lo*ss:hi*ss], b, path, lo, lo*ss); err != nil {
			t.Fatal(err)
		}
		out = append(out, snapshot(b))
	}
	return out
}

// collect reads k batches from r, through Next when lend (r must be a
// formats.Lender) and Read otherwise.
func collect(t *testing.T, r formats.Reader, bs, k int, lend bool) [][]byte {
	t.Helper()
	var out [][]byte
	b := mustBatch(t, r.Schema(), bs)
	for len(out) < k {
		var got *formats.Batch
		var err error
		if lend {
			got, err = r.(formats.Lender).Next()
		} else {
			_, err = r.Read(b)
			got = b
		}
		if err != nil {
			t.Fatalf("batch %d: %v", len(out), err)
		}
		out = append(out, snapshot(got))
	}
	return out
}

// TestParallelDecodeSameBatches: the sync and the async Raw readers, with
// 1, 2 or 3 workers, through Read (copy) and Next (lent ring batches),
// return byte for byte the batches a plain Decoder makes from the same
// bytes — one-hot and multi-hot, u32 and i64 keys, shuffle on and off,
// without keys checks, with slot offsets, and with the workers' key check
// (slot-local and global) — in epoch and repeat mode.
func TestParallelDecodeSameBatches(t *testing.T) {
	dir := t.TempDir()
	const n, bs, seed = 1000, 64, 5 // 16 batches, the last of 40 samples
	for ci, c := range configs {
		d := c.dataset(uint64(40+ci), n)
		path := writeFile(t, dir, d, c.layout)
		sizes := d.Schema.SlotSizes()
		checks := []struct {
			name  string
			sizes []int64
			kc    KeyCheck
		}{
			{"plain", nil, KeyCheck{}},
			{"offsets", sizes, KeyCheck{}},
			{"check", nil, KeyCheck{Sizes: sizes}},
		}
		for _, ck := range checks {
			for _, shuffle := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/shuffle=%v", c.name, ck.name, shuffle)
				want := referenceBatches(t, path, &d.Schema, c.layout, ck.sizes, ck.kc, bs, shuffle, seed, 2)
				nb := len(want) / 2
				for _, workers := range []int{1, 2, 3} {
					for _, repeat := range []bool{false, true} {
						epochs := 1
						if repeat {
							epochs = 2
						}
						for _, lend := range []bool{false, true} {
							o := Options{Layout: c.layout, KeyCheck: ck.kc}
							o.BatchSize, o.Workers, o.Shuffle, o.Seed, o.Repeat, o.SlotSizeArray = bs, workers, shuffle, seed, repeat, ck.sizes
							r, err := Open(path, &d.Schema, o)
							if err != nil {
								t.Fatal(err)
							}
							got := collect(t, r, bs, epochs*nb, lend)
							if !repeat {
								if _, err := r.Read(mustBatch(t, r.Schema(), bs)); err != io.EOF {
									t.Fatalf("%s: sync after the last batch: %v", name, err)
								}
							}
							r.Close()
							for i := range got {
								if !slices.Equal(got[i], want[i]) {
									t.Fatalf("%s: sync, %d workers, repeat %v, lend %v: batch %d differs", name, workers, repeat, lend, i)
								}
							}
							ao := AsyncOptions{Options: o.Options, Layout: c.layout, KeyCheck: ck.kc,
								Async: asyncio.Params{NumThreads: 2, NumBatchesPerThread: 2, IOBlockSize: 1024, Engine: "pread"}}
							data, _ := os.ReadFile(path)
							ar, err := NewAsyncReader(asyncio.NewMemFile(path, data), &d.Schema, ao)
							if err != nil {
								t.Fatal(err)
							}
							got = collect(t, ar, bs, epochs*nb, lend)
							ar.Close()
							for i := range got {
								if !slices.Equal(got[i], want[i]) {
									t.Fatalf("%s: async, %d workers, repeat %v, lend %v: batch %d differs", name, workers, repeat, lend, i)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestPreparedOffsetsInPieces: a decoder with prepared offsets gives the
// same batch as one without, whether the batch is decoded at once or in
// pieces (as the async reader's slices are), and past the prepared size.
func TestPreparedOffsetsInPieces(t *testing.T) {
	for ci, c := range configs {
		d := c.dataset(uint64(70+ci), 100)
		path := writeFile(t, t.TempDir(), d, c.layout)
		data, _ := os.ReadFile(path)
		plain, err := NewDecoder(&d.Schema, c.layout, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := mustBatch(t, &d.Schema, 100)
		if err := plain.Decode(data, want, path, 0, 0); err != nil {
			t.Fatal(err)
		}
		ss := plain.SampleSize()
		for _, prep := range []int{100, 30} {
			dec := plain.Clone()
			dec.PrepareOffsets(prep)
			got := mustBatch(t, &d.Schema, 100)
			for _, cut := range [][2]int{{0, 7}, {7, 50}, {50, 100}} {
				if err := dec.Clone().Decode(data[cut[0]*ss:cut[1]*ss], got, path, int64(cut[0]), int64(cut[0]*ss)); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(snapshot(got), snapshot(want)) {
				t.Fatalf("%s, offsets prepared for %d: batch differs", c.name, prep)
			}
		}
	}
}

// TestKeyCheck: the readers' workers check keys against the slot sizes
// without adding offsets (the keys stay as stored), slot-local or global;
// a key outside its slot is an ErrKeyRange error naming the record and
// its byte offset, the same from every reader and worker count.
func TestKeyCheck(t *testing.T) {
	for _, ci := range []int{1, 4, 6} { // one-hot u32, multi-hot u32, multi-hot i64
		c := configs[ci]
		d := c.dataset(uint64(90+ci), 300)
		sizes := d.Schema.SlotSizes()
		last := len(sizes) - 1
		global := &formatstest.Dataset{Schema: d.Schema.Clone(), Labels: d.Labels, Dense: d.Dense}
		P := formats.SlotOffsets(sizes)
		var total int64
		for _, n := range sizes {
			total += n
		}
		for s := range global.Schema.Slots {
			global.Schema.Slots[s].Size = total
		}
		for i := range d.Keys {
			var row [][]int64
			for s, ks := range d.Keys[i] {
				g := slices.Clone(ks)
				for j := range g {
					g[j] += P[s]
				}
				row = append(row, g)
			}
			global.Keys = append(global.Keys, row)
		}
		dir := t.TempDir()
		for _, g := range []bool{false, true} {
			src := d
			if g {
				src = global
			}
			path := writeFile(t, dir, src, c.layout)
			data, _ := os.ReadFile(path)
			// In range: the keys come out as stored.
			want := referenceBatches(t, path, &d.Schema, c.layout, nil, KeyCheck{}, 32, false, 0, 1)
			for _, workers := range []int{1, 3} {
				o := Options{Layout: c.layout, KeyCheck: KeyCheck{Sizes: sizes, Global: g}}
				o.BatchSize, o.Workers = 32, workers
				r, err := Open(path, &d.Schema, o)
				if err != nil {
					t.Fatal(err)
				}
				got := collect(t, r, 32, len(want), workers > 1)
				r.Close()
				for i := range got {
					if !slices.Equal(got[i], want[i]) {
						t.Fatalf("%s global %v: batch %d changed by the key check", c.name, g, i)
					}
				}
			}
			// The first sample whose last-slot key is the largest one is
			// out of range once that slot shrinks to that key.
			var maxKey int64
			rec := -1
			for i := range d.Keys {
				for _, k := range d.Keys[i][last] {
					if k > maxKey {
						maxKey, rec = k, i
					}
				}
			}
			if rec < 0 {
				continue
			}
			small := slices.Clone(sizes)
			small[last] = maxKey
			for i := 0; i < rec; i++ { // an earlier sample with the same key?
				if slices.Contains(d.Keys[i][last], maxKey) {
					rec = i
					break
				}
			}
			var first error
			for _, workers := range []int{1, 3} {
				for _, async := range []bool{false, true} {
					var r formats.Reader
					var err error
					if async {
						ao := AsyncOptions{Layout: c.layout, KeyCheck: KeyCheck{Sizes: small, Global: g}, Async: asyncio.Params{NumThreads: 2, Engine: "pread"}}
						ao.BatchSize, ao.Workers = 32, workers
						r, err = NewAsyncReader(asyncio.NewMemFile(path, data), &d.Schema, ao)
					} else {
						o := Options{Layout: c.layout, KeyCheck: KeyCheck{Sizes: small, Global: g}}
						o.BatchSize, o.Workers = 32, workers
						r, err = Open(path, &d.Schema, o)
					}
					if err != nil {
						t.Fatal(err)
					}
					b := mustBatch(t, r.Schema(), 32)
					for err == nil {
						_, err = r.Read(b)
					}
					r.Close()
					var fe *formats.Error
					if !errors.Is(err, formats.ErrKeyRange) || !errors.As(err, &fe) || fe.Record != int64(rec) ||
						(fe.Offset-fe.Offset%int64(SampleSizeOf(t, &d.Schema, c.layout)))/int64(SampleSizeOf(t, &d.Schema, c.layout)) != int64(rec) || !strings.Contains(err.Error(), "--slot-size-array") {
						t.Fatalf("%s global %v workers %d async %v: %v, want ErrKeyRange at record %d", c.name, g, workers, async, err, rec)
					}
					if first == nil {
						first = err
					} else if err.Error() != first.Error() {
						t.Fatalf("%s: %v, another reader said %v", c.name, err, first)
					}
				}
			}
		}
	}
	// A key check beside slot offsets is refused.
	c := configs[4]
	d := c.dataset(3, 10)
	path := writeFile(t, t.TempDir(), d, c.layout)
	o := Options{Layout: c.layout, KeyCheck: KeyCheck{Sizes: d.Schema.SlotSizes()}}
	o.SlotSizeArray = d.Schema.SlotSizes()
	if r, err := Open(path, &d.Schema, o); err == nil {
		r.Close()
		t.Fatal("KeyCheck with SlotSizeArray accepted")
	}
}

func SampleSizeOf(t *testing.T, s *formats.Schema, l Layout) int {
	n, err := SampleSize(s, l)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReadBuffersRecycled: a reader given a formats.Recycler keeps its
// workers' read buffers at Close, and the next reader of the same file
// (training's reader of the next pass) decodes with those buffers — no
// Workers × batch bytes allocated and faulted in per pass — and reads the
// same batches.
func TestReadBuffersRecycled(t *testing.T) {
	c := configs[1]
	d := c.dataset(77, 500)
	path := writeFile(t, t.TempDir(), d, c.layout)
	rec := formats.NewRecycler(nil)
	o := Options{Layout: c.layout}
	o.BatchSize, o.Workers, o.Alloc = 64, 3, rec
	var first []*byte
	var got [2]*formatstest.Dataset
	for pass := 0; pass < 2; pass++ {
		r, err := Open(path, &d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.rbufs) != 3 {
			t.Fatalf("pass %d: %d read buffers, want 3", pass, len(r.rbufs))
		}
		ptrs := map[*byte]bool{}
		for _, b := range r.rbufs {
			ptrs[&b[0]] = true
		}
		if pass == 0 {
			for p := range ptrs {
				first = append(first, p)
			}
		} else {
			for _, p := range first {
				if !ptrs[p] {
					t.Errorf("pass 1 allocated new read buffers instead of taking the first pass's from the Recycler")
					break
				}
			}
		}
		if got[pass], err = formatstest.ReadAll(r, 64, 0); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Fatal("the second pass read other batches than the first")
	}
}
