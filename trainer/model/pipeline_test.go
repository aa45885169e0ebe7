package model

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestPipelineOnePerRun: the training and evaluation pipelines are built
// once per Fit and re-armed for each pass: the pinned batches and staging
// slots of a 4-epoch run (an evaluation each epoch) are those of a 1-epoch
// run, and the losses are those of synchronous loads on the CPU.
func TestPipelineOnePerRun(t *testing.T) {
	train := newPlanted(1, 1000, 4, smallSlots) // the last batch of each epoch short
	eval := newPlanted(2, 300, 4, smallSlots)
	fit := func(t *testing.T, m *Model, epochs int) FitResult {
		t.Helper()
		res, err := m.Fit(context.Background(), FitOptions{
			OpenTrain: func() (formats.Reader, error) { return train.reader(64), nil },
			OpenEval:  func() (formats.Reader, error) { return eval.reader(64), nil },
			NumEpochs: epochs,
			Display:   1,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var allocs, stagings [2]int64
	for i, epochs := range []int{1, 4} {
		be := newStagingBackend(t)
		fit(t, cacheModel(t, be, "dlrm", 64), epochs)
		allocs[i], stagings[i] = be.allocs.Load(), be.stagings.Load()
	}
	if allocs[0] != allocs[1] || stagings[0] != stagings[1] || stagings[0] != 2 {
		t.Errorf("pinned allocations %v, stagings %v for 1 and 4 epochs (want equal; 2 stagings: training and evaluation)", allocs, stagings)
	}
	staged := fit(t, cacheModel(t, newStagingBackend(t), "dlrm", 64), 3)
	plain := fit(t, cacheModel(t, cpuBackend(t), "dlrm", 64), 3)
	if len(staged.History) != len(plain.History) || len(plain.History) < 3*16 {
		t.Fatalf("%d and %d points", len(staged.History), len(plain.History))
	}
	for i, p := range plain.History {
		q := staged.History[i]
		if (p.Loss == nil) != (q.Loss == nil) || p.Loss != nil && *p.Loss != *q.Loss ||
			(p.EvalAUC == nil) != (q.EvalAUC == nil) || p.EvalAUC != nil && *p.EvalAUC != *q.EvalAUC {
			t.Fatalf("point %d: staged %+v, synchronous %+v", i, q, p)
		}
	}
}

// TestThroughputRearms: TrainThroughput reopens its data at each end and
// keeps one pipeline.
func TestThroughputRearms(t *testing.T) {
	data := newPlanted(1, 200, 4, smallSlots) // 3 full batches a pass
	var allocs, stagings, opens [2]int64
	for i, steps := range []int{1, 10} {
		be := newStagingBackend(t)
		m := cacheModel(t, be, "dlrm", 64)
		open := func() (formats.Reader, error) { opens[i]++; return data.reader(64), nil }
		res, err := m.TrainThroughput(open, 1, steps)
		if err != nil {
			t.Fatal(err)
		}
		// Steps 1–3 are the first pass, then a pass every 3 steps.
		if w := res.Wait; w == nil || w.Turns != (steps-1)/3 || w.MaxMs < w.MeanMs || w.Long > steps {
			t.Errorf("%d steps: the training goroutine's waits %+v, want %d pass turns", steps, res.Wait, (steps-1)/3)
		}
		allocs[i], stagings[i] = be.allocs.Load(), be.stagings.Load()
	}
	if opens[1] < 4 || stagings != [2]int64{1, 1} || allocs[0] != allocs[1] {
		t.Errorf("%v opens, %v stagings, %v pinned allocations for 1 and 10 steps", opens, stagings, allocs)
	}
}

// TestShortBatchesUnstaged: where training takes full batches only
// (TrainThroughput's steps, Fit in max_iter mode), the short batch that
// ends each pass is not staged (DropShort); Fit in epoch mode trains it,
// staged. The losses of max_iter mode are those of synchronous loads.
func TestShortBatchesUnstaged(t *testing.T) {
	data := newPlanted(1, 200, 4, smallSlots) // 3 full batches of 64 a pass, then 8 samples
	open := func() (formats.Reader, error) { return data.reader(64), nil }
	be := newStagingBackend(t)
	if _, err := cacheModel(t, be, "dlrm", 64).TrainThroughput(open, 1, 10); err != nil {
		t.Fatal(err)
	}
	if n := be.short.Load(); n != 0 {
		t.Errorf("TrainThroughput staged %d short batches", n)
	}
	for _, tc := range []struct {
		epochs, iters int
		short         bool
	}{{0, 13, false}, {3, 0, true}} {
		var hist [2][]float64
		sb := newStagingBackend(t)
		for i, b := range []tensor.Backend{sb, cpuBackend(t)} {
			res, err := cacheModel(t, b, "dlrm", 64).Fit(context.Background(), FitOptions{OpenTrain: open, NumEpochs: tc.epochs, MaxIter: tc.iters, Display: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range res.History {
				if p.Loss != nil {
					hist[i] = append(hist[i], *p.Loss)
				}
			}
		}
		if n := sb.short.Load(); (n > 0) != tc.short {
			t.Errorf("epochs %d, max_iter %d: %d short batches staged", tc.epochs, tc.iters, n)
		}
		if !slices.Equal(hist[0], hist[1]) || len(hist[0]) == 0 {
			t.Errorf("epochs %d, max_iter %d: staged losses %v, synchronous %v", tc.epochs, tc.iters, hist[0], hist[1])
		}
	}
}

// failingReader fails after its first batch.
type failingReader struct {
	formats.Reader
	n int
}

var errDisk = errors.New("disk on fire")

func (r *failingReader) Read(b *formats.Batch) (int, error) {
	if r.n++; r.n > 1 {
		b.SetLen(0)
		return 0, errDisk
	}
	return r.Reader.Read(b)
}

// TestPipelineReaderError: a reader error of a later pass (after a rearm)
// ends Fit with that error, on both load paths.
func TestPipelineReaderError(t *testing.T) {
	data := newPlanted(1, 100, 4, smallSlots)
	for _, staged := range []bool{false, true} {
		m := cacheModel(t, cpuBackend(t), "dlrm", 64)
		if staged {
			m = cacheModel(t, newStagingBackend(t), "dlrm", 64)
		}
		pass := 0
		_, err := m.Fit(context.Background(), FitOptions{
			OpenTrain: func() (formats.Reader, error) {
				pass++
				if pass == 3 {
					return &failingReader{Reader: data.reader(64)}, nil
				}
				return data.reader(64), nil
			},
			NumEpochs: 5,
		})
		if !errors.Is(err, errDisk) {
			t.Errorf("staged %v: %v", staged, err)
		}
	}
}

// TestStageErrorReleases: a batch whose Stage fails ends the run with that
// error; nothing commits (frees) a staging slot the failed Stage did not
// hand out. Before the fix the prefetcher kept the batch's key counts with
// the error, so Release committed slot 0 a second time: two batches could
// share a slot, and with the slots' channel full the run hung.
func TestStageErrorReleases(t *testing.T) {
	data := newPlanted(1, 1000, 4, smallSlots)
	for _, failAt := range []int64{1, 3} {
		be := newStagingBackend(t)
		be.failAt = failAt
		m := cacheModel(t, be, "dlrm", 64)
		_, err := m.Fit(context.Background(), FitOptions{
			OpenTrain: func() (formats.Reader, error) { return data.reader(64), nil },
			NumEpochs: 1,
		})
		if err == nil || !strings.Contains(err.Error(), "test staging: stage") {
			t.Errorf("stage %d fails: Fit returned %v, want the staging error", failAt, err)
		}
		if n := be.badCommits.Load(); n != 0 {
			t.Errorf("stage %d fails: %d commits of a slot not handed out", failAt, n)
		}
	}
}
