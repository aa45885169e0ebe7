package inspect

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// A Figure is a grid of panels under a caption, drawn to a PNG by WritePNG.
// It is the data model of every chart ctrkit draws: tests check its panels
// and series, WritePNG only renders them.
type Figure struct {
	// Caption lines are printed above the panels (what the data is, how
	// many samples, what the fitted or smoothed lines are).
	Caption []string
	// Cols is the number of grid columns (0: ⌈√len(Panels)⌉). The grid has
	// ⌈len(Panels)/Cols⌉ rows; cells past the last panel stay blank.
	Cols int
	// PanelW and PanelH are one panel's size (0: 3 × 2.6 inches).
	PanelW, PanelH vg.Length
	// SharedX gives every panel the union of their x ranges.
	SharedX bool
	Panels  []Panel
}

// A Panel is one chart of a Figure.
type Panel struct {
	Title, XLabel, YLabel string
	// LogX and LogY draw that axis on a log scale (all values must be > 0).
	LogX, LogY bool
	// IntX labels the x axis at integers only (counts such as nnz).
	IntX   bool
	Series []Series
	// Legend shows the series names in the panel.
	Legend bool
}

// SeriesKind says how a Series is drawn.
type SeriesKind int

// Series kinds.
const (
	Scatter    SeriesKind = iota // points
	Line                         // a solid line
	DashedLine                   // a dashed line
	Bars                         // bars of width BarWidth centred on X
)

// A Series is one set of points of a Panel.
type Series struct {
	Name     string
	Kind     SeriesKind
	Points   plotter.XYs
	BarWidth float64
	// Faint draws the series in a light colour, behind the others.
	Faint bool
}

// Grid returns the number of rows and columns of f's panel grid.
func (f *Figure) Grid() (rows, cols int) {
	n := len(f.Panels)
	if n == 0 {
		return 0, 0
	}
	cols = f.Cols
	if cols <= 0 {
		cols = int(math.Ceil(math.Sqrt(float64(n))))
	}
	cols = min(cols, n)
	return (n + cols - 1) / cols, cols
}

var palette = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255},
	color.RGBA{R: 255, G: 127, B: 14, A: 255},
}

