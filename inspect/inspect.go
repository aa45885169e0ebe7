package inspect

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/ctrkit/ctrkit/formats"
)

// Options configure a Collector. The zero value is useful.
type Options struct {
	// ExactKeys bounds the keys counted exactly per slot (default
	// DefaultExactKeys); beyond it the distinct count is estimated.
	ExactKeys int
	// RMin is the first rank of the power-law fit (default 3).
	RMin int64
	// SlotSizes are the slot vocabulary sizes (the support M of the fit);
	// nil or 0 entries: the number of distinct keys seen.
	SlotSizes []int64
	// LabelBins is the number of label histogram bins on [0, 1] (default 20).
	LabelBins int
}

// DefaultExactKeys is the default of Options.ExactKeys: 2^20 keys per slot
// (about 40 MB of map per slot).
const DefaultExactKeys = 1 << 20

// maxNNZBin is the largest nnz with its own histogram bin; larger nnz
// values are counted in the last bin.
const maxNNZBin = 64

// rankPoints is how many (rank, count) points per slot a Report keeps for
// plotting, log-spaced.
const rankPoints = 400

// Validate reports options that cannot work.
func (o *Options) Validate() error {
	if o.ExactKeys < 0 || o.RMin < 0 || o.LabelBins < 0 {
		return errors.New("negative ExactKeys, RMin or LabelBins")
	}
	for i, n := range o.SlotSizes {
		if n < 0 {
			return fmt.Errorf("slot size %d of slot %d is negative", n, i)
		}
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.ExactKeys == 0 {
		o.ExactKeys = DefaultExactKeys
	}
	if o.RMin == 0 {
		o.RMin = 3
	}
	if o.LabelBins == 0 {
		o.LabelBins = 20
	}
	return o
}

// Report is what inspect learns about a dataset.
type Report struct {
	Samples int64        `json:"samples"`
	Labels  []ValueStats `json:"labels"`
	Dense   []ValueStats `json:"dense"`
	Slots   []SlotStats  `json:"slots"`
	// LabelHist counts the values of label column 0 in LabelBins equal bins
	// of [0, 1]; values outside [0, 1] (or NaN) are in LabelOutside.
	LabelHist    []int64 `json:"label_histogram"`
	LabelOutside int64   `json:"label_outside_0_1"`
	// NNZHist counts (sample, slot) pairs by nnz over all slots; the last
	// bin holds nnz ≥ len−1.
	NNZHist []int64 `json:"nnz_histogram"`
}

// ValueStats summarises one label or dense column. NaN and ±Inf values are
// counted in NonFinite and left out of Min, Mean and Max.
type ValueStats struct {
	Min       float64 `json:"min"`
	Mean      float64 `json:"mean"`
	Max       float64 `json:"max"`
	NonFinite int64   `json:"non_finite,omitempty"`
	sum       float64
	n         int64
}

// SlotStats summarises one slot.
type SlotStats struct {
	Name string `json:"name"`
	// Size is the slot size given in Options.SlotSizes (0: unknown).
	Size int64 `json:"size,omitempty"`
	// Keys is the number of key occurrences.
	Keys int64 `json:"keys"`
	// Distinct is the number of distinct keys: exact when Exact, else a
	// HyperLogLog estimate.
	Distinct int64 `json:"distinct"`
	Exact    bool  `json:"distinct_exact"`
	// MinKey and MaxKey are the key range seen (0, -1 without keys).
	MinKey int64 `json:"min_key"`
	MaxKey int64 `json:"max_key"`
	// NNZHist counts samples by nnz (last bin: nnz ≥ len−1); NNZMin and
	// NNZMax are the extremes.
	NNZHist []int64 `json:"nnz_histogram"`
	NNZMin  int64   `json:"nnz_min"`
	NNZMax  int64   `json:"nnz_max"`
	// Alpha is the fitted power-law exponent, nil when the slot has too few
	// distinct keys; Fit says on which ranks.
	Alpha *float64 `json:"alpha"`
	Fit   Fit      `json:"fit"`
	// RankFreq holds up to 400 log-spaced (rank, count) points of the
	// rank–frequency, for plots.
	RankFreq []RankCount `json:"-"`
}

// RankCount is one point of a rank–frequency curve.
type RankCount struct {
	Rank  int64
	Count int64
}

// slotAcc accumulates one slot.
type slotAcc struct {
	counts   map[int64]int64
	full     bool
	sketch   *hll
	keys     int64
	min, max int64
	nnz      []int64
	nnzMin   int64
	nnzMax   int64
}

// Collector accumulates statistics batch by batch. It is not safe for
// concurrent use.
type Collector struct {
	o      Options
	schema *formats.Schema
	r      Report
	slots  []slotAcc
}

// NewCollector returns a collector for batches of schema s.
func NewCollector(s *formats.Schema, o Options) (*Collector, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(o.SlotSizes) > 0 && len(o.SlotSizes) != len(s.Slots) {
		return nil, fmt.Errorf("%d slot sizes for %d slots", len(o.SlotSizes), len(s.Slots))
	}
	o = o.withDefaults()
	c := &Collector{o: o, schema: s}
	c.r.Labels = newValueStats(s.LabelDim)
	c.r.Dense = newValueStats(s.DenseDim)
	c.r.LabelHist = make([]int64, o.LabelBins)
	c.r.NNZHist = make([]int64, maxNNZBin+1)
	c.slots = make([]slotAcc, len(s.Slots))
	for i := range c.slots {
		c.slots[i] = slotAcc{counts: map[int64]int64{}, min: math.MaxInt64, max: math.MinInt64, nnz: make([]int64, maxNNZBin+1), nnzMin: math.MaxInt64, nnzMax: -1}
	}
	return c, nil
}

func newValueStats(n int) []ValueStats {
	v := make([]ValueStats, n)
	for i := range v {
		v[i].Min, v[i].Max = math.Inf(1), math.Inf(-1)
	}
	return v
}

func (v *ValueStats) add(x float32) {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		v.NonFinite++
		return
	}
	v.n++
	v.sum += f
	v.Min = min(v.Min, f)
	v.Max = max(v.Max, f)
}

