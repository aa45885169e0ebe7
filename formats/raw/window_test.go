package raw

import (
	"fmt"
	"io"
	"testing"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/formats"
)

// sampleText is sample i of b as text (for comparisons).
func sampleText(b *formats.Batch, i int) string {
	s := b.Schema
	t := fmt.Sprint(b.Labels[i*s.LabelDim:(i+1)*s.LabelDim], b.Dense[i*s.DenseDim:(i+1)*s.DenseDim])
	for k := range s.Slots {
		lo, hi := b.Row(i, k)
		for j := lo; j < hi; j++ {
			t += fmt.Sprint(" ", k, ":", b.Key(j))
		}
	}
	return t
}

// batchTexts reads every batch of path with o (with async, RawAsync's
// reader, buffered): each batch's samples.
func batchTexts(t *testing.T, path string, s *formats.Schema, o Options, async bool) [][]string {
	t.Helper()
	var r formats.Reader
	var err error
	if async {
		r, err = OpenAsync(path, s, AsyncOptions{Options: o.Options, Layout: o.Layout, Window: o.Window, Async: asyncio.Params{Buffered: true, NumThreads: 2}})
	} else {
		r, err = Open(path, s, o)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := formats.NewBatch(r.Schema(), o.BatchSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for {
		n, err := r.Read(b)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var bt []string
		for i := range n {
			bt = append(bt, sampleText(b, i))
		}
		out = append(out, bt)
	}
}

// TestWindow: readers of the windows [0, 2), [2, 4), [4, 6) of batches of
// 6 read, batch by batch, the parts that make up each batch of the whole
// reader (Raw and RawAsync, shuffled, with and without workers, the last
// batch short; a
// window past a short batch reads no sample and no error).
func TestWindow(t *testing.T) {
	c := configs[3]
	d := c.dataset(5, 23)
	path := writeFile(t, t.TempDir(), d, c.layout)
	for _, batch := range []int{6, 12} {
		for _, async := range []bool{false, true} {
			for _, workers := range []int{1, 3} {
				o := Options{Options: formats.Options{BatchSize: batch, Workers: workers, Shuffle: true, Seed: 9}, Layout: c.layout}
				whole := batchTexts(t, path, &d.Schema, o, async)
				if want := (23 + batch - 1) / batch; len(whole) != want {
					t.Fatalf("batch %d: %d batches", batch, len(whole))
				}
				var parts [3][][]string
				for w := range parts {
					ow := o
					ow.Window = Window{w * batch / 3, (w + 1) * batch / 3}
					parts[w] = batchTexts(t, path, &d.Schema, ow, async)
					if len(parts[w]) != len(whole) {
						t.Fatalf("window %d: %d batches, the whole reader %d", w, len(parts[w]), len(whole))
					}
				}
				for k := range whole {
					var got []string
					for w := range parts {
						got = append(got, parts[w][k]...)
					}
					if fmt.Sprint(got) != fmt.Sprint(whole[k]) {
						t.Errorf("batch size %d async %v workers %d batch %d: windows give %v, the whole reader %v", batch, async, workers, k, got, whole[k])
					}
				}
			}
		}
	}
	o := Options{Options: formats.Options{BatchSize: 6}, Layout: c.layout}
	for _, bad := range []Options{{Window: Window{2, 2}}, {Window: Window{-1, 2}}} {
		bad.Options, bad.Layout = o.Options, o.Layout
		if _, err := Open(path, &d.Schema, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
