package main

import (
	"fmt"

	"gonum.org/v1/plot/plotter"

	"github.com/ctrkit/ctrkit/inspect"
	"github.com/ctrkit/ctrkit/trainer/model"
)

// smoothWindow is the trailing moving-average window of the smoothed
// training loss: a tenth of the displayed points, between 1 and 50.
func smoothWindow(n int) int {
	return min(max(n/10, 1), 50)
}

// historyFigure is the training plot of h: a loss panel (the loss of the
// last batch at each --display iteration, faint, its trailing moving average
// and the eval loss at each evaluation) and, when there was evaluation, an
// AUC panel. source names the config in the caption.
func historyFigure(source string, h []model.Point) (*inspect.Figure, error) {
	var loss, evalLoss, auc plotter.XYs
	evalSamples := 0
	for _, p := range h {
		if p.Loss != nil {
			loss = append(loss, plotter.XY{X: float64(p.Iter), Y: *p.Loss})
		}
		if p.EvalLoss != nil {
			evalLoss = append(evalLoss, plotter.XY{X: float64(p.Iter), Y: *p.EvalLoss})
		}
		if p.EvalAUC != nil {
			auc = append(auc, plotter.XY{X: float64(p.Iter), Y: *p.EvalAUC})
			evalSamples = p.EvalSamples
		}
	}
	if len(loss) == 0 && len(evalLoss) == 0 && len(auc) == 0 {
		return nil, fmt.Errorf("--out-plot: nothing to plot (set --display or --eval-interval)")
	}
	f := &inspect.Figure{Cols: 1, PanelW: 8 * 72, PanelH: 3.6 * 72, SharedX: true,
		Caption: []string{fmt.Sprintf("training of %s", source)}}
	lp := inspect.Panel{Title: "loss", XLabel: "iteration", YLabel: "loss", Legend: true}
	if len(loss) > 0 {
		w := smoothWindow(len(loss))
		smooth := make(plotter.XYs, len(loss))
		sum := 0.0
		for i, p := range loss {
			sum += p.Y
			if i >= w {
				sum -= loss[i-w].Y
			}
			smooth[i] = plotter.XY{X: p.X, Y: sum / float64(min(i+1, w))}
		}
		lp.Series = append(lp.Series,
			inspect.Series{Name: "training loss (last batch)", Kind: inspect.Line, Points: loss, Faint: true},
			inspect.Series{Name: fmt.Sprintf("training loss, mean of last %d", w), Kind: inspect.Line, Points: smooth})
		f.Caption = append(f.Caption, fmt.Sprintf("training loss: the last batch's loss every %d iterations (faint); smoothed: trailing moving average over %d such points",
			displayStep(loss), w))
	}
	if len(evalLoss) > 0 {
		lp.Series = append(lp.Series, inspect.Series{Name: "eval loss", Kind: inspect.DashedLine, Points: evalLoss})
	}
	if len(lp.Series) > 0 {
		f.Panels = append(f.Panels, lp)
	}
	if len(auc) > 0 {
		f.Panels = append(f.Panels, inspect.Panel{Title: "evaluation AUC", XLabel: "iteration", YLabel: "AUC",
			Series: []inspect.Series{{Name: "eval AUC", Kind: inspect.Line, Points: auc}}})
		f.Caption = append(f.Caption, fmt.Sprintf("evaluation: loss and AUC over %d eval samples at each of %d evaluations", evalSamples, len(auc)))
	} else {
		f.Caption = append(f.Caption, "no evaluation (set --eval-interval for eval loss and AUC)")
	}
	return f, nil
}

// displayStep is the iteration step between the first two points of pts
// (the --display interval), 0 with fewer than two.
func displayStep(pts plotter.XYs) int64 {
	if len(pts) < 2 {
		return 0
	}
	return int64(pts[1].X - pts[0].X)
}

// plotHistory writes historyFigure(source, h) as a PNG at path.
func plotHistory(path, source string, h []model.Point) error {
	f, err := historyFigure(source, h)
	if err != nil {
		return err
	}
	if err := f.WritePNG(path); err != nil {
		return fmt.Errorf("--out-plot: %w", err)
	}
	return nil
}

// plotSource describes j's data for the training plot's caption.
func plotSource(j *model.Job) string {
	s := fmt.Sprintf("%s (batch size %d)", j.Train.Path, j.Solver.BatchSize)
	if j.Eval.Path != "" {
		s += ", evaluated on " + j.Eval.Path
	}
	return s
}
