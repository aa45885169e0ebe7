package model

import (
	"fmt"
	"io"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/graph"
)

// MetricSpec is HugeCTR's metrics_spec (the solver's eval_metrics): which
// metrics an evaluation reports and the thresholds that stop training. The
// zero value reports AUC and the average loss and never stops.
type MetricSpec struct {
	// Names are the metrics in the config's order: "AUC", "AverageLoss",
	// "HitRate". Empty: AUC and AverageLoss.
	Names []string
	// AUC and HitRate stop training once reached (≥), AverageLoss once
	// the loss falls to it (≤); 0: never.
	AUC, HitRate, AverageLoss float64
}

// SolverMetrics returns the metric spec of a solver section.
func SolverMetrics(s *graph.Solver) MetricSpec {
	ms := MetricSpec{AUC: s.AUCThreshold, HitRate: s.HitRateThreshold, AverageLoss: s.AverageLossThreshold}
	for _, m := range s.EvalMetrics {
		name, _, _ := strings.Cut(m, ":")
		ms.Names = append(ms.Names, name)
	}
	return ms
}

func (ms MetricSpec) names() []string {
	if len(ms.Names) == 0 {
		return []string{"AUC", "AverageLoss"}
	}
	return ms.Names
}

// Describe is a one-line account of what evaluations report and when they
// stop training, or "" for the default.
func (ms MetricSpec) Describe() string {
	if len(ms.Names) == 0 && ms.AUC == 0 && ms.HitRate == 0 && ms.AverageLoss == 0 {
		return ""
	}
	var parts []string
	for _, n := range ms.names() {
		switch {
		case n == "AUC" && ms.AUC > 0:
			n += fmt.Sprintf(" (stop at ≥ %g)", ms.AUC)
		case n == "HitRate" && ms.HitRate > 0:
			n += fmt.Sprintf(" (stop at ≥ %g; HugeCTR stops on AUC only)", ms.HitRate)
		case n == "AverageLoss" && ms.AverageLoss > 0:
			n += fmt.Sprintf(" (stop at ≤ %g; HugeCTR stops on AUC only)", ms.AverageLoss)
		}
		parts = append(parts, n)
	}
	return "eval metrics: " + strings.Join(parts, ", ")
}

// report writes an evaluation's line (the selected metrics) and says
// whether a threshold was met, writing why.
func (ms MetricSpec) report(w io.Writer, iter int64, ev EvalResult) bool {
	var b strings.Builder
	fmt.Fprintf(&b, "eval iter %d:", iter)
	for i, n := range ms.names() {
		if i > 0 {
			b.WriteByte(',')
		}
		switch n {
		case "AUC":
			fmt.Fprintf(&b, " AUC %.6f", ev.AUC)
		case "AverageLoss":
			fmt.Fprintf(&b, " loss %.6f", ev.Loss)
		case "HitRate":
			fmt.Fprintf(&b, " hit rate %.6f", ev.HitRate)
		}
	}
	fmt.Fprintf(&b, ", %d %s%s\n", ev.Samples, plural(int64(ev.Samples), "sample", "samples"), ev.TasksText())
	io.WriteString(w, b.String())
	switch {
	case ms.AUC > 0 && ev.AUC >= ms.AUC:
		fmt.Fprintf(w, "AUC %.6f reached the threshold %.6f: stopping\n", ev.AUC, ms.AUC)
	case ms.HitRate > 0 && ev.HitRate >= ms.HitRate:
		fmt.Fprintf(w, "hit rate %.6f reached the threshold %.6f: stopping\n", ev.HitRate, ms.HitRate)
	case ms.AverageLoss > 0 && ev.Loss <= ms.AverageLoss:
		fmt.Fprintf(w, "loss %.6f reached the threshold %.6f: stopping\n", ev.Loss, ms.AverageLoss)
	default:
		return false
	}
	return true
}