// plot builds the gonum plot of p.
func (p *Panel) plot() (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text, pl.Y.Label.Text = p.XLabel, p.YLabel
	if p.LogX {
		pl.X.Scale, pl.X.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	if p.LogY {
		pl.Y.Scale, pl.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	if p.IntX && !p.LogX {
		pl.X.Tick.Marker = intTicks{}
	}
	pl.Add(plotter.NewGrid())
	ci := 0
	for _, s := range p.Series {
		if len(s.Points) == 0 {
			continue
		}
		c := palette[ci%len(palette)]
		if s.Faint {
			c = color.Gray{Y: 185}
		} else {
			ci++
		}
		var th plot.Thumbnailer
		switch s.Kind {
		case Scatter:
			sc, err := plotter.NewScatter(s.Points)
			if err != nil {
				return nil, err
			}
			sc.Radius, sc.Color = vg.Points(1.5), c
			pl.Add(sc)
			th = sc
		case Line, DashedLine:
			l, err := plotter.NewLine(s.Points)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = c, vg.Points(1.5)
			if s.Kind == DashedLine {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			pl.Add(l)
			th = l
		case Bars:
			w := s.BarWidth
			if w <= 0 {
				w = 1
			}
			h := &plotter.Histogram{Width: w, FillColor: color.Gray{Y: 160}, LineStyle: plotter.DefaultLineStyle}
			for _, pt := range s.Points {
				h.Bins = append(h.Bins, plotter.HistogramBin{Min: pt.X - w/2, Max: pt.X + w/2, Weight: pt.Y})
			}
			pl.Add(h)
			th = h
		default:
			return nil, fmt.Errorf("unknown series kind %d", s.Kind)
		}
		if p.Legend && s.Name != "" {
			pl.Legend.Add(s.Name, th)
		}
	}
	pl.Legend.Top = true
	if p.Legend && !p.LogY && pl.Y.Max > pl.Y.Min {
		// Headroom for the legend (top right) above the data.
		pl.Y.Max += 0.08 * float64(len(p.Series)) * (pl.Y.Max - pl.Y.Min)
	}
	// A log axis over one value would be widened to [v−1, v+1], which
	// can reach 0: widen it by a factor of 2 each way instead.
	if p.LogX && math.IsInf(pl.X.Min, 0) {
		pl.X.Min, pl.X.Max = 1, 10
	}
	if p.LogY && math.IsInf(pl.Y.Min, 0) {
		pl.Y.Min, pl.Y.Max = 1, 10
	}
	if p.LogX && !(pl.X.Max > pl.X.Min) {
		pl.X.Min, pl.X.Max = pl.X.Min/2, pl.X.Max*2
	}
	if p.LogY && !(pl.Y.Max > pl.Y.Min) {
		pl.Y.Min, pl.Y.Max = pl.Y.Min/2, pl.Y.Max*2
	}
	return pl, nil
}

// WritePNG draws f into a PNG at path (written under a temporary name and
// renamed when complete).
func (f *Figure) WritePNG(path string) error {
	rows, cols := f.Grid()
	if rows == 0 {
		return errors.New("figure without panels")
	}
	pw, ph := f.PanelW, f.PanelH
	if pw <= 0 {
		pw = 3 * vg.Inch
	}
	if ph <= 0 {
		ph = 2.6 * vg.Inch
	}
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i := range f.Panels {
		p, err := f.Panels[i].plot()
		if err != nil {
			return err
		}
		plots[i/cols][i%cols] = p
	}
	if f.SharedX {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, row := range plots {
			for _, p := range row {
				if p != nil {
					lo, hi = min(lo, p.X.Min), max(hi, p.X.Max)
				}
			}
		}
		for _, row := range plots {
			for _, p := range row {
				if p != nil {
					p.X.Min, p.X.Max = lo, hi
				}
			}
		}
	}
	sty := plot.New().Title.TextStyle
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YTop
	lineH := sty.Rectangle("Mg").Size().Y * 1.25
	capH := lineH*vg.Length(len(f.Caption)) + 3*vg.Millimeter
	w := max(pw*vg.Length(cols), 6*vg.Inch)
	img := vgimg.NewWith(vgimg.UseWH(w, ph*vg.Length(rows)+capH), vgimg.UseDPI(110))
	dc := draw.New(img)
	dc.SetColor(color.White)
	for i, line := range f.Caption {
		dc.FillText(sty, vg.Point{X: 3 * vg.Millimeter, Y: dc.Max.Y - 2*vg.Millimeter - lineH*vg.Length(i)}, line)
	}
	body := draw.Crop(dc, 0, 0, 0, -capH)
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: 2 * vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 1 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 3 * vg.Millimeter}
	canvases := plot.Align(plots, t, body)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	out, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(out); err != nil {
		out.Abort()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return out.Commit()
}

// logTicks labels a log axis on every panel: the powers of ten in range,
// or 1-2-5 steps when fewer than two powers fall in it, or every integer
// multiple of a power of ten, or at last the range's ends.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	for _, steps := range [][]int{{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		var ticks []plot.Tick
		labelled := 0
		for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
			d := math.Pow(10, e)
			for i := 1; i < 10; i++ {
				v := d * float64(i)
				if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
					continue
				}
				t := plot.Tick{Value: v}
				for _, s := range steps {
					if s == i {
						t.Label = tickLabel(v)
						labelled++
					}
				}
				ticks = append(ticks, t)
			}
		}
		if labelled >= 2 {
			return ticks
		}
	}
	return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 3, 64)}, {Value: hi, Label: strconv.FormatFloat(hi, 'g', 3, 64)}}
}

func tickLabel(v float64) string {
	if v >= 1e5 || v < 1e-3 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// intTicks labels a linear axis at integer multiples of a 1-2-5 step.
type intTicks struct{}

func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	step := 1.0
	for i := 0; (hi-lo)/step > 6; i++ {
		step *= []float64{2, 2.5, 2}[i%3]
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		v += 0 // −0 → 0
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return ticks
}
