package model

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestPassesLendingRaw: TrainThroughput over a Raw file read by the
// trainer's readers (Raw, and RawAsync, whose lent batches are pinned on
// the GPU and the prefetcher stages straight from), two full batches a
// pass, 5 steps (two pass boundaries, each pass opened by the prefetch
// goroutine while the last batch trains), trains the same batches as
// TrainStep over the file read pass by pass: the same loss on the CPU, the
// staged CPU and the GPU (within 1e-5 there).
func TestPassesLendingRaw(t *testing.T) {
	const B, N, steps = 64, 150, 5
	bes := inputBackends(t)
	bes["staged"] = func() tensor.Backend { return newStagingBackend(t) }
	for name, newBE := range bes {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/async=%v", name, async), func(t *testing.T) {
				cfg, err := graph.Reference("dlrm", graph.RefOptions{DenseDim: 4, SlotSizes: smallSlots, VecSize: 4, Width: 1.0 / 64,
					EmbeddingType: graph.LocalizedOneHot})
				if err != nil {
					t.Fatal(err)
				}
				build := func(be tensor.Backend) *Model {
					m, err := Build(cfg, be, Options{BatchSize: B, Seed: 9, SlotSizeArray: smallSlots})
					if err != nil {
						t.Fatal(err)
					}
					return m
				}
				be := newBE()
				m := build(be)
				s := m.Schema(formats.KeyU32)
				for i := range s.Slots {
					s.Slots[i].Size, s.Slots[i].Hotness = smallSlots[i], 1
				}
				d := formatstest.NewDataset(rand.New(rand.NewPCG(5, 3)), s, N, 0, formatstest.IntegerValued)
				out := dataset.Output{Format: dataset.Raw, KeyType: formats.KeyU32, Check: norm.CheckSum, NoSync: true, RawLayout: raw.OneHot, RawLayoutSet: true}
				path := filepath.Join(t.TempDir(), "data.bin")
				ws, err := dataset.OutputSchema(s, out)
				if err != nil {
					t.Fatal(err)
				}
				w, err := dataset.Create(path, &ws, out)
				if err != nil {
					t.Fatal(err)
				}
				if err := d.WriteAll(w, B); err != nil {
					t.Fatal(err)
				}
				src := Source{Format: dataset.Raw, Path: path, SlotSizeArray: smallSlots, Workers: 2}
				if async {
					src.Async = &asyncio.Params{NumThreads: 2, IOBlockSize: 4096}
				}
				opens := 0
				res, err := m.TrainThroughput(func() (formats.Reader, error) { opens++; return m.Open(src) }, 0, steps)
				if err != nil {
					t.Fatal(err)
				}
				if opens < 3 {
					t.Errorf("%d passes opened for %d steps of 2 a pass", opens, steps)
				}
				ref := build(newBE())
				b, err := formats.NewBatch(&s, B, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Free()
				for i := 0; i < steps; {
					r, err := ref.Open(src)
					if err != nil {
						t.Fatal(err)
					}
					for i < steps {
						n, err := r.Read(b)
						if n == B {
							if err := ref.TrainStep(b); err != nil {
								t.Fatal(err)
							}
							i++
						}
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
					}
					r.Close()
				}
				want, err := ref.Loss()
				if err != nil {
					t.Fatal(err)
				}
				tol := 0.0
				if name == "gpu" {
					tol = 1e-5
				}
				if math.Abs(res.LossLast-want) > tol*math.Abs(want) {
					t.Errorf("loss %v after %d steps across passes, %v trained batch by batch", res.LossLast, steps, want)
				}
			})
		}
	}
}
