package model

import (
	"math/rand/v2"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/input"
)

// wdlBatch is a WDL-shape batch (a wide slot, 26 deep slots, 13 dense) of
// B samples and the model over it on the CPU backend.
func wdlBatch(b *testing.B, B int) (*Model, *formats.Batch) {
	sizes := make([]int64, 27)
	for i := range sizes {
		sizes[i] = 10000
	}
	cfg, err := graph.Reference("wdl", graph.RefOptions{DenseDim: 13, SlotSizes: sizes, VecSize: 1, Width: 1.0 / 64})
	if err != nil {
		b.Fatal(err)
	}
	m, err := Build(cfg, cpuBackend(b), Options{BatchSize: B, Seed: 1, SlotSizeArray: sizes})
	if err != nil {
		b.Fatal(err)
	}
	s := m.Schema(formats.KeyU32)
	for i := range s.Slots {
		s.Slots[i].Size, s.Slots[i].Hotness = sizes[i], 1
	}
	bs, err := formatstest.NewDataset(rand.New(rand.NewPCG(1, 1)), s, B, 1, formatstest.IntegerValued).Batches(B)
	if err != nil {
		b.Fatal(err)
	}
	return m, bs[0]
}

// BenchmarkInputWDL is the host side of the input pipeline per batch for
// the WDL shape (two sparse inputs), bytes the batch's decoded size:
// "staged" is what the prefetcher does on the host for a staged (GPU)
// upload — check the batch, count each input's keys, name the bytes (the
// keys are split on the device); "cpu-load" is the whole synchronous load
// on the CPU backend (copy in, SplitInputs). Before #14 the staged path
// repacked every key on the host (hostInputs.pack).
func BenchmarkInputWDL(b *testing.B) {
	for _, B := range []int{2048, 65536} {
		m, batch := wdlBatch(b, B)
		bytes := formats.BatchBytes(batch.Schema, B)
		pf := input.NewPrefetcher(m.feed)
		b.Run("staged/"+itoa(B), func(b *testing.B) {
			b.SetBytes(bytes)
			b.ReportAllocs()
			for range b.N {
				if _, _, err := pf.HostSide(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("cpu-load/"+itoa(B), func(b *testing.B) {
			b.SetBytes(bytes)
			b.ReportAllocs()
			for range b.N {
				if err := m.feed.Load(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
