package layers

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// shardBatch is a global batch of CSR keys: samples × slots bags of 0–3
// keys, slot s's keys in [0, sizes[s]) (OneHot) or spread over int64 with
// negative keys (hash kinds).
func shardBatch(r *rand.Rand, samples int, sizes []int64, oneHot bool) ([]int64, []int32) {
	off := []int32{0}
	var keys []int64
	for b := 0; b < samples*len(sizes); b++ {
		s := b % len(sizes)
		for k := r.IntN(4); k > 0; k-- {
			if oneHot {
				keys = append(keys, r.Int64N(sizes[s]))
			} else {
				keys = append(keys, r.Int64N(40)-20+int64(s)*1000)
			}
		}
		off = append(off, int32(len(keys)))
	}
	return keys, off
}

type shardRank struct {
	c  *Ctx
	in *SparseInput
	l  *SparseEmbedding
}

func newShardRank(t *testing.T, dt tensor.DType, cfg EmbeddingConfig, sh Shard, batch int) shardRank {
	t.Helper()
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCtx(be, dt, 77)
	c.Shard = sh
	cfg.Shard = sh
	in := &SparseInput{Keys: be.Alloc(tensor.Int64, cfg.MaxNNZ), Offsets: be.Alloc(tensor.Int32, batch*cfg.Slots+1)}
	l, err := NewSparseEmbedding(c, cfg, in, batch)
	if err != nil {
		t.Fatal(err)
	}
	return shardRank{c, in, l}
}

func floats(t tensor.Tensor) []float64 {
	if t.DType == tensor.Float32 {
		f := cpu.Data[float32](t)
		v := make([]float64, len(f))
		for i, x := range f {
			v[i] = float64(x)
		}
		return v
	}
	return cpu.Data[float64](t)
}

// rowsByID maps each used row of a rank's table to its identity (hash: the
// key; OneHot: the global row) and its values.
func rowsByID(l *SparseEmbedding) map[int64][]float64 {
	tab, v := floats(l.Table), l.Cfg.VecSize
	out := map[int64][]float64{}
	if l.Cfg.Kind == LocalizedOneHot {
		for r, g := range l.GlobalRows() {
			out[g] = tab[r*v : r*v+v]
		}
		return out
	}
	n := int(cpu.Data[int32](l.Hash.Count)[0])
	for r, k := range cpu.Data[int64](l.RowKeys())[:n] {
		out[k] = tab[r*v : r*v+v]
	}
	return out
}

