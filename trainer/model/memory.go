package model

import (
	"fmt"
	"math"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// MemoryLimit returns the bytes this process may allocate and what bounds
// them ("physical memory", "cgroup limit", "RLIMIT_AS"), or 0 when unknown.
// Tests replace it.
var MemoryLimit = memoryLimit

// memoryNeed is what a model allocates on the host, by part.
type memoryNeed struct {
	embeddings float64 // tables with their optimizer states
	largest    string  // the largest embedding, for the message
}

// embeddingBytes is the host memory of the embedding tables: rows ×
// vec × 4 bytes × (1 + optimizer state copies), plus a key index entry
// and a row → key entry (HashTable.RowKeys) per row for hash tables.
func embeddingBytes(g *graph.Graph, info *graph.Info, opt *graph.Optimizer) memoryNeed {
	var n memoryNeed
	big := 0.0
	for i, e := range g.Embeddings {
		o := e.Optimizer
		if o == nil {
			o = opt
		}
		rows := float64(info.Embeddings[i].Rows)
		b := rows * float64(e.VecSize) * 4 * float64(1+o.StateCopies())
		if !e.OneHot() {
			b += rows * (16 + 8) // key → row index, row → key
		}
		n.embeddings += b
		if b > big {
			big = b
			n.largest = fmt.Sprintf("embedding %d (%s: %d rows of %d)", i, e.Top, info.Embeddings[i].Rows, e.VecSize)
		}
	}
	return n
}

// batchBytes is the host memory of the input batches (the reader's
// batches, the prefetcher's and the feeder's copies: about five of each
// value per sample) and of the activations with their gradients.
func batchBytes(g *graph.Graph, info *graph.Info, batch int) (input, act float64) {
	in := g.Input
	labels := 0
	for _, d := range in.LabelDims {
		labels += d
	}
	perSample := 4 * float64(labels+in.DenseDim)
	for _, s := range in.Sparse {
		perSample += 8*float64(s.MaxFeatures()) + 4*float64(s.SlotNum)
	}
	input = 5 * float64(batch) * perSample
	for _, sh := range info.Tensors {
		e := float64(sh.Rows)
		for _, d := range sh.Dims {
			e *= float64(d)
		}
		act += 2 * 4 * e * float64(batch)
	}
	return input, act
}

// maxBatchKeys bounds the keys of one batch of one sparse input (int32
// offsets index them).
const maxBatchKeys = math.MaxInt32

// checkHostMemory refuses a model whose host allocations exceed what the
// process may use, before anything is allocated (the kernel would kill
// the process without a word): the embedding tables, the dense parameters
// with their optimizer state, the activations and the input batches, each
// sized by counts of the model file (batchsize, dims, slot counts,
// max_feature_num_per_sample, vector sizes). On a GPU backend the tables,
// parameters and activations live on the device and are not counted.
func checkHostMemory(g *graph.Graph, info *graph.Info, opt *graph.Optimizer, be tensor.Backend, batch int) error {
	for _, s := range g.Input.Sparse {
		if k := float64(batch) * float64(s.MaxFeatures()); k > maxBatchKeys {
			return fmt.Errorf("sparse input %s: batchsize %d × %d keys per sample = %.0f keys in one batch, more than %d (%s of keys)",
				s.Top, batch, s.MaxFeatures(), k, maxBatchKeys, humanBytes(8*k))
		}
	}
	limit, what := MemoryLimit()
	if limit <= 0 {
		limit, what = 1<<50, "ctrkit's bound"
	}
	input, act := batchBytes(g, info, batch)
	_, onGPU := be.(tensor.DeviceMemory)
	if onGPU {
		act = 0
	}
	params := 4 * 4 * float64(info.DenseParams) // values, gradients, two optimizer states
	if onGPU {
		params = 4 * float64(info.DenseParams) // the host copy for saving
	}
	if input > float64(limit) || act > float64(limit) || params > float64(limit) || input+act+params > float64(limit) {
		return fmt.Errorf("batchsize %d: the model needs %s (input batches %s, activations and gradients %s, dense parameters and optimizer state %s), "+
			"more than the %s this process may use (%s): lower batchsize or the layer sizes", batch, humanBytes(input+act+params),
			humanBytes(input), humanBytes(act), humanBytes(params), humanBytes(float64(limit)), what)
	}
	if onGPU {
		return nil
	}
	n := embeddingBytes(g, info, opt)
	if n.embeddings > float64(limit) {
		return fmt.Errorf("the embedding tables need %s (largest: %s, with its optimizer state), more than the %s this process may use (%s): "+
			"lower workspace_size_per_gpu_in_mb or slot_size_array, or run on a machine with more memory", humanBytes(n.embeddings), n.largest, humanBytes(float64(limit)), what)
	}
	return nil
}

// humanBytes formats a byte count as B, KiB, MiB, GiB, TiB, PiB or EiB.
func humanBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	if math.IsInf(b, 0) || b > 1e6 {
		return fmt.Sprintf("%.3g %s", b, units[i])
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
