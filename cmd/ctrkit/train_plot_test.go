package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/model"
)

func history(n int, eval bool) []model.Point {
	var h []model.Point
	for i := 1; i <= n; i++ {
		l := 1 / float64(i)
		h = append(h, model.Point{Iter: int64(10 * i), Loss: &l})
		if eval && i%5 == 0 {
			a, el := 0.5+float64(i)/100, 0.7
			h = append(h, model.Point{Iter: int64(10 * i), EvalAUC: &a, EvalLoss: &el, EvalSamples: 1000})
		}
	}
	return h
}

// TestHistoryFigure: without evaluation one loss panel (raw and smoothed
// training loss) and no AUC panel; with it the eval loss joins the loss
// panel and an AUC panel follows; the caption says how the loss is
// smoothed.
func TestHistoryFigure(t *testing.T) {
	f, err := historyFigure("t.txt", history(40, false))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Panels) != 1 || len(f.Panels[0].Series) != 2 {
		t.Fatalf("no eval: %d panels, %d series", len(f.Panels), len(f.Panels[0].Series))
	}
	c := strings.Join(f.Caption, "\n")
	if !strings.Contains(c, "moving average over 4") || !strings.Contains(c, "every 10 iterations") || !strings.Contains(c, "no evaluation") {
		t.Errorf("caption:\n%s", c)
	}
	// The smoothed series is the trailing mean of 4 points.
	sm := f.Panels[0].Series[1].Points
	if want := (1/7. + 1/8. + 1/9. + 1/10.) / 4; sm[9].Y-want > 1e-12 || want-sm[9].Y > 1e-12 {
		t.Errorf("smoothed[9] %v, want %v", sm[9].Y, want)
	}

	f, err = historyFigure("t.txt", history(40, true))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Panels) != 2 || len(f.Panels[0].Series) != 3 || len(f.Panels[1].Series) != 1 || len(f.Panels[1].Series[0].Points) != 8 {
		t.Fatalf("eval: %d panels", len(f.Panels))
	}
	if !strings.Contains(strings.Join(f.Caption, "\n"), "1000 eval samples") {
		t.Errorf("caption:\n%s", f.Caption)
	}
	if _, err := historyFigure("t.txt", nil); err == nil {
		t.Error("empty history plotted")
	}

	p := filepath.Join(t.TempDir(), "p.png")
	if err := plotHistory(p, "t.txt", history(40, true)); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := png.Decode(fh); err != nil {
		t.Fatal(err)
	}
}
