package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestJSONOutputs: convert, gen, keyset and summary print one JSON object
// on stdout with --json (snake_case keys, units in the names) and the text
// lines no more; each is parsed and its figures checked.
func TestJSONOutputs(t *testing.T) {
	t.Chdir(t.TempDir())
	parse := func(name string, args ...string) map[string]any {
		t.Helper()
		out, err := runCtrkitSplit(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%s --json: not one JSON object (%v):\n%s", name, err, out)
		}
		for k := range m {
			if k != strings.ToLower(k) || strings.ContainsAny(k, "- ") {
				t.Errorf("%s: key %q is not snake_case", name, k)
			}
		}
		return m
	}
	g := parse("gen", "gen", "--format", "norm", "--out-source", "g/file_list.txt", "--num-files", "1", "--eval-num-files", "1",
		"--num-samples-per-file", "100", "--num-slot", "3", "--slot-size-array", "10", "--dense-dim", "2", "--seed", "3", "--json")
	if g["samples"] != 200.0 || g["seed"] != "3" || g["key_convention"] != "global" || g["bytes"].(float64) <= 0 || len(g["files"].([]any)) != 2 {
		t.Errorf("gen --json: %v", g)
	}
	if a, ok := g["planted_auc"].(float64); !ok || a <= 0.5 {
		t.Errorf("gen --json planted_auc %v", g["planted_auc"])
	}
	c := parse("convert", "convert", "g/file_list.txt", "p/", "--to", "parquet", "--json")
	if c["samples"] != 100.0 || c["source_format"] != "norm" || c["output_format"] != "parquet" || c["key_convention"] != "global" ||
		c["slot_size_array_file"] != "p/slot_size_array.json" {
		t.Errorf("convert --json: %v", c)
	}
	if _, ok := c["samples_per_s"].(float64); !ok {
		t.Errorf("convert --json samples_per_s %v", c["samples_per_s"])
	}
	k := parse("keyset", "keyset", "p", "--out", "p.keyset", "--json")
	ks := k["keysets"].([]any)
	if len(ks) != 1 || ks[0].(map[string]any)["path"] != "p.keyset" || ks[0].(map[string]any)["unique_keys"].(float64) < 3 {
		t.Errorf("keyset --json: %v", k)
	}
	if _, err := os.Stat("p.keyset"); err != nil {
		t.Error(err)
	}
	s := parse("summary", "summary", "--model", "wdl", "--slot-size-array", "10,10", "--json", "--out-graph", "wdl.json")
	if s["dense_params"].(float64) <= 0 || s["dense_bytes_f32"] != 4*s["dense_params"].(float64) || len(s["layers"].([]any)) < 5 {
		t.Errorf("summary --json: %v", s)
	}
}

// runCtrkitSplit runs the app with stdout and stderr apart and returns
// stdout.
func runCtrkitSplit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut strings.Builder
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(permuteArgs(app, append([]string{"ctrkit"}, args...)))
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}
