package model

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// TestAcceptancePlanted: on planted Norm data from datagen, every
// reference model reaches an eval AUC within 0.03 of the planted AUC on the
// CPU backend (acceptance 4), at small sizes.
func TestAcceptancePlanted(t *testing.T) {
	dir := t.TempDir()
	p := datagen.DefaultParams()
	p.Format = datagen.Norm
	p.DenseDim = 4
	p.NumSlot = 8
	p.SlotSizeArray = []int64{40, 60, 20, 80, 30, 50, 10, 70}
	p.Source = filepath.Join(dir, "file_list.txt")
	p.EvalSource = filepath.Join(dir, "file_list_test.txt")
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 4, 1, 8192
	p.Seed = 11
	res, err := datagen.Generate(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	models := graph.ReferenceModels
	if testing.Short() {
		models = models[:1]
	}
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			cfg, err := graph.Reference(name, graph.RefOptions{DenseDim: p.DenseDim, SlotSizes: p.SlotSizeArray, VecSize: 8, Width: 1.0 / 32})
			if err != nil {
				t.Fatal(err)
			}
			opt := graph.DefaultOptimizer()
			opt.LearningRate = 0.01
			m, err := Build(cfg, cpuBackend(t), Options{BatchSize: 256, Seed: 1, Optimizer: opt})
			if err != nil {
				t.Fatal(err)
			}
			// Norm keys are global already (SPEC §5): no slot offsets.
			train := Source{Format: dataset.Norm, Path: p.Source, Check: norm.CheckSum}
			eval := Source{Format: dataset.Norm, Path: p.EvalSource, Check: norm.CheckSum}
			fr, err := m.Fit(context.Background(), FitOptions{
				OpenTrain: func() (formats.Reader, error) { return m.Open(train) },
				OpenEval:  func() (formats.Reader, error) { return m.Open(eval) },
				NumEpochs: 2,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: eval AUC %.4f, planted %.4f", name, fr.LastAUC, res.PlantedAUC)
			if math.IsNaN(fr.LastAUC) || math.Abs(fr.LastAUC-res.PlantedAUC) > 0.03 {
				t.Errorf("%s: eval AUC %.4f, planted %.4f", name, fr.LastAUC, res.PlantedAUC)
			}
		})
	}
}
