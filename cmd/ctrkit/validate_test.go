package main

import (
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
)

var updateGolden = flag.Bool("update-validate", false, "rewrite cmd/ctrkit/testdata/validate_*.golden and inspect_*.golden")

// testdataDir is cmd/ctrkit/testdata, absolute (tests change directory).
var testdataDir, _ = filepath.Abs("testdata")

// golden compares got with testdata/name (rewritten with -update-validate).
func goldenText(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join(testdataDir, name)
	if *updateGolden {
		os.MkdirAll(testdataDir, 0o755)
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update-validate)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", p, got, want)
	}
}

// writeNormFixture writes n samples (label i%2, dense 0.5, 2 one-hot slots
// with keys i%7 and i%5) to path; records are 24 bytes unframed, 29 framed.
func writeNormFixture(t *testing.T, path string, n int, m norm.CheckMode, kt formats.KeyType) {
	t.Helper()
	s := formats.NewSchema(1, 1, []int{1, 1}, nil, kt)
	b, err := formats.NewBatch(&s, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		b.AppendSample([]float32{float32(i % 2)}, []float32{0.5}, [][]int64{{int64(i % 7)}, {int64(i % 5)}})
	}
	w, err := norm.Create(path, &s, norm.WriterOptions{Check: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	const rec = 29 // framed record: 4 + 4·2 + 2·(4+4) + 1
	writeNormFixture(t, "a.data", 40, norm.CheckSum, formats.KeyU32)
	writeNormFixture(t, "b.data", 40, norm.CheckSum, formats.KeyU32)
	os.WriteFile("list.txt", []byte("3\na.data\nmissing.data\nb.data\n"), 0o644)
	os.WriteFile("clean.txt", []byte("2\na.data\nb.data\n"), 0o644)

	out, code := execCtrkit(t, "validate", "clean.txt")
	if code != 0 {
		t.Errorf("clean dataset: exit %d\n%s", code, out)
	}
	goldenText(t, "validate_clean.golden", out)

	// Faults: a bad check byte in a.data record 2, a label 3 in b.data
	// record 5, b.data cut inside record 30, and a missing file.
	data, _ := os.ReadFile("a.data")
	data[69+2*rec+rec-1] ^= 0xff
	os.WriteFile("a.data", data, 0o644)
	data, _ = os.ReadFile("b.data")
	binary.LittleEndian.PutUint32(data[69+5*rec+4:], 0x40400000) // 3.0
	s := data[69+5*rec+4 : 69+5*rec+rec-1]
	var sum byte
	for _, c := range s {
		sum += c
	}
	data[69+5*rec+rec-1] = sum
	os.WriteFile("b.data", data[:69+30*rec+10], 0o644)

	out, code = execCtrkit(t, "validate", "--slot-size-array", "7,4", "list.txt")
	if code != 1 {
		t.Errorf("faults: exit %d, want 1\n%s", code, out)
	}
	goldenText(t, "validate_faults.golden", out)

	out, code = execCtrkit(t, "validate", "--json", "--max-per-kind", "1", "--slot-size-array", "7,4", "list.txt")
	if code != 1 {
		t.Errorf("--json: exit %d", code)
	}
	goldenText(t, "validate_faults_json.golden", out)

	if out, code = execCtrkit(t, "validate", "nosuch.txt"); code != 2 {
		t.Errorf("missing path: exit %d, want 2\n%s", code, out)
	}
	if out, code = execCtrkit(t, "validate"); code != 2 {
		t.Errorf("no path: exit %d, want 2\n%s", code, out)
	}
}
