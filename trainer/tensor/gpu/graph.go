package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// CUDA graphs of the training step (tensor.StepGraphs).
//
// Between BeginGraphStep and EndGraphStep the backend defers its
// operations: each one still checks its operands on the host and builds its
// kernel arguments, but the work it would queue (a closure run on the device
// goroutine) is kept. EndGraphStep then runs the step in one call to the
// device goroutine:
//
//   - the first time, the kept work is captured into a CUDA graph (stream
//     capture on the compute stream; the side stream of the fused path
//     joins through its events) while a live cuda.Tape fingerprints every
//     launch, copy, memset, event and cuBLAS call; the graph is then
//     launched;
//   - later, the kept work is run against a dry tape (hashed, not queued)
//     and the graph is launched only when the tape equals the captured one
//     call for call: the same kernels, shapes, addresses and scalar
//     arguments, so the replay runs exactly what the eager calls would.
//
// Scalars that change every step (an optimizer's learning rate, Adam's
// bias-corrected rate and step, Dropout's Philox counter) cannot be kernel
// arguments of a replayed graph. While deferring, those operations write
// them into a 16-byte slot of a pinned host block and pass the slot's device
// address instead (the argument itself becomes 0, so the launch is the same
// every step); EndGraphStep copies the block to the device (an asynchronous
// copy on the compute stream, outside the graph) before it launches the
// graph or runs the work eagerly. The kernels read the slot when its address
// is not null, so they compute with the same float32 values either way.
// The host block is a ring of graphRing buffers, each reused only after its
// copy of graphRing steps ago has run (an event per buffer).
//
// Whatever the graph cannot replay falls back to running the kept work
// eagerly, never to something else: a tape that differs from the captured
// one (the reason names the first differing call), a capture the driver
// refuses, a host synchronisation or host copy inside the step (Upload,
// Download, Sync, Alloc or Free while deferring run the kept work at once
// and the rest of the step eagerly), more per-step scalars than the block
// holds. Each such reason drops the graph; EndGraphStep reports it.

const (
	graphScalarBytes = 64 << 10 // per-step scalar block: 4096 slots of 16 bytes
	graphRing        = 4
)

// graphState is the backend's step graph.
type graphState struct {
	deferring bool
	ops       []graphOp
	dev       cuda.Ptr // the per-step scalar block on the device
	host      [graphRing][]byte
	ev        [graphRing]cuda.Event
	used      [graphRing]bool
	r, off    int // ring buffer of this step, bytes of it used
	overflow  bool
	broken    string // why the step stopped deferring
	tape      *cuda.Tape
	exec      *cuda.Graph
	replays   int64
}

type graphOp struct {
	op string
	fn func(*cuda.Ctx) error
}

// ltSig is a cuBLASLt matmul's shape: the ones cuBLASLt refused in eager
// steps are refused (unfused path) inside graph steps without asking it.
type ltSig struct {
	s                      cuda.Stream
	ta, tb                 bool
	m, n, k, lda, ldb, ldc int
	epi                    cuda.Epilogue
	auxLD                  int
	ty                     cuda.Types
	bty                    cuda.DataType // the bias's type (a float32 and a half one are two shapes)
}

var _ tensor.StepGraphs = (*Backend)(nil)

// deferring reports whether operations are being kept for a graph step.
func (be *Backend) deferring() bool { return be.graph != nil && be.graph.deferring }

