package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/cuda"
)

// TestBenchTrainSources: `ctrkit bench train` feeds its pipeline from a Raw
// file through the synchronous reader and the RawAsync (O_DIRECT) engine,
// and from Parquet, with slot-local keys checked against the slot sizes.
// Before, it fed one-hot keys minus the slot offsets (negative rows: "outside
// its slot") and had no --reader.
func TestBenchTrainSources(t *testing.T) {
	dir := t.TempDir()
	rawPath := filepath.Join(dir, "train.bin")
	pq := filepath.Join(dir, "pq")
	gen := []string{"--dense-dim", "3", "--num-slot", "4", "--slot-size-array", "100"}
	if out, err := runCtrkit(t, append([]string{"gen", "--format", "raw", "--num-samples", "512", "--eval-num-samples", "64",
		"--out-source", rawPath, "--out-eval-source", filepath.Join(dir, "eval.bin")}, gen...)...); err != nil {
		t.Fatalf("gen raw: %v\n%s", err, out)
	}
	if out, err := runCtrkit(t, append([]string{"gen", "--format", "parquet", "--num-files", "1", "--eval-num-files", "1", "--num-samples-per-file", "512",
		"--out-source", filepath.Join(pq, "_file_list.txt"), "--out-eval-source", filepath.Join(dir, "pqe", "_file_list.txt")}, gen...)...); err != nil {
		t.Fatalf("gen parquet: %v\n%s", err, out)
	}
	for _, c := range [][]string{
		{rawPath, "--reader", "sync"},
		{rawPath, "--reader", "async", "--algorithm-search=false"},
		{rawPath, "--reader", "async", "--num-threads", "2", "--io-depth", "2", "--io-block-size", "65536", "--num-batches-per-thread", "2"},
		{filepath.Join(pq, "_file_list.txt")},
	} {
		args := append([]string{"bench", "train", "--device", "cpu", "--batchsize", "64", "--warmup", "1", "--steps", "2",
			"--vec-size", "4", "--slot-size-array", "100", "--label-dim", "1", "--dense-dim", "3", "--num-slot", "4", "--json"}, c...)
		out, err := runCtrkit(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
		var res struct {
			Pipeline struct{ Steps int }
		}
		js := out[max(strings.Index(out, "{\n"), 0):] // after the log lines
		if err := json.Unmarshal([]byte(js), &res); err != nil || res.Pipeline.Steps != 2 {
			t.Errorf("%v: %v, %d steps\n%s", c, err, res.Pipeline.Steps, out)
		}
	}
}

// genSmallRaw writes a Raw file of samples samples (3 dense values, 4
// slots of 100 keys) and its eval file into a temporary folder.
func genSmallRaw(t *testing.T, samples int) string {
	t.Helper()
	dir := t.TempDir()
	rawPath := filepath.Join(dir, "train.bin")
	if out, err := runCtrkit(t, "gen", "--format", "raw", "--num-samples", strconv.Itoa(samples), "--eval-num-samples", "64",
		"--out-source", rawPath, "--out-eval-source", filepath.Join(dir, "eval.bin"),
		"--dense-dim", "3", "--num-slot", "4", "--slot-size-array", "100"); err != nil {
		t.Fatalf("gen raw: %v\n%s", err, out)
	}
	return rawPath
}

// TestBenchTrainAsyncFlags: `bench train --reader async` takes the async
// engine's settings with bench read's names and hands them to the engine
// (an io_alignment it cannot use is its error), and the sync reader refuses
// them. Before, bench train had none of them ("unknown flag --io-depth")
// and ran the engine with its defaults only.
func TestBenchTrainAsyncFlags(t *testing.T) {
	rawPath := genSmallRaw(t, 256)
	base := []string{"bench", "train", rawPath, "--device", "cpu", "--batchsize", "64", "--warmup", "1", "--steps", "2",
		"--vec-size", "4", "--slot-size-array", "100", "--label-dim", "1", "--dense-dim", "3", "--num-slot", "4"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--reader", "async", "--io-alignment", "3"}, "io_alignment 3"},
		{[]string{"--reader", "async", "--aligned-type", "sideways"}, "--aligned-type"},
		{[]string{"--io-depth", "8"}, "--io-depth is a setting of the async reader"},
		{[]string{"--reader", "sync", "--buffered"}, "--buffered is a setting of the async reader"},
	} {
		out, err := runCtrkit(t, append(base, c.args...)...)
		if err == nil || !strings.Contains(out+err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q\n%s", c.args, err, c.want, out)
		}
	}
}

// TestBenchTrainProfile: `bench train --profile` prints the profile table
// (a row per layer of the model, the pipeline's rows, totals against the
// measured step, the pipeline's host side) through the pipeline and on the
// resident batch, and --json carries both profiles; --profile-steps needs
// --profile.
func TestBenchTrainProfile(t *testing.T) {
	rawPath := genSmallRaw(t, 300)
	base := []string{"bench", "train", rawPath, "--device", "cpu", "--batchsize", "8", "--warmup", "1", "--steps", "2",
		"--vec-size", "4", "--slot-size-array", "100", "--label-dim", "1", "--dense-dim", "3", "--num-slot", "4", "--resident"}
	out, err := runCtrkit(t, append(base, "--profile", "--profile-steps", "3")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(out)
	for _, want := range []string{"profile through the pipeline: 3 steps of 8 samples, host clock", "profile on the resident batch",
		"sparse_embedding1", "LocalizedSlotSparseEmbeddingOneHot", "interaction1", "fc8", "InnerProduct", "(wait for the batch)",
		"(commit + split inputs)", "(between steps)", "total of the spans", "measured step:", "pipeline, host side: training waits"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	out, err = runCtrkit(t, append(base, "--profile", "--profile-steps", "2", "--json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	type profile struct {
		Steps  int
		Layers []struct {
			Layer, Type string
			Share       float64
		}
		Pipeline *struct{ Batches int }
	}
	var res struct {
		Profile         *profile
		ResidentProfile *profile `json:"resident_profile"`
	}
	js := out[max(strings.Index(out, "{\n"), 0):]
	if err := json.Unmarshal([]byte(js), &res); err != nil || res.Profile == nil || res.ResidentProfile == nil {
		t.Fatalf("%v: %+v\n%s", err, res, out)
	}
	if res.Profile.Steps != 2 || res.Profile.Pipeline == nil || res.ResidentProfile.Pipeline != nil ||
		len(res.Profile.Layers) != len(res.ResidentProfile.Layers)+1 || len(res.Profile.Layers) < 10 {
		t.Errorf("profiles %+v and %+v", res.Profile, res.ResidentProfile)
	}
	if out, err := runCtrkit(t, append(base, "--profile-steps", "3")...); err == nil || !strings.Contains(err.Error(), "give --profile too") {
		t.Errorf("--profile-steps without --profile: %v\n%s", err, out)
	}
}

type fakeSearcher struct {
	on bool
	st cuda.AlgoSearchStats
}

func (f fakeSearcher) AlgorithmSearch() bool            { return f.on }
func (f fakeSearcher) AlgoSearch() cuda.AlgoSearchStats { return f.st }

// TestPrintAlgoSearch: bench train prints the algorithm search's cost for
// a backend that searched, that it was off, and nothing for the CPU.
func TestPrintAlgoSearch(t *testing.T) {
	var b strings.Builder
	printAlgoSearch(&b, fakeSearcher{on: true, st: cuda.AlgoSearchStats{Descriptors: 24, Timed: 190, Millis: 312.5}})
	if got := b.String(); !strings.Contains(got, "algorithm search") || !strings.Contains(got, "24 descriptors, 190 candidates timed") || !strings.Contains(got, "312.5 ms") {
		t.Errorf("printed %q", got)
	}
	b.Reset()
	printAlgoSearch(&b, fakeSearcher{})
	if got := b.String(); got != "algorithm search: off (cuBLASLt's heuristic's first choice, cuBLAS's own GEMM)\n" {
		t.Errorf("search off: printed %q", got)
	}
	b.Reset()
	printAlgoSearch(&b, struct{}{})
	if b.Len() != 0 {
		t.Errorf("printed %q for a backend without a search (the CPU)", b.String())
	}
}

// TestBenchTrainCUDAGraph: bench train says how its steps ran: on the CPU
// eagerly, with the reason, and --cuda-graph=false says graphs are off;
// --json carries the counts.
func TestBenchTrainCUDAGraph(t *testing.T) {
	dir := t.TempDir()
	rawPath := filepath.Join(dir, "train.bin")
	if out, err := runCtrkit(t, "gen", "--format", "raw", "--num-samples", "64", "--eval-num-samples", "8", "--dense-dim", "3", "--num-slot", "4",
		"--slot-size-array", "100", "--out-source", rawPath, "--out-eval-source", filepath.Join(dir, "eval.bin")); err != nil {
		t.Fatalf("gen: %v\n%s", err, out)
	}
	base := []string{"bench", "train", rawPath, "--device", "cpu", "--batchsize", "8", "--warmup", "1", "--steps", "2", "--resident",
		"--vec-size", "4", "--slot-size-array", "100", "--label-dim", "1", "--dense-dim", "3", "--num-slot", "4"}
	out, err := runCtrkit(t, base...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"pipeline: CUDA graph: 0 of 3 steps ran as the graph\n  eager: the cpu backend has no CUDA graphs: steps run eagerly\n",
		"resident: CUDA graph: 0 of 3 steps ran as the graph\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q:\n%s", want, out)
		}
	}
	out, err = runCtrkit(t, append(base, "--cuda-graph=false")...)
	if err != nil || !strings.Contains(out, "pipeline: CUDA graph off (--cuda-graph=false): eager steps\n") {
		t.Errorf("--cuda-graph=false: %v\n%s", err, out)
	}
	out, err = runCtrkit(t, append(base, "--json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		CUDAGraph struct {
			Enabled bool
			Graphed int64
			Eager   int64
			Notes   []string
		} `json:"cuda_graph"`
	}
	js := out[max(strings.Index(out, "{\n"), 0):]
	if err := json.Unmarshal([]byte(js), &res); err != nil || res.CUDAGraph.Enabled || res.CUDAGraph.Eager != 6 || len(res.CUDAGraph.Notes) != 1 {
		t.Errorf("json: %v, %+v\n%s", err, res.CUDAGraph, out)
	}
}
