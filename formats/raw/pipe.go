package raw

import (
	"context"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/ordered"
)

// decoded is one slot of a decodePipe: a batch decoded by a worker and the
// negative dense values clamped while decoding it.
type decoded struct {
	b       *formats.Batch
	clamped int64
}

// fillFunc decodes batch number g (batch k of the file) into d; each
// worker has its own (its own Decoder and read buffer).
type fillFunc func(g, k int64, d *decoded) error

// decodePipe is the ordered parallel decoder of Reader and AsyncReader: an
// ordered.Ring of R = workers+2 batches. Each worker claims the next
// sequence number g (claim), waits for its turn at slot g mod R
// (Acquire), decodes batch g into the slot's batch and publishes it with
// its error; the consumer (Read or Next) takes the slots in sequence order
// and releases slot g to g+R once done with it. No lock is held across a
// wait and nothing is allocated per batch.
//
// Progress: let m be the lowest sequence number not yet decoded. Its turn
// comes once the consumer is done with m−R, which is decoded; the worker
// that claimed m decodes it.
type decodePipe struct {
	ring   *ordered.Ring[decoded]
	cancel context.CancelFunc
	eg     *errgroup.Group
	total  int64 // batches the consumer takes: the epoch's in epoch mode, -1 in repeat mode
	g      int64 // next sequence number the consumer takes; consumer's goroutine only
	lent   bool  // Next lent slot g−1, released by the next take
}

// startPipe allocates the ring's batches (of schema s, capacity bsize,
// from alloc) and starts the workers: worker w gets its fill from
// newFill(); claim, called by every worker, returns the next sequence
// number and its batch of the file, ok == false at the end of data.
func startPipe(s *formats.Schema, bsize int, alloc formats.Allocator, workers int, total int64,
	claim func() (g, k int64, ok bool), newFill func() fillFunc) (*decodePipe, error) {
	p := &decodePipe{ring: ordered.New[decoded](workers + 2), total: total}
	for i := 0; i < p.ring.Len(); i++ {
		b, err := formats.NewBatch(s, bsize, alloc)
		if err != nil {
			p.free()
			return nil, err
		}
		p.ring.Value(i).b = b
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.eg, ctx = errgroup.WithContext(ctx)
	for w := 0; w < workers; w++ {
		fill := newFill()
		p.eg.Go(func() error {
			for ctx.Err() == nil {
				g, k, ok := claim()
				if !ok {
					return nil
				}
				d, ok := p.ring.Acquire(g)
				if !ok {
					return nil
				}
				err := fill(g, k, d)
				p.ring.Publish(g, err)
				if err != nil {
					// The consumer stops at this batch: the ones after
					// it are never taken.
					return nil
				}
			}
			return nil
		})
	}
	return p, nil
}

// take waits for the next decoded slot, first releasing the slot Next
// lent. At the end of data it returns io.EOF; on a worker's error it
// releases the slot and returns the error.
func (p *decodePipe) take() (*decoded, error) {
	if p.lent {
		p.ring.Release(p.g - 1)
		p.lent = false
	}
	if p.total >= 0 && p.g >= p.total {
		return nil, io.EOF
	}
	d, err := p.ring.Take(p.g)
	p.g++
	if err != nil {
		p.ring.Release(p.g - 1)
		return nil, err
	}
	return d, nil
}

// readTo is Read's parallel path (both readers): it copies the next batch
// into b, adds its clamp count to *clamped and keeps an error in *sticky.
func (p *decodePipe) readTo(b *formats.Batch, clamped *int64, sticky *error) (int, error) {
	d, err := p.take()
	if err == nil {
		err = copyBatch(b, d.b)
		*clamped += d.clamped
		p.ring.Release(p.g - 1)
	}
	if err != nil {
		if err == io.EOF {
			b.SetLen(0)
		}
		*sticky = err
		return 0, err
	}
	return b.N, nil
}

// lendNext is the Next of both Raw readers: the pipe's next slot with
// several workers, else a read (with read) into the reader's own batch,
// made of schema s, bsize samples and alloc on first use. sticky is the
// reader's sticky error, clamped its count of clamped dense values.
func lendNext(p *decodePipe, clamped *int64, sticky *error, own **formats.Batch, s *formats.Schema, bsize int,
	alloc formats.Allocator, read func(*formats.Batch) (int, error)) (*formats.Batch, error) {
	if *sticky != nil {
		return nil, *sticky
	}
	if p != nil {
		return p.lend(clamped, sticky)
	}
	if *own == nil {
		b, err := formats.NewBatch(s, bsize, alloc)
		if err != nil {
			return nil, err
		}
		*own = b
	}
	if _, err := read(*own); err != nil {
		return nil, err
	}
	return *own, nil
}

// lend is Next's parallel path: the next ring batch itself, the caller's
// until the next readTo, lend or stop (clamped and sticky as readTo's).
func (p *decodePipe) lend(clamped *int64, sticky *error) (*formats.Batch, error) {
	d, err := p.take()
	if err != nil {
		*sticky = err
		return nil, err
	}
	p.lent = true
	*clamped += d.clamped
	return d.b, nil
}

// stop cancels the workers and wakes those waiting for a slot's turn; the
// ones inside fill finish their batch first (AsyncReader closes its engine
// to wake those waiting in Get). wait then waits for them.
func (p *decodePipe) stop() {
	p.cancel()
	p.ring.Cancel(ErrClosed)
}

// wait waits for the stopped workers and frees the ring's batches.
func (p *decodePipe) wait() {
	p.eg.Wait()
	p.free()
}

func (p *decodePipe) free() {
	for i := 0; i < p.ring.Len(); i++ {
		if v := p.ring.Value(i); v.b != nil {
			v.b.Free()
			v.b = nil
		}
	}
}

// copyBatch replaces dst's samples by src's.
func copyBatch(dst, src *formats.Batch) error {
	dst.SetLen(0)
	nk := src.NumKeys()
	if err := dst.ReserveKeys(nk); err != nil {
		return err
	}
	labels, dense, offsets, k32, k64 := dst.Full()
	copy(labels, src.Labels)
	copy(dense, src.Dense)
	copy(offsets, src.Offsets)
	if src.Keys64 != nil {
		copy(k64, src.Keys64)
	} else {
		copy(k32, src.Keys32)
	}
	dst.SetLen(src.N)
	return nil
}