// BeginGraphStep implements tensor.StepGraphs.
func (be *Backend) BeginGraphStep() error {
	if be.opts.Debug {
		return errors.New("the backend's debug mode synchronises after every operation")
	}
	if be.err != nil {
		return be.err
	}
	g := be.graph
	if g == nil {
		g = &graphState{}
		err := be.dev.Do(func(c *cuda.Ctx) error {
			var err error
			if g.dev, err = c.Malloc(graphScalarBytes); err != nil {
				return err
			}
			for i := range g.host {
				if g.host[i], err = c.HostAlloc(graphScalarBytes); err != nil {
					return err
				}
				if g.ev[i], err = c.NewEvent(false); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			be.dev.Do(func(c *cuda.Ctx) error { g.free(c); return nil })
			return fmt.Errorf("allocating the CUDA graph's scalar block: %w", err)
		}
		be.graph = g
	}
	g.deferring, g.ops, g.off, g.overflow, g.broken = true, g.ops[:0], 0, false, ""
	return nil
}

// EndGraphStep implements tensor.StepGraphs.
func (be *Backend) EndGraphStep(failed bool) tensor.GraphStep {
	g := be.graph
	if g == nil {
		return tensor.GraphStep{Why: "no graph step was begun"}
	}
	if !g.deferring { // broken: ran eagerly already
		why := g.broken
		be.dropGraph()
		return tensor.GraphStep{Why: why}
	}
	g.deferring = false
	var res tensor.GraphStep
	switch {
	case g.overflow:
		res.Why = fmt.Sprintf("the step has more per-step kernel scalars than the graph's block holds (%d slots)", graphScalarBytes/16)
		be.runKept()
	case be.err != nil || failed:
		// The step failed on the host: run what was issued before the error, as eager
		// mode would have, and let the caller report the error.
		be.runKept()
		return res
	case g.exec == nil:
		res.Why = be.capture()
		res.Captured = res.Why == ""
		res.Replayed = res.Captured
	default:
		res.Why, res.Differs = be.replay()
		res.Replayed = res.Why == ""
	}
	if res.Why != "" {
		be.dropGraph()
	}
	return res
}

// DropGraph implements tensor.StepGraphs.
func (be *Backend) DropGraph() {
	if be.deferring() {
		be.graphBreak("the graph was dropped")
	}
	be.dropGraph()
}

func (be *Backend) dropGraph() {
	g := be.graph
	if g == nil || g.exec == nil {
		return
	}
	exec := g.exec
	g.exec, g.tape = nil, nil
	be.dev.Do(func(c *cuda.Ctx) error {
		c.StreamSync(be.s)
		c.DestroyGraph(exec)
		return nil
	})
}

// GraphReplays is how many steps the current graph has run.
func (be *Backend) GraphReplays() int64 {
	if be.graph == nil {
		return 0
	}
	return be.graph.replays
}

// graphBreak ends deferring (a host-side operation inside the step): the
// kept work runs now, the rest of the step eagerly, and EndGraphStep
// reports why.
func (be *Backend) graphBreak(why string) {
	g := be.graph
	if g == nil || !g.deferring {
		return
	}
	g.deferring = false
	g.broken = "the step calls " + why + ", which a CUDA graph cannot replay"
	be.runKept()
}

// stepScalars returns the device address of this step's 16-byte scalar
// slot holding w0, w1 (little-endian), or 0 when not deferring (the caller
// then passes its scalars as kernel arguments).
func (be *Backend) stepScalars(w0, w1 uint64) cuda.Ptr {
	g := be.graph
	if g == nil || !g.deferring {
		return 0
	}
	if g.off+16 > graphScalarBytes {
		g.overflow = true
		return 0
	}
	h := g.host[g.r][g.off : g.off+16]
	binary.LittleEndian.PutUint64(h, w0)
	binary.LittleEndian.PutUint64(h[8:], w1)
	p := g.dev.Add(g.off)
	g.off += 16
	return p
}

// stageScalars queues the copy of this step's scalar block (outside any
// capture and tape).
func (be *Backend) stageScalars(c *cuda.Ctx) error {
	g := be.graph
	if g.off == 0 {
		return nil
	}
	if err := c.HtoD(g.dev, unsafe.Pointer(&g.host[g.r][0]), g.off, be.s); err != nil {
		return err
	}
	if err := c.Record(g.ev[g.r], be.s); err != nil {
		return err
	}
	g.used[g.r] = true
	g.r = (g.r + 1) % graphRing
	if g.used[g.r] { // the next step writes this buffer: its copy must have run
		return c.EventSync(g.ev[g.r])
	}
	return nil
}

// runOps runs the kept operations on c, labelling the tape with each
// operation; the first error stops it. With sticky, an error becomes the
// backend's error as in eager mode.
func (be *Backend) runOps(c *cuda.Ctx, sticky bool) error {
	for _, o := range be.graph.ops {
		be.op = o.op
		c.SetTapeLabel(o.op)
		if err := o.fn(c); err != nil {
			if sticky && be.err == nil {
				be.err = &tensor.OpError{Op: o.op, Detail: err.Error(), Err: deviceErr(err)}
			}
			return err
		}
	}
	return nil
}

// runKept runs the kept work eagerly (after staging the scalars it reads).
func (be *Backend) runKept() {
	if len(be.graph.ops) == 0 && be.graph.off == 0 {
		return
	}
	be.dev.Do(be.runEager)
	be.graph.ops = be.graph.ops[:0]
}

// runEager stages the scalars the kept work reads and runs it on c; an
// error becomes the backend's, as in an eager step.
func (be *Backend) runEager(c *cuda.Ctx) error {
	if err := be.stageScalars(c); err != nil {
		if be.err == nil {
			be.err = &tensor.OpError{Op: "graph_scalars", Detail: err.Error(), Err: deviceErr(err)}
		}
		return nil
	}
	be.runOps(c, true)
	return nil
}

// capture captures the kept work into the graph and launches it; on any
// failure it runs the work eagerly and returns why.
func (be *Backend) capture() string {
	g := be.graph
	var why string
	be.dev.Do(func(c *cuda.Ctx) error {
		if err := c.BeginCapture(be.s); err != nil {
			why = fmt.Sprintf("stream capture refused: %v", err)
		} else {
			c.StartTape(false)
			opErr := be.runOps(c, false)
			t := c.StopTape()
			exec, err := c.EndCapture(be.s)
			switch {
			case opErr != nil:
				why = fmt.Sprintf("capturing %s: %v", be.op, opErr)
			case err != nil:
				why = fmt.Sprintf("ending the capture: %v", err)
			case t.Unsafe != "":
				why = fmt.Sprintf("the step calls %s, which a CUDA graph cannot replay", t.Unsafe)
			}
			if why == "" {
				g.exec, g.tape = exec, t
			} else if exec != nil {
				c.DestroyGraph(exec)
			}
		}
		if why != "" {
			return be.runEager(c) // nothing of the step ran
		}
		return be.launchGraph(c)
	})
	g.ops = g.ops[:0]
	return why
}

// replay checks the kept work against the captured tape and launches the
// graph, or runs the work eagerly and returns why (differs: its calls
// differ from the captured ones; a new capture may serve later steps).
func (be *Backend) replay() (why string, differs bool) {
	g := be.graph
	be.dev.Do(func(c *cuda.Ctx) error {
		c.StartTape(true)
		opErr := be.runOps(c, false)
		t := c.StopTape()
		if d := g.tape.Diff(t); opErr != nil || d >= 0 {
			why, differs = be.tapeDiff(g.tape, t, d, opErr), opErr == nil
			return be.runEager(c)
		}
		return be.launchGraph(c)
	})
	g.ops = g.ops[:0]
	return why, differs
}

func (be *Backend) launchGraph(c *cuda.Ctx) error {
	g := be.graph
	err := be.stageScalars(c)
	if err == nil {
		err = c.LaunchGraph(g.exec, be.s)
	}
	if err != nil {
		if be.err == nil {
			be.err = &tensor.OpError{Op: "graph_launch", Detail: err.Error(), Err: deviceErr(err)}
		}
		return nil
	}
	g.replays++
	return nil
}

// tapeDiff describes the first difference between the captured tape and
// this step's.
func (be *Backend) tapeDiff(want, got *cuda.Tape, d int, opErr error) string {
	if opErr != nil {
		return fmt.Sprintf("this step's %s cannot be recorded: %v", be.op, opErr)
	}
	item := func(t *cuda.Tape) string {
		if d >= len(t.Items) {
			return "nothing"
		}
		it := t.Items[d]
		s := it.Call
		if it.Func != 0 {
			for name, f := range be.fns {
				if f == it.Func {
					s = "kernel " + name
				}
			}
		}
		if it.Label != "" {
			s = it.Label + ": " + s
		}
		return s
	}
	return fmt.Sprintf("the step differs from the captured one at call %d (%s, captured %s): its shapes, buffers or scalar arguments changed",
		d+1, item(got), item(want))
}

// closeGraph frees the graph and its buffers (on the device goroutine).
func (be *Backend) closeGraph(c *cuda.Ctx) {
	if g := be.graph; g != nil {
		if g.exec != nil {
			c.DestroyGraph(g.exec)
			g.exec = nil
		}
		g.free(c)
		be.graph = nil
	}
}

func (g *graphState) free(c *cuda.Ctx) {
	if g.dev != 0 {
		c.Free(g.dev)
		g.dev = 0
	}
	for i := range g.host {
		if g.host[i] != nil {
			c.HostFree(g.host[i])
			g.host[i] = nil
		}
		if g.ev[i] != 0 {
			c.DestroyEvent(g.ev[i])
			g.ev[i] = 0
		}
	}
}

// ltRefused notes a shape cuBLASLt refused in an eager step (lt, fused.go).
func (be *Backend) ltRefused(sig ltSig) {
	if be.ltNo == nil {
		be.ltNo = map[ltSig]bool{}
	}
	be.ltNo[sig] = true
}

func ltSigOf(s cuda.Stream, transA, transB bool, m, n, k, lda, ldb, ldc int, x cuda.LtArgs) ltSig {
	return ltSig{s: s, ta: transA, tb: transB, m: m, n: n, k: k, lda: lda, ldb: ldb, ldc: ldc, epi: x.Epilogue, auxLD: x.AuxLD, ty: x.Types, bty: x.BiasType}
}
