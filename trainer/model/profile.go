package model

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Profile is where the time of training steps goes, per layer and phase
// (ctrkit bench train --profile): the mean milliseconds per step of each
// span of the step, timed on the backend (CUDA events on the GPU's
// compute stream, tensor.Timer) or by the host's clock (the CPU, whose
// operations finish before they return).
//
// The spans of a step are contiguous: each starts where the previous one
// ended, the first where the previous step's last ended, so a span
// includes any time the device sat idle waiting for the host to issue its
// work, and the spans of all steps add up to the timed run's device
// time. SpanMillis is that sum per step; StepMillis the wall time per
// step measured around the run (the backend synchronised at both ends).
type Profile struct {
	Steps      int     `json:"steps"`
	Batch      int     `json:"batch"`
	StepMillis float64 `json:"step_ms"`
	SpanMillis float64 `json:"span_ms"`
	// DeviceTimed: the spans are the backend's own (CUDA events), not
	// the host's clock.
	DeviceTimed bool `json:"device_timed"`
	// Layers are the rows: each embedding and dense layer in the model's
	// order, then the steps' other spans (the loss sum, the regularizer,
	// "other": label slicing and the optimizer's own work) and, through
	// the pipeline, the input rows: the device idle between steps while
	// the host fetched the next batch, and Commit (staged batch into the
	// inputs, SplitInputs).
	Layers []LayerProfile `json:"layers"`
	// Pipeline is the input pipeline's side (nil for resident batches).
	Pipeline *PipelineProfile `json:"pipeline,omitempty"`
	// GemmTFLOPS is the GEMM rate of the layers with a FLOP count (Σ
	// FLOPs over Σ their forward and backward time).
	GemmTFLOPS float64 `json:"gemm_tflops,omitempty"`
}

// LayerProfile is one row of a Profile: mean milliseconds per step.
type LayerProfile struct {
	Layer string `json:"layer"` // the layer's top(s), or a span's name in parentheses
	Type  string `json:"type"`
	// Kind is "embedding", "dense", "step" (the step's other spans) or
	// "input" (the pipeline's device spans).
	Kind     string  `json:"kind"`
	FwdMs    float64 `json:"fwd_ms"`
	BwdMs    float64 `json:"bwd_ms"`
	UpdateMs float64 `json:"update_ms"`
	// HostMs is the host's time issuing the row's spans (equal to their
	// sum on the CPU; on the GPU the launch cost).
	HostMs float64 `json:"host_ms"`
	// Share is (fwd + bwd + update) / StepMillis.
	Share float64 `json:"share"`
	// FwdFLOP and BwdFLOP are the GEMM floating-point operations per
	// step (2·m·n·k forward, twice that backward) of InnerProduct, MLP,
	// MultiCross and Interaction layers; TFLOPS their rate.
	FwdFLOP float64 `json:"fwd_flop,omitempty"`
	BwdFLOP float64 `json:"bwd_flop,omitempty"`
	TFLOPS  float64 `json:"tflops,omitempty"`
}

// Millis is the row's time per step.
func (r LayerProfile) Millis() float64 { return r.FwdMs + r.BwdMs + r.UpdateMs }

// PipelineProfile is the input pipeline's side of a profiled run, per step
// (a batch a step).
type PipelineProfile struct {
	// WaitMs is the training goroutine's wait for the next batch (host),
	// mean and longest.
	WaitMs    float64 `json:"wait_ms"`
	WaitMaxMs float64 `json:"wait_max_ms"`
	// Batches the prefetcher read while profiled; ReadMs its wait for the
	// reader per batch (Read, or a lending reader's Next) and ReaderRate
	// the samples/s that wait allows (batch / ReadMs; 0 when not measured).
	Batches    int     `json:"batches"`
	ReadMs     float64 `json:"read_ms"`
	ReaderRate float64 `json:"reader_samples_per_sec"`
	// Staged: batches go through the backend's staging (the GPU: pinned
	// memory, copies on a copy stream); else Commit loads them (the CPU)
	// and the rows below are 0.
	Staged bool `json:"staged"`
	// HostSideMs is the host's check and key counts per batch; StageMs
	// the prefetcher's Stage per batch (waiting for a free staging slot
	// and for its copies).
	HostSideMs float64 `json:"host_side_ms"`
	StageMs    float64 `json:"stage_ms"`
	// CopyMs is the staging copies' device time on the copy stream per
	// batch (CUDA events; 0 when the backend does not time them). They
	// overlap the compute stream's work.
	CopyMs float64 `json:"copy_ms"`
	// Turns are the pass boundaries inside the profiled steps;
	// TurnWaitMs the training goroutine's mean wait for a pass's first
	// batch (included in WaitMs) and TurnMs the prefetcher's time
	// switching readers per turn (closing the old one; opening the next
	// when it was not opened ahead).
	Turns      int     `json:"turns,omitempty"`
	TurnWaitMs float64 `json:"turn_wait_ms,omitempty"`
	TurnMs     float64 `json:"turn_ms,omitempty"`
}

