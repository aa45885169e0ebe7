package model

import (
	"errors"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// timedBackend is the staged CPU backend with a tensor.Timer whose spans
// all last exactly one millisecond, counting its timelines and marks.
type timedBackend struct {
	*stagingBackend
	timelines, marks, reads atomic.Int64
}

func (b *timedBackend) NewTimeline(n int) (tensor.Timeline, error) {
	b.timelines.Add(1)
	return &fakeTimeline{b: b, marked: make([]bool, n)}, nil
}

type fakeTimeline struct {
	b      *timedBackend
	marked []bool
}

func (t *fakeTimeline) Mark(i int) { t.b.marks.Add(1); t.marked[i] = true }

func (t *fakeTimeline) Millis(dst []float64) error {
	t.b.reads.Add(1)
	for i := 0; i+1 < len(t.marked); i++ {
		if !t.marked[i] || !t.marked[i+1] {
			return errors.New("fake timeline: a point not marked")
		}
		dst[i] = 1
	}
	clear(t.marked)
	return nil
}

func (t *fakeTimeline) Free() {}

var _ tensor.Timer = (*timedBackend)(nil)

// TestProfileRows: a profile of a model has one row per embedding and
// dense layer, in the model's order, with their types, then the step's
// own rows and the pipeline's; with every span timed as 1 ms (a fake
// tensor.Timer) each row's forward, backward and update milliseconds are
// the number of its spans (an InnerProduct's update: its 2 parameters),
// the rows add up to the spans, whichever the number of steps against the
// ring of timelines (1, 3, 9 steps). Profiling off, the model records no
// point.
func TestProfileRows(t *testing.T) {
	data := newPlanted(1, 300, 4, smallSlots) // 4 full batches and a short one a pass
	for _, steps := range []int{1, 3, 9} {
		be := &timedBackend{stagingBackend: newStagingBackend(t)}
		m := cacheModel(t, be, "dlrm", 64)
		opens := 0
		open := func() (formats.Reader, error) { opens++; return data.reader(64), nil }
		if _, err := m.TrainThroughput(open, 2, 6); err != nil {
			t.Fatal(err)
		}
		if be.timelines.Load() != 0 || be.marks.Load() != 0 {
			t.Fatalf("profiling off: %d timelines, %d marks", be.timelines.Load(), be.marks.Load())
		}
		pr, err := m.ProfileTrain(open, 2, steps)
		if err != nil {
			t.Fatal(err)
		}
		if !pr.DeviceTimed || pr.Steps != steps || pr.Batch != 64 {
			t.Fatalf("steps %d: device timed %v, %d steps, batch %d", steps, pr.DeviceTimed, pr.Steps, pr.Batch)
		}
		if got := be.reads.Load(); got != int64(steps) {
			t.Errorf("%d timelines read for %d steps", got, steps)
		}
		want := len(m.embs) + len(m.dense) + 3 // (other), (wait for the batch), (commit + split inputs)
		if len(pr.Layers) != want {
			t.Fatalf("%d rows, want %d: %+v", len(pr.Layers), want, pr.Layers)
		}
		var sum float64
		for i, r := range pr.Layers {
			sum += r.Millis()
			var fwd, bwd, upd float64
			switch {
			case i < len(m.embs):
				e := m.embs[i].g
				if r.Layer != e.Top || r.Type != e.Type || r.Kind != "embedding" {
					t.Errorf("row %d: %s %s %s, want embedding %s %s", i, r.Layer, r.Type, r.Kind, e.Top, e.Type)
				}
				fwd, bwd, upd = 1, 1, 1
			case i < len(m.embs)+len(m.dense):
				gl := m.Graph.Layers[i-len(m.embs)]
				if r.Layer != strings.Join(gl.Top, ",") || r.Type != gl.Type || r.Kind != "dense" {
					t.Errorf("row %d: %s %s %s, want dense %v %s", i, r.Layer, r.Type, r.Kind, gl.Top, gl.Type)
				}
				fwd, bwd, upd = 1, 1, float64(len(m.dense[i-len(m.embs)].Params()))
				if gl.Type == graph.InnerProduct && (r.FwdFLOP <= 0 || r.BwdFLOP != 2*r.FwdFLOP || r.TFLOPS <= 0) {
					t.Errorf("row %d (%s): FLOP %v, %v, %v TFLOP/s", i, r.Layer, r.FwdFLOP, r.BwdFLOP, r.TFLOPS)
				}
			case r.Layer == "(other)":
				fwd = 2 // labels, the optimizer's rest
			default:
				fwd = 1 // between steps, commit
			}
			if r.FwdMs != fwd || r.BwdMs != bwd || r.UpdateMs != upd {
				t.Errorf("row %d (%s): %v %v %v ms, want %v %v %v", i, r.Layer, r.FwdMs, r.BwdMs, r.UpdateMs, fwd, bwd, upd)
			}
			if r.Share != r.Millis()/pr.StepMillis {
				t.Errorf("row %d: share %v of %v ms in a %v ms step", i, r.Share, r.Millis(), pr.StepMillis)
			}
		}
		if sum != pr.SpanMillis {
			t.Errorf("rows add up to %v ms, spans %v", sum, pr.SpanMillis)
		}
		// The window's first steps may take batches the prefetcher read
		// before it: up to readAhead (two staged in its output, one
		// waiting for a staging slot of the test's two, one committed).
		const readAhead = 4
		p := pr.Pipeline
		if p == nil || !p.Staged || p.Batches < steps-readAhead || p.WaitMs < 0 || p.WaitMaxMs < p.WaitMs || p.ReadMs < 0 {
			t.Errorf("pipeline %+v", p)
		}
		if m.prof != nil {
			t.Error("the profiler stays on after the run")
		}
		before := be.marks.Load()
		if _, err := m.TrainThroughput(open, 0, 2); err != nil || be.marks.Load() != before {
			t.Errorf("after profiling: %v, %d marks, %d before", err, be.marks.Load(), before)
		}
	}
}

// TestProfileHostClock: on a backend without a Timer (the CPU) the spans
// are the host's clock: contiguous, so over the run they cannot exceed
// the measured wall time, and every row is there; the resident profile
// has no pipeline rows.
func TestProfileHostClock(t *testing.T) {
	data := newPlanted(1, 300, 4, smallSlots)
	m := cacheModel(t, cpuBackend(t), "dcn", 64)
	open := func() (formats.Reader, error) { return data.reader(64), nil }
	pr, err := m.ProfileTrain(open, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := formats.NewBatch(&data.schema, 64, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := data.reader(64).Read(b); n != 64 {
		t.Fatal(n, err)
	}
	rp, err := m.ProfileResident(b, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Profile{"pipeline": pr, "resident": rp} {
		if p.DeviceTimed || p.Steps != 4 {
			t.Errorf("%s: device timed %v, %d steps", name, p.DeviceTimed, p.Steps)
		}
		var share float64
		for _, r := range p.Layers {
			share += r.Share
			if r.FwdMs < 0 || r.BwdMs < 0 || r.UpdateMs < 0 || math.Abs(r.HostMs-r.Millis()) > 1e-9 {
				t.Errorf("%s: row %+v", name, r)
			}
		}
		if share <= 0 || share > 1+1e-9 || p.SpanMillis > p.StepMillis*(1+1e-9) {
			t.Errorf("%s: shares add up to %v; spans %v ms in %v ms steps", name, share, p.SpanMillis, p.StepMillis)
		}
	}
	if len(pr.Layers) != len(rp.Layers)+1 || pr.Pipeline == nil || pr.Pipeline.Staged || rp.Pipeline != nil {
		t.Errorf("pipeline %d rows, resident %d rows", len(pr.Layers), len(rp.Layers))
	}
	if rp.Layers[len(rp.Layers)-1].Layer != "(between steps)" {
		t.Errorf("resident's last row %+v", rp.Layers[len(rp.Layers)-1])
	}
}

// TestGemmFLOP: the GEMM counts of a layer per step.
func TestGemmFLOP(t *testing.T) {
	sh := func(dims ...int) graph.Shape { return graph.Shape{Rows: 1, Dims: dims} }
	for _, c := range []struct {
		gl   graph.DenseLayer
		li   graph.LayerInfo
		want float64
	}{
		{graph.DenseLayer{Type: graph.InnerProduct, NumOutput: 256}, graph.LayerInfo{In: []graph.Shape{sh(512)}}, 2 * 10 * 512 * 256},
		{graph.DenseLayer{Type: graph.InnerProduct, NumOutput: 8}, graph.LayerInfo{In: []graph.Shape{sh(3, 4)}}, 2 * 10 * 3 * 4 * 8},
		{graph.DenseLayer{Type: graph.MLP, NumOutputs: []int{8, 2}}, graph.LayerInfo{In: []graph.Shape{sh(4)}}, 2 * 10 * (4*8 + 8*2)},
		{graph.DenseLayer{Type: graph.MultiCross, NumLayers: 3}, graph.LayerInfo{In: []graph.Shape{sh(100)}}, 3 * 2 * 10 * 100},
		{graph.DenseLayer{Type: graph.MultiCross, NumLayers: 3, ProjectionDim: 16}, graph.LayerInfo{In: []graph.Shape{sh(100)}}, 3 * 4 * 10 * 100 * 16},
		{graph.DenseLayer{Type: graph.Interaction}, graph.LayerInfo{In: []graph.Shape{sh(16), sh(26, 16)}}, 10 * 16 * 26 * 27},
		{graph.DenseLayer{Type: graph.ReLU}, graph.LayerInfo{In: []graph.Shape{sh(16)}}, 0},
	} {
		f, b := gemmFLOP(c.gl, c.li, 10)
		if f != c.want || b != 2*c.want {
			t.Errorf("%s: %v, %v FLOP, want %v, %v", c.gl.Type, f, b, c.want, 2*c.want)
		}
	}
}

// TestStartPassesNoDrain: TrainThroughput reads pass after pass through
// one prefetcher that opens the next pass itself (no Stop and Start at a
// pass boundary): the steps train on the full batches of consecutive
// passes in order, each pass's short batch skipped, and every reader
// opened is closed.
func TestStartPassesNoDrain(t *testing.T) {
	data := newPlanted(1, 200, 4, smallSlots) // 3 full batches and 8 samples a pass
	for _, staged := range []bool{false, true} {
		var be tensor.Backend = cpuBackend(t)
		if staged {
			be = newStagingBackend(t)
		}
		m := cacheModel(t, be, "dlrm", 64)
		ref := cacheModel(t, cpuBackend(t), "dlrm", 64)
		var opened, closed int
		open := func() (formats.Reader, error) {
			opened++
			return &closeCounter{Reader: data.reader(64), n: &closed}, nil
		}
		const steps = 8 // passes 1–3
		res, err := m.TrainThroughput(open, 0, steps)
		if err != nil {
			t.Fatal(err)
		}
		if opened < 3 || opened != closed {
			t.Errorf("staged %v: %d readers opened, %d closed", staged, opened, closed)
		}
		// The reference: the same full batches loaded one by one.
		b, _ := formats.NewBatch(&data.schema, 64, nil)
		var r formats.Reader
		for i := 0; i < steps; {
			if r == nil {
				r = data.reader(64)
			}
			n, err := r.Read(b)
			if n == 64 {
				if err := ref.TrainStep(b); err != nil {
					t.Fatal(err)
				}
				i++
			}
			if err == io.EOF {
				r = nil
			}
		}
		want, err := ref.Loss()
		if err != nil {
			t.Fatal(err)
		}
		if res.LossLast != want {
			t.Errorf("staged %v: loss %v after %d steps, reference %v", staged, res.LossLast, steps, want)
		}
	}
}

// TestThroughputNoFullBatch: data with no full batch is an error, not an
// endless loop.
func TestThroughputNoFullBatch(t *testing.T) {
	data := newPlanted(1, 40, 4, smallSlots)
	m := cacheModel(t, newStagingBackend(t), "dlrm", 64)
	_, err := m.TrainThroughput(func() (formats.Reader, error) { return data.reader(64), nil }, 1, 2)
	if err == nil || !strings.Contains(err.Error(), "no full batch") {
		t.Errorf("got %v", err)
	}
}

type closeCounter struct {
	formats.Reader
	n *int
}

func (c *closeCounter) Close() error { *c.n++; return c.Reader.Close() }

// TestProfileSequence: a step whose spans do not follow the model's
// sequence (a hook out of place) is an error naming the span, not a
// silently wrong table.
func TestProfileSequence(t *testing.T) {
	m := cacheModel(t, cpuBackend(t), "dlrm", 64)
	p, err := newProfiler(m, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.free()
	p.start()
	p.mark(spanGap, 0)
	p.mark(spanDenseFwd, 0) // the labels' span is next
	if err := p.endStep(true); err == nil || !strings.Contains(err.Error(), "dense forward 0") {
		t.Errorf("out of sequence: %v", err)
	}
	p2, _ := newProfiler(m, false)
	defer p2.free()
	p2.start()
	p2.mark(spanGap, 0)
	if err := p2.endStep(true); err == nil {
		t.Error("a step of one span ended without an error")
	}
	var off *profiler
	off.mark(spanGap, 0) // profiling off: a no-op
	if off.paramHook() != nil {
		t.Error("a parameter hook with profiling off")
	}
}
