package gpu

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// shardCSR draws samples × slots bags of 0–3 keys (random int64 keys, some
// negative, never reserved) and returns keys and offsets.
func shardCSR(h *harness, samples, slots int) ([]int64, []int64) {
	off := []int64{0}
	var keys []int64
	for b := 0; b < samples*slots; b++ {
		for k := h.rng.IntN(4); k > 0; k-- {
			var key int64
			switch h.rng.IntN(3) {
			case 0:
				key = int64(h.rng.IntN(50)) - 25
			case 1:
				key = int64(h.rng.Uint64())
			default:
				key = math.MinInt64 + 2 + int64(h.rng.IntN(5))
			}
			keys = append(keys, key)
		}
		off = append(off, int64(len(keys)))
	}
	return keys, off
}

func TestShardMaskKeys(t *testing.T) {
	h := newHarness(t)
	const samples, slots = 300, 7
	keys, off := shardCSR(h, samples, slots)
	n := len(keys)
	o := h.Ints(tensor.Int32, off, len(off))
	for _, world := range []int{1, 2, 3, 8} {
		for rank := range world {
			for _, bySlot := range []bool{false, true} {
				k := h.Ints(tensor.Int64, keys, n)
				d := h.Out(tensor.Int64, n)
				h.g.MaskKeys(d.G, k.G, o.G, slots, rank, world, bySlot)
				h.c.MaskKeys(d.C, k.C, o.C, slots, rank, world, bySlot)
				h.Check(fmt.Sprintf("world %d rank %d bySlot %v", world, rank, bySlot), d, 0)
				// In place.
				h.g.MaskKeys(k.G, k.G, o.G, slots, rank, world, bySlot)
				h.c.MaskKeys(k.C, k.C, o.C, slots, rank, world, bySlot)
				h.Check(fmt.Sprintf("world %d rank %d bySlot %v in place", world, rank, bySlot), k, 0)
				h.Free(k, d)
			}
		}
	}
	// Reserved keys are ErrRange on both.
	for _, bad := range []int64{tensor.EmptyKey, tensor.SkipKey} {
		for _, bySlot := range []bool{false, true} {
			bk := append([]int64(nil), keys...)
			bk[n/2] = bad
			k := h.Ints(tensor.Int64, bk, n)
			d := h.Out(tensor.Int64, n)
			h.g.MaskKeys(d.G, k.G, o.G, slots, 1, 2, bySlot)
			h.c.MaskKeys(d.C, k.C, o.C, slots, 1, 2, bySlot)
			if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) {
				t.Errorf("gpu key %d bySlot %v: %v", bad, bySlot, err)
			}
			if err := h.c.Err(); !errors.Is(err, tensor.ErrRange) {
				t.Errorf("cpu key %d bySlot %v: %v", bad, bySlot, err)
			}
			h.g.Reset()
			h.c.Reset()
			h.Free(k, d)
		}
	}
	h.Free(o)
}

func TestShardHashLookup(t *testing.T) {
	h := newHarness(t)
	const maxRows = 40000
	gt, ct := tensor.NewHashTable(h.g, maxRows), tensor.NewHashTable(h.c, maxRows)
	gt.Sharded, ct.Sharded = true, true
	count, rowKeys := pair{gt.Count, ct.Count}, pair{gt.RowKeys, ct.RowKeys}
	var pool []int64
	for i, s := range []struct {
		n      int
		old    float64
		insert bool
	}{{1000, 0, true}, {5000, 0.7, true}, {3000, 0.9, false}, {70000, 0.8, true}} {
		keys := embKeys(h, s.n, &pool, s.old)
		for j := range keys {
			if h.rng.IntN(3) == 0 {
				keys[j] = tensor.SkipKey
			}
		}
		k := h.Ints(tensor.Int64, keys, s.n)
		r := h.Out(tensor.Int32, s.n)
		h.g.HashLookup(gt, k.G, r.G, s.insert)
		h.c.HashLookup(ct, k.C, r.C, s.insert)
		h.Check(fmt.Sprintf("step %d rows", i), r, 0)
		h.Check(fmt.Sprintf("step %d count", i), count, 0)
		h.Check(fmt.Sprintf("step %d row keys", i), rowKeys, 0)
		h.Free(k, r)
	}
	// An unsharded table refuses SkipKey on both.
	gu, cu := tensor.NewHashTable(h.g, 10), tensor.NewHashTable(h.c, 10)
	k := h.Ints(tensor.Int64, []int64{5, tensor.SkipKey}, 2)
	r := h.Out(tensor.Int32, 2)
	h.g.HashLookup(gu, k.G, r.G, true)
	h.c.HashLookup(cu, k.C, r.C, true)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("gpu unsharded SkipKey: %v", err)
	}
	if err := h.c.Err(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("cpu unsharded SkipKey: %v", err)
	}
	h.g.Reset()
	h.c.Reset()
	h.Free(k, r)
}

