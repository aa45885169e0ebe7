package main

import (
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
)

// TestInspectDetects: Norm files of each key width and check mode,
// inspected without flags, report the right key type and check mode.
func TestInspectDetects(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, kt := range []formats.KeyType{formats.KeyU32, formats.KeyI64} {
		for _, m := range []norm.CheckMode{norm.CheckNone, norm.CheckSum} {
			name := fmt.Sprintf("%s_%s.data", kt, m)
			writeNormFixture(t, name, 35, m, kt)
			out, code := execCtrkit(t, "inspect", "--json", name)
			if code != 0 {
				t.Fatalf("%s: exit %d\n%s", name, code, out)
			}
			var got struct {
				Dataset struct {
					KeyType string `json:"key_type"`
					Check   string `json:"check_mode"`
				} `json:"dataset"`
				Stats struct {
					Samples int64 `json:"samples"`
				} `json:"stats"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, out)
			}
			if got.Dataset.KeyType != kt.String() || got.Dataset.Check != m.String() || got.Stats.Samples != 35 {
				t.Errorf("%s: detected key type %q, check mode %q, %d samples", name, got.Dataset.KeyType, got.Dataset.Check, got.Stats.Samples)
			}
		}
	}
}

// TestInspectText compares the text report with a golden file and checks
// that the --out-plot PNGs decode.
func TestInspectText(t *testing.T) {
	t.Chdir(t.TempDir())
	writeNormFixture(t, "a.data", 70, norm.CheckSum, formats.KeyU32)
	out, code := execCtrkit(t, "inspect", "--slot-size-array", "7,5", "--out-plot", "plots", "a.data")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	goldenText(t, "inspect_text.golden", out)
	for _, n := range []string{"rank_frequency.png", "labels.png", "nnz.png"} {
		f, err := os.Open(filepath.Join("plots", n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		f.Close()
	}
	if out, code := execCtrkit(t, "inspect", "nosuch"); code != 2 {
		t.Errorf("missing path: exit %d\n%s", code, out)
	}
}
