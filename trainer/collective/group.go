package collective

import (
	"fmt"
	"sync"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Group is this process's membership in a world of ranks: which global
// ranks it drives (Base .. Base+Local-1) and how it reaches the others.
// NewLocalGroup makes a one-process world; Join one spanning processes.
type Group struct {
	// World is the number of ranks over all processes.
	World int
	// Base is this process's first global rank; Local its rank count.
	Base, Local int
	// Process and Processes index this process among all of them.
	Process, Processes int
	// Payload is what process 0 handed every process at the rendezvous
	// (JoinOptions.Payload), nil in a one-process world.
	Payload []byte

	r    *router
	mu   sync.Mutex
	refs int
	made bool
}

// ProcessOf is the index of the process that drives global rank rank.
func (g *Group) ProcessOf(rank int) int {
	if rank < 0 || rank >= len(g.r.owner) {
		return -1
	}
	return g.r.owner[rank]
}

// NewLocalGroup makes a world of ranks ranks, all in this process.
func NewLocalGroup(ranks int, o Options) (*Group, error) {
	if ranks < 1 {
		return nil, fmt.Errorf("collective: %d ranks", ranks)
	}
	owner := make([]int, ranks)
	return &Group{World: ranks, Local: ranks, Processes: 1, r: newRouter(owner, 0, o.timeout())}, nil
}

// HostComms returns the host communicators of this process's ranks, one
// per backend (len(bes) == Local; the backends may be CPU or GPU ones).
// They can be made once per group; closing all of them releases it.
func (g *Group) HostComms(bes []tensor.Backend) ([]Comm, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.made {
		return nil, fmt.Errorf("collective: the group's communicators were made already")
	}
	if len(bes) != g.Local {
		return nil, fmt.Errorf("collective: %d backends for the %d ranks of this process", len(bes), g.Local)
	}
	g.made = true
	g.refs = len(bes)
	cs := make([]Comm, len(bes))
	for i, be := range bes {
		cs[i] = &hostComm{r: g.r, rank: g.Base + i, be: be, group: g}
	}
	return cs, nil
}

// release drops one reference; the last closes the router.
func (g *Group) release() {
	g.mu.Lock()
	g.refs--
	last := g.refs == 0
	g.mu.Unlock()
	if last {
		g.r.close()
	}
}

// Close ends the group at once (every rank of this process leaves).
func (g *Group) Close() error {
	for i := range g.Local {
		g.r.leave(g.Base+i, fmt.Errorf("its process closed the group"))
	}
	g.r.close()
	return nil
}

// NewLocal is NewLocalGroup + HostComms: len(bes) in-process ranks.
func NewLocal(bes []tensor.Backend, o Options) ([]Comm, error) {
	g, err := NewLocalGroup(len(bes), o)
	if err != nil {
		return nil, err
	}
	return g.HostComms(bes)
}
