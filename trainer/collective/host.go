package collective

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// hostComm is the host implementation of Comm: tensors are downloaded
// from the rank's backend, exchanged through the router, reduced in rank
// order and uploaded back.
type hostComm struct {
	r     *router
	rank  int
	be    tensor.Backend
	seq   uint32
	group *Group // released when the last local rank closes
	once  sync.Once
}

func (c *hostComm) Rank() int               { return c.rank }
func (c *hostComm) Size() int               { return c.r.world }
func (c *hostComm) Backend() tensor.Backend { return c.be }

func (c *hostComm) Group(fn func() error) error { return fn() }

func (c *hostComm) Close() error {
	c.once.Do(func() {
		c.r.leave(c.rank, errors.New("it closed its communicator"))
		if c.group != nil {
			c.group.release()
		}
	})
	return nil
}

// next starts a collective: its sequence number.
func (c *hostComm) next() uint32 {
	c.seq++
	return c.seq
}

// hostSlice allocates a host slice of n elements of dt and returns it with
// its bytes.
func hostSlice(dt tensor.DType, n int) (any, []byte, error) {
	var s any
	switch dt {
	case tensor.Float32:
		s = make([]float32, n)
	case tensor.Float64:
		s = make([]float64, n)
	case tensor.Int32:
		s = make([]int32, n)
	case tensor.Int64:
		s = make([]int64, n)
	case tensor.Uint32:
		s = make([]uint32, n)
	default:
		return nil, nil, fmt.Errorf("collective: no host exchange of %s tensors", dt)
	}
	return s, bytesOf(s), nil
}

func bytesOf(s any) []byte {
	switch v := s.(type) {
	case []float32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	case []float64:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
	case []int32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	case []int64:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
	case []uint32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	}
	return nil
}

// download copies t to the host.
func (c *hostComm) download(t tensor.Tensor) (any, []byte, error) {
	s, b, err := hostSlice(t.DType, t.Len())
	if err != nil {
		return nil, nil, err
	}
	if t.Len() > 0 {
		if err := c.be.Download(s, t); err != nil {
			return nil, nil, err
		}
	}
	return s, b, nil
}

func (c *hostComm) upload(t tensor.Tensor, s any) error {
	if t.Len() > 0 {
		c.be.Upload(t, s)
	}
	return c.be.Err()
}

// exchange sends out[p] to every peer p (concurrently) and receives in[p]
// from every peer p; out[rank] and in[rank] are not used.
func (c *hostComm) exchange(o op, seq uint32, dt tensor.DType, out, in [][]byte) error {
	var wg sync.WaitGroup
	errs := make([]error, c.r.world)
	for p := range c.r.world {
		if p == c.rank || out[p] == nil {
			continue
		}
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			errs[p] = c.r.send(header{seq: seq, src: c.rank, dst: p, op: o, dtype: dt}, out[p])
		}(p)
	}
	var rerr error
	for p := range c.r.world {
		if p == c.rank || in[p] == nil || rerr != nil {
			continue
		}
		rerr = c.r.recv(header{seq: seq, src: p, dst: c.rank, op: o, dtype: dt, n: int64(len(in[p]))}, in[p])
	}
	wg.Wait()
	if rerr != nil {
		return rerr
	}
	return errors.Join(errs...)
}

// blockRange is block j of n elements split over w ranks: the first
// n mod w blocks hold one element more.
func blockRange(n, w, j int) (lo, hi int) {
	q, r := n/w, n%w
	lo = j*q + min(j, r)
	hi = lo + q
	if j < r {
		hi++
	}
	return
}

func (c *hostComm) AllReduce(buf tensor.Tensor, red Reduction) error {
	if err := checkReduction(red, buf.DType); err != nil {
		return err
	}
	seq := c.next()
	s, b, err := c.download(buf)
	if err != nil {
		return err
	}
	if err := c.allReduceBytes(seq, buf.DType, b, red); err != nil {
		return err
	}
	return c.upload(buf, s)
}

// allReduceBytes reduces b (elements of dt) in place: block j is reduced
// on rank j in rank order (reduce-scatter), then every rank gathers the
// reduced blocks (all-gather), so all ranks hold the same bits.
func (c *hostComm) allReduceBytes(seq uint32, dt tensor.DType, b []byte, red Reduction) error {
	w, es := c.r.world, dt.Size()
	n := len(b) / es
	out := make([][]byte, w)
	in := make([][]byte, w)
	lo, hi := blockRange(n, w, c.rank)
	for p := range w {
		plo, phi := blockRange(n, w, p)
		out[p] = b[plo*es : phi*es]
		in[p] = make([]byte, (hi-lo)*es)
	}
	if err := c.exchange(opAllReduce, seq, dt, out, in); err != nil {
		return err
	}
	own := append([]byte(nil), b[lo*es:hi*es]...)
	in[c.rank] = own
	acc := b[lo*es : hi*es]
	copy(acc, in[0])
	for p := 1; p < w; p++ {
		combine(dt, red, acc, in[p])
	}
	if red == Avg {
		scale(dt, acc, 1/float64(w))
	}
	// All-gather the reduced blocks.
	for p := range w {
		out[p] = acc
		plo, phi := blockRange(n, w, p)
		in[p] = b[plo*es : phi*es]
	}
	return c.exchange(opAllReduce, seq, dt, out, in)
}