// spanKind names the spans of a step.
type spanKind uint8

const (
	spanGap       spanKind = iota // from the previous step's end to this step's start
	spanCommit                    // the pipeline's Commit
	spanLabels                    // runLabels
	spanEmbFwd                    // embedding i's forward
	spanDenseFwd                  // dense layer i's forward
	spanLossSum                   // the weighted loss sum's forward
	spanDenseBwd                  // dense layer i's backward
	spanReg                       // the regularizer's gradient
	spanEmbBwd                    // embedding i's backward
	spanParam                     // the update of dense parameter i
	spanOptRest                   // the rest of the dense optimizer (or its Skip)
	spanEmbUpdate                 // embedding i's optimizer
)

var spanNames = [...]string{"gap", "commit", "labels", "embedding forward", "dense forward", "loss sum",
	"dense backward", "regularizer", "embedding backward", "parameter update", "optimizer rest", "embedding update"}

type spanID struct {
	kind spanKind
	i    int
}

func (s spanID) String() string { return fmt.Sprintf("%s %d", spanNames[s.kind], s.i) }

// profileRing is how many steps' timelines are in flight: reading step
// s−4's while step s is issued waits for nothing on the GPU.
const profileRing = 4

// profiler records the spans of training steps (Model.prof; nil: off).
// Point k+1 of a step's timeline ends span seq[k]; point 0 is recorded
// with the previous step's last point.
type profiler struct {
	seq        []spanID
	next       int // spans of the current step marked so far
	timer      tensor.Timer
	ring       [profileRing]profStep
	cur        int
	sum, host  []float64 // per span of seq: ms over the steps read
	scratch    []float64
	steps      int
	err        error
	afterParam func(int)
}

type profStep struct {
	tl    tensor.Timeline // nil: host clock
	at    []time.Time     // the points on the host clock
	ready bool            // a finished step waits to be read
}

// newProfiler builds the span sequence of m's training step (pipeline:
// with the input pipeline's Commit) and the timelines.
func newProfiler(m *Model, pipeline bool) (*profiler, error) {
	p := &profiler{}
	add := func(k spanKind, i int) { p.seq = append(p.seq, spanID{k, i}) }
	add(spanGap, 0)
	if pipeline {
		add(spanCommit, 0)
	}
	add(spanLabels, 0)
	for i := range m.embs {
		add(spanEmbFwd, i)
	}
	for i := range m.dense {
		add(spanDenseFwd, i)
	}
	if m.total != nil {
		add(spanLossSum, 0)
	}
	for i := len(m.dense) - 1; i >= 0; i-- {
		add(spanDenseBwd, i)
	}
	if m.reg != nil {
		add(spanReg, 0)
	}
	for i := range m.embs {
		add(spanEmbBwd, i)
	}
	if !m.frozen {
		for i := range m.params {
			add(spanParam, i)
		}
	}
	add(spanOptRest, 0)
	for i := range m.embs {
		add(spanEmbUpdate, i)
	}
	p.sum = make([]float64, len(p.seq))
	p.host = make([]float64, len(p.seq))
	p.scratch = make([]float64, len(p.seq))
	p.afterParam = func(i int) { p.mark(spanParam, i) }
	p.timer, _ = m.be.(tensor.Timer)
	for r := range p.ring {
		st := &p.ring[r]
		st.at = make([]time.Time, len(p.seq)+1)
		if p.timer != nil {
			tl, err := p.timer.NewTimeline(len(p.seq) + 1)
			if err != nil {
				p.free()
				return nil, err
			}
			st.tl = tl
		}
	}
	return p, nil
}

