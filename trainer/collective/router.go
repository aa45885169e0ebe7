package collective

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

const (
	frameMagic  = 0x4b525443 // "CTRK" little-endian
	headerBytes = 32
	// queueDepth bounds the messages waiting from one rank to another. A
	// rank runs at most one collective ahead of a peer and each collective
	// sends at most two messages per pair, so it never fills in correct
	// use; a full queue stalls the sender (TCP backpressure), not memory.
	queueDepth = 16
	// maxFrame refuses absurd lengths from a damaged or foreign stream
	// before allocating.
	maxFrame = 1 << 36
)

// header is one frame's fixed part (see the package doc).
type header struct {
	seq      uint32
	src, dst int
	op       op
	dtype    tensor.DType
	n        int64 // payload bytes
	// stream is 0 for the collectives of the ranks' communicators, else
	// a Gatherer's stream (their messages are queued apart).
	stream uint32
}

func (h header) put(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], frameMagic)
	binary.LittleEndian.PutUint32(b[4:], h.seq)
	binary.LittleEndian.PutUint32(b[8:], uint32(h.src))
	binary.LittleEndian.PutUint32(b[12:], uint32(h.dst))
	b[16] = byte(h.op)
	b[17] = byte(h.dtype)
	clear(b[18:20])
	binary.LittleEndian.PutUint32(b[20:], h.stream)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.n))
}

func parseHeader(b []byte) (header, error) {
	if m := binary.LittleEndian.Uint32(b); m != frameMagic {
		return header{}, fmt.Errorf("not a ctrkit frame (magic %#08x, want %#08x): another program on this port?", m, frameMagic)
	}
	h := header{
		seq:   binary.LittleEndian.Uint32(b[4:]),
		src:   int(binary.LittleEndian.Uint32(b[8:])),
		dst:   int(binary.LittleEndian.Uint32(b[12:])),
		op:    op(b[16]),
		dtype: tensor.DType(b[17]),
		n:     int64(binary.LittleEndian.Uint64(b[24:])),

		stream: binary.LittleEndian.Uint32(b[20:]),
	}
	if h.n < 0 || h.n > maxFrame {
		return header{}, fmt.Errorf("frame of %d bytes (limit %d)", h.n, int64(maxFrame))
	}
	return h, nil
}

func (h header) String() string {
	return fmt.Sprintf("%s #%d of %d bytes (%s)", h.op, h.seq, h.n, h.dtype)
}

type message struct {
	h    header
	data []byte
}

// router moves messages between the ranks of a world: between goroutines
// of this process through queues, to other processes over one TCP
// connection per process pair whose reader goroutine files incoming
// messages into the same queues.
type router struct {
	world   int
	timeout time.Duration
	owner   []int // global rank → process index
	self    int   // this process's index
	// queue[src, dst, stream] for dst a rank of this process.
	mu    sync.Mutex
	queue map[[3]int]chan message
	// ended are the Gatherer streams closed by a rank of this process,
	// [rank, stream]: their late messages to it are dropped.
	ended map[[2]int]bool
	// gone[r] is closed when rank r left (closed its comm, its process's
	// connection dropped); why[r] says why.
	gone []chan struct{}
	why  []error
	once []sync.Once
	// conns[p] is the connection to process p (nil for this one).
	conns []*peerConn
	done  chan struct{}
	wg    sync.WaitGroup
}

type peerConn struct {
	c    net.Conn
	addr string
	wmu  sync.Mutex
	hbuf [headerBytes]byte
}

func newRouter(owner []int, self int, timeout time.Duration) *router {
	w := len(owner)
	r := &router{world: w, timeout: timeout, owner: owner, self: self, queue: map[[3]int]chan message{}, ended: map[[2]int]bool{},
		gone: make([]chan struct{}, w), why: make([]error, w), once: make([]sync.Once, w), done: make(chan struct{})}
	for i := range r.gone {
		r.gone[i] = make(chan struct{})
	}
	return r
}

func (r *router) local(rank int) bool { return r.owner[rank] == r.self }

func (r *router) q(src, dst int, stream uint32) chan message {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [3]int{src, dst, int(stream)}
	c, ok := r.queue[k]
	if !ok {
		c = make(chan message, queueDepth)
		r.queue[k] = c
	}
	return c
}

// leave marks rank as gone with a reason (first reason wins).
func (r *router) leave(rank int, why error) {
	r.once[rank].Do(func() {
		r.why[rank] = why
		close(r.gone[rank])
	})
}

