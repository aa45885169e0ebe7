package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/datagen"
)

// TestTrainResume: --load-prefix/--load-iter continue the iteration count,
// --keep-snapshots prunes, --load-optimizer=false starts the optimizer
// state fresh where the snapshot has none.
func TestTrainResume(t *testing.T) {
	src, _, _ := genData(t, datagen.Norm, []int64{40, 60, 20, 80, 30, 50}, 4)
	prefix := filepath.Join(t.TempDir(), "dcn")
	common := []string{"train", "--model", "dcn", "--slot-size-array", "40,60,20,80,30,50", "--dense-dim", "4",
		"--vec-size", "4", "--width", "0.03125", "--batchsize", "128", "--source", src, "--optimizer", "adam",
		"--snapshot", "10", "--snapshot-prefix", prefix, "--keep-snapshots", "1"}
	if out, err := runCtrkit(t, append(common, "--max-iter", "20")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat(prefix + "_dense_10.model"); !os.IsNotExist(err) {
		t.Errorf("--keep-snapshots 1 kept snapshot 10: %v", err)
	}
	out, err := runCtrkit(t, append(common, "--max-iter", "30", "--load-prefix", prefix, "--load-iter", "20")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "saved snapshot "+prefix+" at iter 30") || strings.Contains(out, "at iter 10\n") {
		t.Errorf("resumed run:\n%s", out)
	}
	os.Remove(prefix + "_opt_dense_30.model")
	out, err = runCtrkit(t, append(common, "--max-iter", "40", "--load-prefix", prefix, "--load-iter", "30")...)
	if err == nil || !strings.Contains(err.Error(), "dcn_opt_dense_30.model: missing") {
		t.Errorf("resume without optimizer state: %v\n%s", err, out)
	}
	out, err = runCtrkit(t, append(common, "--max-iter", "40", "--load-prefix", prefix, "--load-iter", "30", "--load-optimizer=false")...)
	if err != nil || !strings.Contains(out, "at iter 40") {
		t.Errorf("--load-optimizer=false: %v\n%s", err, out)
	}
}