func (p *profiler) free() {
	for r := range p.ring {
		if tl := p.ring[r].tl; tl != nil {
			tl.Free()
			p.ring[r].tl = nil
		}
	}
}

// point records point k of the current step.
func (p *profiler) point(k int) {
	st := &p.ring[p.cur]
	if st.tl != nil {
		st.tl.Mark(k)
	}
	st.at[k] = time.Now()
}

// start records the first step's point 0.
func (p *profiler) start() {
	p.cur, p.next = 0, 0
	p.point(0)
}

// mark ends span (kind, i) of the current step; a no-op when p is nil
// (profiling off).
func (p *profiler) mark(kind spanKind, i int) {
	if p == nil {
		return
	}
	if p.next >= len(p.seq) || p.seq[p.next] != (spanID{kind, i}) {
		if p.err == nil {
			p.err = fmt.Errorf("profile: span %v after %d of the step's %d spans (want %v)", spanID{kind, i}, p.next, len(p.seq), p.seq[min(p.next, len(p.seq)-1)])
		}
		return
	}
	p.next++
	p.point(p.next)
}

// paramHook is the dense optimizer's per-parameter hook (nil when off).
func (p *profiler) paramHook() func(int) {
	if p == nil {
		return nil
	}
	return p.afterParam
}

// endStep closes the current step; unless it is the last, the next
// step's point 0 is recorded (after reading out the step that used its
// timeline before).
func (p *profiler) endStep(last bool) error {
	if p.err != nil {
		return p.err
	}
	if p.next != len(p.seq) {
		p.err = fmt.Errorf("profile: a step of %d spans, want %d", p.next, len(p.seq))
		return p.err
	}
	p.ring[p.cur].ready = true
	if last {
		return nil
	}
	p.cur = (p.cur + 1) % profileRing
	if p.ring[p.cur].ready {
		if err := p.read(p.cur); err != nil {
			return err
		}
	}
	p.next = 0
	p.point(0)
	return nil
}

// read adds the spans of ring entry r's finished step.
func (p *profiler) read(r int) error {
	st := &p.ring[r]
	if st.tl != nil {
		if err := st.tl.Millis(p.scratch); err != nil {
			p.err = fmt.Errorf("profile: %w", err)
			return p.err
		}
	}
	for k := range p.seq {
		h := float64(st.at[k+1].Sub(st.at[k])) / 1e6
		d := h
		if st.tl != nil {
			d = p.scratch[k]
		}
		p.sum[k] += d
		p.host[k] += h
	}
	st.ready = false
	p.steps++
	return nil
}

// flush reads every finished step (the backend synchronised).
func (p *profiler) flush() error {
	for i := 1; i <= profileRing; i++ {
		r := (p.cur + i) % profileRing
		if p.ring[r].ready {
			if err := p.read(r); err != nil {
				return err
			}
		}
	}
	return p.err
}

