package model

import (
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Fused InnerProducts (on a backend with tensor.FusedDense, the GPU's
// cuBLASLt epilogues; the CPU builds the graph as written).
//
// An InnerProduct whose output only a ReLU layer reads takes the ReLU
// itself (y = ReLU(x·W + b) in one GEMM epilogue) and the ReLU layer
// becomes a pass-through of the same blob. An InnerProduct whose input is
// the output of a ReLU InnerProduct that nothing else reads is chained to it
// (layers.InnerProduct.ChainReLU): its dx GEMM applies the producer's ReLU
// gradient from the mask the producer's forward wrote, and computes the
// producer's bias gradient. HugeCTR's graphs give every tensor one reader
// (Slice layers for fan-out), so the reference MLPs (InnerProduct → ReLU →
// InnerProduct …) fuse end to end; FusedInnerProduct chains (Head, Body,
// Tail) chain the same way.

// fusion plans and records the fusions of one Build.
type fusion struct {
	uses   map[string]int                        // readers of each tensor
	folds  map[int]int                           // InnerProduct layer → the ReLU layer it takes
	folded map[int]bool                          // ReLU layers taken by the InnerProduct before
	reluIP map[*layers.Blob]*layers.InnerProduct // output blob → its ReLU InnerProduct
}

// newFusion plans g's fusions on be; nil when be does not fuse.
func newFusion(g *graph.Graph, info *graph.Info, be tensor.Backend) *fusion {
	if layers.FusedDense(be) == nil {
		return nil
	}
	f := &fusion{uses: map[string]int{}, folds: map[int]int{}, folded: map[int]bool{}, reluIP: map[*layers.Blob]*layers.InnerProduct{}}
	reader := map[string]int{}
	for j, gl := range g.Layers {
		for _, b := range gl.Bottom {
			f.uses[b]++
			reader[b] = j
		}
	}
	for i, gl := range g.Layers {
		if gl.Type != graph.InnerProduct || len(gl.Bottom) != 1 || len(gl.Top) != 1 || len(info.Layers[i].In[0].Dims) == 2 {
			continue // 3-D InnerProducts are row-wise wrappers
		}
		t := gl.Top[0]
		if f.uses[t] != 1 {
			continue
		}
		j := reader[t]
		if r := g.Layers[j]; j > i && r.Type == graph.ReLU && len(r.Bottom) == 1 && len(r.Top) == 1 {
			f.folds[i], f.folded[j] = j, true
		}
	}
	return f
}

// build builds layer i when the fusion changes it: a folded ReLU becomes a
// pass-through of its input. It returns nil for the other layers.
func (f *fusion) build(i int, gl graph.DenseLayer, blobs map[string]*layers.Blob) layers.Layer {
	if f == nil || !f.folded[i] {
		return nil
	}
	return layers.Folded(blobs[gl.Bottom[0]])
}

// built finishes layer i: an InnerProduct that folds its ReLU takes it, and
// an InnerProduct reading (alone) a ReLU InnerProduct's output chains to it.
func (f *fusion) built(i int, gl graph.DenseLayer, l layers.Layer, blobs map[string]*layers.Blob) {
	if f == nil {
		return
	}
	if u, ok := l.(interface{ Unwrap() layers.Layer }); ok {
		l = u.Unwrap()
	}
	ip, ok := l.(*layers.InnerProduct)
	if !ok {
		return
	}
	if _, ok := f.folds[i]; ok {
		ip.Act = tensor.ReLU
	}
	if x := blobs[gl.Bottom[0]]; f.uses[gl.Bottom[0]] == 1 && f.reluIP[x] != nil {
		ip.ChainReLU(f.reluIP[x])
	}
	if ip.Act == tensor.ReLU {
		f.reluIP[ip.Outputs()[0]] = ip
	}
}

// joinGrads makes the device wait for the weight gradients computed on the
// backend's side stream (a no-op without one; also when the fused kernels
// were turned off since, so nothing issued before stays unjoined).
func (m *Model) joinGrads() {
	if f, ok := m.be.(tensor.FusedDense); ok {
		f.JoinGrads()
	}
}
