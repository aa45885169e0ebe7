package datagen

import (
	"bytes"
	"context"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/metrics"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
)

func boolsToFloat(y []bool) []float64 {
	out := make([]float64, len(y))
	for i, v := range y {
		if v {
			out[i] = 1
		}
	}
	return out
}

// TestAUC checks the packed AUC the generator reports against the trainer's
// metric (SPEC §8) on hand-computed cases.
func TestAUC(t *testing.T) {
	cases := []struct {
		s    []float64
		y    []bool
		want float64
	}{
		{[]float64{0.1, 0.9}, []bool{false, true}, 1},
		{[]float64{0.9, 0.1}, []bool{false, true}, 0},
		{[]float64{0.5, 0.5}, []bool{false, true}, 0.5},
		{[]float64{0.1, 0.4, 0.35, 0.8}, []bool{false, false, true, true}, 0.75},
		{[]float64{0.2, 0.2, 0.3, 0.1}, []bool{true, false, true, false}, (1 + 0.5 + 1 + 1) / 4},
	}
	for _, c := range cases {
		if got := metrics.AUC(c.s, boolsToFloat(c.y)); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("AUC(%v, %v) = %v, want %v", c.s, c.y, got, c.want)
		}
		var packed []uint64
		for i, s := range c.s {
			v := uint64(math.Float32bits(float32(s))) << 1
			if c.y[i] {
				v |= 1
			}
			packed = append(packed, v)
		}
		if got := aucPacked(packed); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("aucPacked(%v, %v) = %v, want %v", c.s, c.y, got, c.want)
		}
	}
	if !math.IsNaN(aucPacked([]uint64{1, 3})) {
		t.Error("AUC of one class is not NaN")
	}
}

func TestNormalHash(t *testing.T) {
	var sum, sq float64
	const n = 200000
	for i := range n {
		z := normalHash(uint64(i))
		sum += z
		sq += z * z
	}
	mean, v := sum/n, sq/n-(sum/n)*(sum/n)
	if math.Abs(mean) > 0.01 || math.Abs(v-1) > 0.02 {
		t.Errorf("normalHash mean %.4f variance %.4f, want 0 and 1", mean, v)
	}
}

// lrModel is a logistic regression on exact one-hot key features (Norm keys
// are global, so one weight per key) and the dense values, trained by
// AdaGrad.
type lrModel struct {
	w, gw []float64 // per key
	d, gd []float64 // per dense column, then the bias
}

