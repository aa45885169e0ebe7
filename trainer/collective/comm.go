package collective

import (
	"errors"
	"fmt"
	"time"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Reduction is how AllReduce and ReduceScatter combine the ranks' values.
type Reduction uint8

// The reductions (NCCL's ncclRedOp_t values, in the same order).
const (
	Sum Reduction = iota
	Prod
	Max
	Min
	Avg // Sum divided by the world size (floating types only)
)

func (r Reduction) String() string {
	switch r {
	case Sum:
		return "sum"
	case Prod:
		return "prod"
	case Max:
		return "max"
	case Min:
		return "min"
	case Avg:
		return "avg"
	}
	return fmt.Sprintf("Reduction(%d)", uint8(r))
}

// Comm is one rank's view of a communicator. Every rank calls the same
// collectives in the same order with matching sizes; tensors belong to the
// rank's backend (Backend). Calls are made from one goroutine per rank;
// each returns once this rank's part is issued (NCCL: enqueued on the
// backend's stream, ordered with its other work; host: done).
type Comm interface {
	// Rank is this rank's index in [0, Size).
	Rank() int
	// Size is the number of ranks.
	Size() int
	// Backend is the backend whose tensors this rank passes.
	Backend() tensor.Backend
	// AllReduce replaces buf on every rank by the reduction over ranks.
	AllReduce(buf tensor.Tensor, r Reduction) error
	// ReduceScatter sets dst (n elements) to block Rank() (elements
	// [Rank()·n, (Rank()+1)·n)) of the reduction over ranks of src
	// (Size()·n elements).
	ReduceScatter(dst, src tensor.Tensor, r Reduction) error
	// AllGather sets dst[i·n:(i+1)·n] to rank i's src (n elements).
	AllGather(dst, src tensor.Tensor) error
	// AllToAllV sends src's first send[0] elements to rank 0, the next
	// send[1] to rank 1 and so on, and receives into dst recv[0] elements
	// from rank 0, then recv[1] from rank 1...; send[j] on rank i equals
	// recv[i] on rank j.
	AllToAllV(dst tensor.Tensor, recv []int, src tensor.Tensor, send []int) error
	// Broadcast copies root's buf to every rank's buf.
	Broadcast(buf tensor.Tensor, root int) error
	// Group runs fn, whose collectives are issued together (NCCL's
	// ncclGroupStart/End; the host implementation runs them in order).
	Group(fn func() error) error
	// Close releases the rank's resources; a peer still waiting on this
	// rank gets an error.
	Close() error
}

// Options tune a communicator.
type Options struct {
	// Timeout bounds each wait for a peer (a message of a collective, a
	// rendezvous step); 0 means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is Options.Timeout when unset.
const DefaultTimeout = 5 * time.Minute

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

// ErrMismatch reports ranks that called different collectives, or the
// same collective with other sizes or types.
var ErrMismatch = errors.New("ranks called different collectives")

// ErrPeer reports a peer that failed, left or did not answer in time.
var ErrPeer = errors.New("peer rank unavailable")

// op names a collective in frames and messages.
type op uint8

const (
	opAllReduce op = iota + 1
	opReduceScatter
	opAllGather
	opAllToAllV
	opBroadcast
	opBarrier
	opControl
)

func (o op) String() string {
	switch o {
	case opAllReduce:
		return "AllReduce"
	case opReduceScatter:
		return "ReduceScatter"
	case opAllGather:
		return "AllGather"
	case opAllToAllV:
		return "AllToAllV"
	case opBroadcast:
		return "Broadcast"
	case opBarrier:
		return "Barrier"
	case opControl:
		return "rendezvous"
	case opGatherBytes:
		return "AllGatherBytes"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// checkReduction refuses an unknown reduction or Avg of integers.
func checkReduction(r Reduction, dt tensor.DType) error {
	if r > Avg {
		return fmt.Errorf("collective: unknown reduction %d", r)
	}
	if r == Avg && !dt.IsFloat() {
		return fmt.Errorf("collective: avg of %s values (use sum)", dt)
	}
	return nil
}

// checkCounts validates AllToAllV's counts against the tensors.
func checkCounts(size int, dst tensor.Tensor, recv []int, src tensor.Tensor, send []int) error {
	if len(recv) != size || len(send) != size {
		return fmt.Errorf("collective: AllToAllV with %d send and %d receive counts for %d ranks", len(send), len(recv), size)
	}
	if dst.DType != src.DType {
		return fmt.Errorf("collective: AllToAllV from %s into %s", src.DType, dst.DType)
	}
	var ns, nr int
	for j := 0; j < size; j++ {
		if send[j] < 0 || recv[j] < 0 {
			return fmt.Errorf("collective: AllToAllV negative count for rank %d", j)
		}
		ns += send[j]
		nr += recv[j]
	}
	if ns > src.Len() {
		return fmt.Errorf("collective: AllToAllV sends %d elements from a tensor of %d", ns, src.Len())
	}
	if nr > dst.Len() {
		return fmt.Errorf("collective: AllToAllV receives %d elements into a tensor of %d", nr, dst.Len())
	}
	return nil
}

// checkBlocks validates the n·size shapes of ReduceScatter/AllGather.
func checkBlocks(name string, size int, big, small tensor.Tensor) error {
	if big.DType != small.DType {
		return fmt.Errorf("collective: %s between %s and %s tensors", name, big.DType, small.DType)
	}
	if big.Len() != size*small.Len() {
		return fmt.Errorf("collective: %s needs %d×%d = %d elements, the tensor has %d", name, size, small.Len(), size*small.Len(), big.Len())
	}
	return nil
}
