package model

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// TestPlanRanks: --gpus wins; the config's gpu list runs as listed when the
// machine has the GPUs (one list per node: the launcher's rank picks it);
// otherwise one device with a hint naming the flag, and refusals name the
// config key and the flag.
func TestPlanRanks(t *testing.T) {
	one := &graph.Solver{GPU: [][]int{{0}}}
	eight := &graph.Solver{GPU: [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}}
	twoNodes := &graph.Solver{GPU: [][]int{{0, 1}, {0, 1}}}
	proc := func(r, n int) collective.Launch {
		return collective.Launch{Rank: r, Size: n, From: "CTRKIT_RANK/CTRKIT_WORLD_SIZE, CTRKIT_MASTER_ADDR"}
	}
	for _, c := range []struct {
		name    string
		s       *graph.Solver
		r       RankRequest
		devices []int
		cpu     bool
		group   bool
		hint    string
		err     string
	}{
		{name: "default", s: &graph.Solver{}, r: RankRequest{GPUCount: 1}},
		{name: "one GPU listed", s: one, r: RankRequest{GPUCount: 8}},
		{name: "--gpus 0,1", s: one, r: RankRequest{GPUs: []int{0, 1}, GPUCount: 2}, devices: []int{0, 1}, group: true},
		{name: "--gpus 1", s: eight, r: RankRequest{GPUs: []int{1}, GPUCount: 2}, devices: []int{1}},
		{name: "--gpus beyond the machine", s: one, r: RankRequest{GPUs: []int{0, 1}, GPUCount: 1}, err: "--gpus 0,1: GPU 1 does not exist (this machine has 1 GPU, ordinal 0)"},
		{name: "cpu --gpus 0,1,2", s: one, r: RankRequest{GPUs: []int{0, 1, 2}, CPU: true}, devices: []int{0, 1, 2}, cpu: true, group: true},
		{name: "8 listed, 8 present", s: eight, r: RankRequest{GPUCount: 8}, devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, group: true},
		{name: "8 listed, 1 present", s: eight, r: RankRequest{GPUCount: 1}, hint: "this machine has 1 GPU, ordinal 0 (--gpus picks its GPUs, e.g. --gpus 0)"},
		{name: "8 listed, cpu", s: eight, r: RankRequest{CPU: true}, cpu: true, hint: "--device cpu --gpus 0,1,2,3,4,5,6,7 runs 8 in-process CPU ranks"},
		{name: "vvgpu, process 1 of 2", s: twoNodes, r: RankRequest{GPUCount: 2, Launch: proc(1, 2)}, devices: []int{0, 1}, group: true},
		{name: "vvgpu alone", s: twoNodes, r: RankRequest{GPUCount: 2}, hint: "its 2 nodes need one process each"},
		{name: "vvgpu, 3 processes", s: twoNodes, r: RankRequest{GPUCount: 2, Launch: proc(0, 3), ConfigFile: "m.json"},
			err: "m.json: solver.gpu lists 2 nodes, but the launcher (CTRKIT_RANK/CTRKIT_WORLD_SIZE) started 3 processes (one per node); give each process its GPUs with --gpus"},
		{name: "vvgpu, GPUs missing", s: twoNodes, r: RankRequest{GPUCount: 1, Launch: proc(1, 2), ConfigFile: "m.json"},
			err: "m.json: solver.gpu lists GPUs 0,1 for process 1, this machine has 1 GPU, ordinal 0; give this process its GPUs with --gpus (e.g. --gpus 0)"},
		{name: "cpu, 2 processes", s: one, r: RankRequest{CPU: true, Launch: proc(0, 2)}, devices: []int{0}, cpu: true, group: true},
	} {
		p, err := PlanRanks(c.s, c.r)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(p.Devices, c.devices) || p.CPU != c.cpu || p.Group() != c.group || !strings.Contains(p.Hint, c.hint) || (c.hint == "") != (p.Hint == "") {
			t.Errorf("%s: %+v (group %v), want devices %v cpu %v group %v hint %q", c.name, p, p.Group(), c.devices, c.cpu, c.group, c.hint)
		}
	}
}

// TestRunConfigCapacity: the config's capacity of all its GPUs, spread over
// fewer ranks; on as many ranks or more, each has the per-GPU capacity.
func TestRunConfigCapacity(t *testing.T) {
	g := &graph.Graph{Embeddings: []graph.SparseEmbedding{{Type: graph.DistributedHash, VecSize: 4, MaxVocabPerGPU: 1001}}}
	j := Job{Config: &graph.Config{Graph: g}, Solver: graph.Solver{GPU: [][]int{{0, 1, 2, 3}}}, Optimizer: &graph.Optimizer{Type: "SGD"}}
	for _, c := range []struct{ ranks, want int64 }{{1, 4004}, {2, 2002}, {3, 1335}, {4, 1001}, {8, 1001}} {
		cfg, err := j.runConfig(int(c.ranks))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Graph.Embeddings[0].MaxVocabPerGPU; got != c.want {
			t.Errorf("%d ranks: %d rows a rank, want %d", c.ranks, got, c.want)
		}
	}
}