// TestShardInitHashRows: the GPU's initial rows are bit-identical to the
// CPU's float32 ones, for a uniform bound and for per-slot bounds, and rows
// inserted before first (loaded rows) keep their values.
func TestShardInitHashRows(t *testing.T) {
	h := newHarness(t)
	const maxRows, slots = 30000, 5
	for _, v := range []int{1, 6, 16, 33} {
		for _, perSlot := range []bool{false, true} {
			name := fmt.Sprintf("v %d perSlot %v", v, perSlot)
			gt, ct := tensor.NewHashTable(h.g, maxRows), tensor.NewHashTable(h.c, maxRows)
			gtab, ctab := h.g.Alloc(tensor.Float32, maxRows, v), h.c.Alloc(tensor.Float32, maxRows, v)
			h.g.Fill(gtab, 3)
			h.c.Fill(ctab, 3)
			grs, crs := h.g.Alloc(tensor.Int32, maxRows), h.c.Alloc(tensor.Int32, maxRows)
			h.g.Fill(grs, -1)
			h.c.Fill(crs, -1)
			var gsb, csb tensor.Tensor
			if perSlot {
				b := []float32{0.5, 0.01, 1, 0.25, 0.0625}
				gsb, csb = h.g.Alloc(tensor.Float32, slots), h.c.Alloc(tensor.Float32, slots)
				h.g.Upload(gsb, b)
				h.c.Upload(csb, b)
			}
			gf, cf := h.g.Alloc(tensor.Int32, 1), h.c.Alloc(tensor.Int32, 1)
			// Loaded rows: inserted without InitHashRows, they keep 3.
			loaded, _ := shardCSR(h, 100, slots)
			lk := h.Ints(tensor.Int64, loaded, len(loaded))
			lr := h.Out(tensor.Int32, len(loaded))
			h.g.HashLookup(gt, lk.G, lr.G, true)
			h.c.HashLookup(ct, lk.C, lr.C, true)
			h.Free(lk, lr)
			for step := range 3 {
				keys, off := shardCSR(h, 400*(step+1), slots)
				k := h.Ints(tensor.Int64, keys, len(keys))
				o := h.Ints(tensor.Int32, off, len(off))
				r := h.Out(tensor.Int32, len(keys))
				h.g.Copy(gf, gt.Count)
				h.c.Copy(cf, ct.Count)
				h.g.HashLookup(gt, k.G, r.G, true)
				h.c.HashLookup(ct, k.C, r.C, true)
				h.g.RecordSlots(grs, r.G, o.G, slots)
				h.c.RecordSlots(crs, r.C, o.C, slots)
				h.g.InitHashRows(gtab, gt, gf, 0x1234567890abcdef, 0.05, grs, gsb)
				h.c.InitHashRows(ctab, ct, cf, 0x1234567890abcdef, 0.05, crs, csb)
				h.Check(name+" rows", r, 0)
				h.Free(k, o, r)
			}
			h.Sync()
			g := make([]float32, maxRows*v)
			if err := h.g.Download(g, gtab); err != nil {
				t.Fatal(err)
			}
			c := cpu.Data[float32](ctab)
			for i := range g {
				if math.Float32bits(g[i]) != math.Float32bits(c[i]) {
					t.Fatalf("%s: element %d (row %d): gpu %v (%#x), cpu %v (%#x)", name, i, i/v, g[i],
						math.Float32bits(g[i]), c[i], math.Float32bits(c[i]))
				}
			}
			for _, x := range []tensor.Tensor{gtab, grs, gf, gsb, gt.Keys, gt.Rows, gt.Count, gt.RowKeys} {
				h.g.Free(x)
			}
		}
	}
}

func TestShardSlotRows(t *testing.T) {
	h := newHarness(t)
	const samples = 200
	sizes := []int64{5, 1, 40, 7}
	// Rank 1 of 2: slots 1 and 3, local offsets 0 and 1.
	so := []int64{-1, 0, -1, 1}
	var keys, off []int64
	off = append(off, 0)
	for b := 0; b < samples*len(sizes); b++ {
		for k := h.rng.IntN(3); k > 0; k-- {
			keys = append(keys, int64(h.rng.IntN(int(sizes[b%len(sizes)]))))
		}
		off = append(off, int64(len(keys)))
	}
	k := h.Ints(tensor.Int64, keys, len(keys))
	o := h.Ints(tensor.Int32, off, len(off))
	sot := h.Ints(tensor.Int64, so, len(so))
	sst := h.Ints(tensor.Int64, sizes, len(sizes))
	r := h.Out(tensor.Int32, len(keys))
	h.g.SlotRows(r.G, k.G, o.G, sot.G, sst.G)
	h.c.SlotRows(r.C, k.C, o.C, sot.C, sst.C)
	h.Check("rows", r, 0)
	// A foreign slot's key out of its range is still ErrRange.
	bad := append([]int64(nil), keys...)
	for j := range bad {
		if b := bagOf(off, j); b%len(sizes) == 2 {
			bad[j] = 40
			break
		}
	}
	kb := h.Ints(tensor.Int64, bad, len(bad))
	h.g.SlotRows(r.G, kb.G, o.G, sot.G, sst.G)
	h.c.SlotRows(r.C, kb.C, o.C, sot.C, sst.C)
	if err := h.g.Sync(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("gpu foreign slot key out of range: %v", err)
	}
	if err := h.c.Err(); !errors.Is(err, tensor.ErrRange) {
		t.Errorf("cpu foreign slot key out of range: %v", err)
	}
	h.g.Reset()
	h.c.Reset()
	h.Free(k, o, sot, sst, r, kb)
}

