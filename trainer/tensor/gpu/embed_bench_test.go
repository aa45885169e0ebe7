package gpu

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The embedding benchmarks time one op a call on the shapes of the
// reference models at batch 65536 (keys drawn from `ctrkit gen`'s power law,
// α 1.2), each call ending in a Sync, so ns/op is the device time plus one
// round trip. SetBytes is the op's memory traffic counted once per byte a
// kernel must move (docs/PERFORMANCE.md, the eighth session's table), so
// MB/s reads against the H200's ≈ 4 TB/s. Run on the GPU machine:
//
//	gpu.test -test.run '^$' -test.bench 'Embedding' -test.benchtime 20x

type embBenchShape struct {
	name   string
	nnz    []int // keys a sample per slot
	size   int64 // rows a slot
	v      int
	kind   tensor.OptKind
	sample int
}

var embBenchShapes = []embBenchShape{
	// DCNv2 (MLPerf): 26 multi-hot slots capped at 2 M rows, 214 ids a sample, AdaGrad.
	{"dcnv2", []int{3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1}, 2000000, 128, tensor.AdaGrad, 65536},
	// DLRM: 26 one-hot slots of 10⁶ rows, SGD.
	{"dlrm", embBenchOneHot, 1000000, 128, tensor.SGD, 65536},
	// DLRM at HugeCTR's default batch (launch-bound: ns/op is mostly launches).
	{"dlrm-2048", embBenchOneHot, 1000000, 128, tensor.SGD, 2048},
}

var embBenchOneHot = []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}

// embBenchData is one shape's batch and table on the device, built once.
type embBenchData struct {
	keys, rows, off, slotOff, slotSize tensor.Tensor
	table, s1, out, dOut               tensor.Tensor
	uniqRows, uniqGrad, numUniq        tensor.Tensor
	outH, dOutH                        map[tensor.DType]tensor.Tensor // half pooled outputs and gradients
	nnz, bags, uniq, tableRows, v      int
}

var (
	embBenchMu    sync.Mutex
	embBenchCache = map[string]*embBenchData{}
)

func embBenchSetup(b *testing.B, be *Backend, sh embBenchShape) *embBenchData {
	embBenchMu.Lock()
	defer embBenchMu.Unlock()
	if d, ok := embBenchCache[sh.name]; ok {
		return d
	}
	ns := len(sh.nnz)
	rng := rand.New(rand.NewPCG(1, 2))
	var keys []int64
	off := make([]int32, 0, sh.sample*ns+1)
	off = append(off, 0)
	seen := map[int64]struct{}{}
	for range sh.sample {
		for s, n := range sh.nnz {
			for range n {
				k := datagen.PowerLawKey(0, sh.size-1, 1.2, rng.Float64())
				keys = append(keys, k)
				seen[int64(s)*sh.size+k] = struct{}{}
			}
			off = append(off, int32(len(keys)))
		}
	}
	so, ss := make([]int64, ns), make([]int64, ns)
	for s := range ns {
		so[s], ss[s] = int64(s)*sh.size, sh.size
	}
	d := &embBenchData{nnz: len(keys), bags: sh.sample * ns, uniq: len(seen), tableRows: ns * int(sh.size), v: sh.v}
	d.keys = be.Alloc(tensor.Int64, d.nnz)
	be.Upload(d.keys, keys)
	d.off = be.Alloc(tensor.Int32, len(off))
	be.Upload(d.off, off)
	d.slotOff, d.slotSize = be.Alloc(tensor.Int64, ns), be.Alloc(tensor.Int64, ns)
	be.Upload(d.slotOff, so)
	be.Upload(d.slotSize, ss)
	d.rows = be.Alloc(tensor.Int32, d.nnz)
	d.table = be.Alloc(tensor.Float32, d.tableRows, sh.v)
	if sh.kind != tensor.SGD {
		d.s1 = be.Alloc(tensor.Float32, d.tableRows*sh.v)
	}
	d.out = be.Alloc(tensor.Float32, d.bags, sh.v)
	d.dOut = be.Alloc(tensor.Float32, d.bags, sh.v)
	be.Fill(d.dOut, 0.001)
	d.outH, d.dOutH = map[tensor.DType]tensor.Tensor{}, map[tensor.DType]tensor.Tensor{}
	for _, dt := range embHalfDTypes {
		d.outH[dt], d.dOutH[dt] = be.Alloc(dt, d.bags, sh.v), be.Alloc(dt, d.bags, sh.v)
		be.Fill(d.dOutH[dt], 0.001)
	}
	d.uniqRows = be.Alloc(tensor.Int32, d.nnz)
	d.uniqGrad = be.Alloc(tensor.Float32, d.nnz, sh.v)
	d.numUniq = be.Alloc(tensor.Int32, 1)
	be.SlotRows(d.rows, d.keys, d.off, d.slotOff, d.slotSize)
	be.EmbeddingBagGrad(d.uniqRows, d.uniqGrad, d.numUniq, d.dOut, d.rows, d.off, tensor.Sum)
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	embBenchCache[sh.name] = d
	return d
}

