package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/quickstart"
)

// TestBenchReadQuickstartData runs `ctrkit bench read` with a short duration
// on the quickstart's dataset (smaller files), in CI: the JSON contract
// scripts rely on, and the text report.
func TestBenchReadQuickstartData(t *testing.T) {
	dir := t.TempDir()
	p := quickstart.DatasetParams(dir, quickstart.Options{SamplesPerFile: 4096})
	if _, err := datagen.Generate(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	out, err := runCtrkit(t, "bench", "read", "--duration", "300ms", "--batchsize", "1024", "--json", p.Source)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"samples", "seconds", "samples_per_second", "file_bytes_per_second"} {
		if v, ok := rep[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want > 0", k, rep[k])
		}
	}
	out, err = runCtrkit(t, "bench", "read", "--epochs", "2", "--batchsize", "1000", p.Source)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"(norm, sync reader, batch 1000", "33000 samples in 33 batches, 2.01 epochs", "samples/s", "GB/s of file bytes", "page cache"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// Refusals exit 2 with a message naming the flag.
	_, err = runCtrkit(t, "bench", "read", "--reader", "async", p.Source)
	if ee, ok := err.(*exitError); !ok || ee.code != 2 || !strings.Contains(err.Error(), "--reader async reads Raw files") {
		t.Errorf("async on norm: %v", err)
	}
}