func (c *hostComm) ReduceScatter(dst, src tensor.Tensor, red Reduction) error {
	if err := checkReduction(red, src.DType); err != nil {
		return err
	}
	if err := checkBlocks("ReduceScatter", c.r.world, src, dst); err != nil {
		return err
	}
	seq := c.next()
	_, b, err := c.download(src)
	if err != nil {
		return err
	}
	w, es, n := c.r.world, src.DType.Size(), dst.Len()
	out := make([][]byte, w)
	in := make([][]byte, w)
	for p := range w {
		out[p] = b[p*n*es : (p+1)*n*es]
		in[p] = make([]byte, n*es)
	}
	if err := c.exchange(opReduceScatter, seq, src.DType, out, in); err != nil {
		return err
	}
	in[c.rank] = out[c.rank]
	s, acc, _ := hostSlice(dst.DType, n)
	copy(acc, in[0])
	for p := 1; p < w; p++ {
		combine(src.DType, red, acc, in[p])
	}
	if red == Avg {
		scale(src.DType, acc, 1/float64(w))
	}
	return c.upload(dst, s)
}

func (c *hostComm) AllGather(dst, src tensor.Tensor) error {
	if err := checkBlocks("AllGather", c.r.world, dst, src); err != nil {
		return err
	}
	seq := c.next()
	_, b, err := c.download(src)
	if err != nil {
		return err
	}
	w, es, n := c.r.world, src.DType.Size(), src.Len()
	s, all, _ := hostSlice(dst.DType, dst.Len())
	out := make([][]byte, w)
	in := make([][]byte, w)
	for p := range w {
		out[p] = b
		in[p] = all[p*n*es : (p+1)*n*es]
	}
	copy(in[c.rank], b)
	if err := c.exchange(opAllGather, seq, src.DType, out, in); err != nil {
		return err
	}
	return c.upload(dst, s)
}

func (c *hostComm) AllToAllV(dst tensor.Tensor, recv []int, src tensor.Tensor, send []int) error {
	if err := checkCounts(c.r.world, dst, recv, src, send); err != nil {
		return err
	}
	seq := c.next()
	_, b, err := c.download(src)
	if err != nil {
		return err
	}
	w, es := c.r.world, src.DType.Size()
	// The receiver's result keeps dst's elements beyond Σ recv.
	s, all, err := c.download(dst)
	if err != nil {
		return err
	}
	out := make([][]byte, w)
	in := make([][]byte, w)
	so, ro := 0, 0
	for p := range w {
		out[p] = b[so*es : (so+send[p])*es]
		in[p] = all[ro*es : (ro+recv[p])*es]
		so += send[p]
		ro += recv[p]
	}
	if send[c.rank] != recv[c.rank] {
		return fmt.Errorf("collective: AllToAllV on rank %d sends %d elements to itself but receives %d", c.rank, send[c.rank], recv[c.rank])
	}
	copy(in[c.rank], out[c.rank])
	if err := c.exchange(opAllToAllV, seq, src.DType, out, in); err != nil {
		return err
	}
	return c.upload(dst, s)
}

func (c *hostComm) Broadcast(buf tensor.Tensor, root int) error {
	if root < 0 || root >= c.r.world {
		return fmt.Errorf("collective: Broadcast from rank %d of %d", root, c.r.world)
	}
	seq := c.next()
	w := c.r.world
	out := make([][]byte, w)
	in := make([][]byte, w)
	if c.rank == root {
		_, b, err := c.download(buf)
		if err != nil {
			return err
		}
		for p := range w {
			out[p] = b
		}
		return c.exchange(opBroadcast, seq, buf.DType, out, in)
	}
	s, b, err := hostSlice(buf.DType, buf.Len())
	if err != nil {
		return err
	}
	in[root] = b
	if err := c.exchange(opBroadcast, seq, buf.DType, out, in); err != nil {
		return err
	}
	return c.upload(buf, s)
}

// combine sets acc = acc ∘ x elementwise (both of dt).
func combine(dt tensor.DType, red Reduction, acc, x []byte) {
	switch dt {
	case tensor.Float32:
		reduce(red, view[float32](acc), view[float32](x))
	case tensor.Float64:
		reduce(red, view[float64](acc), view[float64](x))
	case tensor.Int32:
		reduce(red, view[int32](acc), view[int32](x))
	case tensor.Int64:
		reduce(red, view[int64](acc), view[int64](x))
	case tensor.Uint32:
		reduce(red, view[uint32](acc), view[uint32](x))
	}
}

func scale(dt tensor.DType, acc []byte, f float64) {
	switch dt {
	case tensor.Float32:
		for i, v := range view[float32](acc) {
			view[float32](acc)[i] = float32(float64(v) * f)
		}
	case tensor.Float64:
		a := view[float64](acc)
		for i := range a {
			a[i] *= f
		}
	}
}

type number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint32
}

func view[T number](b []byte) []T {
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

func reduce[T number](red Reduction, acc, x []T) {
	switch red {
	case Sum, Avg:
		for i := range acc {
			acc[i] += x[i]
		}
	case Prod:
		for i := range acc {
			acc[i] *= x[i]
		}
	case Max:
		for i := range acc {
			acc[i] = maxNaN(acc[i], x[i])
		}
	case Min:
		for i := range acc {
			acc[i] = minNaN(acc[i], x[i])
		}
	}
}

// maxNaN and minNaN propagate NaN (as NCCL does), so a NaN on one rank is
// seen on all.
func maxNaN[T number](a, b T) T {
	if a != a || b != b {
		return T(math.NaN())
	}
	return max(a, b)
}

func minNaN[T number](a, b T) T {
	if a != a || b != b {
		return T(math.NaN())
	}
	return min(a, b)
}
