package model

import (
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/input"
)

// Schema returns the dataset schema the model reads: its label and dense
// widths and one slot per sparse-input slot (MaxNNZ from nnz_per_slot;
// Hotness 1 for fixed-length one-hot slots), keys of type kt.
func (m *Model) Schema(kt formats.KeyType) formats.Schema { return input.Schema(&m.Graph.Input, kt) }

// hostAlloc is the allocator of batches that the backend stages without a
// copy (pinned memory on the GPU), or nil (Go heap).
func (m *Model) hostAlloc() formats.Allocator { return m.feed.HostAlloc() }
