package collective

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// Setup says which ranks this process drives: HugeCTR's gpu list of one
// node (or `--gpus`), the backend kind, and the launcher's view of the
// processes.
type Setup struct {
	// CPU runs len(Devices) in-process CPU ranks with the host
	// collectives; otherwise one GPU rank per device ordinal with NCCL.
	CPU bool
	// Devices are the GPU ordinals (CPU: only their count matters).
	Devices []int
	// GPU are the GPU backends' options (Device is set per rank).
	GPU gpu.Options
	// Launch describes the processes (FromEnv); the zero value is one.
	Launch Launch
	Options
}

// World is this process's ranks, opened: a backend and a communicator per
// rank, in rank order.
type World struct {
	Group    *Group
	Backends []tensor.Backend
	Comms    []Comm
	// Kind is "nccl" or "host".
	Kind string
}

// Open makes the backends and communicators of s, joining the other
// processes when there are any.
func Open(ctx context.Context, s Setup) (*World, error) {
	if len(s.Devices) == 0 {
		return nil, fmt.Errorf("collective: no devices")
	}
	if s.Launch.Size == 0 {
		s.Launch.Size = 1
	}
	jo := JoinOptions{Options: s.Options}
	if !s.CPU {
		jo.Payload = NCCLPayload
	}
	g, err := Join(ctx, s.Launch, len(s.Devices), jo)
	if err != nil {
		return nil, err
	}
	w := &World{Group: g}
	if s.CPU {
		for range s.Devices {
			be, err := cpu.New(cpu.Options{})
			if err != nil {
				g.Close()
				return nil, err
			}
			w.Backends = append(w.Backends, be)
		}
		w.Kind = "host"
		if w.Comms, err = g.HostComms(w.Backends); err != nil {
			g.Close()
			return nil, err
		}
		return w, nil
	}
	var gbs []*gpu.Backend
	fail := func(err error) (*World, error) {
		for _, b := range gbs {
			b.Close()
		}
		g.Close()
		return nil, err
	}
	for _, d := range s.Devices {
		o := s.GPU
		o.Device = d
		be, err := gpu.New(o)
		if err != nil {
			return fail(fmt.Errorf("GPU %d: %w", d, err))
		}
		gbs = append(gbs, be)
		w.Backends = append(w.Backends, be)
	}
	w.Kind = "nccl"
	if w.Comms, err = NewNCCL(g, gbs); err != nil {
		return fail(err)
	}
	return w, nil
}

// Close closes the communicators, then the backends.
func (w *World) Close() error {
	var errs []error
	for _, c := range w.Comms {
		errs = append(errs, c.Close())
	}
	if len(w.Comms) == 0 && w.Group != nil {
		w.Group.Close()
	}
	for _, be := range w.Backends {
		if c, ok := be.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