func bagOf(off []int64, j int) int {
	for b := 0; b+1 < len(off); b++ {
		if int64(j) < off[b+1] {
			return b
		}
	}
	return -1
}

// TestShardEmbeddingLayer runs the sharded SparseEmbedding layer (rank 1
// of 2, every kind) on the GPU and on the CPU in float32 for three training
// Forwards: the masked lookups give the same rows, the tables (initial rows
// from InitHashRows or the one-hot upload) are bit-identical, and the
// partial outputs agree.
func TestShardEmbeddingLayer(t *testing.T) {
	h := newHarness(t)
	sizes := []int64{50, 9, 300, 12, 7}
	const batch, vec = 64, 8
	for _, kind := range []layers.EmbeddingKind{layers.DistributedHash, layers.LocalizedHash, layers.LocalizedOneHot} {
		cfg := layers.EmbeddingConfig{Kind: kind, VecSize: vec, Slots: len(sizes), Combiner: tensor.Mean, WorkspaceMB: 0.5,
			MaxNNZ: batch * len(sizes) * 3, Shard: layers.Shard{Rank: 1, World: 2}}
		if kind != layers.DistributedHash {
			cfg.SlotSizes = sizes
		}
		mk := func(be tensor.Backend) (*layers.Ctx, *layers.SparseInput, *layers.SparseEmbedding) {
			c := layers.NewCtx(be, tensor.Float32, 11)
			c.Shard = cfg.Shard
			in := &layers.SparseInput{Keys: be.Alloc(tensor.Int64, cfg.MaxNNZ), Offsets: be.Alloc(tensor.Int32, batch*len(sizes)+1)}
			l, err := layers.NewSparseEmbedding(c, cfg, in, batch)
			if err != nil {
				t.Fatal(err)
			}
			return c, in, l
		}
		_, gin, gl := mk(h.g)
		_, cin, cl := mk(h.c)
		for step := range 3 {
			var keys, off []int64
			off = append(off, 0)
			for b := 0; b < batch*len(sizes); b++ {
				for k := h.rng.IntN(4); k > 0; k-- {
					key := h.rng.Int64N(sizes[b%len(sizes)])
					if kind != layers.LocalizedOneHot {
						key = key*7919 - 1000
					}
					keys = append(keys, key)
				}
				off = append(off, int64(len(keys)))
			}
			o32 := make([]int32, len(off))
			for i, x := range off {
				o32[i] = int32(x)
			}
			for _, x := range []struct {
				be tensor.Backend
				in *layers.SparseInput
				l  *layers.SparseEmbedding
			}{{h.g, gin, gl}, {h.c, cin, cl}} {
				x.in.NNZ = len(keys)
				x.be.Upload(x.in.Keys.Prefix(len(keys)), keys)
				x.be.Upload(x.in.Offsets, o32)
				x.l.Forward(layers.Pass{Training: true})
			}
			h.Sync()
			name := fmt.Sprintf("kind %d step %d", kind, step)
			gt, ct := make([]float32, gl.Table.Len()), cpu.Data[float32](cl.Table)
			if err := h.g.Download(gt, gl.Table); err != nil {
				t.Fatal(err)
			}
			for i := range gt {
				if math.Float32bits(gt[i]) != math.Float32bits(ct[i]) {
					t.Fatalf("%s: table element %d: gpu %v, cpu %v", name, i, gt[i], ct[i])
				}
			}
			g, c := gl.Outputs()[0].Value, cl.Outputs()[0].Value
			go32 := make([]float32, g.Len())
			if err := h.g.Download(go32, g); err != nil {
				t.Fatal(err)
			}
			gv, cv := make([]float64, len(go32)), make([]float64, len(go32))
			for i := range go32 {
				gv[i], cv[i] = float64(go32[i]), float64(cpu.Data[float32](c)[i])
			}
			if e := RelErr(gv, cv); !(e <= tolFP32) {
				t.Fatalf("%s: output relative error %.3g", name, e)
			}
		}
	}
}
