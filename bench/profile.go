package bench

import (
	"fmt"
	"io"

	"github.com/ctrkit/ctrkit/trainer/model"
)

// WriteProfile prints p as a table: one row per layer (forward, backward
// and update milliseconds per step, the share of the measured step time,
// the GEMM TFLOP/s of the layers that have GEMMs, the host's time issuing
// them), the step's other spans and the pipeline's device spans, the
// totals against the measured step time, then the pipeline's host side.
func WriteProfile(w io.Writer, title string, p *model.Profile) error {
	clock := "host clock"
	if p.DeviceTimed {
		clock = "device events"
	}
	fmt.Fprintf(w, "%s: %d steps of %d samples, %s, mean ms per step\n", title, p.Steps, p.Batch, clock)
	lw, tw := len("total of the spans"), len("type")
	for _, r := range p.Layers {
		lw, tw = max(lw, len(r.Layer)), max(tw, len(r.Type))
	}
	row := func(layer, typ, fwd, bwd, upd, share, tf, host string) {
		fmt.Fprintf(w, "%-*s  %-*s  %9s  %9s  %9s  %6s  %7s  %8s\n", lw, layer, tw, typ, fwd, bwd, upd, share, tf, host)
	}
	row("layer", "type", "fwd ms", "bwd ms", "update ms", "share", "TFLOP/s", "host ms")
	var fwd, bwd, upd, host, share float64
	for _, r := range p.Layers {
		row(r.Layer, r.Type, ms(r.FwdMs), ms(r.BwdMs), ms(r.UpdateMs), pct(r.Share), tflops(r.TFLOPS), fmt.Sprintf("%.3f", r.HostMs))
		fwd, bwd, upd, host, share = fwd+r.FwdMs, bwd+r.BwdMs, upd+r.UpdateMs, host+r.HostMs, share+r.Share
	}
	row("total of the spans", "", ms(fwd), ms(bwd), ms(upd), pct(share), tflops(p.GemmTFLOPS), fmt.Sprintf("%.3f", host))
	fmt.Fprintf(w, "measured step: %.3f ms (wall clock, the backend synchronised at both ends); the spans cover %.1f%% of it\n",
		p.StepMillis, 100*share)
	if q := p.Pipeline; q != nil {
		fmt.Fprintf(w, "pipeline, host side: training waits %.3f ms a step for the next batch (longest %.3f ms); per batch (%d read): reader %.3f ms",
			q.WaitMs, q.WaitMaxMs, q.Batches, q.ReadMs)
		if q.ReaderRate > 0 {
			fmt.Fprintf(w, " (%s while it reads)", Rate(q.ReaderRate))
		}
		switch {
		case !q.Staged:
			fmt.Fprint(w, "; no staging (batches load on Commit)")
		default:
			fmt.Fprintf(w, ", check and key counts %.3f ms, Stage %.3f ms", q.HostSideMs, q.StageMs)
			if q.CopyMs > 0 {
				fmt.Fprintf(w, " of which the copies take %.3f ms on the copy stream (overlapping compute)", q.CopyMs)
			}
		}
		if q.Turns > 0 {
			fmt.Fprintf(w, "; %d pass turns: training waits %.3f ms for a pass's first batch, the prefetcher switches readers in %.3f ms",
				q.Turns, q.TurnWaitMs, q.TurnMs)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// pct prints a share as a percentage.
func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// tflops prints a rate, "-" for none.
func tflops(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// ms prints a span's milliseconds, "-" for none.
func ms(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}
