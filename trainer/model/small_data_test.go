package model

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
)

// TestFitDataSmallerThanBatch: max_iter mode refuses a dataset smaller than
// one batch, naming its samples, the batch and --batchsize; epoch mode trains
// the short batch and says so; an empty dataset is an error in both.
func TestFitDataSmallerThanBatch(t *testing.T) {
	data := newPlanted(1, 200, 4, smallSlots)
	open := func(n int) func() (formats.Reader, error) {
		d := data
		if n != 200 {
			d = newPlanted(1, n, 4, smallSlots)
		}
		return func() (formats.Reader, error) { return d.reader(256), nil }
	}
	m := smallModel(t, "wdl", 256)
	_, err := m.Fit(context.Background(), FitOptions{OpenTrain: open(200), MaxIter: 10})
	if err == nil {
		t.Fatal("max_iter mode with 200 samples and batch 256 succeeded")
	}
	for _, want := range []string{"200 samples", "batch of 256", "--batchsize 200"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ctrkit/") {
		t.Errorf("error %q has a package prefix", err)
	}
	var log bytes.Buffer
	m = smallModel(t, "wdl", 256)
	res, err := m.Fit(context.Background(), FitOptions{OpenTrain: open(200), NumEpochs: 2, Log: &log})
	if err != nil || res.Iters != 2 {
		t.Fatalf("epoch mode: %d iterations, %v", res.Iters, err)
	}
	if !strings.Contains(log.String(), "note: the training data holds 200 samples, less than one batch of 256") ||
		strings.Count(log.String(), "note:") != 1 {
		t.Errorf("epoch mode log lacks one note:\n%s", log.String())
	}
	for _, o := range []FitOptions{{OpenTrain: open(0), MaxIter: 10}, {OpenTrain: open(0), NumEpochs: 1}} {
		m = smallModel(t, "wdl", 256)
		if _, err := m.Fit(context.Background(), o); err == nil || !strings.Contains(err.Error(), "no samples") {
			t.Errorf("empty data: %v", err)
		}
	}
}

// TestTrainSummary: Train's last line, with plurals.
func TestTrainSummary(t *testing.T) {
	one := trainSummary(FitResult{Iters: 1, Samples: 1, EpochSamples: []int64{1}, LastAUC: math.NaN()}, 1500*time.Millisecond)
	if one != "trained 1 iteration (1 sample, 1 epoch) in 1.5 s, to iteration 1" {
		t.Errorf("summary %q", one)
	}
	two := trainSummary(FitResult{Iters: 12, First: 10, Samples: 512, LastAUC: 0.75, Stopped: true}, time.Second)
	if two != "trained 2 iterations (512 samples) in 1.0 s, to iteration 12; last eval AUC 0.750000 (the AUC threshold was reached)" {
		t.Errorf("summary %q", two)
	}
}
