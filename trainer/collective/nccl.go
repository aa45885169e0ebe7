package collective

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// ncclComm is the NCCL implementation of Comm: every call is enqueued on
// the rank's backend stream from the rank's device goroutine (whose
// context is current), so it is ordered with the backend's kernels.
type ncclComm struct {
	be         *gpu.Backend
	comm       cuda.NCCLComm
	rank, size int
	group      *Group
	once       sync.Once
}

// NCCLPayload is JoinOptions.Payload for an NCCL world: process 0 makes
// the unique id every process's ranks join with.
func NCCLPayload() ([]byte, error) {
	id, err := cuda.NCCLGetUniqueID()
	if err != nil {
		return nil, err
	}
	return id[:], nil
}

// NewNCCL makes the NCCL communicators of this process's ranks, one per
// GPU backend (len(bes) == g.Local, each on its own device). The group
// must come from Join with Payload NCCLPayload, or from NewLocalGroup (an
// id is then made here). The ranks initialize together (NCCL blocks until
// every rank of the world has joined).
func NewNCCL(g *Group, bes []*gpu.Backend) ([]Comm, error) {
	if len(bes) != g.Local {
		return nil, fmt.Errorf("collective: %d GPU backends for the %d ranks of this process", len(bes), g.Local)
	}
	var id cuda.NCCLUniqueID
	switch {
	case len(g.Payload) == len(id):
		copy(id[:], g.Payload)
	case g.Processes == 1:
		var err error
		if id, err = cuda.NCCLGetUniqueID(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("collective: the group carries no NCCL id (Join with JoinOptions.Payload = NCCLPayload)")
	}
	seen := map[int]int{}
	for i, be := range bes {
		if j, ok := seen[be.Device().Ordinal]; ok {
			return nil, fmt.Errorf("collective: ranks %d and %d both on GPU %d (NCCL needs one GPU per rank)", g.Base+j, g.Base+i, be.Device().Ordinal)
		}
		seen[be.Device().Ordinal] = i
	}
	cs := make([]*ncclComm, len(bes))
	errs := make([]error, len(bes))
	var wg sync.WaitGroup
	for i, be := range bes {
		cs[i] = &ncclComm{be: be, rank: g.Base + i, size: g.World}
		wg.Add(1)
		go func(c *ncclComm) {
			defer wg.Done()
			errs[i] = be.Device().Do(func(x *cuda.Ctx) error {
				var err error
				c.comm, err = x.NCCLCommInit(c.size, c.rank, &id)
				return err
			})
		}(cs[i])
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, c := range cs {
			if errs[i] == nil {
				c.be.Device().Do(func(x *cuda.Ctx) error { return x.NCCLCommDestroy(c.comm, true) })
			}
		}
		return nil, fmt.Errorf("collective: NCCL init of %d ranks: %w", g.World, err)
	}
	g.mu.Lock()
	g.refs += len(cs)
	g.mu.Unlock()
	out := make([]Comm, len(cs))
	for i, c := range cs {
		c.group = g
		out[i] = c
	}
	return out, nil
}

func (c *ncclComm) Rank() int               { return c.rank }
func (c *ncclComm) Size() int               { return c.size }
func (c *ncclComm) Backend() tensor.Backend { return c.be }

func ncclType(dt tensor.DType) (cuda.NCCLType, error) {
	switch dt {
	case tensor.Float32:
		return cuda.NCCLFloat32, nil
	case tensor.Float64:
		return cuda.NCCLFloat64, nil
	case tensor.Int32:
		return cuda.NCCLInt32, nil
	case tensor.Int64:
		return cuda.NCCLInt64, nil
	case tensor.Uint32:
		return cuda.NCCLUint32, nil
	}
	return 0, fmt.Errorf("collective: no NCCL type for %s", dt)
}

// do runs fn on the device goroutine after the backend's own errors.
func (c *ncclComm) do(fn func(x *cuda.Ctx, s cuda.Stream) error) error {
	if err := c.be.Err(); err != nil {
		return err
	}
	return c.be.Device().Do(func(x *cuda.Ctx) error { return fn(x, c.be.Stream()) })
}

func (c *ncclComm) AllReduce(buf tensor.Tensor, r Reduction) error {
	dt, err := ncclType(buf.DType)
	if err == nil {
		err = checkReduction(r, buf.DType)
	}
	if err != nil || buf.Len() == 0 {
		return err
	}
	return c.do(func(x *cuda.Ctx, s cuda.Stream) error {
		return x.NCCLAllReduce(gpu.Ptr(buf), gpu.Ptr(buf), buf.Len(), dt, cuda.NCCLOp(r), c.comm, s)
	})
}

func (c *ncclComm) ReduceScatter(dst, src tensor.Tensor, r Reduction) error {
	dt, err := ncclType(src.DType)
	if err == nil {
		err = checkReduction(r, src.DType)
	}
	if err == nil {
		err = checkBlocks("ReduceScatter", c.size, src, dst)
	}
	if err != nil || dst.Len() == 0 {
		return err
	}
	return c.do(func(x *cuda.Ctx, s cuda.Stream) error {
		return x.NCCLReduceScatter(gpu.Ptr(src), gpu.Ptr(dst), dst.Len(), dt, cuda.NCCLOp(r), c.comm, s)
	})
}

func (c *ncclComm) AllGather(dst, src tensor.Tensor) error {
	dt, err := ncclType(src.DType)
	if err == nil {
		err = checkBlocks("AllGather", c.size, dst, src)
	}
	if err != nil || src.Len() == 0 {
		return err
	}
	return c.do(func(x *cuda.Ctx, s cuda.Stream) error {
		return x.NCCLAllGather(gpu.Ptr(src), gpu.Ptr(dst), src.Len(), dt, c.comm, s)
	})
}

func (c *ncclComm) AllToAllV(dst tensor.Tensor, recv []int, src tensor.Tensor, send []int) error {
	dt, err := ncclType(src.DType)
	if err == nil {
		err = checkCounts(c.size, dst, recv, src, send)
	}
	if err != nil {
		return err
	}
	es := src.DType.Size()
	return c.do(func(x *cuda.Ctx, s cuda.Stream) error {
		if err := x.NCCLGroupStart(); err != nil {
			return err
		}
		so, ro := 0, 0
		var first error
		for p := 0; p < c.size; p++ {
			if send[p] > 0 && first == nil {
				first = x.NCCLSend(gpu.Ptr(src).Add(so*es), send[p], dt, p, c.comm, s)
			}
			if recv[p] > 0 && first == nil {
				first = x.NCCLRecv(gpu.Ptr(dst).Add(ro*es), recv[p], dt, p, c.comm, s)
			}
			so += send[p]
			ro += recv[p]
		}
		// The group is closed even after an error, so NCCL's thread state
		// stays balanced.
		return errors.Join(first, x.NCCLGroupEnd())
	})
}

func (c *ncclComm) Broadcast(buf tensor.Tensor, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("collective: Broadcast from rank %d of %d", root, c.size)
	}
	dt, err := ncclType(buf.DType)
	if err != nil || buf.Len() == 0 {
		return err
	}
	return c.do(func(x *cuda.Ctx, s cuda.Stream) error {
		return x.NCCLBroadcast(gpu.Ptr(buf), gpu.Ptr(buf), buf.Len(), dt, root, c.comm, s)
	})
}

// Group brackets fn's calls with ncclGroupStart/End on the device
// goroutine (its OS thread is locked, so NCCL's per-thread group state
// spans the calls).
func (c *ncclComm) Group(fn func() error) error {
	if err := c.be.Device().Do(func(x *cuda.Ctx) error { return x.NCCLGroupStart() }); err != nil {
		return err
	}
	ferr := fn()
	gerr := c.be.Device().Do(func(x *cuda.Ctx) error { return x.NCCLGroupEnd() })
	return errors.Join(ferr, gerr)
}

func (c *ncclComm) Close() error {
	var err error
	c.once.Do(func() {
		err = c.be.Device().Do(func(x *cuda.Ctx) error {
			if e := x.StreamSync(c.be.Stream()); e != nil {
				return errors.Join(e, x.NCCLCommDestroy(c.comm, true))
			}
			return x.NCCLCommDestroy(c.comm, false)
		})
		if c.group != nil {
			c.group.release()
		}
	})
	return err
}
