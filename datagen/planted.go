package datagen

import (
	"math"
	"slices"
)

// Planted-model constants (see the package doc).
const (
	// KeyLogitStd is the standard deviation of the keys' total contribution
	// to the planted logit: slot s's key weights have σ_s =
	// KeyLogitStd/√(Σ_j nnz_j).
	KeyLogitStd = 1.6
	// DenseLogitStd is the standard deviation of the dense values' total
	// contribution: each dense column's weight has σ = DenseLogitStd/√D and
	// multiplies its value standardized to unit variance.
	DenseLogitStd = 0.6
	// TargetCTR is the mean label the planted bias is calibrated to.
	TargetCTR = 0.25
	// maxAUCSamples bounds the eval samples the planted AUC is computed on
	// (8 bytes each): the first maxAUCSamples in file order.
	maxAUCSamples = 1 << 25
	// calibrationSamples are drawn to fit the bias.
	calibrationSamples = 1 << 13
)

// model is the hidden logistic model of the planted label mode:
//
//	logit = bias + Σ_slots Σ_keys w(slot, key) + Σ_j v_j·z_j
//	P(y=1) = 1/(1+e^−logit)
//
// w(slot, key) = σ_slot·N(seed, slot, key), where N is an approximately
// standard normal number (Irwin–Hall sum of four uniforms, scaled) derived by
// hashing (model seed, slot, slot-local key): no table, so memory does not
// grow with the slot sizes. z_j is dense value j standardized to mean ≈ 0 and
// unit variance (see denseFeature). The bias is fitted so the mean of P over
// calibration samples is TargetCTR.
type model struct {
	seed   uint64
	sigma  []float64 // per slot
	weight []float64 // per dense column
	bias   float64
}

func newModel(p *Params, seed uint64) *model {
	m := &model{seed: seed, sigma: make([]float64, p.NumSlot), weight: make([]float64, p.DenseDim)}
	total := 0
	for s := 0; s < p.NumSlot; s++ {
		total += p.NNZ(s)
	}
	for s := range m.sigma {
		m.sigma[s] = KeyLogitStd / math.Sqrt(float64(total))
	}
	for j := range m.weight {
		m.weight[j] = DenseLogitStd / math.Sqrt(float64(p.DenseDim)) * normalHash(mix64(seed^0xd1b54a32d192ed03)+uint64(j)*0x9e3779b97f4a7c15)
	}
	return m
}

// keyWeight returns w(slot, key) for a slot-local key.
func (m *model) keyWeight(slot int, key int64) float64 {
	return m.sigma[slot] * normalHash(m.seed^uint64(slot)*0xbf58476d1ce4e5b9^uint64(key)*0x94d049bb133111eb)
}

// normalHash maps a 64-bit value to an approximately standard normal number:
// the four 16-bit lanes of mix64(h) summed (Irwin–Hall, n = 4: mean 2, var
// 1/3 in units of 65536), centred and scaled to unit variance.
func normalHash(h uint64) float64 {
	h = mix64(h)
	s := (h & 0xffff) + (h >> 16 & 0xffff) + (h >> 32 & 0xffff) + (h >> 48)
	return (float64(int64(s))/65536 - 2) * math.Sqrt(3)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// fitBias sets the bias so the mean probability over the logits (without
// bias) is TargetCTR, by bisection.
func (m *model) fitBias(logits []float64) {
	lo, hi := -30.0, 30.0
	for it := 0; it < 40; it++ { // 60/2^40: far below float32 resolution
		mid := (lo + hi) / 2
		var sum float64
		for _, l := range logits {
			sum += sigmoid(l + mid)
		}
		if sum/float64(len(logits)) < TargetCTR {
			lo = mid
		} else {
			hi = mid
		}
	}
	m.bias = (lo + hi) / 2
}

// mix64 is SplitMix64's finalizer.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// aucPacked computes the AUC of entries packed as float32bits(p)<<1 | label,
// p ≥ 0 (so the bits order like the values). It sorts v in place.
func aucPacked(v []uint64) float64 {
	slices.Sort(v)
	var neg, pos, sum float64
	for i := 0; i < len(v); {
		j := i
		var gp, gn float64
		for ; j < len(v) && v[j]>>1 == v[i]>>1; j++ {
			if v[j]&1 == 1 {
				gp++
			} else {
				gn++
			}
		}
		sum += gp * (neg + gn/2)
		neg += gn
		pos += gp
		i = j
	}
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	return sum / (pos * neg)
}
