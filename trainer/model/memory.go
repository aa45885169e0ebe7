package model

import (
	"fmt"
	"math"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
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
// per row for hash tables.
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
		if e.Type != graph.LocalizedOneHot {
			b += rows * 16 // key → row index
		}
		n.embeddings += b
		if b > big {
			big = b
			n.largest = fmt.Sprintf("embedding %d (%s: %d rows of %d)", i, e.Top, info.Embeddings[i].Rows, e.VecSize)
		}
	}
	return n
}

// checkHostMemory refuses a model whose host allocations exceed what the
// process may use, before anything is allocated (the kernel would kill
// the process without a word). On a GPU backend the tables live on the
// device and are not counted.
func checkHostMemory(g *graph.Graph, info *graph.Info, opt *graph.Optimizer, be tensor.Backend) error {
	limit, what := MemoryLimit()
	if limit <= 0 {
		return nil
	}
	if _, onGPU := be.(*gpu.Backend); onGPU {
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