func BenchmarkEmbedding(b *testing.B) {
	for _, sh := range embBenchShapes {
		row := int64(4 * sh.v)
		b.Run(sh.name+"/slot_rows", func(b *testing.B) {
			be := gpuBackend(b)
			d := embBenchSetup(b, be, sh)
			b.SetBytes(int64(d.nnz)*(8+4) + int64(d.bags+1)*4)
			for range b.N {
				be.SlotRows(d.rows, d.keys, d.off, d.slotOff, d.slotSize)
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sh.name+"/fwd", func(b *testing.B) {
			be := gpuBackend(b)
			d := embBenchSetup(b, be, sh)
			// rows + offsets + each distinct row once from HBM + the output.
			b.SetBytes(int64(d.nnz)*4 + int64(d.bags+1)*4 + int64(d.uniq)*row + int64(d.bags)*row)
			for range b.N {
				be.EmbeddingBag(d.out, d.table, d.rows, d.off, tensor.Sum)
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sh.name+"/bwd", func(b *testing.B) {
			be := gpuBackend(b)
			d := embBenchSetup(b, be, sh)
			// pairs (prep + 4 sort passes of read 12 B, write 8 B) + dOut once
			// + the unique gradients.
			b.SetBytes(int64(d.nnz)*(8+4*20) + int64(d.bags)*row + int64(d.uniq)*row)
			for range b.N {
				be.EmbeddingBagGrad(d.uniqRows, d.uniqGrad, d.numUniq, d.dOut, d.rows, d.off, tensor.Sum)
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(d.uniq), "uniq")
		})
		// The same with a half pooled output / gradient (the table and
		// uniqGrad stay float32).
		for _, dt := range embHalfDTypes {
			half := int64(2 * sh.v)
			b.Run(sh.name+"/fwd_"+dt.String(), func(b *testing.B) {
				be := gpuBackend(b)
				d := embBenchSetup(b, be, sh)
				b.SetBytes(int64(d.nnz)*4 + int64(d.bags+1)*4 + int64(d.uniq)*row + int64(d.bags)*half)
				for range b.N {
					be.EmbeddingBag(d.outH[dt], d.table, d.rows, d.off, tensor.Sum)
					if err := be.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(sh.name+"/bwd_"+dt.String(), func(b *testing.B) {
				be := gpuBackend(b)
				d := embBenchSetup(b, be, sh)
				b.SetBytes(int64(d.nnz)*(8+4*20) + int64(d.bags)*half + int64(d.uniq)*row)
				for range b.N {
					be.EmbeddingBagGrad(d.uniqRows, d.uniqGrad, d.numUniq, d.dOutH[dt], d.rows, d.off, tensor.Sum)
					if err := be.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(sh.name+"/update", func(b *testing.B) {
			be := gpuBackend(b)
			d := embBenchSetup(b, be, sh)
			// AdaGrad: g, w, s1 read, w, s1 written; SGD: g, w read, w written.
			per := int64(3)
			if sh.kind != tensor.SGD {
				per = 5
			}
			b.SetBytes(int64(d.uniq) * row * per)
			p := tensor.OptParams{Kind: sh.kind, Update: tensor.Local, LR: 0.004, Step: 1, Epsilon: 1e-8}
			for range b.N {
				be.SparseUpdate(p, d.table, d.s1, tensor.Tensor{}, tensor.Tensor{}, d.uniqRows, d.uniqGrad, d.numUniq)
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
