// Package inspect summarises a CTR dataset in one streaming pass: sample
// counts, the label mean and histogram, per-dense-column min/mean/max, and
// per slot the distinct keys, key range, nnz histogram and the exponent α
// of a power law fitted to the slot's rank–frequency (the `ctrkit inspect`
// command).
//
// # Distinct keys and memory
//
// Each slot counts its keys exactly in a map of at most Options.ExactKeys
// entries. When a slot meets more distinct keys than that, the map stops
// growing (keys already in it keep being counted; they include the hot keys,
// which appear early) and a HyperLogLog sketch (2^14 registers, about 0.8 %
// standard error) estimates the distinct count instead; SlotStats.Exact says
// which. Memory is therefore bounded by ExactKeys entries per slot.
//
// # Power-law fit
//
// Keys are ranked by count (rank 1 = most frequent key, whatever its id, so
// real data whose ids are not ordered by frequency fits as well as
// generated data), and p(r) ∝ r^−α is fitted by maximum likelihood on the
// ranks [RMin, M] (see FitRankFrequency): M is the slot's size when known
// (Options.SlotSizes; unseen keys count 0), else the number of distinct keys
// seen. The first ranks are left out by default (RMin = 3): the head of a
// real slot is often an outlier (a "missing" bucket), and HugeCTR's
// generator rounds a continuous power law so that key 1 gets only half a
// bucket and swaps places with key 2. When a slot's map overflowed, the fit
// uses the exactly counted head only, conditionally on r ≤ its size.
package inspect
