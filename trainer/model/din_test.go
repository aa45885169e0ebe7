package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dinLayersPending: PReLU_Dice and FusedReshapeConcat are implemented on
// another branch (issue 17's layer work). While true, TestDIN expects the
// fixed DIN config to be refused as unsupported naming one of them; set it
// to false once they are merged, and TestDIN requires DIN to train, save,
// reload and predict bit-identically.
const dinLayersPending = false

// TestDIN trains HugeCTR's din_fp32_1gpu.json with its one defect fixed in
// a copy: layers[22] Reshape has bottom and top swapped in HugeCTR's own
// file (it reads reshape_reduce_item_his, which only it defines, and
// writes reduce_item_his, which layer 21 defines already).
func TestDIN(t *testing.T) {
	if os.Getenv(conformanceChildEnv) != "" {
		t.Skip("child process")
	}
	src := "../../../shared/data/hugectr-json/v23.09.00/test/scripts/din_fp32_1gpu.json"
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Skipf("no shared HugeCTR configs: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	layers := doc["layers"].([]any)
	l := layers[22].(map[string]any)
	if l["type"] != "Reshape" || l["bottom"] != "reshape_reduce_item_his" || l["top"] != "reduce_item_his" {
		t.Fatalf("layers[22] is not the swapped Reshape: %v", l)
	}
	l["bottom"], l["top"] = l["top"], l["bottom"]
	fixed, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "din_fp32_1gpu_fixed.json")
	if err := os.WriteFile(path, fixed, 0o644); err != nil {
		t.Fatal(err)
	}
	row := runConformance(t, path, false, nil)
	t.Logf("DIN (fixed): %s (%s)", row.Status, row.Reason)
	if dinLayersPending {
		if row.Status == statusPass {
			t.Fatalf("DIN trains now: set dinLayersPending to false")
		}
		if row.Status != statusUnsupported || !(strings.Contains(row.Reason, "PReLU_Dice") || strings.Contains(row.Reason, "FusedReshapeConcat")) {
			t.Errorf("DIN (fixed): %s (%s); want unsupported naming PReLU_Dice or FusedReshapeConcat", row.Status, row.Reason)
		}
		return
	}
	if row.Kind != kindTraining || row.Status != statusPass {
		t.Errorf("DIN (fixed): %+v", row)
	}
}