// profile turns the spans read into m's Profile rows.
func (p *profiler) profile(m *Model, wall time.Duration) Profile {
	pr := Profile{Steps: p.steps, Batch: m.batch, DeviceTimed: p.timer != nil}
	if p.steps == 0 {
		return pr
	}
	pr.StepMillis = float64(wall) / 1e6 / float64(p.steps)
	type acc struct{ fwd, bwd, upd, host float64 }
	embs, dense := make([]acc, len(m.embs)), make([]acc, len(m.dense))
	var loss, reg, other, gap, commit acc
	// param → layer
	owner := make([]int, 0, len(m.params))
	for j, l := range m.dense {
		for range l.Params() {
			owner = append(owner, j)
		}
	}
	n := float64(p.steps)
	for k, id := range p.seq {
		d, h := p.sum[k]/n, p.host[k]/n
		pr.SpanMillis += d
		var a *acc
		var f *float64
		switch id.kind {
		case spanGap:
			a, f = &gap, &gap.fwd
		case spanCommit:
			a, f = &commit, &commit.fwd
		case spanLabels, spanOptRest:
			a, f = &other, &other.fwd
		case spanEmbFwd:
			a, f = &embs[id.i], &embs[id.i].fwd
		case spanEmbBwd:
			a, f = &embs[id.i], &embs[id.i].bwd
		case spanEmbUpdate:
			a, f = &embs[id.i], &embs[id.i].upd
		case spanDenseFwd:
			a, f = &dense[id.i], &dense[id.i].fwd
		case spanDenseBwd:
			a, f = &dense[id.i], &dense[id.i].bwd
		case spanParam:
			if id.i < len(owner) {
				a, f = &dense[owner[id.i]], &dense[owner[id.i]].upd
			} else {
				a, f = &other, &other.upd
			}
		case spanLossSum:
			a, f = &loss, &loss.fwd
		case spanReg:
			a, f = &reg, &reg.bwd
		}
		*f += d
		a.host += h
	}
	row := func(layer, typ, kind string, a acc) LayerProfile {
		r := LayerProfile{Layer: layer, Type: typ, Kind: kind, FwdMs: a.fwd, BwdMs: a.bwd, UpdateMs: a.upd, HostMs: a.host}
		if pr.StepMillis > 0 {
			r.Share = r.Millis() / pr.StepMillis
		}
		return r
	}
	for i, e := range m.embs {
		pr.Layers = append(pr.Layers, row(e.g.Top, e.g.Type, "embedding", embs[i]))
	}
	var flop, flopMs float64
	for j := range m.dense {
		gl := m.Graph.Layers[j]
		r := row(strings.Join(gl.Top, ","), gl.Type, "dense", dense[j])
		r.FwdFLOP, r.BwdFLOP = gemmFLOP(gl, m.Info.Layers[j], m.batch)
		if ms := r.FwdMs + r.BwdMs; r.FwdFLOP > 0 && ms > 0 {
			r.TFLOPS = (r.FwdFLOP + r.BwdFLOP) / (ms / 1e3) / 1e12
			flop += r.FwdFLOP + r.BwdFLOP
			flopMs += ms
		}
		pr.Layers = append(pr.Layers, r)
	}
	if flopMs > 0 {
		pr.GemmTFLOPS = flop / (flopMs / 1e3) / 1e12
	}
	if m.total != nil {
		pr.Layers = append(pr.Layers, row("(loss sum)", "LossSum", "step", loss))
	}
	if m.reg != nil {
		pr.Layers = append(pr.Layers, row("(regularizer)", "Regularizer", "step", reg))
	}
	pr.Layers = append(pr.Layers, row("(other)", "labels, optimizer", "step", other))
	gapName := "(between steps)"
	if p.seq[1].kind == spanCommit {
		gapName = "(wait for the batch)"
	}
	pr.Layers = append(pr.Layers, row(gapName, "device idle", "input", gap))
	if p.seq[1].kind == spanCommit {
		pr.Layers = append(pr.Layers, row("(commit + split inputs)", "SplitInputs", "input", commit))
	}
	return pr
}

// gemmFLOP is the GEMM work of one step of layer gl over batch samples:
// 2·m·n·k forward and twice that backward (the input's and the weights'
// gradients) for InnerProduct, FusedInnerProduct and MLP; for MultiCross
// x·w per layer (DCN v1, a matrix-vector product: 2·B·d) or x·U and h·V
// (v2 of rank r: 4·B·d·r); for Interaction the dot products of the n+1
// vectors' n(n+1)/2 pairs (B·d·n(n+1)). 0 for other layers.
func gemmFLOP(gl graph.DenseLayer, li graph.LayerInfo, batch int) (fwd, bwd float64) {
	if len(li.In) == 0 || len(li.In[0].Dims) == 0 {
		return 0, 0
	}
	in := li.In[0]
	k := float64(in.Last())
	rows := float64(batch) * float64(in.Elems()) / k // GEMM rows: samples × rows per sample
	switch gl.Type {
	case graph.InnerProduct, graph.FusedInnerProduct:
		fwd = 2 * rows * k * float64(gl.NumOutput)
	case graph.MLP:
		for _, n := range gl.NumOutputs {
			fwd += 2 * rows * k * float64(n)
			k = float64(n)
		}
	case graph.MultiCross:
		per := 2 * rows * k
		if gl.ProjectionDim > 0 {
			per = 4 * rows * k * float64(gl.ProjectionDim)
		}
		fwd = per * float64(gl.NumLayers)
	case graph.Interaction:
		if len(li.In) < 2 || k == 0 {
			return 0, 0
		}
		n := float64(li.In[1].Elems()) / k
		fwd = float64(batch) * k * n * (n + 1)
	}
	return fwd, 2 * fwd
}

// errProfileSteps is a profile of no steps.
var errProfileSteps = errors.New("profile: give at least one step")
