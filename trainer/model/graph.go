package model

import (
	"fmt"
	"io"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// CUDA graphs of the training step (Options.CUDAGraph, HugeCTR's
// use_cuda_graph / solver "cuda_graph").
//
// The first full step trains eagerly, so every workspace and lazily made
// buffer of the step exists; the next full step is captured into a graph on
// the backend's compute stream (tensor.StepGraphs) and run; later full steps
// replay it. The inputs a step reads are the feeder's fixed buffers (the
// pipeline's Commit copies each batch into them and runs SplitInputs before
// the step, outside the graph: it reads the staging slot of the batch, a
// different buffer each time, and hands the slot back to the uploader as it
// returns, so its work must be queued then), and the scalars that change per step
// (learning rate, Adam's bias correction and step, Dropout's counter) reach
// the kernels through the backend's per-step scalar block, so the same
// graph serves every full step. What Fit does around a step stays outside
// the graph and eager: the input commit before it, the loss watch's copy of
// the step's loss into its ring after it (a column that changes every
// step), loss downloads for display. The backend replays the graph only
// when the step's calls equal the captured ones, else runs the step eagerly
// and says why; the step computes the same either way.
//
// Steps run eagerly, with the reason noted once (GraphStats.Notes, and a
// "note: CUDA graph ..." line of Fit's log): a short batch (n < batch
// size: its loss and gradients are means over n), a profiled step (per-layer
// events), multi-rank groups (collectives between the ranks' steps), a layer
// that declares its step not capturable (GraphRefusal), the backend
// refusing or failing a capture, or a step that differs from the captured
// one. A difference makes the next full step capture again (up to
// maxRecaptures times); the others drop the graph for the rest of the run.

// maxRecaptures is how many times a step that differs from the captured
// one (its calls replayable, their buffers or scalars changed) makes the
// next full step capture again before the graph is given up: a workspace
// grown by an evaluation settles after one, a key count that changes with
// every batch (multi-hot inputs) never does.
const maxRecaptures = 3

// graphRefuser is implemented by a layer whose training step a CUDA graph
// cannot replay (it reads device results on the host, or changes its work
// from step to step): GraphRefusal says why ("" when it can).
type graphRefuser interface {
	GraphRefusal() string
}

// GraphStats say how a model's training steps ran.
type GraphStats struct {
	// Enabled: Options.CUDAGraph on a backend with CUDA graphs, and the
	// graph not dropped.
	Enabled bool `json:"enabled"`
	// Graphed steps ran as the graph (the capture included), Eager ones
	// eagerly (the warm-up step included); Captures counts captures.
	Graphed  int64 `json:"graphed"`
	Eager    int64 `json:"eager"`
	Captures int64 `json:"captures"`
	// Notes are why steps ran eagerly, each once, in order.
	Notes []string `json:"notes,omitempty"`
}

// stepGraph is the model's graph state; nil when Options.CUDAGraph is off.
type stepGraph struct {
	g     tensor.StepGraphs // nil: the backend has none
	off   string            // why the graph is not used any more ("" while it is)
	warm  bool              // a full eager step has run
	stats GraphStats
	// recaptures counts the captures after a step differed from the
	// captured one (at most maxRecaptures, then the graph is dropped).
	recaptures int
	reported   int  // notes written to a log so far
	announced  bool // the capture was written to a log
	seen       map[string]bool
	// backendGraphs: the backend has CUDA graphs (the graph may have been
	// dropped since).
	backendGraphs bool
}

// newStepGraph is the graph state of m (Options.CUDAGraph).
func newStepGraph(m *Model) *stepGraph {
	sg := &stepGraph{seen: map[string]bool{}}
	g, ok := m.be.(tensor.StepGraphs)
	sg.backendGraphs = ok
	switch {
	case !ok:
		sg.drop(fmt.Sprintf("the %s backend has no CUDA graphs: steps run eagerly", m.be.Name()))
	case m.par != nil:
		sg.drop("a model of several ranks runs collectives between its steps: steps run eagerly")
	default:
		// A backend holds one step graph: an earlier model's is of no use.
		g.DropGraph()
		sg.g = g
		sg.stats.Enabled = true
		for _, l := range m.dense {
			if r, ok := l.(graphRefuser); ok && r.GraphRefusal() != "" {
				sg.drop(r.GraphRefusal() + ": steps run eagerly")
				break
			}
		}
		for _, e := range m.embs {
			if r, ok := any(e.layer).(graphRefuser); ok && r.GraphRefusal() != "" && sg.off == "" {
				sg.drop(r.GraphRefusal() + ": steps run eagerly")
			}
		}
	}
	return sg
}

func (sg *stepGraph) note(s string) {
	if !sg.seen[s] {
		sg.seen[s] = true
		sg.stats.Notes = append(sg.stats.Notes, s)
	}
}

// drop stops using the graph for good.
func (sg *stepGraph) drop(why string) {
	if sg.off == "" {
		sg.off = why
	}
	if sg.g != nil {
		sg.g.DropGraph()
	}
	sg.g = nil
	sg.stats.Enabled = false
	sg.note(why)
}

// graphWhy is why the step of n samples cannot run as the graph, "" when it
// can.
func (m *Model) graphWhy(n int) string {
	switch {
	case n < m.batch:
		return fmt.Sprintf("a short batch (%d of %d samples) trains eagerly", n, m.batch)
	case m.prof != nil:
		return "profiled steps (--profile) time each layer with events and run eagerly"
	}
	return ""
}

// step trains on the n samples of the inputs already loaded: as the CUDA
// graph when it can (Options.CUDAGraph), else eagerly (eagerStep).
func (m *Model) step(n int) error {
	sg := m.graph
	if sg == nil || sg.g == nil {
		if sg != nil {
			sg.stats.Eager++
		}
		return m.eagerStep(n)
	}
	if why := m.graphWhy(n); why != "" || !sg.warm {
		if why != "" {
			sg.note(why)
		} else {
			sg.warm = true // the next full step captures
		}
		sg.stats.Eager++
		return m.eagerStep(n)
	}
	if err := sg.g.BeginGraphStep(); err != nil {
		sg.drop(fmt.Sprintf("the backend cannot record a graph (%v): steps run eagerly", err))
		sg.stats.Eager++
		return m.eagerStep(n)
	}
	err := m.eagerStep(n)
	r := sg.g.EndGraphStep(err != nil)
	switch {
	case r.Replayed:
		sg.stats.Graphed++
		if r.Captured {
			sg.stats.Captures++
		}
	default:
		sg.stats.Eager++
	}
	switch {
	case r.Why == "":
	case r.Differs && sg.recaptures < maxRecaptures:
		// E.g. an evaluation grew a workspace the step uses: capture again.
		sg.recaptures++
		sg.note(fmt.Sprintf("iteration %d: %s: the step ran eagerly; the next full step captures again", m.iter, r.Why))
	default:
		sg.drop(fmt.Sprintf("iteration %d: %s: the graph is dropped, steps run eagerly", m.iter, r.Why))
	}
	if err != nil {
		return err
	}
	return m.be.Err()
}

// GraphStats says how the training steps so far ran (zero when
// Options.CUDAGraph is off).
func (m *Model) GraphStats() GraphStats {
	if m.graph == nil {
		return GraphStats{}
	}
	s := m.graph.stats
	s.Notes = append([]string(nil), s.Notes...)
	return s
}

// reportGraph writes the CUDA graph notes not yet written to w (Fit's log);
// only a model whose backend has graphs reports (a CPU run of a HugeCTR
// config, cuda_graph true by default, stays quiet).
func (m *Model) reportGraph(w io.Writer) {
	sg := m.graph
	if sg == nil || !sg.backendGraphs {
		return
	}
	if sg.stats.Captures > 0 && !sg.announced {
		sg.announced = true
		fmt.Fprintf(w, "note: CUDA graph: iteration %d captured the training step; full batches replay it (--cuda-graph=false: eager steps)\n", m.iter)
	}
	for ; sg.reported < len(sg.stats.Notes); sg.reported++ {
		fmt.Fprintf(w, "note: CUDA graph: %s\n", sg.stats.Notes[sg.reported])
	}
}
