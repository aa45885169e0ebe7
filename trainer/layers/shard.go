package layers

import "fmt"

// Shard is one rank's place among the ranks that train one model (issue
// #19): Rank in [0, World). The zero value is the single rank (World 0 and
// 1 are the same), and a single rank runs the same code as many.
//
// Under World ranks a global batch of B_g samples is split into World local
// batches of B_g/World samples, rank r owning samples [r·B_l, (r+1)·B_l).
// A sharded SparseEmbedding is built for the global batch (every rank sees
// every key) and holds only its rank's rows (tensor.ShardOps); the dense
// layers run on the local batch, and Dropout draws the mask the single-rank
// run of the global batch would draw for the rank's samples.
type Shard struct {
	Rank, World int
}

// Ranks is the number of ranks (1 for the zero value).
func (s Shard) Ranks() int { return max(s.World, 1) }

// Sharded reports whether there is more than one rank.
func (s Shard) Sharded() bool { return s.World > 1 }

func (s Shard) check(layer string) error {
	if s.World < 0 || s.Rank < 0 || s.Rank >= s.Ranks() {
		return shapeErr(layer, "rank %d of %d ranks", s.Rank, s.World)
	}
	return nil
}

// String is "rank r of w".
func (s Shard) String() string { return fmt.Sprintf("rank %d of %d", s.Rank, s.Ranks()) }

// OwnsSlot reports whether the rank holds slot s of a Localized embedding
// (HugeCTR: slot s lives on GPU s mod the GPU count).
func (s Shard) OwnsSlot(slot int) bool { return slot%s.Ranks() == s.Rank }

// OwnsKey reports whether the rank holds key k of a DistributedSlot
// embedding (HugeCTR: key mod the GPU count, here the floor modulus so that
// negative keys have an owner too).
func (s Shard) OwnsKey(k int64) bool {
	w := int64(s.Ranks())
	return ((k%w)+w)%w == int64(s.Rank)
}
