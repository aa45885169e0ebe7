package optim

import (
	"math/rand/v2"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// TestTrainsToyModel wires embedding → concat → MLP → BCE with Adam
// (LazyGlobal on the embedding, Global on dense weights) in float32 and
// checks that a learnable rule is learned: loss falls, AUC ends high.
func TestTrainsToyModel(t *testing.T) {
	be, _ := cpu.New(cpu.Options{})
	c := layers.NewCtx(be, tensor.Float32, 1)
	const batch, slots = 128, 2
	keys := &layers.SparseInput{Keys: be.Alloc(tensor.Int64, batch*slots), Offsets: be.Alloc(tensor.Int32, batch*slots+1), NNZ: batch * slots}
	emb, err := layers.NewSparseEmbedding(c, layers.EmbeddingConfig{Kind: layers.DistributedHash, VecSize: 4, Slots: slots,
		WorkspaceMB: 0.01, StateCopies: 3, MaxNNZ: batch * slots}, keys, batch)
	if err != nil {
		t.Fatal(err)
	}
	dense := c.Blob(batch, 1)
	dense.Grad = tensor.Tensor{}
	cat, _ := layers.NewConcat(c, emb.Outputs()[0], dense)
	fc1, _ := layers.NewInnerProduct(c, cat.Outputs()[0], 16, tensor.ReLU)
	fc2, _ := layers.NewInnerProduct(c, fc1.Outputs()[0], 1, tensor.Identity)
	label := &layers.Blob{Value: be.Alloc(tensor.Float32, batch, 1)}
	loss, _ := layers.NewLoss(c, layers.BinaryCrossEntropy, fc2.Outputs()[0], label, nil)
	net := []layers.Layer{emb, cat, fc1, fc2, loss}

	cfg := DefaultConfig(tensor.Adam)
	cfg.Update = tensor.LazyGlobal
	o, _ := New(be, cfg, Schedule{BaseLR: 0.01, WarmupSteps: 10, DecaySteps: 1})
	o.AddEmbedding(emb)
	o.AddDense(fc1.Params()...)
	o.AddDense(fc2.Params()...)

	r := rand.New(rand.NewPCG(3, 4))
	k := make([]int64, batch*slots)
	off := make([]int32, batch*slots+1)
	for i := range off {
		off[i] = int32(i)
	}
	be.Upload(keys.Offsets, off)
	d, y := make([]float32, batch), make([]float32, batch)
	lossVal := make([]float32, 1)
	var first, last float32
	for step := 1; step <= 300; step++ {
		for b := 0; b < batch; b++ {
			a, bb := r.Int64N(10), r.Int64N(10)
			k[2*b], k[2*b+1] = a, 100+bb
			d[b] = float32(r.NormFloat64())
			y[b] = 0
			if a+bb+int64(2*d[b]) > 9 {
				y[b] = 1
			}
		}
		be.Upload(keys.Keys, k)
		be.Upload(dense.Value, d)
		be.Upload(label.Value, y)
		p := layers.Pass{Training: true, Iter: uint64(step)}
		for _, l := range net {
			l.Forward(p)
		}
		for i := len(net) - 1; i >= 0; i-- {
			net[i].Backward(p)
		}
		o.Update()
		if err := be.Download(lossVal, loss.Outputs()[0].Value); err != nil {
			t.Fatal(err)
		}
		if step == 1 {
			first = lossVal[0]
		}
		last = lossVal[0]
	}
	auc, err := be.AUC(fc2.Outputs()[0].Value, label.Value)
	if err != nil {
		t.Fatal(err)
	}
	if last > first/3 || auc < 0.95 {
		t.Fatalf("did not learn: loss %v → %v, AUC %v", first, last, auc)
	}
	t.Logf("loss %.4f → %.4f, last-batch AUC %.4f", first, last, auc)
}
