package model

import (
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/input"
)

// Source is where a model's data comes from (input.Source).
type Source = input.Source

// ParseFormat is input.ParseFormat.
func ParseFormat(name string) (f dataset.Format, async bool, err error) {
	return input.ParseFormat(name)
}

// ParseCheck is input.ParseCheck.
func ParseCheck(name string) (norm.CheckMode, error) { return input.ParseCheck(name) }

// ReaderSources is input.ReaderSources.
func ReaderSources(rp *graph.ReaderParams, in *graph.Input, i64 bool, name string) (train, eval Source, err error) {
	return input.ReaderSources(rp, in, i64, name)
}

// Open opens a reader of src in the model's schema, in batches of the
// model's batch size (input.Open). Readers that lend their batches decode
// into memory the backend stages without a copy (pinned memory on the
// GPU).
func (m *Model) Open(src Source) (formats.Reader, error) { return m.open(src, m.hostAlloc()) }

// open is Open with the batches of lending readers from alloc (pinned
// memory for the GPU; nil: Go heap).
func (m *Model) open(src Source, alloc formats.Allocator) (formats.Reader, error) {
	return input.Open(src, &m.Graph.Input, m.batch, alloc)
}

// Sources is src as package dataset opens it for this model.
func (m *Model) Sources(src Source) (dataset.Sources, error) { return src.Sources(&m.Graph.Input) }
