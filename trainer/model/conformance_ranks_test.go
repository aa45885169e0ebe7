package model

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// TestConformanceRanks trains every shared HugeCTR config that lists
// several GPUs (solver.gpu / vvgpu; skipped when ../shared is absent) on
// one CPU rank and on two in-process CPU ranks (the sharded trainer: the
// batch split over the ranks, embeddings sharded, dense gradients summed)
// from the same generated data, saves both, and predicts the evaluation
// data from each snapshot on one rank: the two-rank model must predict what
// the one-rank model predicts (to float rounding; BatchNorm keeps per-rank
// statistics, as HugeCTR does, so those configs only have to train).
func TestConformanceRanks(t *testing.T) {
	if os.Getenv(conformanceChildEnv) != "" {
		t.Skip("child process")
	}
	if testing.Short() {
		t.Skip("the shared multi-GPU configs: run without -short")
	}
	dir := os.Getenv("CTRKIT_HUGECTR_JSON")
	if dir == "" {
		dir = "../../../shared/data/hugectr-json"
	}
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if len(paths) == 0 {
		t.Skipf("no HugeCTR configs under %s", dir)
	}
	sort.Strings(paths)
	compared, trained := 0, 0
	for _, path := range paths {
		cfg, err := graph.ReadFile(path)
		if err != nil || cfg.Solver == nil || !multiGPU(cfg.Solver.GPU) {
			continue
		}
		name := filepath.Base(path)
		if _, bad := invalidConfigs[name]; bad {
			continue
		}
		if _, exp := expectedFailures[name]; exp {
			continue
		}
		t.Run(name, func(t *testing.T) {
			one, oneDir := rankPredictions(t, path, 1)
			if one == "" {
				return
			}
			two, _ := rankPredictions(t, path, 2)
			trained++
			if hasBatchNorm(cfg) {
				t.Logf("BatchNorm: per-rank statistics, predictions not compared (%s)", oneDir)
				return
			}
			if d := closePredictions(two, one, 1e-4); d != "" {
				t.Errorf("two ranks predict differently from one: %s", d)
			}
			compared++
		})
	}
	t.Logf("%d multi-GPU configs trained on 1 and 2 CPU ranks, %d compared prediction by prediction", trained, compared)
	if trained == 0 {
		t.Errorf("no multi-GPU config under %s trained", dir)
	}
}

func multiGPU(nodes [][]int) bool {
	n := 0
	for _, g := range nodes {
		n += len(g)
	}
	return n > 1
}

func hasBatchNorm(cfg *graph.Config) bool {
	for _, l := range cfg.Graph.Layers {
		if l.Type == graph.BatchNorm {
			return true
		}
	}
	return false
}

// rankPredictions trains path's config as TestConformance does on ranks
// in-process CPU ranks, saves it, and returns the predictions of its
// snapshot reloaded on one rank ("" when the config is not a trainable
// model, logged).
func rankPredictions(t *testing.T, path string, ranks int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	p, row, err := planConformance(path, dir, conformanceLimits(false))
	if err != nil {
		t.Fatal(err)
	}
	if p == nil || p.infer != nil {
		t.Logf("not trained here: %s %s", row.Kind, row.Reason)
		return "", dir
	}
	if _, err := datagen.Generate(context.Background(), p.gen, nil); err != nil {
		t.Fatal(err)
	}
	j := p.job
	cpuSolver(&j.Solver) // CPU ranks train fp32
	if ranks > 1 {
		w, err := collective.Open(context.Background(), collective.Setup{CPU: true, Devices: make([]int, ranks)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		j.World = w
		j.Ranks = RankPlan{CPU: true, Devices: make([]int, ranks)}
	} else {
		if j.Backend, err = conformanceBackend(false, &j.Solver); err != nil {
			t.Fatal(err)
		}
		defer CloseBackend(j.Backend)
	}
	if _, _, err := Train(context.Background(), j, TrainOutput{SaveFinal: true}); err != nil {
		t.Fatalf("%d ranks: training: %v", ranks, err)
	}
	r := p.job
	if r.Backend, err = conformanceBackend(false, &r.Solver); err != nil {
		t.Fatal(err)
	}
	defer CloseBackend(r.Backend)
	r.Init = SnapshotFiles(r.Solver.SnapshotPrefix, confSteps, len(r.Config.Graph.Embeddings))
	r.Init.DenseOpt, r.Init.SparseOpt = "", nil
	out := filepath.Join(dir, "predictions.txt")
	if _, err := RunPredict(r, out); err != nil {
		t.Fatalf("%d ranks: predicting from the snapshot: %v", ranks, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), dir
}
