package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/criteo"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
)

var updateConvert = flag.Bool("update-convert", false, "rewrite cmd/ctrkit/testdata/convert/*.golden")

// convertTestdata is cmd/ctrkit/testdata/convert, absolute (tests change
// directory).
var convertTestdata = filepath.Join(testdataDir, "convert")

// ctrkitArgs runs args as the binary does — flags may follow arguments
// (permuteArgs), an error is printed as "ctrkit: …" and sets the exit
// status as in main — with timings left out of the summaries, and returns
// the output and exit status.
func ctrkitArgs(t *testing.T, args ...string) (string, int) {
	t.Helper()
	t.Setenv(noTimingsEnv, "1")
	return execCtrkit(t, args...)
}

// transcript runs each command line and collects "$ ctrkit …", its output
// and its exit status, failing when the status is not want.
func transcript(t *testing.T, want int, cmds ...[]string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range cmds {
		out, code := ctrkitArgs(t, args...)
		fmt.Fprintf(&b, "$ ctrkit %s\n%s[exit %d]\n", strings.Join(args, " "), out, code)
		if code != want {
			t.Errorf("ctrkit %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
		}
	}
	return b.String()
}

// goldenConvert compares got with testdata/convert/name (rewritten with
// -update-convert).
func goldenConvert(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join(convertTestdata, name)
	if *updateConvert {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update-convert)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", p, got, want)
	}
}

