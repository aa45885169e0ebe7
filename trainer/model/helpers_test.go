package model

import (
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/metrics"
)

// planted is an in-memory dataset with labels from a hidden logistic model
// over one-hot keys (global, slot offsets applied) and dense values.
type planted struct {
	schema formats.Schema
	labels []float32
	dense  []float32
	keys   [][]int64 // per sample, one key per slot
	auc    float64   // Bayes AUC: true probabilities vs drawn labels
}

func newPlanted(seed uint64, n, denseDim int, sizes []int64) *planted {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := rand.New(rand.NewPCG(42, 7)) // the hidden model is the same for every seed
	var total int64
	off := make([]int64, len(sizes))
	for s, v := range sizes {
		off[s] = total
		total += v
	}
	kw := make([]float64, total)
	for i := range kw {
		kw[i] = 1.2 * w.NormFloat64()
	}
	dw := make([]float64, denseDim)
	for i := range dw {
		dw[i] = w.NormFloat64()
	}
	nnz := make([]int, len(sizes))
	for i := range nnz {
		nnz[i] = 1
	}
	p := &planted{schema: formats.NewSchema(1, denseDim, nnz, sizes, formats.KeyI64)}
	probs := make([]float32, n)
	for i := range n {
		logit := -1.0
		ks := make([]int64, len(sizes))
		for s, v := range sizes {
			// a mild power law: small keys are hot
			k := int64(float64(v) * math.Pow(rng.Float64(), 2))
			ks[s] = off[s] + k
			logit += kw[ks[s]] / math.Sqrt(float64(len(sizes)))
		}
		for j := range denseDim {
			x := rng.Float64()
			p.dense = append(p.dense, float32(x))
			logit += dw[j] * (x - 0.5) * 2
		}
		pr := 1 / (1 + math.Exp(-logit))
		probs[i] = float32(pr)
		y := float32(0)
		if rng.Float64() < pr {
			y = 1
		}
		p.labels = append(p.labels, y)
		p.keys = append(p.keys, ks)
	}
	p.auc = metrics.AUC(probs, p.labels)
	return p
}

// twoLabels returns p with the labels [y, 1−y] (label dim 2).
func (p *planted) twoLabels() *planted {
	q := *p
	q.labels = nil
	for _, y := range p.labels {
		q.labels = append(q.labels, y, 1-y)
	}
	s := p.schema
	nnz := make([]int, s.NumSlots())
	for i := range nnz {
		nnz[i] = 1
	}
	q.schema = formats.NewSchema(2, s.DenseDim, nnz, s.SlotSizes(), s.KeyType)
	return &q
}

// reader serves the dataset in order, in batches of batch samples.
func (p *planted) reader(batch int) formats.Reader { return &memReader{p: p, batch: batch} }

type memReader struct {
	p     *planted
	batch int
	pos   int
}

func (r *memReader) Schema() *formats.Schema { return &r.p.schema }
func (r *memReader) Close() error            { return nil }

func (r *memReader) Read(b *formats.Batch) (int, error) {
	b.SetLen(0)
	D, L := r.p.schema.DenseDim, r.p.schema.LabelDim
	for b.N < r.batch && b.N < b.Cap() && r.pos < len(r.p.keys) {
		i := r.pos
		keys := make([][]int64, len(r.p.keys[i]))
		for s, k := range r.p.keys[i] {
			keys[s] = []int64{k}
		}
		if err := b.AppendSample(r.p.labels[i*L:i*L+L], r.p.dense[i*D:i*D+D], keys); err != nil {
			return b.N, err
		}
		r.pos++
	}
	if r.pos >= len(r.p.keys) {
		return b.N, io.EOF
	}
	return b.N, nil
}

// plantedLosses trains m for steps steps of batch samples of data and
// returns the loss after each.
func plantedLosses(t *testing.T, m *Model, data *planted, batch, steps int) []float64 {
	t.Helper()
	r := data.reader(batch)
	b, err := formats.NewBatch(r.Schema(), batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	var losses []float64
	for i := 0; i < steps; i++ {
		if n, err := r.Read(b); n != batch {
			t.Fatalf("read %d: %v", n, err)
		}
		if err := m.TrainStep(b); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		l, err := m.Loss()
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	return losses
}
