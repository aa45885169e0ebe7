package dataset

import (
	"errors"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// TestOpenSourcesChain: several sources read as one pass, cut at
// NumSamples, through Read and through Next (Parquet lends its batches):
// the samples in order, each source's last partial batch partial, and a
// pass shorter than NumSamples an error.
func TestOpenSourcesChain(t *testing.T) {
	s := formats.NewSchema(1, 2, []int{1, 2}, []int64{10, 20}, formats.KeyI64)
	for i := range s.Slots {
		s.Slots[i].Hotness = s.Slots[i].MaxNNZ
	}
	d := formatstest.NewDataset(rand.New(rand.NewPCG(1, 9)), s, 100, 1, formatstest.AnyFloat)
	dir := t.TempDir()
	out := Output{Format: Parquet, KeyType: formats.KeyI64, NoSync: true}
	w, err := Create(filepath.Join(dir, "pq"), &s, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAll(w, 32); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(dir, "pq", "_file_list.txt")
	for _, c := range []struct {
		num  int64
		want []int // batch sizes
	}{
		{0, []int{32, 32, 32, 4, 32, 32, 32, 4}},
		{150, []int{32, 32, 32, 4, 32, 18}},
		{100, []int{32, 32, 32, 4}},
	} {
		for _, lend := range []bool{false, true} {
			src := Sources{Spec: Spec{Format: Parquet}, Paths: []string{list, list}, Schema: s, NumSamples: c.num}
			r, err := OpenSources(src, formats.Options{BatchSize: 32, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			var labels []float32
			b, _ := formats.NewBatch(r.Schema(), 32, nil)
			for {
				var n int
				var err error
				if lend {
					l, ok := r.(formats.Lender)
					if !ok {
						t.Fatal("a chain of Parquet sources does not lend")
					}
					var lb *formats.Batch
					if lb, err = l.Next(); lb != nil {
						n = lb.N
						labels = append(labels, lb.Labels[:n]...)
					}
				} else {
					n, err = r.Read(b)
					labels = append(labels, b.Labels[:n]...)
				}
				if n > 0 {
					got = append(got, n)
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			r.Close()
			if !equalInts(got, c.want) {
				t.Errorf("num_samples %d lend %v: batches %v, want %v", c.num, lend, got, c.want)
			}
			for i, l := range labels {
				if l != d.Labels[i%100][0] {
					t.Fatalf("num_samples %d lend %v: sample %d label %v, want %v", c.num, lend, i, l, d.Labels[i%100][0])
				}
			}
		}
	}
	// A pass shorter than num_samples is an error, not a short epoch.
	for _, lend := range []bool{false, true} {
		r, err := OpenSources(Sources{Spec: Spec{Format: Parquet}, Paths: []string{list}, Schema: s, NumSamples: 101},
			formats.Options{BatchSize: 32, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(r.Schema(), 32, nil)
		for {
			if lend {
				_, err = r.(formats.Lender).Next()
			} else {
				_, err = r.Read(b)
			}
			if err != nil {
				break
			}
		}
		r.Close()
		if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "fewer than num_samples 101") {
			t.Errorf("lend %v: a pass of 100 samples for num_samples 101: %v", lend, err)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
