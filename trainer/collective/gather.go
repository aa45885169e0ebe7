package collective

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// opGatherBytes names a Gatherer's exchange in frames and messages.
const opGatherBytes op = opControl + 1

// Gatherer is one rank's all-gather of byte strings of any length
// (AllGatherBytes) over the ranks of a Group, on a stream of its own: its
// messages travel on the group's connections (TCP between processes,
// memory within one) but are queued apart from the collectives of the
// ranks' communicators, so a goroutine reading data (a prefetcher) can
// exchange while the rank's training goroutine runs its collectives.
// Every rank makes a Gatherer with the same stream number and calls
// AllGatherBytes the same number of times; it works whatever
// communicators (host or NCCL) the ranks use.
type Gatherer struct {
	r      *router
	rank   int
	stream uint32
	seq    uint32
	stop   chan struct{}
	once   sync.Once
}

// Gatherer makes rank's Gatherer on stream (≥ 1; the same number on every
// rank, and not in use by another open Gatherer). rank is a global rank of
// this process.
func (g *Group) Gatherer(rank int, stream uint32) (*Gatherer, error) {
	if rank < g.Base || rank >= g.Base+g.Local {
		return nil, fmt.Errorf("collective: rank %d is not a rank of this process (ranks %d–%d)", rank, g.Base, g.Base+g.Local-1)
	}
	if stream == 0 {
		return nil, errors.New("collective: Gatherer stream 0 is the communicators'")
	}
	return &Gatherer{r: g.r, rank: rank, stream: stream, stop: make(chan struct{})}, nil
}

// Rank is the gatherer's rank; Size the number of ranks.
func (x *Gatherer) Rank() int { return x.rank }

// Size is the number of ranks.
func (x *Gatherer) Size() int { return x.r.world }

// AllGatherBytes sends b to every rank and returns every rank's bytes,
// in rank order (out[Rank()] is b itself). Lengths may differ between
// ranks. A peer that left or does not answer within the group's timeout
// is an ErrPeer error naming it; Close ends a pending call at once.
func (x *Gatherer) AllGatherBytes(b []byte) ([][]byte, error) {
	select {
	case <-x.stop:
		return nil, errors.New("collective: the gatherer was closed")
	default:
	}
	x.seq++
	w := x.r.world
	out := make([][]byte, w)
	out[x.rank] = b
	errs := make([]error, w)
	var wg sync.WaitGroup
	for p := range w {
		if p == x.rank {
			continue
		}
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			errs[p] = x.r.send(header{seq: x.seq, src: x.rank, dst: p, op: opGatherBytes, stream: x.stream}, b)
		}(p)
	}
	var rerr error
	for p := range w {
		if p == x.rank || rerr != nil {
			continue
		}
		out[p], rerr = x.recv(p)
	}
	wg.Wait()
	if rerr != nil {
		return nil, rerr
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// recv waits for the next message of the stream from rank src.
func (x *Gatherer) recv(src int) ([]byte, error) {
	r := x.r
	q := r.q(src, x.rank, x.stream)
	var m message
	select {
	case m = <-q:
	case <-x.stop:
		return nil, errors.New("collective: the gatherer was closed")
	case <-r.gone[src]:
		select { // a message sent before it left still counts
		case m = <-q:
		default:
			return nil, r.peerErr(x.rank, src, fmt.Sprintf("waiting for its data part #%d", x.seq))
		}
	case <-time.After(r.timeout):
		return nil, fmt.Errorf("%w: rank %d: no data part #%d from rank %d within %v (is every process running with the same flags?)", ErrPeer, x.rank, x.seq, src, r.timeout)
	}
	if m.h.op == opGatherBytes && m.h.seq == 0 {
		return nil, fmt.Errorf("%w: rank %d: rank %d closed its end of the exchange before its data part #%d (it stopped reading)", ErrPeer, x.rank, src, x.seq)
	}
	if m.h.op != opGatherBytes || m.h.seq != x.seq {
		return nil, fmt.Errorf("%w: rank %d expected data part #%d from rank %d, rank %d sent %s", ErrMismatch, x.rank, x.seq, src, src, m.h)
	}
	return m.data, nil
}

// Close ends the gatherer: a pending AllGatherBytes returns at once, the
// parts peers send on its stream afterwards are dropped, and every peer is
// told (a frame of sequence number 0), so that a peer waiting for this
// rank's next part gets an ErrPeer error at once instead of waiting out
// the timeout: a reader closed by a rank that stopped reading (its
// prefetcher stopped before the next batch) frees the peers that had
// begun that batch.
func (x *Gatherer) Close() error {
	x.once.Do(func() {
		close(x.stop)
		x.r.endStream(x.rank, x.stream)
		for p := range x.r.world {
			if p != x.rank {
				go x.r.send(header{seq: 0, src: x.rank, dst: p, op: opGatherBytes, stream: x.stream}, nil)
			}
		}
	})
	return nil
}

// streamEnded reports a Gatherer stream that rank (of this process) closed.
func (r *router) streamEnded(rank int, stream uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended[[2]int{rank, int(stream)}]
}

// endStream drops the queues of rank's closed Gatherer stream.
func (r *router) endStream(rank int, stream uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended[[2]int{rank, int(stream)}] = true
	for k := range r.queue {
		if k[1] == rank && k[2] == int(stream) {
			delete(r.queue, k)
		}
	}
}
