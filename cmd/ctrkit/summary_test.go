package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSummaryConfig(t *testing.T) {
	out, err := runCtrkit(t, "summary", "--config", "../../trainer/graph/testdata/old_config.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"InnerProduct", "dense parameters: 145", "[B, 3, 4]"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSummaryModelGraphOut(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "dcn.json")
	out, err := runCtrkit(t, "summary", "--model", "dcn", "--slot-size-array", "10,20,30", "--dense-dim", "4", "--out-graph", g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "MultiCross") || !strings.Contains(out, "concat1_slice1") {
		t.Errorf("output:\n%s", out)
	}
	out2, err := runCtrkit(t, "summary", "--config", g)
	if err != nil {
		t.Fatal(err)
	}
	// Same layers and parameter count from the written file.
	tail := func(s string) string { return s[strings.Index(s, "#"):strings.Index(s, "embedding parameters")] }
	if tail(out) != tail(out2) {
		t.Errorf("summary of the written graph differs:\n%s\n---\n%s", out, out2)
	}
	if _, err := runCtrkit(t, "summary"); err == nil {
		t.Error("summary without a model succeeded")
	}
}

// TestSummaryHugeCTRFiles: every model file HugeCTR ships prints a summary.
func TestSummaryHugeCTRFiles(t *testing.T) {
	dir := "../../../shared/data/hugectr-json/v23.09.00/test/scripts"
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Skip("no ../shared")
	}
	for _, f := range files {
		out, err := runCtrkit(t, "summary", "--config", f)
		if strings.Contains(f, "din_fp32") {
			// HugeCTR cannot load it either: a bottom is never defined.
			if err == nil || !strings.Contains(err.Error(), "reshape_reduce_item_his") {
				t.Errorf("%s: err = %v", f, err)
			}
			continue
		}
		if err != nil || !strings.Contains(out, "dense parameters: ") {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
}