// send delivers data (copied for local peers) from src to dst.
func (r *router) send(h header, data []byte) error {
	h.n = int64(len(data))
	if r.local(h.dst) {
		if h.stream != 0 && r.streamEnded(h.dst, h.stream) {
			return nil
		}
		select {
		case r.q(h.src, h.dst, h.stream) <- message{h, append([]byte(nil), data...)}:
			return nil
		case <-r.gone[h.dst]:
			return r.peerErr(h.src, h.dst, "sending "+h.String())
		case <-time.After(r.timeout):
			return fmt.Errorf("%w: rank %d: rank %d did not take %s within %v", ErrPeer, h.src, h.dst, h, r.timeout)
		}
	}
	pc := r.conns[r.owner[h.dst]]
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	h.put(pc.hbuf[:])
	pc.c.SetWriteDeadline(time.Now().Add(r.timeout))
	bufs := net.Buffers{pc.hbuf[:], data}
	if _, err := bufs.WriteTo(pc.c); err != nil {
		return fmt.Errorf("%w: rank %d: sending %s to rank %d at %s: %v", ErrPeer, h.src, h, h.dst, pc.addr, err)
	}
	return nil
}

// recv waits for the next message from src to dst, checks it is want and
// copies its payload into data (len(data) must equal want.n).
func (r *router) recv(want header, data []byte) error {
	var m message
	select {
	case m = <-r.q(want.src, want.dst, want.stream):
	case <-r.gone[want.src]:
		select { // a message sent before it left still counts
		case m = <-r.q(want.src, want.dst, want.stream):
		default:
			return r.peerErr(want.dst, want.src, "waiting for "+want.String())
		}
	case <-time.After(r.timeout):
		return fmt.Errorf("%w: rank %d: no %s from rank %d within %v (is every rank running and calling the same collectives?)", ErrPeer, want.dst, want, want.src, r.timeout)
	}
	if m.h.op != want.op || m.h.seq != want.seq || m.h.n != int64(len(data)) || m.h.dtype != want.dtype {
		return fmt.Errorf("%w: rank %d expected %s from rank %d, rank %d sent %s", ErrMismatch, want.dst, want, want.src, want.src, m.h)
	}
	copy(data, m.data)
	return nil
}

func (r *router) peerErr(self, peer int, doing string) error {
	why := r.why[peer]
	if why == nil {
		why = errors.New("it left the group")
	}
	return fmt.Errorf("%w: rank %d, %s: rank %d: %v", ErrPeer, self, doing, peer, why)
}

// serve files the frames of process p's connection into the queues until
// the connection closes; then p's ranks are gone.
func (r *router) serve(p int) {
	defer r.wg.Done()
	pc := r.conns[p]
	var hb [headerBytes]byte
	fail := func(err error) {
		for rank, o := range r.owner {
			if o == p {
				r.leave(rank, err)
			}
		}
	}
	for {
		if _, err := io.ReadFull(pc.c, hb[:]); err != nil {
			select {
			case <-r.done:
				fail(errors.New("this process closed its communicator"))
			default:
				if errors.Is(err, io.EOF) {
					fail(fmt.Errorf("its process (%s) closed the connection", pc.addr))
				} else {
					fail(fmt.Errorf("connection to %s: %v", pc.addr, err))
				}
			}
			return
		}
		h, err := parseHeader(hb[:])
		if err == nil && (h.src < 0 || h.src >= r.world || r.owner[h.src] != p || h.dst < 0 || h.dst >= r.world || !r.local(h.dst)) {
			err = fmt.Errorf("frame from rank %d to rank %d on the connection of process %d", h.src, h.dst, p)
		}
		if err != nil {
			fail(fmt.Errorf("from %s: %v", pc.addr, err))
			pc.c.Close()
			return
		}
		data := make([]byte, h.n)
		if _, err := io.ReadFull(pc.c, data); err != nil {
			fail(fmt.Errorf("from %s, in the middle of %s: %v", pc.addr, h, err))
			return
		}
		if h.stream != 0 && r.streamEnded(h.dst, h.stream) {
			continue // a Gatherer closed here: its peers' last parts are not wanted
		}
		select {
		case r.q(h.src, h.dst, h.stream) <- message{h, data}:
		case <-r.gone[h.dst]:
		case <-r.done:
			return
		}
	}
}

// start runs a reader for every connection.
func (r *router) start() {
	for p, pc := range r.conns {
		if pc != nil {
			r.wg.Add(1)
			go r.serve(p)
		}
	}
}

// close ends the router: connections closed, readers stopped.
func (r *router) close() {
	select {
	case <-r.done:
		return
	default:
	}
	close(r.done)
	for _, pc := range r.conns {
		if pc != nil {
			pc.c.Close()
		}
	}
	r.wg.Wait()
}
