package datagen

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestTwoRawDatasetsInOneDirectory: a Raw dataset is its files, not its
// directory: a second one is written beside the first (each with its own
// "<train file>.gen_params.json"); it was refused ("holds a dataset and
// a.bin") because both runs shared gen_params.json.
func TestTwoRawDatasetsInOneDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		p := smallParams(Raw, dir)
		p.Source, p.EvalSource = filepath.Join(dir, n+".bin"), filepath.Join(dir, n+"_eval.bin")
		if _, err := Generate(context.Background(), p, nil); err != nil {
			t.Fatalf("dataset %s: %v", n, err)
		}
	}
	for _, f := range []string{"a.bin", "a_eval.bin", "a.bin.gen_params.json", "b.bin", "b_eval.bin", "b.bin.gen_params.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