// Add accumulates the samples of b.
func (c *Collector) Add(b *formats.Batch) {
	s := c.schema
	ld, dd, S := s.LabelDim, s.DenseDim, len(s.Slots)
	c.r.Samples += int64(b.N)
	for i := 0; i < b.N; i++ {
		for j := 0; j < ld; j++ {
			c.r.Labels[j].add(b.Labels[i*ld+j])
		}
		if ld > 0 {
			x := float64(b.Labels[i*ld])
			if x >= 0 && x <= 1 {
				bin := min(int(x*float64(len(c.r.LabelHist))), len(c.r.LabelHist)-1)
				c.r.LabelHist[bin]++
			} else {
				c.r.LabelOutside++
			}
		}
		for j := 0; j < dd; j++ {
			c.r.Dense[j].add(b.Dense[i*dd+j])
		}
	}
	for si := 0; si < S; si++ {
		a := &c.slots[si]
		for i := 0; i < b.N; i++ {
			lo, hi := b.Row(i, si)
			n := int64(hi - lo)
			c.r.NNZHist[min(n, maxNNZBin)]++
			a.nnz[min(n, maxNNZBin)]++
			a.nnzMin = min(a.nnzMin, n)
			a.nnzMax = max(a.nnzMax, n)
			a.keys += n
			for j := lo; j < hi; j++ {
				a.add(b.Key(j), c.o.ExactKeys)
			}
		}
	}
}

func (a *slotAcc) add(k int64, limit int) {
	a.min = min(a.min, k)
	a.max = max(a.max, k)
	if a.full {
		a.sketch.add(k)
		if _, ok := a.counts[k]; ok {
			a.counts[k]++
		}
		return
	}
	a.counts[k]++
	if len(a.counts) > limit {
		// The last key pushed the map over its limit: drop it from the
		// exact counts and switch to the sketch.
		delete(a.counts, k)
		a.full = true
		a.sketch = &hll{}
		for key := range a.counts {
			a.sketch.add(key)
		}
		a.sketch.add(k)
	}
}

// Report finishes the statistics (fitting α per slot) and returns them.
func (c *Collector) Report() *Report {
	r := c.r
	r.Labels = finishValues(r.Labels)
	r.Dense = finishValues(r.Dense)
	r.Slots = make([]SlotStats, len(c.slots))
	for si := range c.slots {
		a := &c.slots[si]
		st := SlotStats{Name: c.schema.Slots[si].Name, Keys: a.keys, NNZHist: a.nnz, NNZMin: a.nnzMin, NNZMax: a.nnzMax, MinKey: a.min, MaxKey: a.max, Exact: !a.full}
		if len(c.o.SlotSizes) > 0 {
			st.Size = c.o.SlotSizes[si]
		}
		if a.keys == 0 {
			st.MinKey, st.MaxKey = 0, -1
		}
		if r.Samples == 0 {
			st.NNZMin = 0
		}
		counts := make([]int64, 0, len(a.counts))
		for _, n := range a.counts {
			counts = append(counts, n)
		}
		st.Distinct = int64(len(counts))
		var fit Fit
		var ok bool
		if a.full {
			st.Distinct = int64(math.Round(a.sketch.estimate()))
			n := int64(len(counts))
			fit, ok = FitRankFrequency(counts, c.o.RMin, n, n)
		} else {
			m := st.Size
			if m < int64(len(counts)) {
				m = int64(len(counts))
			}
			fit, ok = FitRankFrequency(counts, c.o.RMin, 0, m)
		}
		st.Fit = fit
		if ok {
			al := fit.Alpha
			st.Alpha = &al
		}
		st.RankFreq = rankSample(counts) // sorted by the fit
		r.Slots[si] = st
	}
	return &r
}

func finishValues(v []ValueStats) []ValueStats {
	out := slices.Clone(v)
	for i := range out {
		if out[i].n > 0 {
			out[i].Mean = out[i].sum / float64(out[i].n)
		} else {
			out[i].Min, out[i].Max = 0, 0
		}
	}
	return out
}

// rankSample picks log-spaced points of a descending count list.
func rankSample(sorted []int64) []RankCount {
	var out []RankCount
	last := int64(0)
	n := int64(len(sorted))
	for i := 0; i < rankPoints && n > 0; i++ {
		r := int64(math.Round(math.Pow(float64(n), float64(i)/float64(rankPoints-1))))
		if r <= last || r > n || sorted[r-1] == 0 {
			continue
		}
		out = append(out, RankCount{Rank: r, Count: sorted[r-1]})
		last = r
	}
	return out
}

// Scan reads r to its end into a Collector and returns the report.
// progress, when not nil, is called after each batch with its size.
func Scan(r formats.Reader, batchSize int, o Options, progress func(samples int)) (*Report, error) {
	if batchSize <= 0 {
		batchSize = formats.DefaultBatchSize
	}
	s := r.Schema()
	c, err := NewCollector(s, o)
	if err != nil {
		return nil, err
	}
	b, err := formats.NewBatch(s, batchSize, nil)
	if err != nil {
		return nil, err
	}
	defer b.Free()
	for {
		n, err := r.Read(b)
		if n > 0 {
			c.Add(b)
			if progress != nil {
				progress(n)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return c.Report(), nil
}
