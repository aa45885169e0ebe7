package metrics

import (
	"math"
	"math/rand/v2"
	"testing"
)

func bruteAUC(s, y []float32) float64 {
	var num, p, n float64
	for i := range s {
		p += float64(y[i])
		n += 1 - float64(y[i])
		for j := range s {
			w := float64(y[i]) * (1 - float64(y[j]))
			if s[i] > s[j] {
				num += w
			} else if s[i] == s[j] {
				num += w / 2
			}
		}
	}
	return num / (p * n)
}

func TestAUCBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(300)
		s, y := make([]float32, n), make([]float32, n)
		levels := 1 + r.IntN(20) // few distinct scores: many ties
		for i := range s {
			s[i] = float32(r.IntN(levels)) / float32(levels)
			switch r.IntN(5) {
			case 0:
				y[i] = r.Float32() // soft labels: weights
			default:
				y[i] = float32(r.IntN(2))
			}
		}
		got, want := AUC(s, y), bruteAUC(s, y)
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("trial %d: got %v, want NaN", trial, got)
			}
			continue
		}
		if math.Abs(got-want) > 1e-9 {
			t.Fatalf("trial %d (n=%d): AUC %v, brute force %v", trial, n, got, want)
		}
	}
}

func TestAUCKnown(t *testing.T) {
	if got := AUC([]float32{0.1, 0.4, 0.35, 0.8}, []float32{0, 0, 1, 1}); got != 0.75 {
		t.Fatalf("sklearn example: %v, want 0.75", got)
	}
	if got := AUC([]float32{0.5, 0.5}, []float32{0, 1}); got != 0.5 {
		t.Fatalf("tie: %v", got)
	}
	if !math.IsNaN(AUC([]float32{1, 2}, []float32{1, 1})) {
		t.Fatal("one class must be NaN")
	}
	var a AUCAccumulator
	a.Add([]float32{0.1, 0.4}, []float32{0, 0})
	a.Add([]float32{0.35, 0.8}, []float32{1, 1})
	if a.Value() != 0.75 {
		t.Fatal("accumulator")
	}
}

func TestAverageLossHitRate(t *testing.T) {
	var l AverageLoss
	l.Add(1, 10)
	l.Add(4, 30)
	if l.Value() != 3.25 {
		t.Fatalf("average loss %v", l.Value())
	}
	var h HitRate
	h.Add([]float32{0.9, 0.85, 0.8, 0.1, 0.95}, []float32{1, 0, 1, 1, 1})
	if h.Value() != 2.0/3 {
		t.Fatalf("hit rate %v", h.Value())
	}
}

// TestAUCNaN: a NaN score gives a NaN AUC at once (before the fix the tie
// grouping never advanced past it and spun forever); ±Inf scores rank.
func TestAUCNaN(t *testing.T) {
	nan := float32(math.NaN())
	for _, s := range [][]float32{{nan}, {0.5, nan, 0.2, 0.9}, {nan, nan, nan, nan}, {0.1, 0.2, 0.3, nan}} {
		y := []float32{1, 0, 1, 0}[:len(s)]
		if got := AUC(s, y); !math.IsNaN(got) {
			t.Errorf("AUC(%v) = %v, want NaN", s, got)
		}
	}
	inf := float32(math.Inf(1))
	if got := AUC([]float32{-inf, inf, 0, inf}, []float32{0, 1, 0, 1}); got != 1 {
		t.Errorf("AUC with infinities = %v, want 1", got)
	}
	if got := FirstNaN([]float64{1, 2, math.NaN()}); got != 2 {
		t.Errorf("FirstNaN = %d, want 2", got)
	}
}