func readAll(t *testing.T, list string, s *formats.Schema) *formats.Batch {
	t.Helper()
	r, err := norm.OpenList(list, s, norm.Options{Check: norm.CheckSum})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	all, err := formats.NewBatch(s, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := formats.NewBatch(s, formats.DefaultBatchSize, nil)
	for {
		n, err := r.Read(b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := all.CopySample(b, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	return all
}

func (m *lrModel) logit(b *formats.Batch, i int) float64 {
	s := b.Schema
	z := m.d[s.DenseDim]
	for j, v := range b.Dense[i*s.DenseDim : (i+1)*s.DenseDim] {
		z += m.d[j] * float64(v)
	}
	lo, _ := b.Row(i, 0)
	_, hi := b.Row(i, len(s.Slots)-1)
	for k := lo; k < hi; k++ {
		z += m.w[b.Key(k)]
	}
	return z
}

func (m *lrModel) train(b *formats.Batch, epochs int, lr float64, rng *rand.Rand) {
	s := b.Schema
	order := rng.Perm(b.N)
	const l2 = 1e-6
	for range epochs {
		for _, i := range order {
			g := sigmoid(m.logit(b, i)) - float64(b.Labels[i*s.LabelDim])
			for j, v := range b.Dense[i*s.DenseDim : (i+1)*s.DenseDim] {
				gj := g * float64(v)
				m.gd[j] += gj * gj
				m.d[j] -= lr * gj / (math.Sqrt(m.gd[j]) + 1e-8)
			}
			m.gd[s.DenseDim] += g * g
			m.d[s.DenseDim] -= lr * g / (math.Sqrt(m.gd[s.DenseDim]) + 1e-8)
			lo, _ := b.Row(i, 0)
			_, hi := b.Row(i, len(s.Slots)-1)
			for k := lo; k < hi; k++ {
				key := b.Key(k)
				gk := g + l2*m.w[key]
				m.gw[key] += gk * gk
				m.w[key] -= lr * gk / (math.Sqrt(m.gw[key]) + 1e-8)
			}
		}
	}
}

// TestPlantedLearnable generates Norm data with planted labels, trains a
// logistic regression on the training files and checks its eval AUC comes
// within 0.02 of the planted (Bayes) AUC the generator reports.
func TestPlantedLearnable(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	dir := t.TempDir()
	p := DefaultParams()
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.Seed = 2026
	p.NumSlot = 26
	for i := range p.SlotSizeArray {
		p.SlotSizeArray[i] = 300
	}
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 10, 2, 40960
	res, err := Generate(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("planted AUC %.4f, CTR %.3f", res.PlantedAUC, res.CTR)
	s := p.Schema()
	train := readAll(t, p.Source, &s)
	eval := readAll(t, p.EvalSource, &s)
	var nkeys int64
	for _, n := range p.SlotSizeArray {
		nkeys += n
	}
	m := &lrModel{w: make([]float64, nkeys), gw: make([]float64, nkeys), d: make([]float64, p.DenseDim+1), gd: make([]float64, p.DenseDim+1)}
	m.train(train, 3, 0.05, rand.New(rand.NewPCG(1, 2)))
	scores := make([]float64, eval.N)
	labels := make([]bool, eval.N)
	for i := range scores {
		scores[i] = m.logit(eval, i)
		labels[i] = eval.Labels[i] == 1
	}
	got := metrics.AUC(scores, boolsToFloat(labels))
	t.Logf("logistic regression eval AUC %.4f", got)
	if math.Abs(got-res.PlantedAUC) > 0.02 {
		t.Errorf("LR eval AUC %.4f not within 0.02 of planted AUC %.4f", got, res.PlantedAUC)
	}
	if math.Abs(res.CTR-TargetCTR) > 0.03 {
		t.Errorf("CTR %.3f far from target %.2f", res.CTR, TargetCTR)
	}
}

// TestPlantedDefaultAUC checks the planted AUC of the default settings
// (on fewer files) is above 0.70.
func TestPlantedDefaultAUC(t *testing.T) {
	dir := t.TempDir()
	p := DefaultParams()
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.Seed = 7
	p.NumFiles, p.EvalNumFiles = 1, 4
	res, err := Generate(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("default settings: planted AUC %.4f, CTR %.3f", res.PlantedAUC, res.CTR)
	if !(res.PlantedAUC > 0.70) {
		t.Errorf("planted AUC %.4f ≤ 0.70", res.PlantedAUC)
	}
}

// TestPlantedPerLabel: with label_dim 2 each label column has a hidden
// model of its own: two planted AUCs are reported (Result, gen_params.json)
// and the columns are drawn from different probabilities.
func TestPlantedPerLabel(t *testing.T) {
	dir := t.TempDir()
	p := DefaultParams()
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.LabelDim, p.NumSlot, p.DenseDim = 2, 4, 3
	p.SlotSizeArray = []int64{50, 50, 50, 50}
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 1, 1, 8192
	res, err := Generate(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PlantedAUCs) != 2 || len(res.CTRs) != 2 || res.PlantedAUCs[0] != res.PlantedAUC {
		t.Fatalf("planted AUCs %v, CTRs %v (AUC %v)", res.PlantedAUCs, res.CTRs, res.PlantedAUC)
	}
	for j, a := range res.PlantedAUCs {
		if !(a > 0.7 && a < 0.99) || math.Abs(res.CTRs[j]-TargetCTR) > 0.03 {
			t.Errorf("label %d: planted AUC %.4f, CTR %.3f", j, a, res.CTRs[j])
		}
	}
	s := p.Schema()
	eval := readAll(t, p.EvalSource, &s)
	differ := 0
	for i := 0; i < eval.N; i++ {
		if eval.Labels[2*i] != eval.Labels[2*i+1] {
			differ++
		}
	}
	// Same P for both columns would differ in 2·P(1−P) ≈ 0.31 of the
	// samples at most; independent models differ in about 2·CTR(1−CTR)
	// plus the spread of P: compare against the same-model share.
	frac := float64(differ) / float64(eval.N)
	t.Logf("planted AUCs %v, CTRs %v, columns differ in %.3f", res.PlantedAUCs, res.CTRs, frac)
	if frac < 0.32 { // one model for both: 0.27
		t.Errorf("label columns differ in %.3f of the samples: not independent models", frac)
	}
	rec, err := os.ReadFile(ParamsPath(p))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(rec, []byte(`"planted_aucs"`)) {
		t.Errorf("gen_params.json has no planted_aucs:\n%s", rec)
	}
}
