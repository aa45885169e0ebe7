package criteo

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// TestVocabBudget builds the vocabulary of data whose distinct values need
// several times the budget, and checks that the spilling build gives the
// same ids as an unbounded one while its accounted memory stays within the
// budget.
func TestVocabBudget(t *testing.T) {
	paths := genFiles(t, 2, genConfig{Lines: 10000, Sep: '\t', Frequent: 300, PRare: 0.5, PMissing: 0.1})
	const budget = MinMemoryBudget
	unbounded, err := BuildVocab(paths, VocabOptions{MemoryBudget: 1 << 30, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	us := unbounded.Stats()
	if us.Runs != 0 || us.Samples != 20000 {
		t.Fatalf("unbounded: %+v", us)
	}
	footprint := 16 * us.Distinct // bytes of the distinct (slot, value) counts alone
	if footprint < 4*budget {
		t.Fatalf("distinct footprint %d not well above the budget %d", footprint, budget)
	}

	// A low GOGC keeps garbage from hiding the live heap (Go's minimum heap
	// target is 4 MB × GOGC/100).
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	// The live heap as of each collection (runtime/metrics): unlike
	// MemStats.HeapInuse it does not count garbage a collector starved of
	// CPU (a loaded CI machine) has not reclaimed yet.
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	liveHeap := func() uint64 {
		metrics.Read(live)
		return live[0].Value.Uint64()
	}
	var peakHeap atomic.Uint64
	runtime.GC()
	base := liveHeap()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if h := liveHeap(); h > peakHeap.Load() {
				peakHeap.Store(h)
			}
		}
	}()
	small, err := BuildVocab(paths, VocabOptions{MemoryBudget: budget, TempDir: t.TempDir(), Workers: 2})
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	ss := small.Stats()
	t.Logf("distinct %d (footprint %d B), frequent %d, runs %d, accounted peak %d B, live-heap growth %d B, budget %d B",
		ss.Distinct, footprint, ss.Frequent, ss.Runs, ss.PeakBytes, int64(peakHeap.Load())-int64(base), budget)
	if ss.Runs < 10 {
		t.Errorf("only %d runs spilled", ss.Runs)
	}
	if ss.PeakBytes > budget {
		t.Errorf("accounted peak %d above budget %d", ss.PeakBytes, budget)
	}
	// The live heap also holds the growing Vocab and the reader's buffers;
	// it is a cross-check, so allow 2×.
	if g := int64(peakHeap.Load()) - int64(base); g > 2*budget {
		t.Errorf("live heap grew by %d, budget %d", g, budget)
	}
	if ss.Distinct != us.Distinct || ss.Frequent != us.Frequent {
		t.Errorf("stats differ: %+v vs %+v", ss, us)
	}
	for s := 0; s < DefaultNumCat; s++ {
		if !slices.Equal(small.Values(s), unbounded.Values(s)) {
			t.Fatalf("slot %d: vocabularies differ", s)
		}
	}
	if us.Frequent < 26*100 {
		t.Errorf("only %d frequent values", us.Frequent)
	}
	// The ids of the second pass agree.
	o1, o2 := Options{Vocab: unbounded}, Options{Vocab: small}
	o1.BatchSize, o2.BatchSize = 4096, 4096
	d1, _ := readAll(t, paths, o1)
	d2, _ := readAll(t, paths, o2)
	if d := formatstest.Diff(d1, d2); d != "" {
		t.Fatal(d)
	}
	// A reference count over the same ids.
	ref := make([]map[uint64]int, DefaultNumCat)
	for s := range ref {
		ref[s] = map[uint64]int{}
	}
	var rare, frequent int
	for i := range d1.Keys {
		for s := range d1.Keys[i] {
			switch k := d1.Keys[i][s][0]; {
			case k == IDRare:
				rare++
			case k >= 2:
				frequent++
				ref[s][uint64(k)]++
			}
		}
	}
	for s := range ref {
		for id, n := range ref[s] {
			if n < DefaultMinCount {
				t.Fatalf("slot %d id %d seen %d times", s, id, n)
			}
		}
	}
	if rare == 0 || frequent == 0 {
		t.Errorf("rare %d frequent %d", rare, frequent)
	}
}

