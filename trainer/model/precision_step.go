package model

import (
	"fmt"
	"io"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

// guardRun is how many steps in a row may overflow before training stops
// (docs/PRECISION.md): at a check (display, evaluation, snapshot, the
// end) where every step since the last check was skipped and at least
// guardRun such steps have passed in a row, the run stops with an error
// naming the loss scale.
const guardRun = 20

// stepGuard is fp16's overflow check in the training step: the backend's
// tensor.OverflowGuard (on the device, no host synchronisation, so the
// step stays one CUDA graph) skips the updates of a step whose gradients
// hold an Inf or NaN, and the host reads the skipped count where it
// synchronises anyway.
type stepGuard struct {
	g     tensor.OverflowGuard
	scale float64
	// read is the skipped count at the last check, at step readIter; run
	// the steps in a row known to have been skipped.
	read, readIter, run int64
}

func newStepGuard(m *Model, scale float64) (*stepGuard, error) {
	g, ok := m.be.(tensor.OverflowGuard)
	if !ok {
		return nil, fmt.Errorf("precision fp16: backend %s has no overflow check for the loss scale (tensor.OverflowGuard); use --precision bf16 or tf32", m.be.Name())
	}
	if scale == 0 {
		scale = 1
	}
	n, err := g.GuardSkipped()
	if err != nil {
		return nil, err
	}
	return &stepGuard{g: g, scale: scale, read: n}, nil
}

// halfBackend reports whether be stores half-precision tensors (every
// backend but the CPU's).
func halfBackend(be tensor.Backend) bool {
	_, isCPU := be.(*cpu.Backend)
	return !isCPU
}

// errCPUHalf refuses fp16 and bf16 on the CPU; OpenBackend says the same.
func errCPUHalf(p graph.Precision) error {
	how := "--precision fp16, --mixed-precision or the solver's mixed_precision (Python: use_mixed_precision)"
	if p == graph.BF16 {
		how = "--precision bf16 or --bf16 (Python: ctrkit_precision=\"bf16\")"
	}
	return fmt.Errorf("precision %s (%s) trains on the GPU only: the CPU backend trains fp32; use --device gpu, or --precision fp32", p, how)
}

// guardedUpdate runs the step's updates under the guard: GuardBegin,
// GuardCheck on every gradient the updates read (the dense parameters'
// and each embedding's unique-row gradient), the updates, GuardEnd.
func (m *Model) guardedUpdate(update func()) {
	g := m.guard.g
	g.GuardBegin()
	if !m.frozen {
		for _, p := range m.params {
			g.GuardCheck(p.Grad)
		}
	}
	for _, e := range m.embs {
		if !e.frozen {
			g.GuardCheck(e.layer.RowGrad())
		}
	}
	update()
	g.GuardEnd()
}

// SkippedSteps is the number of training steps fp16's overflow check
// skipped (0 in other precisions); it synchronises.
func (m *Model) SkippedSteps() (int64, error) {
	if m.guard == nil {
		return 0, nil
	}
	return m.guard.g.GuardSkipped()
}

// LossScale is the static loss scale the model trains with (1: none).
func (m *Model) LossScale() float64 {
	if m.guard != nil {
		return m.guard.scale
	}
	if m.lossScale > 0 {
		return m.lossScale
	}
	return 1
}

// checkGuard reads the skipped count at step iter (a point where the
// trainer synchronises), logs the steps skipped since the last check and
// stops the run when the overflow persists (guardRun).
func (m *Model) checkGuard(w io.Writer, iter int64) error {
	sg := m.guard
	if sg == nil || iter == sg.readIter {
		return nil
	}
	n, err := sg.g.GuardSkipped()
	if err != nil {
		return err
	}
	steps, skipped := iter-sg.readIter, n-sg.read
	sg.read, sg.readIter = n, iter
	if skipped <= 0 {
		sg.run = 0
		return nil
	}
	if skipped >= steps {
		sg.run += steps
	} else {
		sg.run = 0
	}
	if sg.run >= guardRun {
		return fmt.Errorf("fp16: the gradients overflowed in every one of the last %d steps (to iteration %d) at loss scale %g: "+
			"lower the solver's scaler (mixed_precision, --loss-scale) or train in bf16 (--precision bf16)", sg.run, iter, sg.scale)
	}
	fmt.Fprintf(w, "fp16: %d of the last %d steps overflowed (to iteration %d) and were skipped, %d in all, at loss scale %g: "+
		"if this persists, lower the solver's scaler (mixed_precision, --loss-scale)\n", skipped, steps, iter, n, sg.scale)
	return nil
}
