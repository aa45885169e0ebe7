package inspect

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// plotReport is a report of n slots; the slots in empty have no keys, slot
// i has nnz i+1 in every sample.
func plotReport(n int, empty map[int]bool) *Report {
	r := &Report{Samples: 100, Labels: []ValueStats{{Mean: 0.3, Max: 1}}, LabelHist: make([]int64, 20)}
	r.LabelHist[0], r.LabelHist[19] = 70, 30
	for i := 0; i < n; i++ {
		st := SlotStats{Name: "C" + string(rune('A'+i)), NNZHist: make([]int64, maxNNZBin+1)}
		nnz := min(i+1, maxNNZBin)
		st.NNZHist[nnz] = 100
		st.NNZMin, st.NNZMax = int64(nnz), int64(nnz)
		if !empty[i] {
			st.Keys, st.Distinct = 100*int64(nnz), 50
			for rk := int64(1); rk <= 50; rk++ {
				st.RankFreq = append(st.RankFreq, RankCount{Rank: rk, Count: 1 + 100/rk})
			}
			if i%2 == 0 {
				a := 1.1
				st.Alpha = &a
				st.Fit = Fit{Alpha: a, RMin: 3, RMax: 50, M: 50, Samples: 300}
			}
		}
		r.Slots = append(r.Slots, st)
	}
	return r
}

// TestRankFigurePanels: one panel per slot with keys (no blank panels for
// the grid's spare cells, none for slots without keys, which the caption
// names), a fit line where α was fitted, and the fit in the caption.
func TestRankFigurePanels(t *testing.T) {
	for _, n := range []int{1, 2, 5, 26} {
		empty := map[int]bool{}
		if n == 26 {
			empty = map[int]bool{3: true, 17: true}
		}
		f := RankFigure(plotReport(n, empty), PlotOptions{Source: "data/file_list.txt"})
		if len(f.Panels) != n-len(empty) {
			t.Fatalf("%d slots: %d panels", n, len(f.Panels))
		}
		rows, cols := f.Grid()
		if rows*cols < len(f.Panels) || (rows-1)*cols >= len(f.Panels) {
			t.Errorf("%d panels in a %d×%d grid", len(f.Panels), rows, cols)
		}
		for _, p := range f.Panels {
			want := 1
			if strings.Contains(p.Title, "α =") {
				want = 2
			}
			if len(p.Series) != want || !p.LogX || !p.LogY {
				t.Errorf("panel %q: %d series (want %d), log %v %v", p.Title, len(p.Series), want, p.LogX, p.LogY)
			}
		}
		c := strings.Join(f.Caption, "\n")
		for _, w := range []string{"data/file_list.txt", "100 samples", "maximum likelihood", "α"} {
			if !strings.Contains(c, w) {
				t.Errorf("caption lacks %q:\n%s", w, c)
			}
		}
		if n == 26 && !strings.Contains(c, "CD, CR") {
			t.Errorf("caption does not name the slots without keys:\n%s", c)
		}
	}
	if f := RankFigure(plotReport(3, map[int]bool{0: true, 1: true, 2: true}), PlotOptions{}); f != nil {
		t.Errorf("figure without keys: %d panels", len(f.Panels))
	}
}

// TestNNZFigurePerSlot: one nnz panel per slot, each with its own slot's
// histogram (not the pool of all slots).
func TestNNZFigurePerSlot(t *testing.T) {
	r := plotReport(26, map[int]bool{5: true})
	f := NNZFigure(r, PlotOptions{Source: "x"})
	if len(f.Panels) != 26 {
		t.Fatalf("%d panels", len(f.Panels))
	}
	for i, p := range f.Panels {
		pts := p.Series[0].Points
		if len(p.Series) != 1 || p.Series[0].Kind != Bars || len(pts) != i+2 {
			t.Fatalf("slot %d: %d series, %d bars", i, len(p.Series), len(pts))
		}
		if last := pts[len(pts)-1]; last.X != float64(i+1) || last.Y != 100 {
			t.Errorf("slot %d: last bar %v, want nnz %d × 100", i, last, i+1)
		}
	}
	if NNZFigure(&Report{}, PlotOptions{}) != nil {
		t.Error("nnz figure of an empty report")
	}
}

// TestLogTicksLabelled: every log axis gets at least two labelled ticks in
// its range, also when the range lies within one decade.
func TestLogTicksLabelled(t *testing.T) {
	for _, rg := range [][2]float64{{1, 1000}, {3, 8}, {1.2, 1.9}, {0.5, 2}, {40, 900}, {2, 3.5e6}} {
		n := 0
		for _, tk := range (logTicks{}).Ticks(rg[0], rg[1]) {
			if tk.Label != "" && tk.Value >= rg[0]*(1-1e-9) && tk.Value <= rg[1]*(1+1e-9) {
				n++
			}
		}
		if n < 2 {
			t.Errorf("range %v: %d labelled ticks", rg, n)
		}
	}
}

// TestFigureWritePNG: a figure with every series kind, one-point log
// panels included, is written and decodes.
func TestFigureWritePNG(t *testing.T) {
	one := plotter.XYs{{X: 1, Y: 5}}
	two := plotter.XYs{{X: 1, Y: 5}, {X: 2, Y: 3}}
	f := &Figure{Caption: []string{"a", "b"}, PanelW: 150, PanelH: 120, Panels: []Panel{
		{Title: "log", LogX: true, LogY: true, Series: []Series{{Kind: Scatter, Points: one}}},
		{Title: "lines", Legend: true, Series: []Series{{Name: "a", Kind: Line, Points: two, Faint: true}, {Name: "b", Kind: DashedLine, Points: two}}},
		{Title: "bars", Series: []Series{{Kind: Bars, Points: two, BarWidth: 1}}},
	}}
	p := filepath.Join(t.TempDir(), "f.png")
	if err := f.WritePNG(p); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 100 {
		t.Errorf("image %v", b)
	}
	if err := (&Figure{}).WritePNG(p + "2"); err == nil {
		t.Error("empty figure written")
	}
}

// TestIntTicks: integer labels only, at least two in range.
func TestIntTicks(t *testing.T) {
	for _, rg := range [][2]float64{{-0.5, 1.5}, {-0.5, 4.5}, {0, 64.5}, {-0.5, 1000}} {
		ticks := (intTicks{}).Ticks(rg[0], rg[1])
		if len(ticks) < 2 || len(ticks) > 8 {
			t.Errorf("range %v: %d ticks", rg, len(ticks))
		}
		for _, tk := range ticks {
			if tk.Value != float64(int64(tk.Value)) || tk.Value < rg[0] || tk.Value > rg[1] || strings.HasPrefix(tk.Label, "-0") {
				t.Errorf("range %v: tick %v", rg, tk.Value)
			}
		}
	}
}