func TestVocabMultiRoundMerge(t *testing.T) {
	paths := genFiles(t, 1, genConfig{Lines: 20000, Sep: ',', Header: true, Frequent: 50, PRare: 0.7, PMissing: 0})
	v1, err := BuildVocab(paths, VocabOptions{MemoryBudget: MinMemoryBudget, Workers: 1, MinCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := BuildVocab(paths, VocabOptions{Workers: 3, MinCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	st := v1.Stats()
	t.Logf("%+v", st)
	if st.Runs <= 16 { // fan-in at 1 MiB: 8 runs of 64 KiB buffers in half the budget
		t.Errorf("runs %d: no multi-round merge", st.Runs)
	}
	for s := 0; s < DefaultNumCat; s++ {
		if !slices.Equal(v1.Values(s), v2.Values(s)) {
			t.Fatalf("slot %d differs", s)
		}
	}
}

func TestVocabSaveLoad(t *testing.T) {
	v := NewVocab([][]uint64{{5, 3, 3, Missing, 9}, {}, {1 << 40}}, 6)
	if !slices.Equal(v.Values(0), []uint64{3, 5, 9}) || !slices.Equal(v.SlotSizes(), []int64{5, 2, 3}) {
		t.Fatalf("NewVocab: %v %v", v.Values(0), v.SlotSizes())
	}
	if v.ID(0, Missing) != IDMissing || v.ID(0, 4) != IDRare || v.ID(0, 3) != 2 || v.ID(0, 9) != 4 || v.ID(2, 1<<40) != 2 {
		t.Fatal("ids")
	}
	p := t.TempDir() + "/vocab.bin"
	if err := v.Save(p); err != nil {
		t.Fatal(err)
	}
	w, err := LoadVocab(p)
	if err != nil {
		t.Fatal(err)
	}
	if w.MinCount() != 6 || w.NumSlots() != 3 || !slices.Equal(w.Values(0), v.Values(0)) || !slices.Equal(w.Values(2), v.Values(2)) {
		t.Fatalf("loaded %+v", w)
	}
	data, _ := os.ReadFile(p)
	if len(data) != 8+4+4+3*8+4*8+4 {
		t.Fatalf("file size %d", len(data))
	}
	for name, mut := range map[string]func([]byte) []byte{
		"flip":     func(b []byte) []byte { b[30] ^= 1; return b },
		"truncate": func(b []byte) []byte { return b[:len(b)-9] },
		"magic":    func(b []byte) []byte { b[0] = 'X'; return b },
		"short":    func(b []byte) []byte { return b[:10] },
	} {
		q := t.TempDir() + "/bad.bin"
		os.WriteFile(q, mut(slices.Clone(data)), 0o644)
		if _, err := LoadVocab(q); !errors.Is(err, formats.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A valid CRC over a hostile count, and unsorted values.
	for name, body := range map[string][]byte{
		"count":    append([]byte(vocabMagic), 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10),
		"slots":    append([]byte(vocabMagic), 0xff, 0xff, 0xff, 0x7f, 6, 0, 0, 0),
		"unsorted": append([]byte(vocabMagic), 1, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0),
	} {
		crc := crc32c(body)
		q := t.TempDir() + "/bad.bin"
		os.WriteFile(q, append(body, byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)), 0o644)
		var fe *formats.Error
		if _, err := LoadVocab(q); !errors.Is(err, formats.ErrCorrupt) || !errors.As(err, &fe) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestVocabOptions(t *testing.T) {
	for _, o := range []VocabOptions{{MemoryBudget: 1000}, {MinCount: -1}, {Layout: Layout{Format: 9}}} {
		if _, err := BuildVocab([]string{"testdata/small.tsv"}, o); err == nil {
			t.Errorf("accepted %+v", o)
		}
	}
	if _, err := BuildVocab(nil, VocabOptions{}); err == nil {
		t.Error("no paths accepted")
	}
	_, err := BuildVocab([]string{"testdata/bad.tsv"}, VocabOptions{})
	var fe *formats.Error
	if !errors.As(err, &fe) || fe.Record != 1 {
		t.Errorf("bad line: %v", err)
	}
	v, err := BuildVocab([]string{"testdata/bad.tsv"}, VocabOptions{Layout: Layout{SkipBad: true}, MinCount: 1})
	if err != nil || v.Stats().Skipped != 3 || v.Stats().Samples != 3 {
		t.Fatalf("SkipBad: %v %+v", err, v.Stats())
	}
	if !slices.Equal(v.Values(0), []uint64{1, 0x05db9164}) {
		t.Errorf("slot 0 values %x", v.Values(0))
	}
}

func TestVocabIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := [][]uint64{nil, {0}, make([]uint64, 10000)}
	for i := range vals[2] {
		if i%2 == 0 {
			vals[2][i] = uint64(rng.Uint32())
		} else {
			vals[2][i] = CatValue(fmt.Appendf(nil, "v%d", i))
		}
	}
	v := NewVocab(vals, 6)
	for s := range vals {
		sorted := v.Values(s)
		probe := append(slices.Clone(sorted), 1, 2, Missing-1, 1<<63)
		for range 1000 {
			probe = append(probe, uint64(rng.Uint32()), rng.Uint64())
		}
		for _, x := range probe {
			want := int64(IDRare)
			if i, ok := slices.BinarySearch(sorted, x); ok {
				want = int64(2 + i)
			}
			if got := v.ID(s, x); got != want {
				t.Fatalf("slot %d value %x: id %d, want %d", s, x, got, want)
			}
		}
	}
}

func BenchmarkVocabID(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]uint64, 1<<20)
	for i := range vals {
		vals[i] = uint64(rng.Uint32())
	}
	v := NewVocab([][]uint64{vals}, 6)
	probe := make([]uint64, 1<<16)
	for i := range probe {
		probe[i] = vals[rng.IntN(len(vals))]
		if i%4 == 0 {
			probe[i] = uint64(rng.Uint32())
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		v.ID(0, probe[i&(len(probe)-1)])
		i++
	}
}