// TestShardedEmbeddingMatchesOneRank: over 2, 3 and 4 ranks, every kind and
// combiner, the partial outputs of the ranks sum to the single-rank output,
// and after three SGD steps (each rank updating its rows from the whole
// output gradient) every row equals the single-rank table's row of the same
// key (or global row): initial rows do not depend on the rank count.
func TestShardedEmbeddingMatchesOneRank(t *testing.T) {
	sizes := []int64{5, 9, 3, 12, 7}
	const batch, vec = 16, 6
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-6
		}
		for _, kind := range []EmbeddingKind{DistributedHash, LocalizedHash, LocalizedOneHot} {
			for _, comb := range []tensor.Combiner{tensor.Sum, tensor.Mean} {
				for _, world := range []int{2, 3, 4} {
					name := fmt.Sprintf("%v kind %d combiner %d world %d", dt, kind, comb, world)
					cfg := EmbeddingConfig{Kind: kind, VecSize: vec, Slots: len(sizes), Combiner: comb, WorkspaceMB: 0.05,
						MaxNNZ: batch * len(sizes) * 3}
					if kind != DistributedHash {
						cfg.SlotSizes = sizes
					}
					one := newShardRank(t, dt, cfg, Shard{}, batch)
					ranks := make([]shardRank, world)
					for r := range ranks {
						ranks[r] = newShardRank(t, dt, cfg, Shard{Rank: r, World: world}, batch)
					}
					rng := rand.New(rand.NewPCG(uint64(world), uint64(kind)))
					for step := 1; step <= 3; step++ {
						keys, off := shardBatch(rng, batch, sizes, kind == LocalizedOneHot)
						grad := make([]float64, batch*len(sizes)*vec)
						for i := range grad {
							grad[i] = rng.NormFloat64()
						}
						all := append([]shardRank{one}, ranks...)
						for _, x := range all {
							x.in.NNZ = len(keys)
							x.c.BE.Upload(x.in.Keys.Prefix(len(keys)), keys)
							x.c.BE.Upload(x.in.Offsets, off)
							x.l.Forward(Pass{Training: true, Iter: uint64(step)})
						}
						want := floats(one.l.Outputs()[0].Value)
						sum := make([]float64, len(want))
						for _, x := range ranks {
							for i, v := range floats(x.l.Outputs()[0].Value) {
								sum[i] += v
							}
						}
						for i := range want {
							if math.Abs(sum[i]-want[i]) > tol*(1+math.Abs(want[i])) {
								t.Fatalf("%s step %d: output %d: ranks sum to %v, one rank %v", name, step, i, sum[i], want[i])
							}
						}
						for _, x := range all {
							g := x.l.Outputs()[0].Grad
							if dt == tensor.Float32 {
								f := make([]float32, len(grad))
								for i, v := range grad {
									f[i] = float32(v)
								}
								x.c.BE.Upload(g, f)
							} else {
								x.c.BE.Upload(g, grad)
							}
							x.l.Backward(Pass{Training: true})
							x.c.BE.SparseUpdate(tensor.OptParams{Kind: tensor.SGD, LR: 0.5, Step: int64(step)}, x.l.Table,
								tensor.Tensor{}, tensor.Tensor{}, tensor.Tensor{}, x.l.UniqRows, x.l.UniqGrad, x.l.NumUniq)
							if err := x.c.BE.Err(); err != nil {
								t.Fatalf("%s step %d: %v", name, step, err)
							}
						}
					}
					ref := rowsByID(one.l)
					seen := map[int64]int{}
					for r, x := range ranks {
						for id, row := range rowsByID(x.l) {
							seen[id]++
							w, ok := ref[id]
							if !ok {
								t.Fatalf("%s: rank %d holds %d, which one rank never inserted", name, r, id)
							}
							for j := range row {
								if math.Abs(row[j]-w[j]) > tol {
									t.Fatalf("%s: rank %d row of %d: %v, one rank %v", name, r, id, row, w)
								}
							}
						}
					}
					for id := range ref {
						if seen[id] != 1 {
							t.Fatalf("%s: %d held by %d ranks", name, id, seen[id])
						}
					}
					// LocalizedHash: the rows' slots agree with one rank's.
					if kind == LocalizedHash {
						slotOf := func(l *SparseEmbedding) map[int64]int32 {
							m := map[int64]int32{}
							n := int(cpu.Data[int32](l.Hash.Count)[0])
							for row, k := range cpu.Data[int64](l.RowKeys())[:n] {
								m[k] = cpu.Data[int32](l.RowSlots)[row]
							}
							return m
						}
						want := slotOf(one.l)
						for _, x := range ranks {
							for k, s := range slotOf(x.l) {
								if want[k] != s || !x.l.Cfg.Shard.OwnsSlot(int(s)) {
									t.Fatalf("%s: key %d slot %d on %v, one rank %d", name, k, s, x.l.Cfg.Shard, want[k])
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestShardedOneHotLayout: a rank holds the rows of its slots only, local
// rows in slot order, with the single-rank table's initial values.
func TestShardedOneHotLayout(t *testing.T) {
	sizes := []int64{3, 4, 2, 5, 1}
	cfg := EmbeddingConfig{Kind: LocalizedOneHot, VecSize: 3, Slots: 5, SlotSizes: sizes, MaxNNZ: 4}
	one := newShardRank(t, tensor.Float32, cfg, Shard{}, 1)
	r1 := newShardRank(t, tensor.Float32, cfg, Shard{Rank: 1, World: 2}, 1)
	// Rank 1 of 2: slots 1 and 3, global rows 3–6 and 9–13.
	want := []int64{3, 4, 5, 6, 9, 10, 11, 12, 13}
	if got := r1.l.GlobalRows(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("global rows %v, want %v", got, want)
	}
	if got := r1.l.OwnedSlots(); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("owned slots %v", got)
	}
	if r1.l.Table.Rows() != 9 || r1.l.LocalRow(9) != 4 || r1.l.LocalRow(2) != -1 || r1.l.LocalRow(14) != -1 {
		t.Fatalf("table %v, local rows of 9, 2, 14: %d %d %d", r1.l.Table, r1.l.LocalRow(9), r1.l.LocalRow(2), r1.l.LocalRow(14))
	}
	for g := int64(-2); g < 17; g++ {
		want := -1
		for r, x := range r1.l.GlobalRows() {
			if x == g {
				want = r
			}
		}
		if got := r1.l.LocalRow(g); got != want {
			t.Fatalf("LocalRow(%d) = %d, want %d", g, got, want)
		}
		if got := one.l.LocalRow(g); got != map[bool]int{true: int(g), false: -1}[g >= 0 && g < 15] {
			t.Fatalf("one rank: LocalRow(%d) = %d", g, got)
		}
	}
	ref, got := floats(one.l.Table), floats(r1.l.Table)
	for r, g := range want {
		for j := range 3 {
			if got[r*3+j] != ref[int(g)*3+j] {
				t.Fatalf("local row %d (global %d): %v, one rank %v", r, g, got[r*3:r*3+3], ref[g*3:g*3+3])
			}
			a := math.Sqrt(1 / float64(sizes[[]int{1, 1, 1, 1, 3, 3, 3, 3, 3}[r]]))
			if w := tensor.InitValue32(one.l.Seed, tensor.InitTagOneHot, g, j, a); float32(got[r*3+j]) != w {
				t.Fatalf("global row %d element %d: %v, InitValue32 %v", g, j, got[r*3+j], w)
			}
		}
	}
	// More ranks than slots: rank 5 of 6 holds nothing; its output is zero.
	r5 := newShardRank(t, tensor.Float32, cfg, Shard{Rank: 5, World: 6}, 1)
	if len(r5.l.GlobalRows()) != 0 || len(r5.l.OwnedSlots()) != 0 {
		t.Fatalf("rank 5 of 6: rows %v slots %v", r5.l.GlobalRows(), r5.l.OwnedSlots())
	}
	r5.in.NNZ = 2
	r5.c.BE.Upload(r5.in.Keys.Prefix(2), []int64{2, 0})
	r5.c.BE.Upload(r5.in.Offsets, []int32{0, 1, 1, 1, 2, 2})
	r5.l.Forward(Pass{Training: true})
	for _, v := range floats(r5.l.Outputs()[0].Value) {
		if v != 0 {
			t.Fatal("a rank without slots pooled something")
		}
	}
	if err := r5.c.BE.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestLoadedRowsKeepTheirValues: rows inserted outside a training Forward
// (a model file's load: HashLookup with insert, then the rows written) are
// never re-initialised by later Forwards; new keys are.
func TestLoadedRowsKeepTheirValues(t *testing.T) {
	cfg := EmbeddingConfig{Kind: LocalizedHash, VecSize: 4, Slots: 2, SlotSizes: []int64{10, 100}, WorkspaceMB: 0.01, MaxNNZ: 8}
	x := newShardRank(t, tensor.Float64, cfg, Shard{}, 2)
	be := x.c.BE
	loaded := be.Alloc(tensor.Int64, 2)
	be.Upload(loaded, []int64{5, 6})
	be.HashLookup(x.l.Hash, loaded, be.Alloc(tensor.Int32, 2), true)
	tab := cpu.Data[float64](x.l.Table)
	for i := 0; i < 8; i++ {
		tab[i] = 9
	}
	cpu.Data[int32](x.l.RowSlots)[0], cpu.Data[int32](x.l.RowSlots)[1] = 0, 1
	for it := range 2 {
		x.in.NNZ = 5
		be.Upload(x.in.Keys.Prefix(5), []int64{5, 7, 6, 8, int64(20 + it)})
		be.Upload(x.in.Offsets, []int32{0, 2, 3, 4, 5})
		x.l.Forward(Pass{Training: true})
		if err := be.Err(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 8; i++ {
			if tab[i] != 9 {
				t.Fatalf("iteration %d: loaded row %d changed to %v", it, i/4, tab[i:8])
			}
		}
	}
	rows := rowsByID(x.l)
	for _, k := range []int64{7, 8, 20, 21} {
		a := math.Sqrt(1 / 10.0) // 7 and 8 come in slot 0, 20 and 21 in slot 1
		if k >= 20 {
			a = math.Sqrt(1 / 100.0)
		}
		for j, v := range rows[k] {
			if want := tensor.InitValue64(x.l.Seed, tensor.InitTagHash, k, j, a); v != want {
				t.Fatalf("key %d element %d: %v, want %v", k, j, v, want)
			}
		}
	}
}

// TestShardedDropoutMatchesOneRank: the masks of W ranks, each over its
// local batch, concatenate to the single-rank mask of the global batch.
func TestShardedDropoutMatchesOneRank(t *testing.T) {
	const global, width = 24, 6
	run := func(sh Shard, rows int, iter uint64) []float64 {
		be, err := cpu.New(cpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := NewCtx(be, tensor.Float64, 5)
		c.Shard = sh
		in := c.Blob(rows, width)
		be.Fill(in.Value, 1)
		d, err := NewDropout(c, in, 0.4)
		if err != nil {
			t.Fatal(err)
		}
		d.Forward(Pass{Training: true, Iter: iter})
		be.Fill(d.out.Grad, 1)
		d.Backward(Pass{Training: true, Iter: iter})
		y := append([]float64(nil), f64(d.out.Value)...)
		for i, g := range f64(in.Grad) {
			if g != y[i] {
				t.Fatalf("%v: backward mask differs at %d", sh, i)
			}
		}
		return y
	}
	for _, iter := range []uint64{0, 1, 7} {
		want := run(Shard{}, global, iter)
		for _, world := range []int{2, 3, 4} {
			var got []float64
			for r := range world {
				got = append(got, run(Shard{Rank: r, World: world}, global/world, iter)...)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("iteration %d, %d ranks: masks differ", iter, world)
			}
		}
	}
	// 3 samples × 3 per rank is 9 elements: refused over several ranks.
	be, _ := cpu.New(cpu.Options{})
	c := NewCtx(be, tensor.Float64, 5)
	c.Shard = Shard{Rank: 0, World: 2}
	_, err := NewDropout(c, c.Blob(3, 3), 0.5)
	if !errors.Is(err, tensor.ErrShape) || !strings.Contains(err.Error(), "multiple of 4") {
		t.Fatalf("9 elements per rank: %v", err)
	}
	c.Shard = Shard{Rank: 2, World: 2}
	if _, err := NewDropout(c, c.Blob(4, 4), 0.5); err == nil {
		t.Fatal("rank 2 of 2 accepted")
	}
}
