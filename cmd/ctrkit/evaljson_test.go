package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/trainer/model"
)

// TestEvaluateJSON: evaluate --json prints one object with snake_case keys.
func TestEvaluateJSON(t *testing.T) {
	src, eval, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	prefix := filepath.Join(t.TempDir(), "wdl")
	common := []string{"--model", "wdl", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4",
		"--vec-size", "4", "--width", "0.03125", "--batchsize", "256"}
	if out, err := runCtrkit(t, append(append([]string{"train"}, common...), "--source", src, "--max-iter", "8",
		"--snapshot-prefix", prefix)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := runCtrkit(t, append(append([]string{"evaluate", "--json"}, common...), "--eval-source", eval,
		"--load-prefix", prefix, "--load-iter", "8")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	line := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("last line %q: %v\n%s", line, err, out)
	}
	for _, k := range []string{"auc", "loss", "hit_rate"} {
		v, ok := got[k].(float64)
		if k == "hit_rate" && got[k] == nil {
			_, ok = got[k] // null: no sample scored above 0.8
			v = 0
		}
		if !ok || v < 0 || v > 1.5 {
			t.Errorf("%s = %v", k, got[k])
		}
	}
	if got["samples"] != float64(8192) || got["batches"] != float64(32) || strings.Contains(out, "eval: AUC") {
		t.Errorf("output:\n%s", out)
	}
	var sb strings.Builder
	if err := writeEvalJSON(&sb, model.EvalResult{AUC: math.NaN(), Loss: 0.5, Samples: 3, Batches: 1}); err != nil ||
		sb.String() != `{"auc":null,"loss":0.5,"hit_rate":0,"samples":3,"batches":1}`+"\n" {
		t.Errorf("NaN AUC: %q, %v", sb.String(), err)
	}
}
