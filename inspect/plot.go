package inspect

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot/plotter"
)

// Plot file names written by WritePlots.
const (
	RankFrequencyPNG = "rank_frequency.png"
	LabelsPNG        = "labels.png"
	NNZPNG           = "nnz.png"
)

// PlotOptions say what the plotted report is about.
type PlotOptions struct {
	// Source names the data in each caption (a dataset path).
	Source string
}

// WritePlots writes PNG charts of r into dir (created when missing): the
// rank–frequency of every slot with keys on log-log axes with its fitted
// power law (RankFigure), the histogram of label column 0 (LabelFigure) and
// the nnz histogram of every slot (NNZFigure). It returns the paths written.
func WritePlots(dir string, r *Report, o PlotOptions) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating plot directory: %w", err)
	}
	var out []string
	for _, f := range []struct {
		name string
		fig  *Figure
	}{{RankFrequencyPNG, RankFigure(r, o)}, {LabelsPNG, LabelFigure(r, o)}, {NNZPNG, NNZFigure(r, o)}} {
		if f.fig == nil {
			continue
		}
		p := filepath.Join(dir, f.name)
		if err := f.fig.WritePNG(p); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

func source(o PlotOptions) string {
	if o.Source == "" {
		return "dataset"
	}
	return o.Source
}

// RankFigure is the rank–frequency chart of r: one log-log panel per slot
// that has keys, its sampled (rank, count) points and, when fitted, the
// power law's expected counts as a dashed line. Slots without keys are
// named in the caption. It is nil when no slot has keys.
func RankFigure(r *Report, o PlotOptions) *Figure {
	f := &Figure{Caption: []string{
		fmt.Sprintf("%s: %d samples, %d slots — key count against frequency rank (rank 1 = most frequent key), log-log", source(o), r.Samples, len(r.Slots)),
		"dashed: discrete power law count(r) = N·r^−α / Σ_{k=rmin..M} k^−α, α fitted by maximum likelihood on ranks rmin..rmax",
		"(N = key occurrences in those ranks, M = slot size or distinct keys); points: up to 400 log-spaced ranks",
	}}
	var empty []string
	for si := range r.Slots {
		st := &r.Slots[si]
		if len(st.RankFreq) == 0 {
			empty = append(empty, st.Name)
			continue
		}
		p := Panel{Title: st.Name, XLabel: "rank", YLabel: "count", LogX: true, LogY: true}
		var pts plotter.XYs
		for _, rc := range st.RankFreq {
			pts = append(pts, plotter.XY{X: float64(rc.Rank), Y: float64(rc.Count)})
		}
		p.Series = append(p.Series, Series{Name: "keys", Kind: Scatter, Points: pts})
		if st.Alpha != nil && st.Fit.RMax > st.Fit.RMin {
			a, ft := *st.Alpha, st.Fit
			p.Title += fmt.Sprintf(": α = %.3f (ranks %d..%d)", a, ft.RMin, ft.RMax)
			z := zeta(a, ft.RMin, ft.M)
			var line plotter.XYs
			for i := 0; i <= 50; i++ {
				rk := float64(ft.RMin) * math.Pow(float64(ft.RMax)/float64(ft.RMin), float64(i)/50)
				line = append(line, plotter.XY{X: rk, Y: float64(ft.Samples) * math.Pow(rk, -a) / z})
			}
			p.Series = append(p.Series, Series{Name: "fit", Kind: DashedLine, Points: line})
		} else {
			p.Title += fmt.Sprintf(": no fit (%d distinct keys)", st.Distinct)
		}
		f.Panels = append(f.Panels, p)
	}
	if len(f.Panels) == 0 {
		return nil
	}
	if len(empty) > 0 {
		f.Caption = append(f.Caption, fmt.Sprintf("not drawn (no keys): %s", strings.Join(empty, ", ")))
	}
	return f
}

// LabelFigure is the histogram of label column 0 over [0, 1]; nil without
// labels or samples.
func LabelFigure(r *Report, o PlotOptions) *Figure {
	if len(r.LabelHist) == 0 || len(r.Labels) == 0 || r.Samples == 0 {
		return nil
	}
	w := 1 / float64(len(r.LabelHist))
	var pts plotter.XYs
	for i, n := range r.LabelHist {
		pts = append(pts, plotter.XY{X: w * (float64(i) + 0.5), Y: float64(n)})
	}
	l := r.Labels[0]
	cap2 := fmt.Sprintf("label column 0 in %d equal bins of [0, 1]; mean %.4g, min %.4g, max %.4g", len(r.LabelHist), l.Mean, l.Min, l.Max)
	if r.LabelOutside > 0 {
		cap2 += fmt.Sprintf("; %d values outside [0, 1] not drawn", r.LabelOutside)
	}
	return &Figure{
		Caption: []string{fmt.Sprintf("%s: %d samples", source(o), r.Samples), cap2},
		PanelW:  6 * 72, PanelH: 3.5 * 72,
		Panels: []Panel{{Title: "label (column 0)", XLabel: "label", YLabel: "samples",
			Series: []Series{{Name: "label", Kind: Bars, Points: pts, BarWidth: w}}}},
	}
}

// NNZFigure is the histogram of the number of keys per sample of every
// slot, one panel per slot; nil without slots or samples.
func NNZFigure(r *Report, o PlotOptions) *Figure {
	if len(r.Slots) == 0 || r.Samples == 0 {
		return nil
	}
	f := &Figure{Caption: []string{
		fmt.Sprintf("%s: %d samples, %d slots", source(o), r.Samples, len(r.Slots)),
		fmt.Sprintf("samples by nnz (keys per sample) in each slot; the last bin counts nnz ≥ %d", maxNNZBin),
	}}
	for si := range r.Slots {
		st := &r.Slots[si]
		last := 0
		for i, n := range st.NNZHist {
			if n > 0 {
				last = i
			}
		}
		var pts plotter.XYs
		for i := 0; i <= last && i < len(st.NNZHist); i++ {
			pts = append(pts, plotter.XY{X: float64(i), Y: float64(st.NNZHist[i])})
		}
		title := fmt.Sprintf("%s: nnz %d..%d", st.Name, st.NNZMin, st.NNZMax)
		f.Panels = append(f.Panels, Panel{Title: title, XLabel: "nnz", YLabel: "samples", IntX: true,
			Series: []Series{{Name: "nnz", Kind: Bars, Points: pts, BarWidth: 1}}})
	}
	return f
}
