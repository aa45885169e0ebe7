// Package metrics holds the trainer's evaluation metrics as host-side math:
// exact AUC (SPEC §8), AverageLoss and HitRate. Backends call AUC on their
// downloaded (or, on the CPU, shared) prediction buffers; the accumulators
// gather per-batch results across an evaluation.
package metrics

import (
	"math"
	"slices"
)

// AUC is the exact ROC AUC of scores against labels (SPEC §8): labels are
// weights (a sample with label y counts y as a positive and 1−y as a
// negative), and pairs with equal scores count ½ (Mann–Whitney). The result
// is Σ_{i,j} y_i(1−y_j)·([s_i>s_j] + ½[s_i=s_j]) / (Σy·Σ(1−y)), over all
// ordered pairs including i = j; NaN when either total weight is 0 or a
// score is NaN (NaN has no rank). Scores are sorted once (O(n log n));
// sums are float64.
func AUC[T float32 | float64](scores, labels []T) float64 {
	n := min(len(scores), len(labels))
	if FirstNaN(scores[:n]) >= 0 {
		return math.NaN()
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		sa, sb := scores[a], scores[b]
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return 0
	})
	var negBelow, area, totPos, totNeg float64
	for g := 0; g < n; {
		h := g
		var pos, neg float64
		for ; h < n && scores[idx[h]] == scores[idx[g]]; h++ {
			y := float64(labels[idx[h]])
			pos += y
			neg += 1 - y
		}
		area += pos * (negBelow + 0.5*neg)
		negBelow += neg
		totPos += pos
		totNeg += neg
		g = h
	}
	if totPos == 0 || totNeg == 0 {
		return math.NaN()
	}
	return area / (totPos * totNeg)
}

// FirstNaN is the index of the first NaN of x, or −1.
func FirstNaN[T float32 | float64](x []T) int {
	for i, v := range x {
		if v != v {
			return i
		}
	}
	return -1
}

// AUCAccumulator gathers scores and labels over an evaluation (AUC needs
// all of them). Add copies; the caller's slices may be reused.
type AUCAccumulator struct {
	scores, labels []float32
}

// Add appends one batch.
func (a *AUCAccumulator) Add(scores, labels []float32) {
	n := min(len(scores), len(labels))
	a.scores = append(a.scores, scores[:n]...)
	a.labels = append(a.labels, labels[:n]...)
}

// Value is the AUC of everything added.
func (a *AUCAccumulator) Value() float64 { return AUC(a.scores, a.labels) }

// Data returns everything added (valid until the next Add or Reset).
func (a *AUCAccumulator) Data() (scores, labels []float32) { return a.scores, a.labels }

// Reset forgets everything, keeping capacity.
func (a *AUCAccumulator) Reset() { a.scores, a.labels = a.scores[:0], a.labels[:0] }

// AverageLoss is the sample-weighted mean of per-batch mean losses.
type AverageLoss struct {
	sum float64
	n   int64
}

// Add records a batch of n samples whose mean loss is loss.
func (a *AverageLoss) Add(loss float64, n int) {
	a.sum += loss * float64(n)
	a.n += int64(n)
}

// Value is the mean loss per sample (NaN before any Add).
func (a *AverageLoss) Value() float64 {
	if a.n == 0 {
		return math.NaN()
	}
	return a.sum / float64(a.n)
}

// Reset forgets everything.
func (a *AverageLoss) Reset() { *a = AverageLoss{} }

// HitRateThreshold is the score above which HugeCTR's HitRate checks a
// sample (metrics.cu, collect_hits).
const HitRateThreshold = 0.8

// HitRate is HugeCTR's HitRate: among samples scored above 0.8, the fraction
// whose label is exactly 1.
type HitRate struct {
	checked, hits int64
}

// Add records a batch.
func (h *HitRate) Add(scores, labels []float32) {
	for i, s := range scores[:min(len(scores), len(labels))] {
		if s > HitRateThreshold {
			h.checked++
			if labels[i] == 1 {
				h.hits++
			}
		}
	}
}

// Value is hits/checked (NaN when nothing was checked).
func (h *HitRate) Value() float64 {
	if h.checked == 0 {
		return math.NaN()
	}
	return float64(h.hits) / float64(h.checked)
}

// Reset forgets everything.
func (h *HitRate) Reset() { *h = HitRate{} }
