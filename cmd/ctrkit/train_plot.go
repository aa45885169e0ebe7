package main

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/model"
)

// plotHistory writes a PNG with the training loss (top) and the eval AUC
// (bottom) against iterations.
func plotHistory(path string, h []model.Point) error {
	var loss, auc plotter.XYs
	for _, p := range h {
		if p.Loss != nil {
			loss = append(loss, plotter.XY{X: float64(p.Iter), Y: *p.Loss})
		}
		if p.EvalAUC != nil {
			auc = append(auc, plotter.XY{X: float64(p.Iter), Y: *p.EvalAUC})
		}
	}
	if len(loss) == 0 && len(auc) == 0 {
		return fmt.Errorf("--plot: nothing to plot (set --display or --eval-interval)")
	}
	mk := func(title, y string, pts plotter.XYs) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "iteration"
		p.Y.Label.Text = y
		if len(pts) > 0 {
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			s.Radius = vg.Points(2)
			p.Add(l, s, plotter.NewGrid())
		}
		return p, nil
	}
	pl, err := mk("training loss", "loss", loss)
	if err != nil {
		return err
	}
	pa, err := mk("evaluation AUC", "AUC", auc)
	if err != nil {
		return err
	}
	img := vgimg.New(8*vg.Inch, 8*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{{pl}, {pa}}, tiles, dc)
	pl.Draw(canvases[0][0])
	pa.Draw(canvases[1][0])
	f, err := formats.CreateFile(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}
