package model

import (
	"errors"

	"github.com/ctrkit/ctrkit/trainer/collective"
)

// Parallel makes a Model one rank of a group of ranks that train one model
// together (HugeCTR's multi-GPU and multi-node training, docs/MULTI_GPU.md):
// the global batch (Options.BatchSize) is split over the ranks in equal,
// consecutive sample blocks; the dense network is data-parallel (every rank
// holds all of it, gradients are summed over the ranks); embedding tables
// are sharded (DistributedSlotSparseEmbeddingHash by key, the Localized
// kinds by slot), each rank pooling its rows for the whole global batch.
type Parallel struct {
	// Comm is this rank's communicator; its Backend is the Model's.
	Comm collective.Comm
}

// errParallelPending is returned by Build until the sharded trainer lands.
var errParallelPending = errors.New("training over several ranks (--gpus with more than one device) is not available in this build")
