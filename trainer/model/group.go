package model

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// Group is one model trained over several ranks of this process: a Model
// per rank, each with its communicator (Options.Parallel), built alike
// (same config, seed and options). Its methods run a call on every rank
// at once, one goroutine a rank, and return rank 0's result (the lowest
// rank of this process in a multi-process run); only that rank writes
// the log, metrics and progress.
//
// A GPU backend runs its work on its device's own locked OS thread
// (trainer/cuda), so the rank goroutines need not lock theirs.
type Group struct {
	Models []*Model
}

// NewGroup builds cfg once per communicator: model r on comms[r]'s
// backend as its rank (o.Parallel is set per rank and must be nil). The
// communicators are the caller's (collective.Open's World.Comms, in rank
// order).
func NewGroup(cfg *graph.Config, comms []collective.Comm, o Options) (*Group, error) {
	if len(comms) == 0 {
		return nil, errors.New("a group of no ranks")
	}
	if o.Parallel != nil {
		return nil, errors.New("NewGroup sets Options.Parallel per rank: leave it nil")
	}
	g := &Group{Models: make([]*Model, len(comms))}
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ro := o
			ro.Parallel = &Parallel{Comm: c}
			g.Models[i], errs[i] = Build(cfg, c.Backend(), ro)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, rankErr(comms[i].Rank(), len(comms) > 1 || comms[i].Size() > 1, err)
		}
	}
	return g, nil
}

// rankErr prefixes err with its rank when there are several.
func rankErr(rank int, several bool, err error) error {
	if !several || err == nil {
		return err
	}
	return fmt.Errorf("rank %d: %w", rank, err)
}

// Run calls fn on every rank's model concurrently and waits for all. The
// first failure cancels ctx for the others and closes the failing rank's
// communicator, so a rank waiting for it in a collective gets
// collective.ErrPeer at once instead of hanging; the error returned is
// the root cause (the lowest rank's error that is not a peer's or a
// cancellation's consequence), prefixed with its rank. After a failure the
// group's communicators cannot be used again.
func (g *Group) Run(ctx context.Context, fn func(ctx context.Context, m *Model) error) error {
	return runRanks(ctx, g.Models, fn)
}

func runRanks(ctx context.Context, ms []*Model, fn func(ctx context.Context, m *Model) error) error {
	if len(ms) == 1 {
		// This process's only rank: closing its communicator on a failure
		// tells the other processes' ranks at once.
		err := fn(ctx, ms[0])
		if c := ms[0].Comm(); err != nil && c != nil && c.Size() > 1 {
			c.Close()
		}
		return rankErr(ms[0].Rank(), ms[0].World() > 1, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(ms))
	var mu sync.Mutex
	order := []int{} // ranks in the order they failed
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := fn(ctx, m)
			if err == nil {
				return
			}
			errs[i] = err
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			cancel()
			if c := m.Comm(); c != nil {
				c.Close()
			}
		}()
	}
	wg.Wait()
	if len(order) == 0 {
		return nil
	}
	root := order[0]
	for i, err := range errs {
		if err != nil && !secondary(err) {
			root = i
			break
		}
	}
	return rankErr(ms[root].Rank(), true, errs[root])
}

// secondary reports an error that follows from another rank's failure.
func secondary(err error) bool {
	return errors.Is(err, collective.ErrPeer) || errors.Is(err, context.Canceled)
}

// Fit trains the group (Model.Fit on every rank; FitGroup).
func (g *Group) Fit(ctx context.Context, o FitOptions) (FitResult, error) {
	return FitGroup(ctx, g.Models, o)
}

// FitGroup runs Fit on every rank's model (one goroutine a rank, as
// Group.Run) with the same options: each rank opens its own readers
// through o's functions, which must be safe to call from several
// goroutines. Only rank 0 writes o.Log, o.Metrics and o.Progress. The
// result is rank 0's (every rank's equals it).
func FitGroup(ctx context.Context, ms []*Model, o FitOptions) (FitResult, error) {
	if len(ms) == 0 {
		return FitResult{}, errors.New("FitGroup of no models")
	}
	res := make([]FitResult, len(ms))
	err := runRanks(ctx, ms, func(ctx context.Context, m *Model) error {
		i := indexOf(ms, m)
		var err error
		res[i], err = m.Fit(ctx, o)
		return err
	})
	return res[0], err
}

func indexOf(ms []*Model, m *Model) int {
	for i, x := range ms {
		if x == m {
			return i
		}
	}
	return -1
}

// EvaluateSamples evaluates the first maxSamples samples (0: all) of the
// data open returns (each rank opens its own reader): rank 0's result,
// which every rank's equals.
func (g *Group) EvaluateSamples(ctx context.Context, open func() (formats.Reader, error), maxSamples int64) (EvalResult, error) {
	res := make([]EvalResult, len(g.Models))
	err := g.Run(ctx, func(_ context.Context, m *Model) error {
		i := indexOf(g.Models, m)
		var err error
		res[i], err = m.evaluateFrom(open, maxSamples, nil, nil)
		return err
	})
	return res[0], err
}

// PredictSamples appends the scores of the first maxSamples samples (0:
// all) of the data open returns to dst, in sample order (rank 0's, which
// every rank's equals).
func (g *Group) PredictSamples(ctx context.Context, dst []float32, open func() (formats.Reader, error), maxSamples int64) ([]float32, error) {
	res := make([][]float32, len(g.Models))
	res[0] = dst
	err := g.Run(ctx, func(_ context.Context, m *Model) error {
		i := indexOf(g.Models, m)
		r, err := open()
		if err != nil {
			return err
		}
		defer r.Close()
		res[i], err = m.PredictSamples(res[i], r, maxSamples)
		return err
	})
	return res[0], err
}
