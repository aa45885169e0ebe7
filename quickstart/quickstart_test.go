package quickstart

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRun runs the quickstart end to end at a small size: every step
// reports, the data validates clean, and the model learns something of
// what was planted.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	res, err := Run(context.Background(), &out, Options{Dir: t.TempDir(), SamplesPerFile: 8192})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"1. generate:", "2. validate:", "ok: no problems", "3. read:", "4. train:", "eval AUC", "files kept in"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if res.Problems != 0 || res.ReadSamplesPerS <= 0 || res.PlantedAUC < 0.7 {
		t.Errorf("result %+v", res)
	}
	if res.EvalAUC < 0.65 || res.EvalAUC > res.PlantedAUC+0.02 {
		t.Errorf("eval AUC %.4f against planted %.4f", res.EvalAUC, res.PlantedAUC)
	}
}