// readDataset resolves p with sp and reads every sample.
func readDataset(t *testing.T, p string, sp dataset.Spec) *formatstest.Dataset {
	t.Helper()
	d, err := dataset.Resolve(p, sp)
	if err != nil {
		t.Fatalf("resolve %s: %v", p, err)
	}
	r, err := d.Open(formats.Options{BatchSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ds, err := formatstest.ReadAll(r, 1024, 0)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return ds
}

// TestConvertCommand converts a Norm fixture to Parquet, the Parquet to Raw
// and the Raw back to Norm with the binary's command line, compares the
// summaries with a golden transcript and the samples with the original.
func TestConvertCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	writeNormFixture(t, "a.data", 50, norm.CheckSum, formats.KeyU32)
	writeNormFixture(t, "b.data", 30, norm.CheckSum, formats.KeyU32)
	os.WriteFile("list.txt", []byte("2\na.data\nb.data\n"), 0o644)
	got := transcript(t, 0,
		[]string{"convert", "list.txt", "pq", "--to", "parquet", "--nnz-array", "1", "--samples-per-file", "60", "--compression", "zstd"},
		[]string{"convert", "pq", "onehot.bin", "--to", "raw", "--out-float-label-dense", "--batchsize", "7"},
		[]string{"convert", "onehot.bin", "back/file_list.txt", "--from", "raw", "--to", "norm", "--label-dim", "1", "--dense-dim", "1",
			"--num-slot", "2", "--float-label-dense", "--out-check-type", "none", "--i64-input-key", "--out-key-type", "i32"},
		[]string{"convert", "back/file_list.txt", "multi.bin", "--to", "raw", "--nnz-array", "1", "--out-raw-layout", "multihot",
			"--out-float-label-dense", "--out-label-type", "float32", "--out-key-type", "i64"},
		[]string{"convert", "list.txt", "all/list.txt", "--to", "norm", "--out-key-type", "i64", "--samples-per-file", "45"},
	)
	goldenConvert(t, "convert_success.golden", []byte(got))

	want := readDataset(t, "list.txt", dataset.Spec{})
	if want.Len() != 80 {
		t.Fatalf("fixture: %d samples", want.Len())
	}
	for _, c := range []struct {
		path string
		spec dataset.Spec
	}{
		{"pq", dataset.Spec{}},
		{"onehot.bin", dataset.Spec{Format: dataset.Raw, LabelDim: 1, DenseDim: 1, NumSlot: 2, FloatLabelDense: true}},
		{"back/file_list.txt", dataset.Spec{}},
		{"multi.bin", dataset.Spec{LabelDim: 1, DenseDim: 1, NumSlot: 2, FloatLabelDense: true, NNZ: []int{1},
			RawLayout: raw.MultiHot, RawLayoutSet: true, LabelType: formats.Float32, LabelTypeSet: true, KeyType: formats.KeyI64, KeyTypeSet: true}},
		{"all/list.txt", dataset.Spec{}},
	} {
		if diff := formatstest.Diff(want, readDataset(t, c.path, c.spec)); diff != "" {
			t.Errorf("%s: %s", c.path, diff)
		}
	}
	if files, _ := formats.ReadFileList("all/list.txt"); len(files) != 2 {
		t.Errorf("--samples-per-file 45 of 80 samples: %d files, want 2", len(files))
	}
	if files, _ := filepath.Glob("pq/*.parquet"); len(files) != 2 {
		t.Errorf("--samples-per-file 60 of 80 samples: %d parquet files, want 2", len(files))
	}
}

// TestConvertTimings: without the test environment the summary reports the
// time, the throughput and the decoding goroutines (to Raw, a quarter of
// the cores is left to the writer from 8 cores on).
func TestConvertTimings(t *testing.T) {
	t.Chdir(t.TempDir())
	writeNormFixture(t, "a.data", 20, norm.CheckNone, formats.KeyU32)
	for _, tc := range []struct {
		to      string
		workers int
	}{{"norm", 16}, {"raw", 2}, {"raw", 16}} {
		decoding := tc.workers
		if tc.to == "raw" {
			decoding = dataset.ReadWorkers(tc.workers, runtime.GOMAXPROCS(0))
		}
		w := strconv.Itoa(tc.workers)
		dst := "o" + w + "." + tc.to
		args := []string{"ctrkit", "convert", "a.data", dst, "--to", tc.to, "--num-workers", w}
		if tc.to == "raw" {
			args = append(args, "--nnz-array", "1,1", "--out-float-label-dense")
		}
		out, err := runCtrkit(t, permuteArgs(newApp(), args)[1:]...)
		if err != nil || !regexp.MustCompile(`converted 20 samples from a.data \(norm\) to `+dst+` \(`+tc.to+`\) in [0-9.]+s \([0-9]+ samples/s, `+strconv.Itoa(decoding)+` decoding goroutines\)\n$`).MatchString(out) {
			t.Errorf("%v, output:\n%s", err, out)
		}
	}
}

// TestConvertRefused: bad or contradictory parameters exit 2 with a message
// naming the flag, and write nothing.
func TestConvertRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	writeNormFixture(t, "a.data", 20, norm.CheckSum, formats.KeyU32)
	os.WriteFile("day.tsv", []byte("1\t5\t\t68fd1e64\n0\t\t7\t\n"), 0o644)
	got := transcript(t, 2,
		[]string{"convert", "a.data", "out"},
		[]string{"convert", "a.data", "--to", "parquet"},
		[]string{"convert", "a.data", "out", "--to", "csv"},
		[]string{"convert", "a.data", "out", "--to", "parquet", "--compression", "lz4"},
		[]string{"convert", "a.data", "out", "--to", "parquet", "--cat-type", "float"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--compression", "zstd"},
		[]string{"convert", "a.data", "out.bin", "--to", "raw", "--dictionary"},
		[]string{"convert", "a.data", "out.bin", "--to", "raw", "--samples-per-file", "10"},
		[]string{"convert", "a.data", "out.bin", "--to", "raw"},
		[]string{"convert", "a.data", "out.bin", "--to", "raw", "--nnz-array", "2", "--out-raw-layout", "onehot"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--out-key-type", "i16"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--out-check-type", "crc"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--check-type", "md5"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--label-dim", "2"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--slot-size-array", "7,0"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--batchsize", "0"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--min-count", "3"},
		[]string{"convert", "a.data", "out", "--to", "norm", "--vocab"},
		[]string{"convert", "day.tsv", "out", "--to", "norm", "--num-slot", "1", "--dense-dim", "2"},
		[]string{"convert", "day.tsv", "out", "--to", "norm", "--vocab", "--vocab-memory", "lots", "--num-slot", "1", "--dense-dim", "2"},
		[]string{"convert", "day.tsv", "out", "--to", "norm", "--vocab", "--min-count", "0", "--num-slot", "1", "--dense-dim", "2"},
		[]string{"convert", "day.tsv", "out", "--to", "norm", "--vocab", "--slot-size-array", "10", "--num-slot", "1", "--dense-dim", "2"},
		[]string{"convert", "nosuch.txt", "out", "--to", "norm"},
	)
	goldenConvert(t, "convert_refused.golden", []byte(got))
	if ents, _ := filepath.Glob("out*"); len(ents) != 0 {
		t.Errorf("refused conversions wrote %v", ents)
	}
}

// criteoSample is the real Criteo excerpt shared by the project, skipped
// when this checkout lacks it.
func criteoSample(t *testing.T) string {
	p, _ := filepath.Abs(filepath.Join("..", "..", "..", "shared", "data", "criteo_sample.txt"))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no %s", p)
	}
	return p
}

// directCriteo reads Criteo text with the criteo package.
func directCriteo(t *testing.T, path string, o criteo.Options) *formatstest.Dataset {
	t.Helper()
	r, err := criteo.Open([]string{path}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ds, err := formatstest.ReadAll(r, formats.DefaultBatchSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// outputs are the destinations a Criteo conversion is checked in, with what
// reading them back needs.
var criteoOutputs = []struct {
	to, dst string
	args    []string
	spec    dataset.Spec
}{
	{"norm", "n/file_list.txt", []string{"--out-check-type", "sum"}, dataset.Spec{}},
	{"raw", "r/onehot.bin", nil, dataset.Spec{Format: dataset.Raw}},
	{"raw", "f/float.bin", []string{"--out-float-label-dense", "--out-key-type", "i64"},
		dataset.Spec{Format: dataset.Raw, FloatLabelDense: true}},
	{"parquet", "p", []string{"--compression", "none", "--cat-type", "uint32"}, dataset.Spec{}},
	{"parquet", "d", []string{"--dictionary"}, dataset.Spec{}},
}

// checkCriteoConversion converts src with the mapping flags to every output
// and compares what reads back with want (wantGlobal for Norm, whose keys
// convert offsets by default, HugeCTR's convention) and the
// slot_size_array.json with sizes.
func checkCriteoConversion(t *testing.T, src string, mapping []string, want, wantGlobal *formatstest.Dataset, sizes []int64) {
	t.Helper()
	for _, o := range criteoOutputs {
		dst := filepath.Join(t.TempDir(), o.dst)
		args := append(append([]string{"convert", src, dst, "--to", o.to}, mapping...), o.args...)
		out, code := ctrkitArgs(t, args...)
		if code != 0 {
			t.Errorf("%s: exit %d\n%s", strings.Join(args, " "), code, out)
			continue
		}
		sp := o.spec
		if sp.Format == dataset.Raw {
			sp.LabelDim, sp.DenseDim, sp.NumSlot = 1, want.Schema.DenseDim, len(want.Schema.Slots)
		}
		w := want
		if o.to == "norm" {
			w = wantGlobal
		}
		if diff := formatstest.Diff(w, readDataset(t, dst, sp)); diff != "" {
			t.Errorf("%s: %s", strings.Join(args, " "), diff)
		}
		// Beside a Raw file under its name (never a shared name in the
		// working directory), in a dataset's directory otherwise.
		jsonPath := dst + ".slot_size_array.json"
		if o.to == "parquet" {
			jsonPath = filepath.Join(dst, "slot_size_array.json")
		} else if o.to == "norm" {
			jsonPath = filepath.Join(filepath.Dir(dst), "slot_size_array.json")
		}
		got, err := criteo.ReadSlotSizeJSON(jsonPath)
		if err != nil || !slices.Equal(got, sizes) {
			t.Errorf("%s: slot_size_array.json %v, %v; want %v", strings.Join(args, " "), got, err, sizes)
		}
		if !strings.Contains(out, "slot_size_array written to "+jsonPath+" (keys ") {
			t.Errorf("%s: output does not name %s:\n%s", strings.Join(args, " "), jsonPath, out)
		}
	}
}

// TestConvertCriteoSample converts the real Criteo rows by hashing and by
// vocabularies of two thresholds to every format and checks the values
// against a direct read of the text.
func TestConvertCriteoSample(t *testing.T) {
	src := criteoSample(t)
	buckets := make([]int64, 26)
	var ssa []string
	for i := range buckets {
		buckets[i] = int64(100 + 13*i)
		ssa = append(ssa, strconv.FormatInt(buckets[i], 10))
	}
	want := directCriteo(t, src, criteo.Options{Buckets: buckets})
	if want.Len() != 200 {
		t.Fatalf("direct read: %d samples", want.Len())
	}
	wantGlobal := directCriteo(t, src, criteo.Options{Buckets: buckets, Options: formats.Options{SlotSizeArray: buckets}})
	checkCriteoConversion(t, src, []string{"--slot-size-array", strings.Join(ssa, ",")}, want, wantGlobal, buckets)

	prev := int64(0)
	for _, mc := range []int{6, 2} {
		v, err := criteo.BuildVocab([]string{src}, criteo.VocabOptions{MinCount: mc})
		if err != nil {
			t.Fatal(err)
		}
		want := directCriteo(t, src, criteo.Options{Vocab: v})
		mapping := []string{"--vocab"}
		if mc != criteo.DefaultMinCount {
			mapping = append(mapping, "--min-count", strconv.Itoa(mc))
		}
		wantGlobal := directCriteo(t, src, criteo.Options{Vocab: v, Options: formats.Options{SlotSizeArray: v.SlotSizes()}})
		checkCriteoConversion(t, src, mapping, want, wantGlobal, v.SlotSizes())
		// A lower threshold gives more ids: --min-count was applied.
		var sum int64
		for _, n := range v.SlotSizes() {
			sum += n
		}
		if sum <= prev {
			t.Errorf("min count %d: %d ids in all, not above the %d of the previous threshold", mc, sum, prev)
		}
		prev = sum
	}
}

// TestConvertCriteoFixture converts the checked-in TSV fixture by hashing
// and by vocabulary (with the vocabulary saved and reused) and compares the
// transcript, the JSON and the values.
func TestConvertCriteoFixture(t *testing.T) {
	src := filepath.Join(convertTestdata, "day.tsv")
	dir := t.TempDir()
	t.Chdir(dir)
	os.Symlink(src, "day.tsv")
	got := transcript(t, 0,
		[]string{"convert", "day.tsv", "h.bin", "--to", "raw", "--slot-size-array", "11", "--num-workers", "2"},
		[]string{"convert", "day.tsv", "v", "--to", "parquet", "--vocab", "--min-count", "2", "--out-vocab", "day.vocab", "--num-workers", "2"},
		[]string{"convert", "day.tsv", "w/list.txt", "--to", "norm", "--vocab-file", "day.vocab", "--i64-input-key"},
	)
	goldenConvert(t, "convert_criteo.golden", []byte(got))
	if _, err := os.Stat("slot_size_array.json"); err == nil {
		t.Error("a Raw conversion wrote slot_size_array.json into the working directory")
	}
	for _, p := range []string{"h.bin.slot_size_array.json", "v/slot_size_array.json", "w/slot_size_array.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.ReplaceAll(p, "/", "_")
		if p == "h.bin.slot_size_array.json" {
			name = "slot_size_array.json" // the golden's name from before
		}
		goldenConvert(t, name+".golden", b)
	}
	buckets := make([]int64, 26)
	for i := range buckets {
		buckets[i] = 11
	}
	want := directCriteo(t, src, criteo.Options{Buckets: buckets})
	if diff := formatstest.Diff(want, readDataset(t, "h.bin", dataset.Spec{})); diff != "" {
		t.Errorf("hashed: %s", diff)
	}
	v, err := criteo.LoadVocab("day.vocab")
	if err != nil {
		t.Fatal(err)
	}
	if v.MinCount() != 2 {
		t.Errorf("saved vocabulary has min count %d, want 2", v.MinCount())
	}
	want = directCriteo(t, src, criteo.Options{Vocab: v})
	wantGlobal := directCriteo(t, src, criteo.Options{Vocab: v, Options: formats.Options{SlotSizeArray: v.SlotSizes()}})
	for _, p := range []string{"v", "w/list.txt"} {
		w := want
		if p == "w/list.txt" { // Norm: global keys
			w = wantGlobal
		}
		if diff := formatstest.Diff(w, readDataset(t, p, dataset.Spec{})); diff != "" {
			t.Errorf("vocabulary, %s: %s", p, diff)
		}
	}
}

var peakRe = regexp.MustCompile(`(\d+) spilled runs, peak (\d+) bytes counted`)

// TestConvertVocabMemory builds a vocabulary over generated Criteo text
// with more distinct values than a 1 MiB budget holds, and requires the
// same output, byte for byte, as with a 1 GiB budget, the small run having
// spilled and stayed within its budget.
func TestConvertVocabMemory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	p := datagen.DefaultParams()
	p.Format = datagen.Criteo
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 1, 1, 12000
	p.SlotSizeArray = make([]int64, p.NumSlot)
	for i := range p.SlotSizeArray {
		p.SlotSizeArray[i] = 8000
	}
	p.DistType = datagen.DistUniform
	p.Source, p.EvalSource = filepath.Join(dir, "data", "file_list.txt"), filepath.Join(dir, "data", "file_list_test.txt")
	p.Seed, p.Threads = 3, 2
	if _, err := datagen.Generate(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	files, err := formats.ReadFileList(p.Source)
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string][]byte{}
	// The small budget reads the generator's file list, the large one the
	// text file it names: both are Criteo text.
	for _, budget := range []string{"1MiB", "1GiB"} {
		src := p.Source
		if budget == "1GiB" {
			src = files[0]
		}
		out, code := ctrkitArgs(t, "convert", src, budget+".bin", "--to", "raw", "--vocab", "--min-count", "2",
			"--vocab-memory", budget, "--out-vocab", budget+".vocab", "--num-workers", "2")
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", budget, code, out)
		}
		m := peakRe.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no vocabulary stats in\n%s", budget, out)
		}
		runs, _ := strconv.Atoi(m[1])
		peak, _ := strconv.ParseInt(m[2], 10, 64)
		limit, _ := parseSize(budget)
		if peak > limit {
			t.Errorf("%s: peak %d bytes over the budget", budget, peak)
		}
		if (runs > 0) != (budget == "1MiB") {
			t.Errorf("%s: %d spilled runs", budget, runs)
		}
		t.Logf("%s: %s", budget, strings.SplitN(out, "\n", 2)[0])
		if outs[budget], err = os.ReadFile(budget + ".bin"); err != nil {
			t.Fatal(err)
		}
		if outs[budget+"v"], err = os.ReadFile(budget + ".vocab"); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(outs["1MiB"], outs["1GiB"]) || len(outs["1MiB"]) != 12000*160 {
		t.Errorf("outputs differ with the budget (%d and %d bytes)", len(outs["1MiB"]), len(outs["1GiB"]))
	}
	if !bytes.Equal(outs["1MiBv"], outs["1GiBv"]) {
		t.Error("vocabularies differ with the budget")
	}
	v, err := criteo.LoadVocab("1MiB.vocab")
	if err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.Distinct != 0 && st.Distinct*16 < 1<<20 {
		t.Errorf("only %d distinct values: the 1 MiB budget is not exceeded", st.Distinct)
	}
	var frequent int64
	for _, n := range v.SlotSizes() {
		frequent += n - 2
	}
	if frequent == 0 {
		t.Error("no frequent values: ids are all rare")
	}
}
