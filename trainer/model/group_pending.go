package model

import (
	"context"
	"errors"

	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// Stand-ins for the group API of the sharded trainer (group.go, parallel.go
// on branch h-dist), removed when it is merged.

type Group struct{ Models []*Model }

func NewGroup(cfg *graph.Config, comms []collective.Comm, o Options) (*Group, error) {
	return nil, errors.New("training over several ranks (--gpus with more than one device) is not available in this build")
}

func (g *Group) Run(ctx context.Context, fn func(ctx context.Context, m *Model) error) error {
	return errors.New("no group")
}

func (m *Model) Rank() int {
	if m.comm == nil {
		return 0
	}
	return m.comm.Rank()
}

func (m *Model) World() int {
	if m.comm == nil {
		return 1
	}
	return m.comm.Size()
}
