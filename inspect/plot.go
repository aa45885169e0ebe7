package inspect

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/ctrkit/ctrkit/formats"
)

// Plot file names written by WritePlots.
const (
	RankFrequencyPNG = "rank_frequency.png"
	LabelsPNG        = "labels.png"
	NNZPNG           = "nnz.png"
)

// WritePlots writes PNG charts of r into dir (created when missing): the
// rank–frequency of every slot on log-log axes with its fitted power law
// (one panel per slot, in a grid), the histogram of label column 0, and the
// histogram of nnz over all slots. It returns the paths written.
func WritePlots(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("ctrkit/inspect: creating plot directory: %w", err)
	}
	var out []string
	if len(r.Slots) > 0 {
		p := filepath.Join(dir, RankFrequencyPNG)
		if err := rankPlots(p, r); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	if len(r.LabelHist) > 0 && len(r.Labels) > 0 {
		p := filepath.Join(dir, LabelsPNG)
		w := 1 / float64(len(r.LabelHist))
		if err := histPlot(p, "label (column 0)", "label", r.LabelHist, 0, w); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	if len(r.Slots) > 0 {
		h := r.NNZHist
		last := 0
		for i, n := range h {
			if n > 0 {
				last = i
			}
		}
		p := filepath.Join(dir, NNZPNG)
		if err := histPlot(p, "nnz per slot and sample (all slots)", "nnz", h[:last+1], -0.5, 1); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

func rankPlots(path string, r *Report) error {
	n := len(r.Slots)
	cols := int(math.Ceil(math.Sqrt(float64(n))))
	rows := (n + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for si := range r.Slots {
		st := &r.Slots[si]
		p := plot.New()
		p.Title.Text = st.Name
		if st.Alpha != nil {
			p.Title.Text += fmt.Sprintf(" (α = %.3f)", *st.Alpha)
		}
		p.X.Label.Text = "rank"
		p.Y.Label.Text = "count"
		var pts plotter.XYs
		for _, rc := range st.RankFreq {
			pts = append(pts, plotter.XY{X: float64(rc.Rank), Y: float64(rc.Count)})
		}
		if len(pts) > 0 {
			p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
			p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			sc.Radius = vg.Points(1.5)
			p.Add(sc)
			if st.Alpha != nil && st.Fit.RMax > st.Fit.RMin {
				a, f := *st.Alpha, st.Fit
				z := zeta(a, f.RMin, f.M)
				line := plotter.XYs{}
				for i := 0; i <= 50; i++ {
					rk := float64(f.RMin) * math.Pow(float64(f.RMax)/float64(f.RMin), float64(i)/50)
					line = append(line, plotter.XY{X: rk, Y: float64(f.Samples) * math.Pow(rk, -a) / z})
				}
				l, err := plotter.NewLine(line)
				if err != nil {
					return err
				}
				l.Color = plotter.DefaultLineStyle.Color
				l.Width = vg.Points(1.5)
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
				p.Add(l)
			}
		}
		plots[si/cols][si%cols] = p
	}
	for i := n; i < rows*cols; i++ {
		plots[i/cols][i%cols] = plot.New()
	}
	side := vg.Length(3) * vg.Inch
	img := vgimg.New(side*vg.Length(cols), side*vg.Length(rows))
	dc := draw.New(img)
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter, PadY: vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(plots, t, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	return savePNG(path, img)
}

// histPlot draws counts as bars of width w starting at x0.
func histPlot(path, title, xlabel string, counts []int64, x0, w float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "count"
	h := &plotter.Histogram{Width: w, FillColor: color.Gray{Y: 160}, LineStyle: plotter.DefaultLineStyle}
	for i, n := range counts {
		lo := x0 + w*float64(i)
		h.Bins = append(h.Bins, plotter.HistogramBin{Min: lo, Max: lo + w, Weight: float64(n)})
	}
	p.Add(h)
	img := vgimg.New(6*vg.Inch, 4*vg.Inch)
	p.Draw(draw.New(img))
	return savePNG(path, img)
}

func savePNG(path string, img *vgimg.Canvas) error {
	f, err := formats.CreateFile(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Abort()
		return fmt.Errorf("ctrkit/inspect: writing %s: %w", path, err)
	}
	return f.Commit()
}
